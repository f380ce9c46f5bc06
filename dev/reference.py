#!/usr/bin/python3
"""PyTorch reference ("executable spec") for train_miras.

This file is the readable definition that train_miras.c / train_miras.cu are tested
against. It follows ../shared/SPEC.md (model semantics, sections cited as SPEC §n) and
dev/CONTRACT.md (binary formats, parameter order). It is written naively on purpose:
float64, autograd, python loops over tokens, the per-token memory gradient obtained with
torch.autograd.grad(create_graph=True) so that the outer backward includes every
second-order term (SPEC §6).

Layer patterns of 'M' (memory mixer), 'A' (causal softmax attention) and 'S' (sliding-window
attention of window W, header slot 23), SPEC §2 and §9.1, with the memory / algorithm options that
the fixtures cover: linear or deep memory; l2, dot, lp (Moneta) or huber (Yaad) attentional
bias; gd or momentum; retention none, lq (Moneta) or kl (Memora); scalar-per-head or
channel-wise (low-rank) eta / delta gates (CONTRACT "Extension for MIRAS").

Usage (always with Debian's interpreter, torch 1.13 CPU is enough):

    /usr/bin/python3 dev/reference.py fixtures --out dev/fixtures
        writes dev/fixtures/<name>.bin for every fixture config (FIXTURES; CONTRACT "Fixture file"),
        then re-reads every file and checks it (sizes, header, loss reproduced).

    /usr/bin/python3 dev/reference.py selftest [--only a,b] [--fd-per-tensor 3] [--fixture-fd]
        (1) b=1 chunked algorithm (autograd) == separately written online rule with
            hand-derived memory gradients, logits and outer gradients (lq: per-token
            normalisation with the one-token lag; kl: the softmax rule in weight space);
            chunked autograd == chunked hand-derived gradients at the fixture b;
        (2) finite differences of the loss vs autograd for entries of every tensor
            (--fixture-fd: also at each fixture's own parameters; huber fixtures also print
            the fraction of error entries beyond delta);
        (3) our AdamW+clip == torch.optim.AdamW with the same clip.

    /usr/bin/python3 dev/reference.py read dev/fixtures/titans.bin
        prints a fixture's header and summary.

    /usr/bin/python3 dev/reference.py bench --preset titans --D 256 --L 4 --H 4 --T 256 --B 4 \
        [--steps 3] [--device cpu|cuda] [--V 50257] [--E 4] [--b 16] [--F ...] [--gate-rank r]
        (presets: the fixture names, incl. moneta, yaad, memora and their _cw variants)
        float32 forward+backward timing of the naive reference, prints tokens/s.
"""
import argparse
import math
import os
import struct
import time

import numpy as np
import torch

MAGIC_MODEL = 20261101
MAGIC_FIXTURE = 20261103
VERSION = 1

# ----------------------------------------------------------------------------------------
# Configuration and parameter layout (CONTRACT.md "Parameter layout")
# ----------------------------------------------------------------------------------------

PARAM_NAMES = [
    "wte", "rms1_w", "wq", "wk", "wv", "conv_q", "conv_k", "conv_v",
    "gate_a_w", "gate_a_b", "gate_eta_w", "gate_eta_b", "gate_theta_w", "gate_theta_b",
    "mem_p0", "mem_ln_g", "mem_ln_b", "wg", "rmsh_w", "wo", "rms2_w",
    "mlp_w1", "mlp_w3", "mlp_w2", "rmsf_w",
    # CONTRACT "Extension for MIRAS": appended, so that older layouts are unchanged
    "gate_eta_up", "gate_delta_w", "gate_delta_b", "gate_delta_up",
    # Titans layers (SPEC §9.2-9.3; README "Titans layers"): appended as well
    "pers", "att_wq", "att_wk", "att_wv", "att_wo", "rmsa_w", "og1_w", "og2_w",
    # the ATLAS family (README "ATLAS"): omega's window gates gamma (SPEC §5.5)
    "gate_gamma_w", "gate_gamma_b", "poly_rho",
]
# AdamW weight decay applies to these tensors only (CONTRACT.md)
DECAYED = {"wte", "wq", "wk", "wv", "gate_a_w", "gate_eta_w", "gate_theta_w",
           "wg", "wo", "mlp_w1", "mlp_w3", "mlp_w2",
           "gate_eta_up", "gate_delta_w", "gate_delta_up",
           "att_wq", "att_wk", "att_wv", "att_wo", "gate_gamma_w"}

BIASES = ["l2", "dot", "lp", "huber"]                # header slot 14
ALGOS = ["gd", "momentum", "muon", "muon_chunk"]     # header slot 15 (muon: SPEC §5.7, token-level; chunk-level)
RETENTIONS = ["none", "lq", "kl"]                    # header slot 20
LATTICES = ["none", "dec", "enc", "sim"]             # header slot 38 (Lattice, SPEC §5.8)
LATA_NO_ORTHO, LATA_NO_RENORM = 1, 2                 # header slot 40 (ablation bits)
ARCHS = ["none", "mal", "mag", "mac"]                # header slot 24 (25: N_p, 26: MAC segment C)

# lp bias (Moneta, SPEC §4): r = p tanh(s e) (e^2 + eps)^((p-1)/2), p = 3, s = 10, eps = 1e-6
LP_P, LP_S, LP_EPS = 3.0, 10.0, 1e-6
# lq retention (Moneta, SPEC §5.3): s = (|A|_q + 1e-6)^(q-2), q = 4
LQ_Q, LQ_EPS = 4, 1e-6


def make_config(V, D, L, H, E, F, b, mem_depth, mem_resid, mem_ln, bias, algo,
                gate_a, gate_eta, eta_max=1.0, K=4, pattern=None, retention="none",
                gate_rank=0, anchor=0, window=0, lattice="none", lat_k=0, lat_ablate=0, arch="none", npers=0, seg=0, omega=1, poly=0, gated=0, phistar=0):
    """Model config dict with the fields of the CONTRACT header."""
    assert D % H == 0
    pattern = pattern if pattern is not None else "M" * L
    assert len(pattern) == L and set(pattern) <= set("MAS")
    assert arch in ARCHS and npers >= 0
    swa = "S" in pattern or arch in ("mal", "mag")              # MAL, MAG: sliding-window attention
    assert (window >= 1) if swa else window == 0                 # W only with 'S' layers
    if arch != "none":                                           # Titans: every layer 'M', even d for RoPE
        assert set(pattern) == {"M"} and (D // H) % 2 == 0
        assert (seg >= 1 and seg % b == 0) if arch == "mac" else seg == 0
    else:
        assert npers == 0 and seg == 0
    assert not ("A" in pattern or "S" in pattern) or (D // H) % 2 == 0   # RoPE pairs halves
    assert bias in BIASES and algo in ALGOS and retention in RETENTIONS
    # lq / kl are defined for the gd recurrence only (SPEC §5.3, §5.4, §5.9)
    assert retention == "none" or algo == "gd", "retention lq/kl needs algo gd"
    assert gate_rank >= 0
    # anchored retention (README): P_t - P_0 follows the plain rule; needs a learned a, not kl
    assert anchor in (0, 1) and not (anchor and (retention == "kl" or not gate_a))
    # omega (SPEC §5.5): window c >= 1 (1: the plain rule); with gd or momentum, no lq/kl, per-head gates
    assert 1 <= omega <= 64 and (omega == 1 or (retention == "none" and gate_rank == 0))
    # poly (SPEC §5.6): degree-2 features of q, k; no lq/kl, per-head gates
    assert poly in (0, 1) and (not poly or (retention == "none" and gate_rank == 0))
    # the gated deep memory (ATLAS++, SPEC §4; header slot 32): deep, any algorithm, no lq/kl
    assert gated in (0, 1) and (not gated or (mem_depth == 2 and retention == "none"))
    # the phi* memory (DT, DOT; header slot 33): gd, plain retention, per-head gates, l2 or dot, no poly, no anchor;
    # deep without residual and LN; 2: the W2 steps bounded (deep only)
    assert phistar in (0, 1, 2) and (not phistar or (algo == "gd" and retention == "none" and gate_rank == 0
                                                     and not anchor and not poly and not gated and bias in ("l2", "dot")
                                                     and (mem_depth == 1 or (not mem_resid and not mem_ln))))
    assert phistar != 2 or mem_depth == 2
    if mem_depth == 1:            # the linear memory never has a residual or LN (SPEC §4)
        mem_resid, mem_ln = 0, 0
    # Lattice (SPEC §5.8): a linear d x d slot state S_0 = I (no P_0), gd, no retention, per-head eta;
    # lat_k (the trainer's checkpoint interval, header slot 39) changes nothing in the results
    assert lattice in LATTICES and lat_ablate in (0, 1, 2, 3)
    assert (lat_k >= 1) if lattice != "none" else (lat_k == 0 and lat_ablate == 0)
    assert lattice == "none" or (mem_depth == 1 and algo == "gd" and retention == "none"
                                 and gate_rank == 0 and not anchor and gate_eta)
    return dict(V=V, Vp=(V + 63) // 64 * 64, D=D, L=L, H=H, E=E, F=F, b=b, K=K,
                mem_depth=mem_depth, mem_resid=mem_resid, mem_ln=mem_ln, bias=bias,
                algo=algo, gate_a=gate_a, gate_eta=gate_eta, eta_max=eta_max,
                pattern=pattern, retention=retention, gate_rank=gate_rank, anchor=anchor,
                window=window, lattice=lattice, lat_k=lat_k, lat_ablate=lat_ablate, arch=arch, npers=npers, seg=seg, omega=omega, poly=poly, gated=gated, phistar=phistar)


def head_dims(cfg):
    d = cfg["D"] // cfg["H"]
    return d, cfg["E"] * d                            # d, d_m


def mem_in_dim(cfg):
    """The memory's input width: d, or D_phi = 1 + d + d(d+1)/2 with the poly features (SPEC §5.6)."""
    d, _ = head_dims(cfg)
    return 1 + d + d * (d + 1) // 2 if cfg.get("poly", 0) else d


def mem_state_size(cfg):
    d, dm = head_dims(cfg)
    din = mem_in_dim(cfg)
    if cfg.get("phistar", 0):                         # the phi* memory: only W1 is finite (linear: nothing)
        return d * dm if cfg["mem_depth"] == 2 else 0
    return d * dm + (1 + cfg.get("gated", 0)) * dm * din if cfg["mem_depth"] == 2 else d * din


def poly_features(x, a):
    """SPEC §5.6: phi(x) = [sqrt(a0); sqrt(a1) x; sqrt(a2) (x_i^2)_i; sqrt(2 a2) (x_i x_j)_{i<j}],
    the pairs in row-major order (i, then j > i). x (..., d), a (3,) -> (..., D_phi)."""
    d = x.shape[-1]
    iu, ju = torch.triu_indices(d, d, offset=1)
    one = torch.ones_like(x[..., :1])
    return torch.cat([torch.sqrt(a[0]) * one, torch.sqrt(a[1]) * x, torch.sqrt(a[2]) * x * x,
                      torch.sqrt(2 * a[2]) * x[..., iu] * x[..., ju]], dim=-1)


def mem_split(cfg, x):
    """With poly the memory's inputs carry [raw (d), features (D_phi)]: the matrices see the features,
    the residual adds the raw input (SPEC §4). Without poly both are x."""
    if not cfg.get("poly", 0):
        return x, x
    d, _ = head_dims(cfg)
    return x[..., :d], x[..., d:]


def memory_layers(cfg):
    """Lm, the number of 'M' layers: the memory-only tensors (conv, gates, P_0, memory LN, wg,
    rmsh_w) are stacked over these, in layer order (CONTRACT "Extension for attention layers")."""
    return cfg["pattern"].count("M")


def memory_index(cfg, l):
    """Layer l's index in the memory-only tensors: its rank among the 'M' layers."""
    return cfg["pattern"][:l].count("M")


def param_shapes(cfg):
    """[(name, shape)] in CONTRACT order; absent tensors get shape (0,)."""
    V, Vp, D, LL, H, F, K = (cfg[k] for k in ("V", "Vp", "D", "L", "H", "F", "K"))
    L = memory_layers(cfg)                            # the memory-only tensors; LL: every layer
    d, dm = head_dims(cfg)
    HD = H * d
    deep_ln = cfg["mem_depth"] == 2 and cfg["mem_ln"]
    mom = cfg["algo"] in ("momentum", "muon", "muon_chunk")   # the theta gate
    r = cfg["gate_rank"]                              # 0: scalar per head; > 0: channel-wise
    huber = cfg["bias"] == "huber"
    arch = cfg.get("arch", "none")
    titans = arch != "none"
    none = (0,)
    shapes = {
        "wte": (Vp, D), "rms1_w": (LL, D),
        "wq": (LL, HD, D), "wk": (LL, HD, D), "wv": (LL, HD, D),
        "conv_q": (L, HD, K), "conv_k": (L, HD, K), "conv_v": (L, HD, K),
        "gate_a_w": (L, H, D) if cfg["gate_a"] else none,
        "gate_a_b": (L, H) if cfg["gate_a"] else none,
        # channel-wise (r > 0): gate_eta_w is the down projection (r, D), the bias per channel
        "gate_eta_w": ((L, r, D) if r else (L, H, D)) if cfg["gate_eta"] else none,
        "gate_eta_b": ((L, HD) if r else (L, H)) if cfg["gate_eta"] else none,
        "gate_theta_w": (L, H, D) if mom else none,
        "gate_theta_b": (L, H) if mom else none,
        "mem_p0": (L, H, mem_state_size(cfg)) if cfg["lattice"] == "none" else none,  # Lattice: S_0 = I fixed
        "mem_ln_g": (L, H, d) if deep_ln else none,
        "mem_ln_b": (L, H, d) if deep_ln else none,
        "wg": (L, D, D), "rmsh_w": (L, HD), "wo": (LL, D, HD), "rms2_w": (LL, D),
        "mlp_w1": (LL, F, D), "mlp_w3": (LL, F, D), "mlp_w2": (LL, D, F), "rmsf_w": (D,),
        "gate_eta_up": (L, HD, r) if cfg["gate_eta"] and r else none,
        "gate_delta_w": ((L, r, D) if r else (L, H, D)) if huber else none,
        "gate_delta_b": ((L, HD) if r else (L, H)) if huber else none,
        "gate_delta_up": (L, HD, r) if huber and r else none,
        # Titans layers: N_p persistent D-vectors per layer, the attention's own projections,
        # MAL's RMSNorm_attn, the o(y, m) gate's two RMSNorms (MAG, MAC)
        "pers": (LL, cfg.get("npers", 0), D) if cfg.get("npers", 0) else none,
        "att_wq": (LL, HD, D) if titans else none, "att_wk": (LL, HD, D) if titans else none,
        "att_wv": (LL, HD, D) if titans else none, "att_wo": (LL, D, HD) if titans else none,
        "rmsa_w": (LL, D) if arch == "mal" else none,
        "og1_w": (LL, D) if arch in ("mag", "mac") else none,
        "og2_w": (LL, D) if arch in ("mag", "mac") else none,
        "gate_gamma_w": (L, H * cfg["omega"], D) if cfg["omega"] > 1 else none,
        "gate_gamma_b": (L, H * cfg["omega"]) if cfg["omega"] > 1 else none,
        "poly_rho": (L, 3) if cfg["poly"] else none,
    }
    return [(n, shapes[n]) for n in PARAM_NAMES]


def num_params(cfg):
    return sum(int(np.prod(s)) for _, s in param_shapes(cfg))


def unflatten(cfg, flat):
    """Named views into the flat parameter vector (CONTRACT order, back to back)."""
    out, off = {}, 0
    for name, shape in param_shapes(cfg):
        n = int(np.prod(shape))
        out[name] = flat[off:off + n].view(*shape)
        off += n
    assert off == flat.numel()
    return out


def decay_mask(cfg, dtype=torch.float64):
    parts = [torch.full((int(np.prod(s)),), 1.0 if n in DECAYED else 0.0, dtype=dtype)
             for n, s in param_shapes(cfg)]
    return torch.cat(parts)


# ----------------------------------------------------------------------------------------
# Elementwise pieces
# ----------------------------------------------------------------------------------------

def silu(x):
    return x * torch.sigmoid(x)


GELU_C = math.sqrt(2.0 / math.pi)


def gelu_tanh(x):
    # GELU, tanh approximation (SPEC §4)
    return 0.5 * x * (1.0 + torch.tanh(GELU_C * (x + 0.044715 * x ** 3)))


def gelu_tanh_grad(x):
    # d/dx of gelu_tanh, used only by the hand-derived memory gradient (selftest)
    t = torch.tanh(GELU_C * (x + 0.044715 * x ** 3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x * x)


def rmsnorm(x, w, eps=1e-6):
    # SPEC §2: x / sqrt(mean(x^2) + eps) * w, over the last dim
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def layernorm(x, g, beta, eps=1e-5):
    # SPEC §4: LayerNorm over the last dim, biased variance, eps 1e-5, affine (g, beta)
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * g + beta


def l2norm(x, eps=1e-6):
    # SPEC §3: x / sqrt(|x|^2 + eps), over the last dim (one head)
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def causal_conv(x, w):
    """SPEC §3 CausalDepthwiseConv_K. x (B,T,C), w (C,K).
    c_t[i] = sum_{j=0..K-1} w[i][j] * x_{t-K+1+j}[i], with x_{<0} = 0."""
    B, T, C = x.shape
    K = w.shape[1]
    xp = torch.cat([torch.zeros(B, K - 1, C, dtype=x.dtype, device=x.device), x], dim=1)
    out = torch.zeros_like(x)
    for j in range(K):
        out = out + w[:, j] * xp[:, j:j + T, :]          # xp[:, j + t] = x_{t-K+1+j}
    return out


def rope(x):
    """SPEC §9.1 RoPE, rotate-half pairing, on x (B,T,H,d) at positions t = 0..T-1:
    th = t * 10000^(-2i/d) for i < d/2 (float64), x'_i = x_i cos th - x_{i+d/2} sin th,
    x'_{i+d/2} = x_{i+d/2} cos th + x_i sin th."""
    return rope_at(x, list(range(x.shape[1])))


def rope_at(x, pos):
    """RoPE as rope() on x (B,n,H,d), row i at position pos[i] (MAC's segments; rope(): pos = 0..T-1)."""
    B, n, H, d = x.shape
    half = d // 2
    inv = torch.tensor([10000.0 ** (-2.0 * i / d) for i in range(half)], dtype=torch.float64)
    th = torch.tensor(pos, dtype=torch.float64).view(n, 1) * inv.view(1, half)
    cos = torch.cos(th).to(x.dtype).view(1, n, 1, half)
    sin = torch.sin(th).to(x.dtype).view(1, n, 1, half)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def matvec(W, x):
    # W (..., m, n), x (..., n) -> (..., m)
    return (W @ x.unsqueeze(-1)).squeeze(-1)


# ----------------------------------------------------------------------------------------
# The memory module (SPEC §4). State P is flat per (batch, head): (B, H, S).
# deep:   P = [W1 (d, d_m) row-major, W2 (d_m, d) row-major],  M(x) = x + LN(W1 GELU(W2 x))
# linear: P = W (d, d),                                         M(x) = W x
# ----------------------------------------------------------------------------------------

def mem_unpack(cfg, P):
    d, dm = head_dims(cfg)
    din = mem_in_dim(cfg)
    lead = P.shape[:-1]
    if cfg["mem_depth"] == 2:
        W1 = P[..., :d * dm].reshape(*lead, d, dm)
        W2 = P[..., d * dm:d * dm + dm * din].reshape(*lead, dm, din)
        if cfg.get("gated", 0):                          # ATLAS++: W3 (d_m, d_in) after W2
            return W1, W2, P[..., d * dm + dm * din:].reshape(*lead, dm, din)
        return W1, W2
    return (P.reshape(*lead, d, din),)


def mem_apply(cfg, P, x, ln_g, ln_b):
    """M(x; P). P (B,H,S), x (B,H,d), ln_g/ln_b (H,d) (deep && mem_ln) -> (B,H,d).
    (poly: x is [raw, features], mem_split)"""
    xr, x = mem_split(cfg, x)
    if cfg["mem_depth"] == 1:
        (W,) = mem_unpack(cfg, P)
        return matvec(W, x)                               # M(x) = W x
    W1, W2, *W3 = mem_unpack(cfg, P)
    h = gelu_tanh(matvec(W2, x))
    if W3:                                                # gated (ATLAS++): GELU(W2 x) * W3 x
        h = h * matvec(W3[0], x)
    o = matvec(W1, h)                                     # W1 h
    if cfg["mem_ln"]:
        o = layernorm(o, ln_g, ln_b)                      # LN(.)
    if cfg["mem_resid"]:
        o = xr + o                                        # x + . (the raw input)
    return o


def mem_inner_loss(cfg, P, k, v, ln_g, ln_b):
    """Attentional bias (SPEC §4 table), per (B,H):
    l2: 1/2 |M(k) - v|^2 ;  dot: -<M(k), v>.  (lp and huber go through mem_bias_r.)"""
    m = mem_apply(cfg, P, k, ln_g, ln_b)
    if cfg["bias"] == "l2":
        return 0.5 * ((m - v) ** 2).sum(-1)
    return -(m * v).sum(-1)


def mem_bias_r(cfg, e, v, delta):
    """r = d loss / d M(k), elementwise over the d output channels (SPEC §4 table).
    e = M(k) - v (B,H,d); delta (B,H,1) per head or (B,H,d) per channel (huber only).
    r stays a differentiable function of e (and delta): the outer backward goes through it."""
    bias = cfg["bias"]
    if bias == "l2":
        return e
    if bias == "dot":
        return -v
    if bias == "lp":
        # p tanh(s e) (e^2 + eps)^((p-1)/2) with p = 3: (p-1)/2 = 1
        assert LP_P == 3.0
        return LP_P * torch.tanh(LP_S * e) * (e * e + LP_EPS)
    # huber: clamp(e, -delta, delta); d/de = 1 inside (|e| <= delta), 0 outside;
    # d/ddelta = sign(e) outside, 0 inside
    with torch.no_grad():                                 # (how close to the kink: HUBER_MIN_MARGIN)
        HUBER_MARGIN[0] = min(HUBER_MARGIN[0], ((e.abs() - delta).abs() / delta).min().item())
    return torch.where(e > delta, delta, torch.where(e < -delta, -delta, e))


# Huber's derivative jumps at |e| = delta, so the gradient of a fixture with an error e within float rounding of its
# threshold depends on which side float lands: seen on an H200 (2026-11-28), where muon_linear's e = 0.15426812 against
# delta = 0.15426613 (outside by 1.3e-5 of delta, in double) fell inside in the GPU's float and outside in the CPU's, and
# every gradient moved by 2e-2 (a float CPU build without OpenMP took the GPU's side, e 0.15426683 against 0.15426691).
# A Huber fixture must keep every e at least HUBER_MIN_MARGIN of delta from it (in its forward and its 10 AdamW steps;
# build_fixture checks): float moved that e by ~1e-5 of delta, so 3e-4 leaves a factor of ~30. HUBER_MARGIN is the
# smallest margin mem_bias_r has seen since it was last reset.
HUBER_MIN_MARGIN = 3e-4
HUBER_MARGIN = [math.inf]


def mem_grad_autograd(cfg, P, k, v, ln_g, ln_b, escale=None, delta=None):
    """g = d loss(k, v; P) / dP for every (batch, head), by autograd, keeping the graph
    (create_graph=True) so that the outer backward sees the second-order terms (SPEC §6).
    Batches and heads are independent, so the gradient of the sum is the per-(b,h) gradient.
    escale (B,H,d): channel-wise eta, multiplies r before the backprop through M (CONTRACT);
    delta: huber threshold. l2/dot without escale: autograd of the scalar inner loss;
    otherwise the vector-Jacobian product of M(k; P) with r (the same thing, r = dloss/dM)."""
    outer_grad = torch.is_grad_enabled()
    with torch.enable_grad():
        if not P.requires_grad:                           # e.g. under torch.no_grad()
            P = P.detach().requires_grad_(True)
        if cfg["bias"] in ("l2", "dot") and escale is None:
            loss = mem_inner_loss(cfg, P, k, v, ln_g, ln_b).sum()
            (g,) = torch.autograd.grad(loss, P, create_graph=outer_grad)
        else:
            m = mem_apply(cfg, P, k, ln_g, ln_b)
            r = mem_bias_r(cfg, m - v, v, delta)
            if escale is not None:
                r = escale * r
            (g,) = torch.autograd.grad(m, P, grad_outputs=r, create_graph=outer_grad)
    return g


def mem_grad_manual(cfg, P, k, v, ln_g, ln_b, escale=None, delta=None):
    """The same g written out by hand (backprop of r = dloss/dM(k) through M). Used by the
    selftest as an independent implementation; it is differentiable by autograd too."""
    def outer(a, b):                                      # (..., m), (..., n) -> (..., m, n)
        return a.unsqueeze(-1) * b.unsqueeze(-2)
    m = mem_apply(cfg, P, k, ln_g, ln_b)
    e = m - v
    if cfg["bias"] == "l2":                               # r = dloss/dM(k)
        r = e
    elif cfg["bias"] == "dot":
        r = -v
    elif cfg["bias"] == "lp":                             # 3 tanh(10 e) (e^2 + 1e-6)
        r = 3.0 * torch.tanh(10.0 * e) * (e ** 2 + 1e-6)
    else:                                                 # Huber derivative
        r = torch.minimum(torch.maximum(e, -delta), delta)
    if escale is not None:                                # channel-wise eta
        r = r * escale
    _, k = mem_split(cfg, k)                              # (poly: the matrices see the features)
    if cfg["mem_depth"] == 1:
        return outer(r, k).flatten(-2)                    # dW = r k^T
    W1, W2, *W3 = mem_unpack(cfg, P)
    h = matvec(W2, k)
    z = gelu_tanh(h)
    if W3:                                                # gated: z = GELU(W2 k) * z3, z3 = W3 k
        z3 = matvec(W3[0], k)
        z2 = z
        z = z2 * z3
    o = matvec(W1, z)
    if cfg["mem_ln"]:
        mu = o.mean(-1, keepdim=True)
        rstd = 1.0 / torch.sqrt(((o - mu) ** 2).mean(-1, keepdim=True) + 1e-5)
        n = (o - mu) * rstd
        dn = r * ln_g
        do = rstd * (dn - dn.mean(-1, keepdim=True) - n * (dn * n).mean(-1, keepdim=True))
    else:
        do = r                                            # residual adds nothing to dP
    dW1 = outer(do, z)                                    # (d, d_m)
    dz = matvec(W1.transpose(-1, -2), do)
    if W3:                                                # dW2 = (dz z3 GELU'(h)) k^T, dW3 = (dz GELU(h)) k^T
        return torch.cat([dW1.flatten(-2), outer(dz * z3 * gelu_tanh_grad(h), k).flatten(-2),
                          outer(dz * z2, k).flatten(-2)], dim=-1)
    dh = dz * gelu_tanh_grad(h)
    dW2 = outer(dh, k)                                    # (d_m, d)
    return torch.cat([dW1.flatten(-2), dW2.flatten(-2)], dim=-1)


def mem_matrices_flat(cfg, P):
    """The memory matrices of a flat state (..., S) as [(flat slice, rows, cols)]
    (CONTRACT: deep W1 (d, d_m) then W2 (d_m, d); linear W (d, d))."""
    d, dm = head_dims(cfg)
    din = mem_in_dim(cfg)
    if cfg["mem_depth"] == 2:
        out = [(P[..., :d * dm], d, dm), (P[..., d * dm:d * dm + dm * din], dm, din)]
        if cfg.get("gated", 0):                          # W3
            out.append((P[..., d * dm + dm * din:], dm, din))
        return out
    return [(P, d, din)]


def lq_scale(cfg, A):
    """SPEC §5.3: s = (|A|_4 + 1e-6)^(4-2) per memory matrix (entrywise 4-norm), returned
    broadcast to the flat state shape (..., S) so that P = A / s."""
    parts = []
    for x, _, _ in mem_matrices_flat(cfg, A):
        n = ((x ** 4).sum(-1, keepdim=True)) ** 0.25      # |A|_4 of this matrix
        parts.append(((n + LQ_EPS) ** (LQ_Q - 2)).expand(x.shape))
    return torch.cat(parts, dim=-1)


def kl_weights(cfg, Z):
    """SPEC §5.4: W = softmax over each row of each memory matrix of the logits Z (..., S)."""
    parts = []
    for x, rows, cols in mem_matrices_flat(cfg, Z):
        lead = x.shape[:-1]
        parts.append(torch.softmax(x.reshape(*lead, rows, cols), dim=-1).reshape(*lead, rows * cols))
    return torch.cat(parts, dim=-1)


NS5_ABC = (3.4445, -4.7750, 2.0315)


def ns5(S, rows, cols):
    """SPEC §5.7 Newton-Schulz on the (rows, cols) matrices of S (..., rows*cols): X = S / (|S|_F + 1e-7),
    transposed so that rows <= cols, 5 times A = X X^T, X = a X + (b A + c A A) X, transposed back."""
    a, b, c = NS5_ABC
    X = S.reshape(*S.shape[:-1], rows, cols)
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    if rows > cols:
        X = X.transpose(-1, -2)
    for _ in range(5):
        A = X @ X.transpose(-1, -2)
        X = a * X + (b * A + c * A @ A) @ X
    if rows > cols:
        X = X.transpose(-1, -2)
    return X.reshape(S.shape)


def ns5_state(cfg, S):
    """NS5 of every memory matrix of a flat state (..., S) (W; or W1, W2), concatenated back."""
    return torch.cat([ns5(x, r, c) for x, r, c in mem_matrices_flat(cfg, S)], dim=-1)


def memory_read_chunked(cfg, P0, ln_g, ln_b, q, k, v, a, eta, theta, grad_fn=mem_grad_autograd,
                        eta_ch=None, delta=None, state=None, gamma=None, t0=0):
    """SPEC §5 chunked algorithm, naive.
    q, k, v: (B,T,H,d); a, eta, theta: (B,T,H) or None (= constant 1); P0: (H,S).
    eta_ch (B,T,H,d) or None: channel-wise eta (then eta is None: the scalar eta of the
    recurrences is 1 and eta_ch scales the error inside g_t, CONTRACT); delta (B,T,H,1) per head
    or (B,T,H,d) per channel, huber only.
    Chunk c covers [c*b, min((c+1)*b, T)). Inside a chunk every g_t is taken at the
    chunk-start state P_s; then token by token
        gd:       P_t = a_t P_{t-1} - eta_t g_t                        (SPEC §5.1)
        momentum: S_t = theta_t S_{t-1} - eta_t g_t ; P_t = a_t P_{t-1} + S_t   (SPEC §5.2)
        muon:     S_t = theta_t S_{t-1} + g_t ; P_t = a_t P_{t-1} - eta_t NS5(S_t) per matrix (SPEC §5.7)
        muon_chunk: reads P_t = a_t P_{t-1} - eta_t g_t from P_s (the gd form), S_t = theta_t S_{t-1} + g_t,
                  and the carry P_end = (prod a) P_s - eta_last NS5(S_end) (SPEC §5.7's chunk-level form)
    and the read is after the write: y_t = M(q_t; P_t). With the anchored retention
    (cfg["anchor"], README) the retention decays toward P_0 instead of 0: a_t P_{t-1} becomes
    a_t P_{t-1} + (1 - a_t) P_0 (for lq: A_t = a_t A_{t-1} + (1 - a_t) A_0 - eta_t g_t). Retention lq / kl (SPEC §5.3, §5.4,
    CONTRACT) replace the carried state, see below.
    omega (SPEC §5.5, gamma (B,T,H,c) or None): g_t is replaced by G_t = sum_{o<c} gamma_t[o] g_{t-o}
    (positions < 0 dropped), every g_{t-o} taken at the chunk-start state P_s, also for the c-1
    tokens before the chunk (the halo). Returns y (B,T,H,d).
    state (MAC's segments): None, or a list [P, S] of the carried state (B,H,S) to start from (P holds A for lq, the
    logits Z for kl), replaced in place by the end state. t0 (MAC's segments, a multiple of b): the rows from t0 on are
    run from that state and returned; the rows before are there only as omega's halo."""
    B, T, H, d = q.shape
    b = cfg["b"]
    ret = cfg["retention"]
    P = P0.unsqueeze(0).repeat(B, 1, 1)                   # P_0 (A_0, Z_0) restored per sequence
    S = torch.zeros_like(P)                               # momentum, 0 at sequence start
    if state is not None:
        P, S = state
    anc = P0.unsqueeze(0) if cfg.get("anchor", 0) else 0.0   # where the retention decays to
    ys = []

    def grad_at(Pat, t):                                  # g_t at the state Pat
        return grad_fn(cfg, Pat, k[:, t], v[:, t], ln_g, ln_b,
                       escale=None if eta_ch is None else eta_ch[:, t],
                       delta=None if delta is None else delta[:, t])

    def gates(t):
        a_t = 1.0 if a is None else a[:, t].unsqueeze(-1)              # (B,H,1)
        eta_t = 1.0 if eta is None else eta[:, t].unsqueeze(-1)
        return a_t, eta_t

    for c0 in range(t0, T, b):
        c1 = min(c0 + b, T)
        if ret == "none":
            Ps = P                                        # chunk-start state
            if gamma is None:
                gs = [grad_at(Ps, t) for t in range(c0, c1)]
            else:                                         # omega: the window sum, halo included
                c_ = gamma.shape[-1]
                gw = {j: grad_at(Ps, j) for j in range(max(0, c0 - c_ + 1), c1)}
                gs = [sum(gamma[:, t, :, o].unsqueeze(-1) * gw[t - o] for o in range(c_) if t - o >= 0)
                      for t in range(c0, c1)]
            A = 1.0                                       # muon_chunk: prod a over the chunk
            for t, g in zip(range(c0, c1), gs):
                a_t, eta_t = gates(t)
                if cfg["algo"] == "muon_chunk":
                    P = a_t * P + (1 - a_t) * anc - eta_t * g   # the reads' state (gd form)
                    S = theta[:, t].unsqueeze(-1) * S + g
                    A = A * a_t
                elif cfg["algo"] == "gd":
                    P = a_t * P + (1 - a_t) * anc - eta_t * g
                elif cfg["algo"] == "muon":
                    S = theta[:, t].unsqueeze(-1) * S + g
                    P = a_t * P + (1 - a_t) * anc - eta_t * ns5_state(cfg, S)
                else:
                    S = theta[:, t].unsqueeze(-1) * S - eta_t * g
                    P = a_t * P + (1 - a_t) * anc + S
                ys.append(mem_apply(cfg, P, q[:, t], ln_g, ln_b))
            if cfg["algo"] == "muon_chunk":               # the carry: one Newton-Schulz step per chunk
                P = A * Ps + (1 - A) * anc - eta_t * ns5_state(cfg, S)
        elif ret == "lq":
            # P holds A. s frozen for the chunk (reads too), differentiated through.
            s = lq_scale(cfg, P)
            Ps = P / s                                    # P_s = A_s / s
            gs = [grad_at(Ps, t) for t in range(c0, c1)]
            for t, g in zip(range(c0, c1), gs):
                a_t, eta_t = gates(t)
                P = a_t * P + (1 - a_t) * anc - eta_t * g  # A_t = a_t A_{t-1} - eta_t g_t(P_s)
                ys.append(mem_apply(cfg, P / s, q[:, t], ln_g, ln_b))   # y_t = M(q_t; A_t / s)
        else:                                             # kl: P holds the logits Z
            Ws = kl_weights(cfg, P)                       # W_s = softmax(Z_s)
            a_t, eta_t = gates(c0)                        # lag token: exact step in logit space
            P = a_t * P - eta_t * grad_at(Ws, c0)         # Z_1 = a_1 Z_s - eta_1 g_1(W_s)
            W = kl_weights(cfg, P)                        # W_1
            ys.append(mem_apply(cfg, W, q[:, c0], ln_g, ln_b))
            W1 = W
            gs = [grad_at(W1, t) for t in range(c0 + 1, c1)]   # g_t at W_1
            for t, g in zip(range(c0 + 1, c1), gs):
                a_t, eta_t = gates(t)
                W = a_t * W - eta_t * g                   # linear in-chunk form from W_1
                P = a_t * P - eta_t * g                   # same recurrence on Z -> Z_end
                ys.append(mem_apply(cfg, W, q[:, t], ln_g, ln_b))
    if state is not None:
        state[:] = [P, S]
    return torch.stack(ys, dim=1)


def phistar_read(cfg, st, x):
    """W2 phi*(x) over the history of st (memory_read_phistar's state): x (B,H,d) -> (B,H,w), 0 without entries."""
    B, H, d = x.shape
    if not st["ek"]:
        return torch.zeros(B, H, head_dims(cfg)[1] if cfg["mem_depth"] == 2 else d, dtype=x.dtype)
    s = math.sqrt(d)
    kap = torch.stack([w * torch.exp(s * (ke * x).sum(-1)) for ke, w in zip(st["ek"], st["ew"])], -1)   # (B,H,E)
    return (kap.unsqueeze(-1) * torch.stack(st["es"], 2)).sum(2) / kap.sum(-1, keepdim=True)


def phistar_state(cfg, P0, B):
    """The phi* memory's start state: W1 (B,H,d,d_m) from P0 (deep; linear: None) and an empty history."""
    H = cfg["H"]
    d, dm = head_dims(cfg)
    W1 = P0.view(H, d, dm).unsqueeze(0).repeat(B, 1, 1, 1) if cfg["mem_depth"] == 2 else None
    return dict(W1=W1, ek=[], es=[], ew=[])


def phistar_apply(cfg, st, x):
    """M(x) at the state st without update (MAC's h): W1 GELU(W2 phi*(x)) (linear: W phi*(x)); x (B,H,d)."""
    z = phistar_read(cfg, st, x)
    return (st["W1"] * gelu_tanh(z).unsqueeze(-2)).sum(-1) if cfg["mem_depth"] == 2 else z


def memory_read_phistar(cfg, P0, q, k, v, a, eta, gamma=None, state=None, t0=0):
    """The phi* memory (README "DT and DOT"; ATLAS's DeepTransformer and DOT, digest §4.4 and A15), naive.
    phi*(x) is the infinite exp feature map, phi*(k).phi*(x) = kappa(k, x) = exp(s k.x), s = sqrt(d) (q, k are
    l2-normed). A matrix acting on phi*(x) starts at 0 and is kept as its history, a list of entries (k_e, sig_e,
    w_e): W2_t phi*(x) = sum_e w_e sig_e kappa(k_e, x) / sum_e w_e kappa(k_e, x) (0 without entries), the normalised
    kernel sum. Deep: M(x) = W1 GELU(W2 phi*(x)), W1 (d, d_m) from P0, no residual, no LN; linear: M(x) =
    W phi*(x) (no finite state). Chunked like SPEC §5 with the omega window of §5.5: in the chunk every inner
    gradient (of its rows and of the c-1 halo rows before it) is taken at the chunk-start state, here by autograd:
    z_j = W2_s phi*(k_j), loss_j = the attentional bias of M(k_j) = W1_s GELU(z_j) (linear: z_j) against v_j, and
    (dloss/dW1_s, dloss/dz_j) = (g1_j, -sig_j), the W2 gradient being -sig_j phi*(k_j)^T; with phistar 2 (bounded
    steps, the dot and deep_transformer presets) sig_j / sqrt(1 + mean(sig_j^2)) takes its place (RMS < 1). Then token by token
        W1_t = a_t W1_{t-1} - eta_t sum_o gamma_t[o] g1_{t-o}
        W2_t = a_t W2_{t-1} + eta_t sum_o gamma_t[o] sig_{t-o} phi*(k_{t-o})^T : every w_e *= a_t, then the entries
               (k_{t-o}, sig_{t-o}, eta_t gamma_t[o]) are appended
        y_t = W1_t GELU(W2_t phi*(q_t))   (linear: y_t = W_t phi*(q_t)).
    The weights are plain products here (T is small); the trainer keeps them as logs. Returns y (B,T,H,d).
    state, t0 (MAC's segments): None, or phistar_state's dict to start from at row t0 (a multiple of b; the rows
    before it are only omega's halo), replaced in place by the end state; y then holds rows t0.. only."""
    B, T, H, d = q.shape
    b, c, deep = cfg["b"], cfg["omega"], cfg["mem_depth"] == 2
    st = phistar_state(cfg, P0, B) if state is None else state
    W1, ek, es, ew = st["W1"], st["ek"], st["es"], st["ew"]   # the history: keys, signals, weights (B,H,.)

    def read(x):                                          # x (B,H,d) -> W2 phi*(x) (B,H,w)
        return phistar_read(cfg, dict(ek=ek, es=es, ew=ew), x)

    ys = []
    for t0 in range(t0, T, b):
        n, nh = min(b, T - t0), min(c - 1, t0)
        W1s = W1
        g1, sig = {}, {}
        with torch.enable_grad():
            for tj in range(t0 - nh, t0 + n):             # the inner gradients at the chunk-start state
                z = read(k[:, tj])
                if not z.requires_grad:
                    z = z.detach().requires_grad_(True)
                ins = [z]
                if deep:
                    if not W1s.requires_grad:
                        W1s = W1s.detach().requires_grad_(True)
                    m = (W1s * gelu_tanh(z).unsqueeze(-2)).sum(-1)
                    ins = [W1s, z]
                else:
                    m = z
                loss = (0.5 * ((m - v[:, tj]) ** 2).sum(-1) if cfg["bias"] == "l2" else -(m * v[:, tj]).sum(-1)).sum()
                gr = torch.autograd.grad(loss, ins, create_graph=True)
                g1[tj], sig[tj] = (gr[0], -gr[1]) if deep else (None, -gr[0])
                if cfg["phistar"] == 2:
                    sig[tj] = sig[tj] / torch.sqrt(1 + (sig[tj] ** 2).mean(-1, keepdim=True))
        for t in range(t0, t0 + n):
            a_t = 1.0 if a is None else a[:, t]              # (B,H)
            e_t = 1.0 if eta is None else eta[:, t]
            ew = [w * a_t for w in ew]
            if deep:
                W1 = (a_t.unsqueeze(-1).unsqueeze(-1) if a is not None else 1.0) * W1
            for o in range(min(c, t + 1)):
                gm = 1.0 if gamma is None else gamma[:, t, :, o]
                coef = e_t * gm
                if deep:
                    W1 = W1 - (coef.unsqueeze(-1).unsqueeze(-1) if torch.is_tensor(coef) else coef) * g1[t - o]
                ek.append(k[:, t - o])
                es.append(sig[t - o])
                ew.append(coef * torch.ones(B, H, dtype=q.dtype) if not torch.is_tensor(coef) else coef)
            zq = read(q[:, t])
            ys.append((W1 * gelu_tanh(zq).unsqueeze(-2)).sum(-1) if deep else zq)
    if state is not None:
        state.update(W1=W1, ek=ek, es=es, ew=ew)
    return torch.stack(ys, 1)


def ns5_online(S):
    """NS5 of (..., r, c) matrices, written independently of ns5 (Gram form: NS5(X_0) = Q_4 ... Q_0 X_0 with
    Q_j = a I + b A_j + c A_j^2, A_{j+1} = Q_j^2 A_j, A_0 = X_0 X_0^T, on the smaller side)."""
    a, b, c = NS5_ABC
    tr = S.shape[-2] > S.shape[-1]
    X0 = S.transpose(-1, -2) if tr else S
    X0 = X0 / (torch.sqrt((X0 * X0).sum((-2, -1), keepdim=True)) + 1e-7)
    A = X0 @ X0.transpose(-1, -2)
    eye = torch.eye(A.shape[-1], dtype=A.dtype)
    Q = eye.expand(A.shape)
    for _ in range(5):
        Qj = a * eye + b * A + c * A @ A
        Q = Qj @ Q
        A = Qj @ Qj @ A
    X = Q @ X0
    return X.transpose(-1, -2) if tr else X


def memory_read_online(cfg, P0, ln_g, ln_b, q, k, v, a, eta, theta, eta_ch=None, delta=None, gamma=None,
                       state=None, t0=0):
    """Independent exact online rule (what b = 1 must equal): per token, gradient at the
    previous state, hand-derived; P_t = a_t P_{t-1} - eta_t g_t(P_{t-1}) (or momentum).
    lq (Moneta, per-token normalisation with the one-token lag of SPEC §5.3):
        s = (|A_{t-1}|_4 + 1e-6)^2 per matrix, A_t = a_t A_{t-1} - eta_t g_t(A_{t-1}/s),
        y_t = M(q_t; A_t / s).
    kl (Memora, the softmax rule itself, carried in weight space):
        W_t = softmax_rows(a_t log W_{t-1} - eta_t g_t(W_{t-1})), W_0 = softmax_rows(P0).
    state (MAC's segments) as memory_read_chunked's: [P, S] carried in (P: A for lq, logits Z for kl) and out (kl:
    log W, logits of the same softmax); t0 as memory_read_chunked's."""
    B, T, H, d = q.shape
    P = P0.unsqueeze(0).repeat(B, 1, 1)
    S = torch.zeros_like(P)
    if state is not None:
        P, S = state
    anc = P0.unsqueeze(0) if cfg.get("anchor", 0) else 0.0   # anchored retention: decay toward P_0 (A_0)
    one = torch.ones(B, T, H, dtype=q.dtype, device=q.device)
    a = one if a is None else a
    eta = one if eta is None else eta

    def per_matrix(X, fn):                                # apply fn to each (rows, cols) matrix
        mats = mem_unpack(cfg, X)
        return torch.cat([fn(M).flatten(-2) for M in mats], dim=-1)

    if cfg["retention"] == "kl":
        P = per_matrix(P, lambda Z: torch.softmax(Z, dim=-1))          # W_0
    ys = []
    for t in range(t0, T):
        kw = dict(escale=None if eta_ch is None else eta_ch[:, t],
                  delta=None if delta is None else delta[:, t])
        a_t, eta_t = a[:, t, :, None], eta[:, t, :, None]
        if cfg["retention"] == "lq":
            s = per_matrix(P, lambda A: (A.abs().pow(4).sum((-2, -1), keepdim=True).pow(0.25)
                                         + 1e-6).pow(2).expand(A.shape))
            g = mem_grad_manual(cfg, P / s, k[:, t], v[:, t], ln_g, ln_b, **kw)
            P = a_t * P + (1 - a_t) * anc - eta_t * g
            ys.append(mem_apply(cfg, P / s, q[:, t], ln_g, ln_b))
            continue
        if gamma is None:
            g = mem_grad_manual(cfg, P, k[:, t], v[:, t], ln_g, ln_b, **kw)
        else:                                             # omega: window gradients at the current state
            g = sum(gamma[:, t, :, o].unsqueeze(-1) * mem_grad_manual(
                        cfg, P, k[:, t - o], v[:, t - o], ln_g, ln_b,
                        delta=None if delta is None else delta[:, t - o])
                    for o in range(gamma.shape[-1]) if t - o >= 0)
        if cfg["retention"] == "kl":
            X = a_t * torch.log(P) - eta_t * g
            P = per_matrix(X, lambda Z: torch.softmax(Z, dim=-1))
        elif cfg["algo"] == "gd":
            P = a_t * P + (1 - a_t) * anc - eta_t * g
        elif cfg["algo"] == "muon":                       # NS5 written out per matrix (ns5_online)
            S = theta[:, t, :, None] * S + g
            P = a_t * P + (1 - a_t) * anc - eta_t * per_matrix(S, ns5_online)
        elif cfg["algo"] == "muon_chunk":                 # b = 1: read the gd step, carry the NS5 step
            S = theta[:, t, :, None] * S + g
            ys.append(mem_apply(cfg, a_t * P + (1 - a_t) * anc - eta_t * g, q[:, t], ln_g, ln_b))
            P = a_t * P + (1 - a_t) * anc - eta_t * per_matrix(S, ns5_online)
            continue
        else:
            S = theta[:, t, :, None] * S - eta_t * g
            P = a_t * P + (1 - a_t) * anc + S
        ys.append(mem_apply(cfg, P, q[:, t], ln_g, ln_b))
    if state is not None:
        state[:] = [torch.log(P) if cfg["retention"] == "kl" else P, S]
    return torch.stack(ys, dim=1)


def lattice_read(cfg, q, k, v, eta, mu, state=None, t0=0):
    """Lattice (SPEC §5.8), the naive per-token loop; autograd differentiates through it.
    q, k, v (B,T,H,d); eta (B,T,H); mu (B,T,H) or None (= 1). State S (B,H,d,m), m = d slots as
    columns, S_0 = I. Per token:
        DEC: h = S k - v, c = k     ENC: h = v, c = S^T v - k     SIM: h = -v, c = k
        g = S^T h ; A = mu + eta (c * g) ; W = S diag(A) - eta h c^T
        S_t = W with each column divided by its norm ; y_t = S_t q_t
    Ablation bits (cfg["lat_ablate"]): 1 drops eta (c * g) from A, 2 drops the renormalisation.
    state, t0 (MAC's segments): None, or [S, _] to start from at row t0 (the rows before are not used), replaced in
    place by the end state."""
    B, T, H, d = q.shape
    kind, abl = cfg["lattice"], cfg["lat_ablate"]
    S = torch.eye(d, dtype=q.dtype).expand(B, H, d, d) if state is None else state[0]
    ys = []
    for t in range(t0, T):
        kt, vt, qt = k[:, t], v[:, t], q[:, t]                          # (B,H,d)
        et = eta[:, t].unsqueeze(-1)                                  # (B,H,1)
        mt = 1.0 if mu is None else mu[:, t].unsqueeze(-1)
        if kind == "dec":
            h = torch.einsum("bhrm,bhm->bhr", S, kt) - vt
        elif kind == "enc":
            h = vt
        else:
            h = -vt
        g = torch.einsum("bhrm,bhr->bhm", S, h)                       # S^T h
        c = g - kt if kind == "enc" else kt
        A = mt + (0.0 if abl & LATA_NO_ORTHO else et * c * g)
        A = A * torch.ones_like(c)
        W = S * A.unsqueeze(-2) - et.unsqueeze(-1) * h.unsqueeze(-1) * c.unsqueeze(-2)
        S = W if abl & LATA_NO_RENORM else W / torch.sqrt((W * W).sum(dim=-2, keepdim=True))
        ys.append(torch.einsum("bhrm,bhm->bhr", S, qt))
    if state is not None:
        state[:] = [S, None]
    return torch.stack(ys, dim=1)


def lattice_read_paper(cfg, q, k, v, eta, mu, state=None, t0=0):
    """The same rule written independently, slot by slot in the paper's form (selftest's "online" path):
    the decoder uses the normalised slots phi_i = s_i / |s_i|; the step on slot i is the projected gradient
    Delta s_i = -eta c_i P(s_i) h / |s_i| with P(s) = I - s s^T / |s|^2 (Eq. 7/13; ENC's c uses phi too),
    then s_i <- mu s_i + Delta s_i and the projection onto the unit sphere (Eq. 14/16). On unit slots (always,
    with the renormalisation, since S_0 = I) this equals lattice_read's template. Without the orthogonal term
    the step is the plain -eta c_i h; without the renormalisation the template is taken literally (its
    unit-slot assumption then fails, so the paper's form is not the definition)."""
    B, T, H, d = q.shape
    kind, abl = cfg["lattice"], cfg["lat_ablate"]
    ortho, renorm = not abl & LATA_NO_ORTHO, not abl & LATA_NO_RENORM
    slots = [torch.zeros(B, H, d, dtype=q.dtype).index_fill(-1, torch.tensor([i]), 1.0) for i in range(d)]
    if state is not None:                                 # (MAC: start from S, slot i its column i, at row t0)
        slots = [state[0][..., :, i] for i in range(d)]
    ys = []
    for t in range(t0, T):
        kt, vt, qt, et = k[:, t], v[:, t], q[:, t], eta[:, t].unsqueeze(-1)
        mt = 1.0 if mu is None else mu[:, t].unsqueeze(-1)
        nrm = [torch.sqrt((s_ * s_).sum(-1, keepdim=True)) for s_ in slots]
        phi = [s_ / n_ if renorm else s_ for s_, n_ in zip(slots, nrm)]
        dec = sum(phi[i] * kt[..., i:i + 1] for i in range(d))          # phi(S) k
        h = dec - vt if kind == "dec" else (vt if kind == "enc" else -vt)
        new = []
        for i in range(d):
            si = slots[i]
            ci = ((phi[i] * vt).sum(-1, keepdim=True) - kt[..., i:i + 1]) if kind == "enc" else kt[..., i:i + 1]
            if ortho and renorm:
                Ph = h - si * (si * h).sum(-1, keepdim=True) / nrm[i] ** 2
                step = -et * ci * Ph / nrm[i]
            elif ortho:                                               # template: + eta c_i (s_i . h) s_i - eta c_i h
                step = et * ci * (si * h).sum(-1, keepdim=True) * si - et * ci * h
            else:
                step = -et * ci * h
            w = mt * si + step
            new.append(w / torch.sqrt((w * w).sum(-1, keepdim=True)) if renorm else w)
        slots = new
        ys.append(sum(slots[i] * qt[..., i:i + 1] for i in range(d)))
    if state is not None:
        state[:] = [torch.stack(slots, dim=-1), None]
    return torch.stack(ys, dim=1)


# ----------------------------------------------------------------------------------------
# Model (SPEC §2, §3)
# ----------------------------------------------------------------------------------------

class MirasModel:
    """Parameters live in one flat tensor in CONTRACT order; self.p holds named views."""

    def __init__(self, cfg, flat):
        self.cfg = cfg
        assert flat.numel() == num_params(cfg)
        self.flat = flat
        self.p = unflatten(cfg, flat)
        self.read_fn = "chunked"                 # or "online" (selftest only)
        self.grad_fn = mem_grad_autograd         # or mem_grad_manual (selftest only)

    def gates(self, ml, u):
        """The memory's gates of the stream u (B,T,D) with memory-only tensors ml: a, eta (B,T,H) or None,
        eta_ch (B,T,H,d) and delta (B,T,H,1 or d) or None, theta (B,T,H) or None (SPEC §3, CONTRACT)."""
        cfg, p = self.cfg, self.p
        B, T, D = u.shape
        H = cfg["H"]
        d, _ = head_dims(cfg)
        a = torch.sigmoid(u @ p["gate_a_w"][ml].T + p["gate_a_b"][ml]) if cfg["gate_a"] else None
        rank = cfg["gate_rank"]
        eta_ch = delta = None
        if rank == 0:
            eta = (cfg["eta_max"] * torch.sigmoid(u @ p["gate_eta_w"][ml].T + p["gate_eta_b"][ml])
                   if cfg["gate_eta"] else None)
        else:
            # channel-wise (CONTRACT): eta = eta_max sigmoid(b + (u W_down^T) W_up^T), per channel
            # of the memory output; the scalar eta of the recurrences is then 1
            eta = None
            if cfg["gate_eta"]:
                eta_ch = cfg["eta_max"] * torch.sigmoid(
                    p["gate_eta_b"][ml] + (u @ p["gate_eta_w"][ml].T) @ p["gate_eta_up"][ml].T)
                eta_ch = eta_ch.view(B, T, H, d)
        if cfg["bias"] == "huber":                        # Huber threshold delta = softplus(.)
            if rank == 0:
                delta = torch.nn.functional.softplus(
                    u @ p["gate_delta_w"][ml].T + p["gate_delta_b"][ml]).unsqueeze(-1)  # (B,T,H,1)
            else:
                delta = torch.nn.functional.softplus(
                    p["gate_delta_b"][ml] + (u @ p["gate_delta_w"][ml].T) @ p["gate_delta_up"][ml].T
                ).view(B, T, H, d)
        theta = (torch.sigmoid(u @ p["gate_theta_w"][ml].T + p["gate_theta_b"][ml])
                 if cfg["algo"] in ("momentum", "muon", "muon_chunk") else None)
        return a, eta, eta_ch, delta, theta

    def mixer(self, l, u):
        """SPEC §3 memory mixer of layer l. u (B,T,D), already RMS-normed. The memory-only
        tensors are indexed by ml, the layer's rank among the 'M' layers; wq, wk, wv, wo by l."""
        cfg, p = self.cfg, self.p
        ml = memory_index(cfg, l)
        B, T, D = u.shape
        H = cfg["H"]
        d, _ = head_dims(cfg)
        # q~, k~, v~ = SiLU(CausalDepthwiseConv_K(u W^T))
        q = silu(causal_conv(u @ p["wq"][l].T, p["conv_q"][ml]))
        k = silu(causal_conv(u @ p["wk"][l].T, p["conv_k"][ml]))
        v = silu(causal_conv(u @ p["wv"][l].T, p["conv_v"][ml]))
        q, k, v = (x.view(B, T, H, d) for x in (q, k, v))
        q, k = l2norm(q), l2norm(k)                       # per head; v = v~
        if cfg["poly"]:                                   # SPEC §5.6: [raw, phi] (mem_split)
            a_poly = torch.nn.functional.softplus(p["poly_rho"][ml])
            q = torch.cat([q, poly_features(q, a_poly)], dim=-1)
            k = torch.cat([k, poly_features(k, a_poly)], dim=-1)
        a, eta, eta_ch, delta, theta = self.gates(ml, u)  # per head per token: affine maps of u
        gamma = None                                      # omega's window gates (SPEC §5.5), (B,T,H,c)
        if cfg["omega"] > 1:
            gamma = torch.sigmoid(u @ p["gate_gamma_w"][ml].T + p["gate_gamma_b"][ml]).view(B, T, H, cfg["omega"])
        deep_ln = cfg["mem_depth"] == 2 and cfg["mem_ln"]
        ln_g = p["mem_ln_g"][ml] if deep_ln else None      # (H,d)
        ln_b = p["mem_ln_b"][ml] if deep_ln else None
        if cfg.get("phistar", 0):                         # DT, DOT (README "DT and DOT")
            y = memory_read_phistar(cfg, p["mem_p0"][ml], q, k, v, a, eta, gamma)
        elif cfg["lattice"] != "none":                    # Lattice: mu = the a gate (1 without it)
            y = (lattice_read_paper if self.read_fn == "online" else lattice_read)(cfg, q, k, v, eta, a)
        elif self.read_fn == "chunked":
            y = memory_read_chunked(cfg, p["mem_p0"][ml], ln_g, ln_b, q, k, v, a, eta, theta,
                                    grad_fn=self.grad_fn, eta_ch=eta_ch, delta=delta, gamma=gamma)
        else:
            y = memory_read_online(cfg, p["mem_p0"][ml], ln_g, ln_b, q, k, v, a, eta, theta,
                                   eta_ch=eta_ch, delta=delta, gamma=gamma)
        # out = (RMSNorm_head(y) * SiLU(u Wg^T)) Wo^T
        yn = rmsnorm(y, p["rmsh_w"][ml].view(H, d)).reshape(B, T, H * d)
        return (yn * silu(u @ p["wg"][ml].T)) @ p["wo"][l].T

    def attention(self, l, u):
        """SPEC §9.1 attention of layer l ('A' causal, 'S' window W). u (B,T,D), RMS-normed.
        q, k = RoPE(u Wq^T), RoPE(u Wk^T) per head (rotate-half pairing, angles in float64);
        scores q.k / sqrt(d); key j visible to query i iff j <= i ('A') or i - W < j <= i ('S');
        out = concat_heads(softmax(scores) v) Wo^T with v = u Wv^T."""
        cfg, p = self.cfg, self.p
        B, T, D = u.shape
        H = cfg["H"]
        d, _ = head_dims(cfg)
        q = rope((u @ p["wq"][l].T).view(B, T, H, d))
        k = rope((u @ p["wk"][l].T).view(B, T, H, d))
        v = (u @ p["wv"][l].T).view(B, T, H, d)
        s = torch.einsum("bihc,bjhc->bhij", q, k) / math.sqrt(d)
        i = torch.arange(T).view(T, 1)
        j = torch.arange(T).view(1, T)
        vis = j <= i
        if cfg["pattern"][l] == "S":
            vis = vis & (j > i - cfg["window"])
        s = s.masked_fill(~vis, float("-inf"))
        o = torch.einsum("bhij,bjhc->bihc", torch.softmax(s, dim=-1), v).reshape(B, T, D)
        return o @ p["wo"][l].T

    def titans_attention(self, l, ua, np_):
        """SPEC §9.2-9.3 attention of a Titans layer over rows ua (B,Tr,D) with its own projections
        att_w*: RoPE at row positions 0..Tr-1; key j visible to query i iff j <= i and (j < np_
        (the persistent rows) or i - W < j); returns attn Wo_a^T for every row (B,Tr,D)."""
        cfg, p = self.cfg, self.p
        B, Tr, D = ua.shape
        H = cfg["H"]
        d, _ = head_dims(cfg)
        q = rope((ua @ p["att_wq"][l].T).view(B, Tr, H, d))
        k = rope((ua @ p["att_wk"][l].T).view(B, Tr, H, d))
        v = (ua @ p["att_wv"][l].T).view(B, Tr, H, d)
        s = torch.einsum("bihc,bjhc->bhij", q, k) / math.sqrt(d)
        i = torch.arange(Tr).view(Tr, 1)
        j = torch.arange(Tr).view(1, Tr)
        vis = (j <= i) & ((j < np_) | (j > i - cfg["window"]))
        s = s.masked_fill(~vis, float("-inf"))
        o = torch.einsum("bhij,bjhc->bihc", torch.softmax(s, dim=-1), v).reshape(B, Tr, D)
        return o @ p["att_wo"][l].T

    def titans_layer(self, l, x):
        """SPEC §9.2-9.3, one MAL or MAG layer on the residual stream x (B,T,D), SwiGLU included.
        The memory mixer (section 3, self.mixer) runs over the stream [P || u] of N_p + T rows
        and keeps the sequence rows."""
        cfg, p = self.cfg, self.p
        B, T, D = x.shape
        np_ = cfg["npers"]
        u = rmsnorm(x, p["rms1_w"][l])
        P = p["pers"][l].unsqueeze(0).expand(B, np_, D) if np_ else u[:, :0]
        us = torch.cat([P, u], dim=1)                     # [P || u]
        m = self.mixer(l, us)[:, np_:]
        if cfg["arch"] == "mal":
            x = x + m                                     # memory as a layer, then SWA (no prefix)
            x = x + self.titans_attention(l, rmsnorm(x, p["rmsa_w"][l]), 0)
        else:                                             # MAG: o(y, m)
            y = self.titans_attention(l, us, np_)[:, np_:]
            o = rmsnorm(y, p["og1_w"][l]) * torch.sigmoid(rmsnorm(m, p["og2_w"][l]))
            x = x + o
        return x + self.swiglu(l, rmsnorm(x, p["rms2_w"][l]))

    def mac_layer(self, l, x):
        """SPEC §9.3 MAC, one layer on x (B,T,D), SwiGLU included. Segments of C tokens; for
        segment s: h = M(q(u_s); P_(s)) read without update (q from the memory's Wq and conv_q over
        the u sequence, SiLU, l2 norm); attention over [P || h || u_s] (P and h keys/values only,
        projected by att_wk, att_wv; P at RoPE positions 0..N_p-1, h_j and u_j at N_p + t); y = the
        attention output before Wo_a; the memory takes q, k, v and gates from y (its projections and
        conv over the y sequence), writes and reads (section 5), m = the raw reads;
        x += RMSNorm_g1(y Wo_a^T) * sigmoid(RMSNorm_g2(m)). Any retention (h reads the segment-start weights:
        A/s for lq, softmax(Z) for kl), bias and gate rank."""
        cfg, p = self.cfg, self.p
        B, T, D = x.shape
        H = cfg["H"]
        d, _ = head_dims(cfg)
        np_, C = cfg["npers"], cfg["seg"]
        u = rmsnorm(x, p["rms1_w"][l])
        deep_ln = cfg["mem_depth"] == 2 and cfg["mem_ln"]
        ln_g = p["mem_ln_g"][l] if deep_ln else None
        ln_b = p["mem_ln_b"][l] if deep_ln else None

        def feats(x):                                     # poly (SPEC §5.6): [raw, phi] (mem_split)
            if not cfg["poly"]:
                return x
            return torch.cat([x, poly_features(x, torch.nn.functional.softplus(p["poly_rho"][l]))], dim=-1)

        def memq(z):                                      # the memory's q of a stream z (B,n,D)
            n = z.shape[1]
            return feats(l2norm(silu(causal_conv(z @ p["wq"][l].T, p["conv_q"][l])).view(B, n, H, d)))
        qu = memq(u)                                      # the u-stream q (for h)
        Pr = p["pers"][l].unsqueeze(0).expand(B, np_, D) if np_ else u[:, :0]
        kP = rope_at((Pr @ p["att_wk"][l].T).view(B, np_, H, d), list(range(np_)))
        vP = (Pr @ p["att_wv"][l].T).view(B, np_, H, d)
        lat = cfg["lattice"] != "none"                   # Lattice: the state S (B,H,d,m), S_0 = I (no P_0)
        phi = cfg.get("phistar", 0)                       # the phi* memory: W1 and the history (phistar_state)
        if phi:
            state = phistar_state(cfg, p["mem_p0"][l], B)
        elif lat:
            state = [torch.eye(d, dtype=u.dtype).expand(B, H, d, d), None]
        else:
            state = [p["mem_p0"][l].unsqueeze(0).repeat(B, 1, 1), None]
            state[1] = torch.zeros_like(state[0])
        ys, ms = [], []
        for s0 in range(0, T, C):
            s1 = min(s0 + C, T)
            n = s1 - s0
            pos = [np_ + t for t in range(s0, s1)]
            ret = cfg["retention"]                        # the weights of the segment-start state P_(s)
            Wseg = (state[0] / lq_scale(cfg, state[0]) if ret == "lq" else
                    kl_weights(cfg, state[0]) if ret == "kl" else state[0]) if not phi else None
            if phi:                                       # the phi* read at the segment-start W1 and history
                h = torch.stack([phistar_apply(cfg, state, qu[:, t]) for t in range(s0, s1)], dim=1).reshape(B, n, D)
            elif lat:                                     # Lattice's read y = S q at S_(s)
                h = torch.einsum("bhrm,bnhm->bnhr", state[0], qu[:, s0:s1]).reshape(B, n, D)
            else:
                h = torch.stack([mem_apply(cfg, Wseg, qu[:, t], ln_g, ln_b) for t in range(s0, s1)],
                                dim=1).reshape(B, n, D)   # read at P_(s), no update
            us = u[:, s0:s1]
            q = rope_at((us @ p["att_wq"][l].T).view(B, n, H, d), pos)
            kh = rope_at((h @ p["att_wk"][l].T).view(B, n, H, d), pos)
            ku = rope_at((us @ p["att_wk"][l].T).view(B, n, H, d), pos)
            vh = (h @ p["att_wv"][l].T).view(B, n, H, d)
            vu = (us @ p["att_wv"][l].T).view(B, n, H, d)
            k = torch.cat([kP, kh, ku], dim=1)            # keys: P, h, u_s
            v = torch.cat([vP, vh, vu], dim=1)
            sc = torch.einsum("bihc,bjhc->bhij", q, k) / math.sqrt(d)
            i = torch.arange(n).view(n, 1)
            j = torch.arange(n).view(1, n)
            vis = torch.cat([torch.ones(n, np_, dtype=torch.bool), j <= i, j <= i], dim=1)
            sc = sc.masked_fill(~vis, float("-inf"))
            ys.append(torch.einsum("bhij,bjhc->bihc", torch.softmax(sc, dim=-1), v).reshape(B, n, D))
            Y = torch.cat(ys, dim=1)                      # the y stream so far (its conv is causal)
            # the memory's inputs of rows 0..s1-1 (its conv is causal); the rows before s0 are omega's halo only
            qy = memq(Y)
            ky = feats(l2norm(silu(causal_conv(Y @ p["wk"][l].T, p["conv_k"][l])).view(B, s1, H, d)))
            vy = silu(causal_conv(Y @ p["wv"][l].T, p["conv_v"][l])).view(B, s1, H, d)
            a, eta, eta_ch, delta, theta = self.gates(l, Y)
            gamma = (torch.sigmoid(Y @ p["gate_gamma_w"][l].T + p["gate_gamma_b"][l]).view(B, s1, H, cfg["omega"])
                     if cfg["omega"] > 1 else None)       # omega's window gates (SPEC §5.5)
            # g_t is the partial derivative with k, v held fixed (SPEC §9.3): k, v depend on P_(s) through
            # h, so the writes take their gradients at a copy of P_(s) (autograd differentiates w.r.t. it)
            if phi:                                       # (phi*: W1; the history's signals are no state)
                state["W1"] = state["W1"].clone() if state["W1"] is not None else None
            else:
                state[0] = state[0].clone()
            if phi:                                       # (the state dict: W1 and the history, carried on)
                y_ = memory_read_phistar(cfg, p["mem_p0"][l], qy, ky, vy, a, eta, gamma, state=state, t0=s0)
            elif lat:                                     # mu = the a gate (1 without it), as the mixer's
                y_ = (lattice_read_paper if self.read_fn == "online" else lattice_read)(cfg, qy, ky, vy, eta, a,
                                                                                       state=state, t0=s0)
            elif self.read_fn == "chunked":
                y_ = memory_read_chunked(cfg, p["mem_p0"][l], ln_g, ln_b, qy, ky, vy, a, eta, theta,
                                         grad_fn=self.grad_fn, eta_ch=eta_ch, delta=delta, state=state,
                                         gamma=gamma, t0=s0)
            else:                                         # (selftest: b = 1 against the online rule)
                y_ = memory_read_online(cfg, p["mem_p0"][l], ln_g, ln_b, qy, ky, vy, a, eta, theta,
                                        eta_ch=eta_ch, delta=delta, state=state, gamma=gamma, t0=s0)
            ms.append(y_.reshape(B, n, D))
        y, m = torch.cat(ys, dim=1), torch.cat(ms, dim=1)
        o = rmsnorm(y @ p["att_wo"][l].T, p["og1_w"][l]) * torch.sigmoid(rmsnorm(m, p["og2_w"][l]))
        x = x + o
        return x + self.swiglu(l, rmsnorm(x, p["rms2_w"][l]))

    def swiglu(self, l, x):
        # SPEC §2: (SiLU(x W1^T) * (x W3^T)) W2^T
        p = self.p
        return (silu(x @ p["mlp_w1"][l].T) * (x @ p["mlp_w3"][l].T)) @ p["mlp_w2"][l].T

    def forward(self, tokens):
        """tokens (B,T) int64 -> logits (B,T,V) (first V columns of the tied head)."""
        cfg, p = self.cfg, self.p
        x = p["wte"][tokens]
        for l in range(cfg["L"]):
            if cfg.get("arch", "none") == "mac":
                x = self.mac_layer(l, x)
                continue
            if cfg.get("arch", "none") != "none":
                x = self.titans_layer(l, x)
                continue
            mix = self.mixer if cfg["pattern"][l] == "M" else self.attention
            x = x + mix(l, rmsnorm(x, p["rms1_w"][l]))
            x = x + self.swiglu(l, rmsnorm(x, p["rms2_w"][l]))
        logits = rmsnorm(x, p["rmsf_w"]) @ p["wte"].T      # (B,T,Vp)
        return logits[..., :cfg["V"]]

    def loss(self, inputs, targets):
        """Mean cross-entropy over all B*T positions, over the first V columns only."""
        logits = self.forward(inputs)
        V = self.cfg["V"]
        lp = torch.log_softmax(logits, dim=-1)
        return -lp.reshape(-1, V).gather(1, targets.reshape(-1, 1)).mean(), logits


def split_tokens(tokens, B, T):
    """tokens int32[B*(T+1)] -> inputs, targets (B,T) int64 (CONTRACT fixture rows)."""
    t = torch.as_tensor(np.asarray(tokens, dtype=np.int64)).view(B, T + 1)
    return t[:, :T].contiguous(), t[:, 1:].contiguous()


# ----------------------------------------------------------------------------------------
# AdamW (CONTRACT.md): global-norm clip, decoupled decay on DECAYED tensors, constant lr
# ----------------------------------------------------------------------------------------

def adamw_step(p, g, m, v, step, hp, mask):
    """One step, in place on p, m, v (flat float64 tensors). step counts from 1."""
    n = torch.sqrt((g * g).sum())
    if n > hp["grad_clip"]:
        g = g * (hp["grad_clip"] / n)
    lr, b1, b2 = hp["lr"], hp["beta1"], hp["beta2"]
    p.mul_(1.0 - lr * hp["weight_decay"] * mask)            # decoupled decay
    m.mul_(b1).add_((1.0 - b1) * g)
    v.mul_(b2).add_((1.0 - b2) * g * g)
    bc1 = 1.0 - b1 ** step
    bc2 = 1.0 - b2 ** step
    p.sub_(lr * (m / bc1) / (torch.sqrt(v / bc2) + hp["eps"]))


def loss_and_grad(cfg, flat64, inputs, targets, **model_kw):
    flat = flat64.detach().clone().requires_grad_(True)
    model = MirasModel(cfg, flat)
    for k_, v_ in model_kw.items():
        setattr(model, k_, v_)
    loss, logits = model.loss(inputs, targets)
    loss.backward()
    return loss.detach(), logits.detach(), flat.grad.detach()


def train_losses(cfg, flat64, inputs, targets, hp, dtype=torch.float64):
    """nsteps of (forward/backward, AdamW) on the same batch; params kept in float64
    (dtype=float32 only for the precision report)."""
    p = flat64.detach().to(dtype).clone()
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    mask = decay_mask(cfg, dtype)
    losses = []
    for step in range(1, hp["nsteps"] + 1):
        loss, _, g = loss_and_grad(cfg, p, inputs, targets)
        losses.append(loss.item())
        adamw_step(p, g, m, v, step, hp, mask)
    return losses


# ----------------------------------------------------------------------------------------
# Fixture configs, parameter init, file I/O (CONTRACT.md "Fixture file")
# ----------------------------------------------------------------------------------------

SMALL = dict(V=61, D=32, L=2, H=2, E=2, F=64, K=4, eta_max=1.0)
# float hyperparameters are stored as float32 bits, so the reference uses the float32-rounded
# values (lr = 0.0030000000260770321...), exactly what a reader of the header gets
TRAIN_HP = dict(B=2, T=11, nsteps=10, lr=3e-3, beta1=0.9, beta2=0.95, eps=1e-8,
                weight_decay=0.1, grad_clip=1.0)
for _k in ("lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip"):
    TRAIN_HP[_k] = float(np.float32(TRAIN_HP[_k]))

# name: (mem_depth, mem_resid, mem_ln, bias, algo, gate_a, gate_eta, b, retention, gate_rank[, anchor[, lattice, lat_k, lat_ablate]])
# (each fixture's seed is in FIXTURE_SEED, by name)
FIXTURES = {
    "titans":         (2, 1, 1, "l2", "momentum", 1, 1, 4, "none", 0),
    "ttt_mlp":        (2, 1, 1, "l2", "gd", 0, 1, 4, "none", 0),
    "linear_attn":    (1, 0, 0, "dot", "gd", 0, 0, 4, "none", 0),
    "deltanet":       (1, 0, 0, "l2", "gd", 0, 1, 1, "none", 0),
    "gated_deltanet": (1, 0, 0, "l2", "gd", 1, 1, 1, "none", 0),
    "deep_noln":      (2, 1, 0, "l2", "momentum", 1, 1, 4, "none", 0),
    "deep_nores_gd":  (2, 0, 1, "l2", "gd", 1, 1, 3, "none", 0),
    # MIRAS (CONTRACT "Extension for MIRAS"): presets and channel-wise (gate_rank 3) variants
    "moneta":         (2, 1, 1, "lp", "gd", 1, 1, 4, "lq", 0),
    "yaad":           (2, 1, 1, "huber", "gd", 1, 1, 4, "none", 0),
    "memora":         (2, 1, 1, "l2", "gd", 1, 1, 4, "kl", 0),
    "yaad_cw":        (2, 1, 1, "huber", "gd", 1, 1, 4, "none", 3),
    "moneta_cw":      (2, 1, 1, "lp", "gd", 1, 1, 3, "lq", 3),
    "memora_cw":      (2, 1, 1, "l2", "gd", 1, 1, 4, "kl", 3),
    # the anchored retention (README "Long sequences"): the presets that use it, and a linear memory
    "titans_anchor":  (2, 1, 1, "l2", "momentum", 1, 1, 4, "none", 0, 1),
    "yaad_anchor":    (2, 1, 1, "huber", "gd", 1, 1, 4, "none", 0, 1),
    "moneta_anchor":  (2, 1, 1, "lp", "gd", 1, 1, 3, "lq", 0, 1),
    "gdn_anchor":     (1, 0, 0, "l2", "gd", 1, 1, 1, "none", 0, 1),
    # attention layers (SPEC §9.1; layer pattern and window in FIXTURE_LAYERS): Transformer++, the
    # titans-H hybrid, and all three kinds in one model (the memory layer third, so that its index in
    # the memory-only tensors, 0, differs from its layer index, 2); the memory fields of transformer
    # are titans' and unused
    "transformer":    (2, 1, 1, "l2", "momentum", 1, 1, 4, "none", 0),
    "titans_H":       (2, 1, 1, "l2", "momentum", 1, 1, 4, "none", 0),
    "hybrid_asm":     (2, 1, 1, "l2", "momentum", 1, 1, 3, "none", 0),
    # the ATLAS family (README "ATLAS"; the 12th field is omega's window c): omeganet's rule without the
    # poly features (deep, gd, anchored), with momentum, and a linear memory whose halo (c-1 = 3) spans
    # more than one chunk (b = 2)
    "omega_gd":       (2, 1, 1, "l2", "gd", 1, 1, 4, "none", 0, 1, 3),
    "omega_mom":      (2, 1, 1, "l2", "momentum", 1, 1, 4, "none", 0, 0, 3),
    "omega_linear":   (1, 0, 0, "huber", "gd", 1, 1, 2, "none", 0, 0, 4),
    # the 13th field: poly features (SPEC §5.6). omeganet's memory (deep + poly, gd, omega, anchored);
    # poly alone on titans' rule; a linear memory with poly (W: d x D_phi)
    "omeganet":       (2, 1, 1, "l2", "gd", 1, 1, 4, "none", 0, 1, 3, 1),
    "poly_mom":       (2, 1, 1, "l2", "momentum", 1, 1, 4, "none", 0, 0, 1, 1),
    "poly_linear":    (1, 0, 0, "l2", "gd", 1, 1, 3, "none", 0, 0, 2, 1),
    # Lattice (SPEC §5.8): the three variants (mu = 1), DEC with the forgetting gate mu (gate_a), SIM with mu and
    # without the renormalisation, DEC with both ablations (the delta rule from S_0 = I); lat_k 4 (T = 11: 4, 4, 3)
    "lattice":        (1, 0, 0, "l2", "gd", 0, 1, 1, "none", 0, 0, "dec", 4, 0),
    "lattice_enc":    (1, 0, 0, "l2", "gd", 0, 1, 1, "none", 0, 0, "enc", 4, 0),
    "lattice_sim":    (1, 0, 0, "l2", "gd", 0, 1, 1, "none", 0, 0, "sim", 4, 0),
    "lattice_mu":     (1, 0, 0, "l2", "gd", 1, 1, 1, "none", 0, 0, "dec", 4, 0),
    "lattice_sim_nr": (1, 0, 0, "l2", "gd", 1, 1, 1, "none", 0, 0, "sim", 4, 2),
    "lattice_delta":  (1, 0, 0, "l2", "gd", 0, 1, 1, "none", 0, 0, "dec", 4, 3),
    # Titans layers (SPEC §9.2-9.3; arrangement, N_p and W in FIXTURE_TITANS): N_p + T (14, 13) and T = 11
    # no multiple of b, W < T; MAG also with the gated DeltaNet memory (-Q gated_deltanet, b = 1)
    "mal":            (2, 1, 1, "l2", "momentum", 1, 1, 4, "none", 0),
    "mag":            (2, 1, 1, "l2", "momentum", 1, 1, 4, "none", 0),
    "mag_gdn":        (1, 0, 0, "l2", "gd", 1, 1, 1, "none", 0),
    "mac":            (2, 1, 1, "l2", "momentum", 1, 1, 2, "none", 0),
    # MAC with the MIRAS memories (-Q moneta, memora, yaad): lq (anchored, as the moneta preset), kl with channel-wise
    # gates, Huber with channel-wise eta and delta (anchored, as yaad)
    "mac_moneta":     (2, 1, 1, "lp", "gd", 1, 1, 2, "lq", 0, 1),
    "mac_memora_cw":  (2, 1, 1, "l2", "gd", 1, 1, 2, "kl", 3),
    "mac_yaad_cw":    (2, 1, 1, "huber", "gd", 1, 1, 2, "none", 3, 1),
    # MAL and MAG with the ATLAS family's memories (-Q omeganet, atlas, atlas_pp): omeganet's (deep + poly, gd, omega 3,
    # anchored) and atlas' (the same with token-level muon) in MAL, atlas_pp's (gated + poly, muon, omega 3, anchored)
    # in MAG; b = 4 (N_p + T = 14 and 13: the stream ends in a partial chunk)
    "mal_omeganet":   (2, 1, 1, "l2", "gd", 1, 1, 4, "none", 0, 1, 3, 1),
    "mal_atlas":      (2, 1, 1, "l2", "muon", 1, 1, 4, "none", 0, 1, 3, 1),
    "mag_atlas_pp":   (2, 1, 1, "l2", "muon", 1, 1, 4, "none", 0, 1, 3, 1, 1),
    # MAL and MAG with Lattice (-Q lattice, lattice_sim) and the phi* memory (-Q dot, deep_transformer): DEC at b = 1
    # (lat_k 4: the stream of N_p + T = 14 rows checkpoints at 4, 8, 12), SIM with the mu gate; dot's memory (deep l2,
    # omega 3, bounded W2 steps, b = 3) and deep_transformer's (deep dot bias, c = 1, bounded, b = 4)
    # MAC with muon and the gated memory: token-level muon on the gated memory
    # (atlas_pp's without omega and poly, anchored), chunk-level muon on the deep memory; b = 2, C = 4
    "mac_muon_gated":  (2, 1, 1, "l2", "muon", 1, 1, 2, "none", 0, 1, 1, 0, 1),
    "mac_muonc":       (2, 1, 1, "l2", "muon_chunk", 1, 1, 2, "none", 0, 0, 1, 0, 0),
    # MAC with the ATLAS family's memories (omega's halo crosses the segment boundary): omeganet's (deep + poly, gd,
    # omega 3, anchored) and atlas_pp's (gated + poly, muon, omega 3, anchored) at b = 2, C = 4 (the chunk at t = 4 has
    # the previous segment's rows 2, 3 as its halo); a linear Huber memory with omega 4 at b = 1 (halos of 3 chunks)
    "mac_omeganet":    (2, 1, 1, "l2", "gd", 1, 1, 2, "none", 0, 1, 3, 1),
    "mac_atlas_pp":    (2, 1, 1, "l2", "muon", 1, 1, 2, "none", 0, 1, 3, 1, 1),
    "mac_omega_lin":   (1, 0, 0, "huber", "gd", 1, 1, 1, "none", 0, 0, 4),
    # MAC with Lattice: DEC with checkpoints every 3 tokens (segments of C 4 start inside them), SIM with the mu gate
    # and without the renormalisation (lat_k 4)
    "mac_lattice":     (1, 0, 0, "l2", "gd", 0, 1, 1, "none", 0, 0, "dec", 3, 0),
    "mac_lattice_sim": (1, 0, 0, "l2", "gd", 1, 1, 1, "none", 0, 0, "sim", 4, 2),
    # MAC with the phi* memory (h reads the entries committed before the segment, W1 at its start): dot's memory (deep,
    # l2, omega 3, bounded W2 steps) at b = 2, C = 4 (the halo crosses the segment boundary); a linear phi* memory
    # with the dot bias and omega 2 at b = 1
    "mac_dot":         (2, 0, 0, "l2", "gd", 1, 1, 2, "none", 0, 0, 3, 0, 0, 2),
    "mac_dot_lin":     (1, 0, 0, "dot", "gd", 1, 1, 1, "none", 0, 0, 2, 0, 0, 1),
    "mal_lattice":     (1, 0, 0, "l2", "gd", 0, 1, 1, "none", 0, 0, "dec", 4, 0),
    "mag_lattice_sim": (1, 0, 0, "l2", "gd", 1, 1, 1, "none", 0, 0, "sim", 4, 0),
    "mal_dot":         (2, 0, 0, "l2", "gd", 1, 1, 3, "none", 0, 0, 3, 0, 0, 2),
    "mag_dt":          (2, 0, 0, "dot", "gd", 1, 1, 4, "none", 0, 0, 1, 0, 0, 2),
    # muon (SPEC §5.7, token-level): deep anchored with omega (window 3, b = 4: T = 11 ends in a partial chunk); atlas's
    # memory (deep + poly, muon, omega 3, anchored); a linear Huber memory (omega 2, b = 3); deep without LN, no omega
    "muon_deep":      (2, 1, 1, "l2", "muon", 1, 1, 4, "none", 0, 1, 3),
    "atlas":          (2, 1, 1, "l2", "muon", 1, 1, 4, "none", 0, 1, 3, 1),
    "muon_linear":    (1, 0, 0, "huber", "muon", 1, 1, 3, "none", 0, 0, 2),
    "muon_noln":      (2, 1, 0, "l2", "muon", 1, 1, 3, "none", 0, 0, 1),
    # the 14th field: the gated deep memory (ATLAS++, SPEC §4). atlas_pp's memory (gated + poly, muon, omega 3,
    # anchored); gated without LN, omega 2, b = 3
    "atlas_pp":       (2, 1, 1, "l2", "muon", 1, 1, 4, "none", 0, 1, 3, 1, 1),
    "gated_noln":     (2, 1, 0, "l2", "muon", 1, 1, 3, "none", 0, 0, 2, 0, 1),
    # the gated memory with the dual-form chunk (gd, momentum) and chunk-level muon: gd anchored with omega 3 at b = 3;
    # momentum with poly at b = 4 (T = 11 ends in a partial chunk); chunk-level muon without LN, omega 2
    "gated_gd":       (2, 1, 1, "l2", "gd", 1, 1, 3, "none", 0, 1, 3, 0, 1),
    "gated_mom":      (2, 1, 1, "l2", "momentum", 1, 1, 4, "none", 0, 0, 1, 1, 1),
    "gated_chunk":    (2, 1, 0, "l2", "muon_chunk", 1, 1, 3, "none", 0, 0, 2, 0, 1),
    # chunk-level muon (SPEC §5.7, atlas_chunk): atlas_chunk's memory (deep + poly, omega 3, anchored); linear, omega 2
    "atlas_chunk":    (2, 1, 1, "l2", "muon_chunk", 1, 1, 4, "none", 0, 1, 3, 1),
    "muonc_linear":   (1, 0, 0, "l2", "muon_chunk", 1, 1, 3, "none", 0, 0, 2),
    # the 15th field: the phi* memory (README "DT and DOT"). deep_transformer's memory (deep, dot bias, c = 1, b = 4:
    # T = 11 ends in a partial chunk); dot's (deep, l2, omega 3: the halo spans the chunk boundary); a linear l2 phi*
    # memory with omega 4 at b = 2 (the halo reaches two chunks back)
    "deep_transformer": (2, 0, 0, "dot", "gd", 1, 1, 4, "none", 0, 0, 1, 0, 0, 1),
    "dot":              (2, 0, 0, "l2", "gd", 1, 1, 4, "none", 0, 0, 3, 0, 0, 1),
    "dot_linear":       (1, 0, 0, "l2", "gd", 1, 1, 2, "none", 0, 0, 4, 0, 0, 1),
    # phi* 2: the bounded W2 steps of today's dot and deep_transformer presets (deep, l2, omega 3, b = 3; deep, dot,
    # c = 1, b = 4)
    "dot_bound":        (2, 0, 0, "l2", "gd", 1, 1, 3, "none", 0, 0, 3, 0, 0, 2),
    "dt_bound":         (2, 0, 0, "dot", "gd", 1, 1, 4, "none", 0, 0, 1, 0, 0, 2),
}
# name: (arch, N_p, W); L from SMALL, every layer 'M'
FIXTURE_TITANS = {
    "mal":     ("mal", 3, 4),
    "mag":     ("mag", 2, 5),
    "mag_gdn": ("mag", 3, 3),
    "mac":     ("mac", 2, 0),                           # segment C = 4 (= 2b): T = 11 is no multiple of C
    "mac_moneta":    ("mac", 2, 0),
    "mac_memora_cw": ("mac", 3, 0),
    "mac_yaad_cw":   ("mac", 1, 0),
    "mal_omeganet":  ("mal", 3, 4),
    "mal_atlas":     ("mal", 3, 5),
    "mag_atlas_pp":  ("mag", 2, 5),
    "mac_muon_gated":  ("mac", 2, 0),
    "mac_muonc":       ("mac", 3, 0),
    "mac_omeganet":    ("mac", 2, 0),
    "mac_atlas_pp":    ("mac", 3, 0),
    "mac_omega_lin":   ("mac", 1, 0),
    "mac_lattice":     ("mac", 2, 0),
    "mac_lattice_sim": ("mac", 3, 0),
    "mac_dot":         ("mac", 2, 0),
    "mac_dot_lin":     ("mac", 3, 0),
    "mal_lattice":     ("mal", 3, 4),
    "mag_lattice_sim": ("mag", 2, 5),
    "mal_dot":         ("mal", 2, 4),
    "mag_dt":          ("mag", 3, 5),
}
# name: (layer pattern, window W, L); fixtures not named here are all 'M', L from SMALL
FIXTURE_LAYERS = {
    "transformer": ("AA", 0, 2),
    "titans_H":    ("MS", 4, 2),                         # W = 4 < T = 11
    "hybrid_asm":  ("ASM", 3, 3),                        # W = 3, b = 3: T = 11 is no multiple of b
}


def fixture_config(name, **over):
    md, res, ln, bias, algo, ga, ge, b, ret, rank, *ext = FIXTURES[name]
    kw = dict(SMALL, b=b, retention=ret, gate_rank=rank, anchor=ext[0] if ext else 0)
    if len(ext) > 1 and isinstance(ext[1], str):   # Lattice: kind, checkpoint interval, ablation bits
        kw.update(lattice=ext[1], lat_k=ext[2], lat_ablate=ext[3])
    else:                                          # the ATLAS family: omega's window c, poly features
        kw.update(omega=ext[1] if len(ext) > 1 else 1, poly=ext[2] if len(ext) > 2 else 0,
                  gated=ext[3] if len(ext) > 3 else 0, phistar=ext[4] if len(ext) > 4 else 0)
    if name in FIXTURE_LAYERS:
        pat, W, L = FIXTURE_LAYERS[name]
        kw.update(pattern=pat, window=W, L=L)
    if name in FIXTURE_TITANS:
        arch, npers, W = FIXTURE_TITANS[name]
        kw.update(arch=arch, npers=npers, window=W, seg=4 if arch == "mac" else 0)
    kw.update(over)
    return make_config(mem_depth=md, mem_resid=res, mem_ln=ln, bias=bias, algo=algo,
                       gate_a=ga, gate_eta=ge, **kw)


def logit(p):
    return math.log(p / (1.0 - p))


def softplus_inv(y):
    return math.log(math.expm1(y))


# Init of the MIRAS fixtures (see init_params), chosen so that the inner optimisation is well
# conditioned and a float32 evaluation tracks the float64 fixture closely (--f32-report):
#   channel-wise up projections N(0, 0.3^2); huber delta ~ 0.7 (about half of the errors clamped);
#   lq (Moneta): A_0 ~ N(0, 0.03^2) so that P_0 = A_0/s has O(1) entries; since P = A/|A|_4^2 the
#     memory scale is the inverse of the A scale, so the step in A space must be small (eta ~ 0.003)
#     and the retention close to 1 (a ~ 0.99) or the normalisation blows P up / down chunk by chunk;
#   lp: LN gain ~ 0.5 keeps |e| < ~1, where the cubic-like r = 3 tanh(10e)(e^2+eps) stays tame;
#   kl (Memora): a ~ 0.99 (a < 1 shrinks the logits, i.e. flattens the rows), logits
#     Z_0 ~ N(0, 3^2) (peaky rows: a uniform softmax would make all hidden units identical, and
#     std 1 leaves the LN input nearly constant), eta ~ 0.03 (the in-chunk linear steps in
#     weight space stay small next to the entries of W).
# (Checked by perturbing the parameters by 1e-7 relatively: the 10 AdamW step losses of every
# MIRAS fixture then move by <= ~2e-5 relatively, so float32 implementations can track them.)
INIT_UP_STD = 0.3
INIT_DELTA = 0.7
INIT_ETA = {"lq": 0.003, "kl": 0.03}                  # by retention (else 0.45 gd, 0.3 momentum)
INIT_A = {"lq": 0.99, "kl": 0.99}                     # by retention (else 0.9)
INIT_LN_G = {"lp": 0.5}                              # by bias (else 1)
INIT_LQ_STD = 0.03
INIT_KL_STD = 3.0


def init_params(cfg, gen):
    """Random parameters (float64 values already rounded to float32), chosen so every code
    path sees non-degenerate values. Matrices N(0, 1/fan_in), wte N(0, 0.5^2) including the
    padded rows, conv N(0, 0.5^2), norm weights 1 + 0.1 N, LN bias 0.1 N, gate weights
    N(0, 0.2^2), gate biases logit(target) + 0.3 N (a ~ 0.9, theta ~ 0.7, eta ~ 0.45 for gd
    and ~ 0.3 for momentum), deep p0 with LN: W1, W2 ~ N(0, 1); deep p0 without LN:
    N(0, 1/fan_in) per matrix; linear p0 N(0, 0.1^2). These keep the inner memory optimisation
    stable, so that float32 implementations track the float64 fixtures closely."""
    d, dm = head_dims(cfg)
    D, F = cfg["D"], cfg["F"]

    def N(shape, std, mean=0.0):
        return mean + std * torch.randn(*shape, generator=gen, dtype=torch.float64)

    out = []
    for name, shape in param_shapes(cfg):
        if int(np.prod(shape)) == 0:
            out.append(torch.zeros(0, dtype=torch.float64))
            continue
        if name == "wte":
            t = N(shape, 0.5)
        elif name == "pers":                              # persistent tokens: unit-RMS like u's rows
            t = N(shape, 1.0)
        elif name in ("att_wq", "att_wk", "att_wv", "att_wo"):
            t = N(shape, 1.0 / math.sqrt(D))
        elif name in ("rmsa_w", "og1_w", "og2_w"):
            t = N(shape, 0.1, 1.0)
        elif name in ("wq", "wk", "wv", "wg", "mlp_w1", "mlp_w3"):
            t = N(shape, 1.0 / math.sqrt(D))
        elif name == "wo":
            t = N(shape, 1.0 / math.sqrt(D))              # fan_in = HD = D
        elif name == "mlp_w2":
            t = N(shape, 1.0 / math.sqrt(F))
        elif name.startswith("conv_"):
            t = N(shape, 0.5)
        elif name == "mem_ln_g":
            t = N(shape, 0.1, INIT_LN_G.get(cfg["bias"], 1.0))
        elif name in ("rms1_w", "rms2_w", "rmsf_w", "rmsh_w"):
            t = N(shape, 0.1, 1.0)
        elif name == "mem_ln_b":
            t = N(shape, 0.1)
        elif name.endswith("_w"):                         # gate weights (and down projections)
            t = N(shape, 0.2)
        elif name.endswith("_up"):                        # channel-wise gate up projections
            t = N(shape, INIT_UP_STD)
        elif name == "gate_delta_b":
            t = N(shape, 0.3, softplus_inv(INIT_DELTA))
        elif name == "gate_a_b":
            t = N(shape, 0.3, logit(INIT_A.get(cfg["retention"], 0.9)))
        elif name == "gate_eta_b":                        # momentum amplifies the step
            target = {"momentum": 0.3, "muon": 0.1, "muon_chunk": 0.1}.get(cfg["algo"], 0.45)   # NS5 steps are O(1)
            target = INIT_ETA.get(cfg["retention"], target)
            if cfg.get("lat_ablate", 0) & LATA_NO_RENORM:   # Lattice without the renormalisation: the slots
                target = 0.1                              # grow with every step; a small step keeps float32 close
            t = N(shape, 0.3, logit(target / cfg["eta_max"]))
        elif name == "gate_theta_b":
            t = N(shape, 0.3, logit(0.7))
        elif name == "gate_gamma_b":                      # omega's window gates ~ 0.7
            t = N(shape, 0.3, logit(0.7))
        elif name == "poly_rho":                          # a = softplus(rho) ~ (1, 1, 1/2) (SPEC §5.6)
            t = N(shape, 0.1) + torch.tensor([softplus_inv(1.0), softplus_inv(1.0), softplus_inv(0.5)], dtype=torch.float64)
        elif name == "mem_p0" and cfg["retention"] == "lq":
            t = N(shape, INIT_LQ_STD)                     # A_0; P_0 = A_0 / (|A_0|_4 + 1e-6)^2
        elif name == "mem_p0" and cfg["retention"] == "kl":
            t = N(shape, INIT_KL_STD)                     # logits Z_0 (random: breaks symmetry)
        elif name == "mem_p0":
            if cfg["mem_depth"] == 2:
                L, H = shape[0], shape[1]
                if cfg["mem_ln"]:
                    # k is unit-norm, so W2 std 1 gives O(1) GELU inputs; LN removes the
                    # scale of W1 and the effective inner step on the output is ~eta/std(W1)^2,
                    # so std 1 keeps the inner optimisation stable (well-conditioned fixture)
                    W1 = N((L, H, d * dm), 1.0)
                    W2 = N((L, H, (1 + cfg.get("gated", 0)) * dm * mem_in_dim(cfg)), 1.0)   # (and W3)
                else:
                    W1 = N((L, H, d * dm), 1.0 / math.sqrt(dm))   # W1 (d, d_m): fan_in d_m
                    if cfg.get("phistar", 0):                 # (phi*: W1 only, W2_0 = 0)
                        out.append(W1.reshape(-1))
                        continue
                    W2 = N((L, H, (1 + cfg.get("gated", 0)) * dm * mem_in_dim(cfg)),
                           1.0 / math.sqrt(mem_in_dim(cfg)))   # W2 (d_m, d_in) (and W3)
                t = torch.cat([W1, W2], dim=-1)
            else:
                t = N(shape, 0.1)
        else:
            raise KeyError(name)
        out.append(t.reshape(-1))
    flat = torch.cat(out)
    return flat.float().double()                          # rounded to float32


def f32_bits(x):
    return struct.unpack("<i", struct.pack("<f", float(x)))[0]


def bits_f32(i):
    return struct.unpack("<f", struct.pack("<i", int(i)))[0]


def make_header(cfg, magic, hp=None):
    h = np.zeros(256, dtype=np.int32)
    h[0], h[1] = magic, VERSION
    h[2:12] = [cfg["V"], cfg["Vp"], cfg["D"], cfg["L"], cfg["H"], cfg["E"], cfg["F"],
               cfg["b"], cfg["K"], cfg["mem_depth"]]
    h[12] = cfg["mem_resid"]
    h[13] = cfg["mem_ln"]
    h[14] = BIASES.index(cfg["bias"])
    h[15] = ALGOS.index(cfg["algo"])
    h[16] = cfg["gate_a"]
    h[17] = cfg["gate_eta"]
    h[18] = f32_bits(cfg["eta_max"])
    h[19] = num_params(cfg)
    h[20] = RETENTIONS.index(cfg["retention"])
    h[21] = cfg["gate_rank"]
    h[22] = cfg.get("anchor", 0)
    h[23] = cfg.get("window", 0)                          # W of the 'S' layers (0 without)
    h[38] = LATTICES.index(cfg.get("lattice", "none"))    # Lattice kind, checkpoint interval, ablation bits
    h[39] = cfg.get("lat_k", 0)
    h[40] = cfg.get("lat_ablate", 0)
    h[24] = ARCHS.index(cfg.get("arch", "none"))          # Titans layers: arch, N_p, MAC segment
    h[25] = cfg.get("npers", 0)
    h[26] = cfg.get("seg", 0)
    h[30] = cfg.get("omega", 1) if cfg.get("omega", 1) > 1 else 0   # omega's window (0: off)
    h[31] = cfg.get("poly", 0)                            # poly features (0/1)
    h[32] = cfg.get("gated", 0)                           # the gated deep memory (ATLAS++, 0/1)
    h[33] = cfg.get("phistar", 0)                         # the phi* memory (DT, DOT, 0/1; 2: bounded steps)
    assert cfg["L"] <= 128
    for l, ch in enumerate(cfg["pattern"]):
        h[64 + l] = ord(ch)                               # one ASCII char per int32 slot
    if hp is not None:
        h[100], h[101], h[102] = hp["B"], hp["T"], hp["nsteps"]
        for slot, key in zip(range(103, 109),
                             ("lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip")):
            h[slot] = f32_bits(hp[key])
    return h


def config_from_header(h):
    L = int(h[5])
    return dict(V=int(h[2]), Vp=int(h[3]), D=int(h[4]), L=L, H=int(h[6]), E=int(h[7]),
                F=int(h[8]), b=int(h[9]), K=int(h[10]), mem_depth=int(h[11]),
                mem_resid=int(h[12]), mem_ln=int(h[13]), bias=BIASES[h[14]],
                algo=ALGOS[h[15]], gate_a=int(h[16]), gate_eta=int(h[17]),
                eta_max=bits_f32(h[18]), pattern="".join(chr(c) for c in h[64:64 + L]),
                retention=RETENTIONS[h[20]], gate_rank=int(h[21]), anchor=int(h[22]),
                window=int(h[23]), lattice=LATTICES[h[38]], lat_k=int(h[39]), lat_ablate=int(h[40]),
                arch=ARCHS[h[24]], npers=int(h[25]), seg=int(h[26]),
                omega=int(h[30]) or 1, poly=int(h[31]), gated=int(h[32]), phistar=int(h[33]))


def write_fixture(path, cfg, hp, params32, tokens, logits, loss, grads, losses):
    with open(path, "wb") as f:
        f.write(make_header(cfg, MAGIC_FIXTURE, hp).astype("<i4").tobytes())
        f.write(np.asarray(params32, dtype="<f4").tobytes())
        f.write(np.asarray(tokens, dtype="<i4").tobytes())
        f.write(np.asarray(logits, dtype="<f8").tobytes())
        f.write(np.asarray([loss], dtype="<f8").tobytes())
        f.write(np.asarray(grads, dtype="<f8").tobytes())
        f.write(np.asarray(losses, dtype="<f8").tobytes())


def read_fixture(path):
    """Independent small reader: parses a fixture and checks every size against the header."""
    raw = open(path, "rb").read()
    h = np.frombuffer(raw[:1024], dtype="<i4")
    assert h[0] == MAGIC_FIXTURE and h[1] == VERSION, (h[0], h[1])
    cfg = config_from_header(h)
    hp = dict(B=int(h[100]), T=int(h[101]), nsteps=int(h[102]))
    for slot, key in zip(range(103, 109),
                         ("lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip")):
        hp[key] = bits_f32(h[slot])
    P, B, T, V, ns = int(h[19]), hp["B"], hp["T"], cfg["V"], hp["nsteps"]
    off = 1024
    out = dict(cfg=cfg, hp=hp, header=h)
    for key, dt, n in (("params", "<f4", P), ("tokens", "<i4", B * (T + 1)),
                       ("logits", "<f8", B * T * V), ("loss", "<f8", 1),
                       ("grads", "<f8", P), ("losses", "<f8", ns)):
        nb = np.dtype(dt).itemsize * n
        out[key] = np.frombuffer(raw[off:off + nb], dtype=dt)
        assert out[key].size == n, key
        off += nb
    assert off == len(raw), f"{path}: {len(raw)} bytes, expected {off}"
    return out


# each fixture's seed (its weights and tokens), by name: the seeds the committed dev/fixtures were made with, so that
# `reference.py fixtures` writes them again byte for byte (a seed by position broke that when fixtures were
# inserted before others: 7 of them were 3 places further on when they were made). Some share a seed (their
# configurations differ, and so do their draws); a new fixture takes the next unused number (1210 on). The Huber
# fixtures' seeds were drawn again on 2026-11-28, from 1068 on, each the first whose draw keeps HUBER_MIN_MARGIN (which
# build_fixture checks) and whose 10 AdamW step losses from the float CPU trainer, built with and without OpenMP, stay
# within 2e-5 of the fp64 trainer's (yaad's first such draw, 1129, ran to 7e-2: Adam's steps amplified float's
# rounding). Their old seeds (yaad 1008, yaad_cw 1010, yaad_anchor 1014, omega_linear 1022, muon_linear 1038,
# mac_yaad_cw 1051, mac_omega_lin 1063) put an error within 6e-6..1.5e-4 of delta.
FIXTURE_SEED = {
    "titans": 1000, "ttt_mlp": 1001, "linear_attn": 1002, "deltanet": 1003, "gated_deltanet": 1004,
    "deep_noln": 1005, "deep_nores_gd": 1006, "moneta": 1007, "yaad": 1133, "memora": 1009, "yaad_cw": 1142,
    "moneta_cw": 1011, "memora_cw": 1012, "titans_anchor": 1013, "yaad_anchor": 1149, "moneta_anchor": 1015,
    "gdn_anchor": 1016, "transformer": 1017, "titans_H": 1018, "hybrid_asm": 1019, "omega_gd": 1020,
    "omega_mom": 1021, "omega_linear": 1179, "omeganet": 1023, "poly_mom": 1024, "poly_linear": 1025,
    "lattice": 1020, "lattice_enc": 1021, "lattice_sim": 1022, "lattice_mu": 1023, "lattice_sim_nr": 1024,
    "lattice_delta": 1025, "mal": 1020, "mag": 1021, "mag_gdn": 1022, "mac": 1023, "muon_deep": 1036, "atlas": 1037,
    "muon_linear": 1195, "muon_noln": 1039, "atlas_pp": 1040, "gated_noln": 1041, "gated_gd": 1042,
    "gated_mom": 1043, "gated_chunk": 1044, "atlas_chunk": 1042, "muonc_linear": 1043, "deep_transformer": 1044,
    "dot": 1045, "dot_linear": 1046, "dot_bound": 1047, "dt_bound": 1048, "mac_moneta": 1049, "mac_memora_cw": 1050,
    "mac_yaad_cw": 1199, "mal_omeganet": 1052, "mal_atlas": 1053, "mag_atlas_pp": 1054,
    "mal_lattice": 1055, "mag_lattice_sim": 1056, "mal_dot": 1057, "mag_dt": 1058, "mac_muon_gated": 1059,
    "mac_muonc": 1060, "mac_omeganet": 1061, "mac_atlas_pp": 1062, "mac_omega_lin": 1209, "mac_lattice": 1064,
    "mac_lattice_sim": 1065, "mac_dot": 1066, "mac_dot_lin": 1067,
}


def build_fixture(name):
    cfg = fixture_config(name)
    hp = dict(TRAIN_HP)
    gen = torch.Generator().manual_seed(FIXTURE_SEED[name])
    flat = init_params(cfg, gen)
    tokens = torch.randint(0, cfg["V"], (hp["B"] * (hp["T"] + 1),), generator=gen)
    tokens = tokens.numpy().astype(np.int32)
    inputs, targets = split_tokens(tokens, hp["B"], hp["T"])
    HUBER_MARGIN[0] = math.inf
    loss, logits, grads = loss_and_grad(cfg, flat, inputs, targets)
    losses = train_losses(cfg, flat, inputs, targets, hp)
    assert abs(losses[0] - loss.item()) < 1e-12
    if cfg["bias"] == "huber" and HUBER_MARGIN[0] < HUBER_MIN_MARGIN:
        raise SystemExit(f"fixture {name}: an error e lies {HUBER_MARGIN[0]:.2e} of delta from Huber's threshold "
                         f"(under HUBER_MIN_MARGIN {HUBER_MIN_MARGIN:g}): its gradient would depend on float "
                         f"rounding (hint: give it another seed in FIXTURE_SEED)")
    return cfg, hp, flat, tokens, logits, loss, grads, losses


def cmd_fixtures(args):
    os.makedirs(args.out, exist_ok=True)
    names = args.only.split(",") if args.only else list(FIXTURES)
    for name in names:
        t0 = time.time()
        cfg, hp, flat, tokens, logits, loss, grads, losses = build_fixture(name)
        path = os.path.join(args.out, name + ".bin")
        write_fixture(path, cfg, hp, flat.float().numpy(), tokens,
                      logits.reshape(-1).numpy(), loss.item(), grads.numpy(), losses)
        verify_fixture(path, name)
        print(f"{path}: {os.path.getsize(path)} bytes, num_params {num_params(cfg)}, "
              f"loss {loss.item():.6f}, losses[-1] {losses[-1]:.6f}, "
              f"|grad| {grads.norm().item():.4f}  ({time.time() - t0:.1f}s)")
        if args.f32_report:
            # how far the same reference evaluated in float32 lands from the fixture
            inputs, targets = split_tokens(tokens, hp["B"], hp["T"])
            l32, lg32, g32 = loss_and_grad(cfg, flat.float(), inputs, targets)
            L32 = train_losses(cfg, flat, inputs, targets, hp, dtype=torch.float32)
            print(f"    float32 reference vs fixture: |dloss| {abs(l32.item() - loss.item()):.1e}"
                  f"  max|dlogit| {(lg32.double() - logits).abs().max().item():.1e}"
                  f"  |dgrad|/|grad| {((g32.double() - grads).norm() / grads.norm()).item():.1e}"
                  f"  max|dgrad| {(g32.double() - grads).abs().max().item():.1e}"
                  f"  max|dlosses| {max(abs(a - b) for a, b in zip(L32, losses)):.1e}")


def verify_fixture(path, name=None):
    """Re-read a fixture and check it: header vs config, sizes, and that the reference
    reproduces logits, loss and grads from the stored params and tokens."""
    fx = read_fixture(path)
    cfg, hp = fx["cfg"], fx["hp"]
    if name is not None:
        assert cfg == fixture_config(name), (cfg, fixture_config(name))
        assert hp == TRAIN_HP, hp
    assert fx["header"][19] == num_params(cfg)
    assert all(0 <= t < cfg["V"] for t in fx["tokens"])
    flat = torch.from_numpy(fx["params"].astype(np.float64))
    inputs, targets = split_tokens(fx["tokens"], hp["B"], hp["T"])
    loss, logits, grads = loss_and_grad(cfg, flat, inputs, targets)
    assert abs(loss.item() - fx["loss"][0]) < 1e-12
    assert np.abs(logits.reshape(-1).numpy() - fx["logits"]).max() < 1e-12
    assert np.abs(grads.numpy() - fx["grads"]).max() < 1e-12
    assert abs(fx["losses"][0] - fx["loss"][0]) < 1e-12
    # padded wte rows are parameters with exactly zero gradient
    g = unflatten(cfg, torch.from_numpy(fx["grads"].copy()))
    assert (g["wte"][cfg["V"]:] == 0).all()
    return fx


def cmd_read(args):
    fx = read_fixture(args.path)
    print(fx["cfg"])
    print(fx["hp"])
    print("num_params", int(fx["header"][19]), "loss", fx["loss"][0])
    print("losses", " ".join(f"{x:.6f}" for x in fx["losses"]))
    g = unflatten(fx["cfg"], torch.from_numpy(fx["grads"].copy()))
    for n, t in g.items():
        print(f"  {n:13s} {str(tuple(t.shape)):16s} |grad| {t.norm().item():.3e}")


# ----------------------------------------------------------------------------------------
# Self tests
# ----------------------------------------------------------------------------------------

def fd_check(cfg, flat, inp, tgt, g_a, gen, per_tensor, h=1e-5):
    """Central finite differences of the loss vs the autograd gradient g_a, for per_tensor
    random entries of every tensor (plus one padded wte entry). Returns (max rel err, count,
    retries). The huber loss is piecewise (kinks where |e| = delta): when an error entry
    crosses its threshold inside [-h, h] the difference quotient is off, so a failing entry is
    retried with h/10, h/100 (counted in retries)."""
    views = unflatten(cfg, torch.arange(num_params(cfg)))
    fd_err, nchk, retries = 0.0, 0, 0

    def central(i, h):
        fp, fm = flat.clone(), flat.clone()
        fp[i] += h
        fm[i] -= h
        with torch.no_grad():
            lp = MirasModel(cfg, fp).loss(inp, tgt)[0].item()
            lm = MirasModel(cfg, fm).loss(inp, tgt)[0].item()
        return (lp - lm) / (2 * h)

    for pname, idx_view in views.items():
        idx = idx_view.reshape(-1)
        if idx.numel() == 0:
            continue
        picks = torch.randperm(idx.numel(), generator=gen)[:per_tensor]
        if pname == "wte":                   # one padded row entry too (grad exactly 0)
            picks = torch.cat([picks, torch.tensor([cfg["V"] * cfg["D"] + 3])])
        for j in picks.tolist():
            i = idx[j].item()
            for hh in (h, h / 10, h / 100):
                fd = central(i, hh)
                err = abs(fd - g_a[i].item()) / max(1e-3, abs(g_a[i].item()))
                if err < 1e-5 or cfg["bias"] != "huber":
                    break
                retries += 1
            fd_err = nanmax([fd_err, err])
            nchk += 1
            assert err < 1e-5, (cfg, pname, j, fd, g_a[i].item())
    return fd_err, nchk, retries


def nanmax(xs):
    """max that a NaN cannot hide in (Python's max keeps whichever comes first when compared with NaN)."""
    xs = list(xs)
    return float("nan") if any(x != x for x in xs) else max(xs)


def huber_clamped_fraction(cfg, flat, inp):
    """Fraction of the error entries e = M(k) - v (every token, layer, chunk-start state) with
    |e| > delta in one forward: the huber fixtures must exercise both branches."""
    cnt = [0, 0]

    def grad_fn(cfg_, P, k, v, ln_g, ln_b, escale=None, delta=None):
        with torch.no_grad():
            e = mem_apply(cfg_, P, k, ln_g, ln_b) - v
            cnt[0] += int((e.abs() > delta).sum())
            cnt[1] += e.numel()
        return mem_grad_autograd(cfg_, P, k, v, ln_g, ln_b, escale=escale, delta=delta)
    model = MirasModel(cfg, flat)
    model.grad_fn = grad_fn
    with torch.no_grad():
        model.loss(inp, inp)
    return cnt[0] / cnt[1]


def cmd_selftest(args):
    worst = {}
    hp = TRAIN_HP
    names = args.only.split(",") if args.only else list(FIXTURES)
    for name in names:
        gen = torch.Generator().manual_seed(FIXTURE_SEED[name] + 77)
        # (1a) b = 1 chunked (autograd) == online rule (hand-derived gradients)
        cfg1 = fixture_config(name, b=1)
        flat = init_params(cfg1, gen)
        toks = torch.randint(0, cfg1["V"], (hp["B"] * (hp["T"] + 1),), generator=gen).numpy()
        inp, tgt = split_tokens(toks, hp["B"], hp["T"])
        l_c, lg_c, g_c = loss_and_grad(cfg1, flat, inp, tgt)
        l_o, lg_o, g_o = loss_and_grad(cfg1, flat, inp, tgt, read_fn="online")
        e1 = nanmax([(lg_c - lg_o).abs().max().item(), (g_c - g_o).abs().max().item()])
        assert e1 < 1e-10, (name, e1)
        # (1b) chunked at the fixture b: autograd inner gradient == hand-derived
        cfg = fixture_config(name)
        l_a, lg_a, g_a = loss_and_grad(cfg, flat, inp, tgt)
        l_m, lg_m, g_m = loss_and_grad(cfg, flat, inp, tgt, grad_fn=mem_grad_manual)
        e1b = nanmax([(lg_a - lg_m).abs().max().item(), (g_a - g_m).abs().max().item()])
        assert e1b < 1e-10, (name, e1b)
        # b > 1 must differ from b = 1 (the chunk approximation is really exercised)
        diff_b = (lg_a - lg_c).abs().max().item()
        # (2) finite differences on a few entries of every tensor
        fd_err, nchk, rtr = fd_check(cfg, flat, inp, tgt, g_a, gen, args.fd_per_tensor)
        # where (1a) and (1b) compare a code path with itself, say so rather than print a 0 that reads as agreement
        same = ("no memory layer" if "M" not in cfg.get("pattern", "M") else
                "phi*: one reader" if cfg.get("phistar", 0) else None)
        c1a, c1b = (f"n/a ({same})", f"n/a ({same})") if same else (f"{e1:.1e}", f"{e1b:.1e}")
        line = (f"{name:15s} b=1 chunked vs online {c1a} | chunked autograd vs manual "
                f"{c1b} | b={cfg['b']} vs b=1 logits differ {diff_b:.1e} | "
                f"finite-diff max rel err {fd_err:.1e} over {nchk} entries")
        if rtr:
            line += f" ({rtr} huber-kink retries with smaller h)"
        # (2b) the same at the fixture's own parameters and tokens (as build_fixture draws them)
        if args.fixture_fd:
            gen_f = torch.Generator().manual_seed(FIXTURE_SEED[name])
            flat_f = init_params(cfg, gen_f)
            toks_f = torch.randint(0, cfg["V"], (hp["B"] * (hp["T"] + 1),), generator=gen_f)
            inp_f, tgt_f = split_tokens(toks_f.numpy(), hp["B"], hp["T"])
            _, _, g_f = loss_and_grad(cfg, flat_f, inp_f, tgt_f)
            fd_f, n_f, rtr = fd_check(cfg, flat_f, inp_f, tgt_f, g_f, gen, args.fd_per_tensor)
            line += f" | at fixture params {fd_f:.1e} over {n_f}"
            if rtr:
                line += f" ({rtr} huber-kink retries)"
            if cfg["bias"] == "huber":
                line += f" | |e| > delta: {huber_clamped_fraction(cfg, flat_f, inp_f):.2f}"
        worst[name] = (e1, e1b, diff_b, fd_err, nchk)
        print(line, flush=True)
    # (3) AdamW + clip vs torch.optim.AdamW
    cfg = fixture_config("titans")
    gen = torch.Generator().manual_seed(5)
    flat = init_params(cfg, gen)
    toks = torch.randint(0, cfg["V"], (hp["B"] * (hp["T"] + 1),), generator=gen).numpy()
    inp, tgt = split_tokens(toks, hp["B"], hp["T"])
    ours = train_losses(cfg, flat, inp, tgt, dict(hp, nsteps=4))
    leaves = {n: t.clone().requires_grad_(True) for n, t in unflatten(cfg, flat).items()}
    groups = [dict(params=[leaves[n] for n in PARAM_NAMES if n in DECAYED],
                   weight_decay=hp["weight_decay"]),
              dict(params=[leaves[n] for n in PARAM_NAMES if n not in DECAYED],
                   weight_decay=0.0)]
    opt = torch.optim.AdamW(groups, lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]),
                            eps=hp["eps"])
    theirs = []
    for _ in range(4):
        opt.zero_grad()
        fl = torch.cat([leaves[n].reshape(-1) for n in PARAM_NAMES])
        loss = MirasModel(cfg, fl).loss(inp, tgt)[0]
        loss.backward()
        theirs.append(loss.item())
        torch.nn.utils.clip_grad_norm_(list(leaves.values()), hp["grad_clip"])
        opt.step()
    e3 = nanmax(abs(a - b) for a, b in zip(ours, theirs))
    print(f"AdamW vs torch.optim.AdamW (4 steps, titans): max |loss diff| {e3:.1e}; "
          f"losses {' '.join(f'{x:.6f}' for x in ours)}")
    # torch's clip uses n/(n+1e-6); ours uses the contract's exact clip/n
    assert e3 < 1e-8
    print("selftest OK")


# ----------------------------------------------------------------------------------------
# Bench
# ----------------------------------------------------------------------------------------

def cmd_bench(args):
    dev = torch.device(args.device)
    torch.manual_seed(0)
    md, res, ln, bias, algo, ga, ge, b, ret, rank, *anc = FIXTURES[args.preset]
    if args.gate_rank is not None:
        rank = args.gate_rank
    if args.b is not None:
        b = args.b
    elif args.preset not in ("deltanet", "gated_deltanet"):
        b = 16                                            # SPEC default chunk
    F = args.F if args.F else (8 * args.D // 3 + 63) // 64 * 64
    cfg = make_config(V=args.V, D=args.D, L=args.L, H=args.H, E=args.E, F=F, b=b,
                      mem_depth=md, mem_resid=res, mem_ln=ln, bias=bias, algo=algo,
                      gate_a=ga, gate_eta=ge, retention=ret, gate_rank=rank)
    gen = torch.Generator().manual_seed(0)
    flat = init_params(cfg, gen).float().to(dev).requires_grad_(True)
    tok = torch.randint(0, cfg["V"], (args.B, args.T + 1), generator=gen).to(dev)
    inp, tgt = tok[:, :-1], tok[:, 1:]

    def step():
        flat.grad = None
        loss = MirasModel(cfg, flat).loss(inp, tgt)[0]
        loss.backward()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return loss.item()

    step()                                                # warmup
    t0 = time.time()
    for _ in range(args.steps):
        loss = step()
    dt = (time.time() - t0) / args.steps
    print(f"bench preset={args.preset} D={args.D} L={args.L} H={args.H} E={args.E} "
          f"F={F} b={b} gate_rank={rank} V={args.V} B={args.B} T={args.T} "
          f"device={args.device} "
          f"params={num_params(cfg)} loss={loss:.4f}")
    print(f"fwd+bwd {dt * 1000:.1f} ms/step, {args.B * args.T / dt:.1f} tokens/s")


def main():
    torch.set_default_dtype(torch.float64)
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("fixtures")
    a.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures"))
    a.add_argument("--only", default="", help="comma-separated subset of fixture names")
    a.add_argument("--f32-report", action="store_true",
                   help="also print how closely a float32 evaluation tracks each fixture")
    a = sub.add_parser("selftest")
    a.add_argument("--fd-per-tensor", type=int, default=3)
    a.add_argument("--only", default="", help="comma-separated subset of fixture names")
    a.add_argument("--fixture-fd", action="store_true",
                   help="also finite differences at each fixture's own parameters")
    a = sub.add_parser("read")
    a.add_argument("path")
    a = sub.add_parser("bench")
    a.add_argument("--preset", required=True, choices=list(FIXTURES))
    for k_, d_ in (("D", 256), ("L", 4), ("H", 4), ("T", 256), ("B", 4), ("steps", 3),
                   ("V", 50257), ("E", 4), ("F", 0)):
        a.add_argument(f"--{k_}", type=int, default=d_)
    a.add_argument("--b", type=int, default=None)
    a.add_argument("--gate-rank", type=int, default=None,
                   help="channel-wise gate rank (default: the preset's, 0 or 3)")
    a.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    {"fixtures": cmd_fixtures, "selftest": cmd_selftest, "read": cmd_read,
     "bench": cmd_bench}[args.cmd](args)


if __name__ == "__main__":
    main()
