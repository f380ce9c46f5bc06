#!/usr/bin/python3
"""PyTorch reference ("executable spec") for train_miras.

This file is the readable definition that train_miras.c / train_miras.cu are tested
against. It follows ../shared/SPEC.md (model semantics, sections cited as SPEC §n) and
dev/CONTRACT.md (binary formats, parameter order). It is written naively on purpose:
float64, autograd, python loops over tokens, the per-token memory gradient obtained with
torch.autograd.grad(create_graph=True) so that the outer backward includes every
second-order term (SPEC §6).

Only the memory-mixer pattern 'M' is implemented, with the memory / algorithm options that
the fixtures cover: linear or deep memory, l2 or dot attentional bias, gd or momentum.

Usage (always with Debian's interpreter, torch 1.13 CPU is enough):

    /usr/bin/python3 dev/reference.py fixtures --out dev/fixtures
        writes dev/fixtures/<name>.bin for the 7 fixture configs (CONTRACT "Fixture file"),
        then re-reads every file and checks it (sizes, header, loss reproduced).

    /usr/bin/python3 dev/reference.py selftest
        (1) b=1 chunked algorithm (autograd) == separately written online rule with
            hand-derived memory gradients, logits and outer gradients;
            chunked autograd == chunked hand-derived gradients at the fixture b;
        (2) finite differences of the loss vs autograd for entries of every tensor;
        (3) our AdamW+clip == torch.optim.AdamW with the same clip.

    /usr/bin/python3 dev/reference.py read dev/fixtures/titans.bin
        prints a fixture's header and summary.

    /usr/bin/python3 dev/reference.py bench --preset titans --D 256 --L 4 --H 4 --T 256 --B 4 \
        [--steps 3] [--device cpu|cuda] [--V 50257] [--E 4] [--b 16] [--F ...]
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
]
# AdamW weight decay applies to these tensors only (CONTRACT.md)
DECAYED = {"wte", "wq", "wk", "wv", "gate_a_w", "gate_eta_w", "gate_theta_w",
           "wg", "wo", "mlp_w1", "mlp_w3", "mlp_w2"}


def make_config(V, D, L, H, E, F, b, mem_depth, mem_resid, mem_ln, bias, algo,
                gate_a, gate_eta, eta_max=1.0, K=4, pattern=None):
    """Model config dict with the fields of the CONTRACT header."""
    assert D % H == 0
    assert bias in ("l2", "dot") and algo in ("gd", "momentum")
    if mem_depth == 1:            # the linear memory never has a residual or LN (SPEC §4)
        mem_resid, mem_ln = 0, 0
    return dict(V=V, Vp=(V + 63) // 64 * 64, D=D, L=L, H=H, E=E, F=F, b=b, K=K,
                mem_depth=mem_depth, mem_resid=mem_resid, mem_ln=mem_ln, bias=bias,
                algo=algo, gate_a=gate_a, gate_eta=gate_eta, eta_max=eta_max,
                pattern=pattern if pattern is not None else "M" * L)


def head_dims(cfg):
    d = cfg["D"] // cfg["H"]
    return d, cfg["E"] * d                            # d, d_m


def mem_state_size(cfg):
    d, dm = head_dims(cfg)
    return 2 * d * dm if cfg["mem_depth"] == 2 else d * d


def param_shapes(cfg):
    """[(name, shape)] in CONTRACT order; absent tensors get shape (0,)."""
    V, Vp, D, L, H, F, K = (cfg[k] for k in ("V", "Vp", "D", "L", "H", "F", "K"))
    d, dm = head_dims(cfg)
    HD = H * d
    deep_ln = cfg["mem_depth"] == 2 and cfg["mem_ln"]
    mom = cfg["algo"] == "momentum"
    none = (0,)
    shapes = {
        "wte": (Vp, D), "rms1_w": (L, D),
        "wq": (L, HD, D), "wk": (L, HD, D), "wv": (L, HD, D),
        "conv_q": (L, HD, K), "conv_k": (L, HD, K), "conv_v": (L, HD, K),
        "gate_a_w": (L, H, D) if cfg["gate_a"] else none,
        "gate_a_b": (L, H) if cfg["gate_a"] else none,
        "gate_eta_w": (L, H, D) if cfg["gate_eta"] else none,
        "gate_eta_b": (L, H) if cfg["gate_eta"] else none,
        "gate_theta_w": (L, H, D) if mom else none,
        "gate_theta_b": (L, H) if mom else none,
        "mem_p0": (L, H, mem_state_size(cfg)),
        "mem_ln_g": (L, H, d) if deep_ln else none,
        "mem_ln_b": (L, H, d) if deep_ln else none,
        "wg": (L, D, D), "rmsh_w": (L, HD), "wo": (L, D, HD), "rms2_w": (L, D),
        "mlp_w1": (L, F, D), "mlp_w3": (L, F, D), "mlp_w2": (L, D, F), "rmsf_w": (D,),
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
    lead = P.shape[:-1]
    if cfg["mem_depth"] == 2:
        W1 = P[..., :d * dm].reshape(*lead, d, dm)
        W2 = P[..., d * dm:].reshape(*lead, dm, d)
        return W1, W2
    return (P.reshape(*lead, d, d),)


def mem_apply(cfg, P, x, ln_g, ln_b):
    """M(x; P). P (B,H,S), x (B,H,d), ln_g/ln_b (H,d) (deep && mem_ln) -> (B,H,d)."""
    if cfg["mem_depth"] == 1:
        (W,) = mem_unpack(cfg, P)
        return matvec(W, x)                               # M(x) = W x
    W1, W2 = mem_unpack(cfg, P)
    o = matvec(W1, gelu_tanh(matvec(W2, x)))              # W1 GELU(W2 x)
    if cfg["mem_ln"]:
        o = layernorm(o, ln_g, ln_b)                      # LN(.)
    if cfg["mem_resid"]:
        o = x + o                                         # x + .
    return o


def mem_inner_loss(cfg, P, k, v, ln_g, ln_b):
    """Attentional bias (SPEC §4 table), per (B,H):
    l2: 1/2 |M(k) - v|^2 ;  dot: -<M(k), v>."""
    m = mem_apply(cfg, P, k, ln_g, ln_b)
    if cfg["bias"] == "l2":
        return 0.5 * ((m - v) ** 2).sum(-1)
    return -(m * v).sum(-1)


def mem_grad_autograd(cfg, P, k, v, ln_g, ln_b):
    """g = d loss(k, v; P) / dP for every (batch, head), by autograd, keeping the graph
    (create_graph=True) so that the outer backward sees the second-order terms (SPEC §6).
    Batches and heads are independent, so the gradient of the sum is the per-(b,h) gradient."""
    outer_grad = torch.is_grad_enabled()
    with torch.enable_grad():
        if not P.requires_grad:                           # e.g. under torch.no_grad()
            P = P.detach().requires_grad_(True)
        loss = mem_inner_loss(cfg, P, k, v, ln_g, ln_b).sum()
        (g,) = torch.autograd.grad(loss, P, create_graph=outer_grad)
    return g


def mem_grad_manual(cfg, P, k, v, ln_g, ln_b):
    """The same g written out by hand (backprop of r = dloss/dM(k) through M). Used by the
    selftest as an independent implementation; it is differentiable by autograd too."""
    def outer(a, b):                                      # (..., m), (..., n) -> (..., m, n)
        return a.unsqueeze(-1) * b.unsqueeze(-2)
    m = mem_apply(cfg, P, k, ln_g, ln_b)
    r = (m - v) if cfg["bias"] == "l2" else -v            # r = dloss/dM(k)
    if cfg["mem_depth"] == 1:
        return outer(r, k).flatten(-2)                    # dW = r k^T
    W1, W2 = mem_unpack(cfg, P)
    h = matvec(W2, k)
    z = gelu_tanh(h)
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
    dh = matvec(W1.transpose(-1, -2), do) * gelu_tanh_grad(h)
    dW2 = outer(dh, k)                                    # (d_m, d)
    return torch.cat([dW1.flatten(-2), dW2.flatten(-2)], dim=-1)


def memory_read_chunked(cfg, P0, ln_g, ln_b, q, k, v, a, eta, theta, grad_fn=mem_grad_autograd):
    """SPEC §5 chunked algorithm, naive.
    q, k, v: (B,T,H,d); a, eta, theta: (B,T,H) or None (= constant 1); P0: (H,S).
    Chunk c covers [c*b, min((c+1)*b, T)). Inside a chunk every g_t is taken at the
    chunk-start state P_s; then token by token
        gd:       P_t = a_t P_{t-1} - eta_t g_t                        (SPEC §5.1)
        momentum: S_t = theta_t S_{t-1} - eta_t g_t ; P_t = a_t P_{t-1} + S_t   (SPEC §5.2)
    and the read is after the write: y_t = M(q_t; P_t). Returns y (B,T,H,d)."""
    B, T, H, d = q.shape
    b = cfg["b"]
    P = P0.unsqueeze(0).repeat(B, 1, 1)                   # P_0 restored per sequence
    S = torch.zeros_like(P)                               # momentum, 0 at sequence start
    ys = []
    for c0 in range(0, T, b):
        c1 = min(c0 + b, T)
        Ps = P                                            # chunk-start state
        gs = [grad_fn(cfg, Ps, k[:, t], v[:, t], ln_g, ln_b) for t in range(c0, c1)]
        for t, g in zip(range(c0, c1), gs):
            a_t = 1.0 if a is None else a[:, t].unsqueeze(-1)          # (B,H,1)
            eta_t = 1.0 if eta is None else eta[:, t].unsqueeze(-1)
            if cfg["algo"] == "gd":
                P = a_t * P - eta_t * g
            else:
                S = theta[:, t].unsqueeze(-1) * S - eta_t * g
                P = a_t * P + S
            ys.append(mem_apply(cfg, P, q[:, t], ln_g, ln_b))
    return torch.stack(ys, dim=1)


def memory_read_online(cfg, P0, ln_g, ln_b, q, k, v, a, eta, theta):
    """Independent exact online rule (what b = 1 must equal): per token, gradient at the
    previous state, hand-derived; P_t = a_t P_{t-1} - eta_t g_t(P_{t-1}) (or momentum)."""
    B, T, H, d = q.shape
    P = P0.unsqueeze(0).repeat(B, 1, 1)
    S = torch.zeros_like(P)
    one = torch.ones(B, T, H, dtype=q.dtype, device=q.device)
    a = one if a is None else a
    eta = one if eta is None else eta
    ys = []
    for t in range(T):
        g = mem_grad_manual(cfg, P, k[:, t], v[:, t], ln_g, ln_b)
        if cfg["algo"] == "gd":
            P = a[:, t, :, None] * P - eta[:, t, :, None] * g
        else:
            S = theta[:, t, :, None] * S - eta[:, t, :, None] * g
            P = a[:, t, :, None] * P + S
        ys.append(mem_apply(cfg, P, q[:, t], ln_g, ln_b))
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

    def mixer(self, l, u):
        """SPEC §3 memory mixer of layer l. u (B,T,D), already RMS-normed."""
        cfg, p = self.cfg, self.p
        B, T, D = u.shape
        H = cfg["H"]
        d, _ = head_dims(cfg)
        # q~, k~, v~ = SiLU(CausalDepthwiseConv_K(u W^T))
        q = silu(causal_conv(u @ p["wq"][l].T, p["conv_q"][l]))
        k = silu(causal_conv(u @ p["wk"][l].T, p["conv_k"][l]))
        v = silu(causal_conv(u @ p["wv"][l].T, p["conv_v"][l]))
        q, k, v = (x.view(B, T, H, d) for x in (q, k, v))
        q, k = l2norm(q), l2norm(k)                       # per head; v = v~
        # gates, per head per token: affine map of u
        a = torch.sigmoid(u @ p["gate_a_w"][l].T + p["gate_a_b"][l]) if cfg["gate_a"] else None
        eta = (cfg["eta_max"] * torch.sigmoid(u @ p["gate_eta_w"][l].T + p["gate_eta_b"][l])
               if cfg["gate_eta"] else None)
        theta = (torch.sigmoid(u @ p["gate_theta_w"][l].T + p["gate_theta_b"][l])
                 if cfg["algo"] == "momentum" else None)
        deep_ln = cfg["mem_depth"] == 2 and cfg["mem_ln"]
        ln_g = p["mem_ln_g"][l] if deep_ln else None      # (H,d)
        ln_b = p["mem_ln_b"][l] if deep_ln else None
        if self.read_fn == "chunked":
            y = memory_read_chunked(cfg, p["mem_p0"][l], ln_g, ln_b, q, k, v, a, eta, theta,
                                    grad_fn=self.grad_fn)
        else:
            y = memory_read_online(cfg, p["mem_p0"][l], ln_g, ln_b, q, k, v, a, eta, theta)
        # out = (RMSNorm_head(y) * SiLU(u Wg^T)) Wo^T
        yn = rmsnorm(y, p["rmsh_w"][l].view(H, d)).reshape(B, T, H * d)
        return (yn * silu(u @ p["wg"][l].T)) @ p["wo"][l].T

    def swiglu(self, l, x):
        # SPEC §2: (SiLU(x W1^T) * (x W3^T)) W2^T
        p = self.p
        return (silu(x @ p["mlp_w1"][l].T) * (x @ p["mlp_w3"][l].T)) @ p["mlp_w2"][l].T

    def forward(self, tokens):
        """tokens (B,T) int64 -> logits (B,T,V) (first V columns of the tied head)."""
        cfg, p = self.cfg, self.p
        x = p["wte"][tokens]
        for l in range(cfg["L"]):
            assert cfg["pattern"][l] == "M", "reference implements the memory mixer only"
            x = x + self.mixer(l, rmsnorm(x, p["rms1_w"][l]))
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

# name: (mem_depth, mem_resid, mem_ln, bias, algo, gate_a, gate_eta, b)
FIXTURES = {
    "titans":         (2, 1, 1, "l2", "momentum", 1, 1, 4),
    "ttt_mlp":        (2, 1, 1, "l2", "gd", 0, 1, 4),
    "linear_attn":    (1, 0, 0, "dot", "gd", 0, 0, 4),
    "deltanet":       (1, 0, 0, "l2", "gd", 0, 1, 1),
    "gated_deltanet": (1, 0, 0, "l2", "gd", 1, 1, 1),
    "deep_noln":      (2, 1, 0, "l2", "momentum", 1, 1, 4),
    "deep_nores_gd":  (2, 0, 1, "l2", "gd", 1, 1, 3),
}


def fixture_config(name, **over):
    md, res, ln, bias, algo, ga, ge, b = FIXTURES[name]
    kw = dict(SMALL, b=b)
    kw.update(over)
    return make_config(mem_depth=md, mem_resid=res, mem_ln=ln, bias=bias, algo=algo,
                       gate_a=ga, gate_eta=ge, **kw)


def logit(p):
    return math.log(p / (1.0 - p))


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
        elif name in ("wq", "wk", "wv", "wg", "mlp_w1", "mlp_w3"):
            t = N(shape, 1.0 / math.sqrt(D))
        elif name == "wo":
            t = N(shape, 1.0 / math.sqrt(D))              # fan_in = HD = D
        elif name == "mlp_w2":
            t = N(shape, 1.0 / math.sqrt(F))
        elif name.startswith("conv_"):
            t = N(shape, 0.5)
        elif name in ("rms1_w", "rms2_w", "rmsf_w", "rmsh_w", "mem_ln_g"):
            t = N(shape, 0.1, 1.0)
        elif name == "mem_ln_b":
            t = N(shape, 0.1)
        elif name.endswith("_w"):                         # gate weights
            t = N(shape, 0.2)
        elif name == "gate_a_b":
            t = N(shape, 0.3, logit(0.9))
        elif name == "gate_eta_b":                        # momentum amplifies the step
            target = 0.3 if cfg["algo"] == "momentum" else 0.45
            t = N(shape, 0.3, logit(target / cfg["eta_max"]))
        elif name == "gate_theta_b":
            t = N(shape, 0.3, logit(0.7))
        elif name == "mem_p0":
            if cfg["mem_depth"] == 2:
                L, H = shape[0], shape[1]
                if cfg["mem_ln"]:
                    # k is unit-norm, so W2 std 1 gives O(1) GELU inputs; LN removes the
                    # scale of W1 and the effective inner step on the output is ~eta/std(W1)^2,
                    # so std 1 keeps the inner optimisation stable (well-conditioned fixture)
                    W1 = N((L, H, d * dm), 1.0)
                    W2 = N((L, H, dm * d), 1.0)
                else:
                    W1 = N((L, H, d * dm), 1.0 / math.sqrt(dm))   # W1 (d, d_m): fan_in d_m
                    W2 = N((L, H, dm * d), 1.0 / math.sqrt(d))    # W2 (d_m, d): fan_in d
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
    h[14] = {"l2": 0, "dot": 1}[cfg["bias"]]
    h[15] = {"gd": 0, "momentum": 1}[cfg["algo"]]
    h[16] = cfg["gate_a"]
    h[17] = cfg["gate_eta"]
    h[18] = f32_bits(cfg["eta_max"])
    h[19] = num_params(cfg)
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
                mem_resid=int(h[12]), mem_ln=int(h[13]), bias=["l2", "dot"][h[14]],
                algo=["gd", "momentum"][h[15]], gate_a=int(h[16]), gate_eta=int(h[17]),
                eta_max=bits_f32(h[18]), pattern="".join(chr(c) for c in h[64:64 + L]))


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


FIXTURE_SEED = {name: 1000 + i for i, name in enumerate(FIXTURES)}


def build_fixture(name):
    cfg = fixture_config(name)
    hp = dict(TRAIN_HP)
    gen = torch.Generator().manual_seed(FIXTURE_SEED[name])
    flat = init_params(cfg, gen)
    tokens = torch.randint(0, cfg["V"], (hp["B"] * (hp["T"] + 1),), generator=gen)
    tokens = tokens.numpy().astype(np.int32)
    inputs, targets = split_tokens(tokens, hp["B"], hp["T"])
    loss, logits, grads = loss_and_grad(cfg, flat, inputs, targets)
    losses = train_losses(cfg, flat, inputs, targets, hp)
    assert abs(losses[0] - loss.item()) < 1e-12
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

def cmd_selftest(args):
    worst = {}
    hp = TRAIN_HP
    for name in FIXTURES:
        gen = torch.Generator().manual_seed(FIXTURE_SEED[name] + 77)
        # (1a) b = 1 chunked (autograd) == online rule (hand-derived gradients)
        cfg1 = fixture_config(name, b=1)
        flat = init_params(cfg1, gen)
        toks = torch.randint(0, cfg1["V"], (hp["B"] * (hp["T"] + 1),), generator=gen).numpy()
        inp, tgt = split_tokens(toks, hp["B"], hp["T"])
        l_c, lg_c, g_c = loss_and_grad(cfg1, flat, inp, tgt)
        l_o, lg_o, g_o = loss_and_grad(cfg1, flat, inp, tgt, read_fn="online")
        e1 = max((lg_c - lg_o).abs().max().item(), (g_c - g_o).abs().max().item())
        assert e1 < 1e-10, (name, e1)
        # (1b) chunked at the fixture b: autograd inner gradient == hand-derived
        cfg = fixture_config(name)
        l_a, lg_a, g_a = loss_and_grad(cfg, flat, inp, tgt)
        l_m, lg_m, g_m = loss_and_grad(cfg, flat, inp, tgt, grad_fn=mem_grad_manual)
        e1b = max((lg_a - lg_m).abs().max().item(), (g_a - g_m).abs().max().item())
        assert e1b < 1e-10, (name, e1b)
        # b > 1 must differ from b = 1 (the chunk approximation is really exercised)
        diff_b = (lg_a - lg_c).abs().max().item()
        # (2) finite differences on a few entries of every tensor
        views = unflatten(cfg, torch.arange(num_params(cfg)))
        fd_err, nchk = 0.0, 0
        for pname, idx_view in views.items():
            idx = idx_view.reshape(-1)
            if idx.numel() == 0:
                continue
            picks = torch.randperm(idx.numel(), generator=gen)[:args.fd_per_tensor]
            if pname == "wte":               # one padded row entry too (grad exactly 0)
                picks = torch.cat([picks, torch.tensor([cfg["V"] * cfg["D"] + 3])])
            for j in picks.tolist():
                i = idx[j].item()
                h = 1e-5
                fp, fm = flat.clone(), flat.clone()
                fp[i] += h
                fm[i] -= h
                with torch.no_grad():
                    lp = MirasModel(cfg, fp).loss(inp, tgt)[0].item()
                    lm = MirasModel(cfg, fm).loss(inp, tgt)[0].item()
                fd = (lp - lm) / (2 * h)
                err = abs(fd - g_a[i].item()) / max(1e-3, abs(g_a[i].item()))
                fd_err = max(fd_err, err)
                nchk += 1
                assert err < 1e-5, (name, pname, j, fd, g_a[i].item())
        worst[name] = (e1, e1b, diff_b, fd_err, nchk)
        print(f"{name:15s} b=1 chunked vs online {e1:.1e} | chunked autograd vs manual "
              f"{e1b:.1e} | b={cfg['b']} vs b=1 logits differ {diff_b:.1e} | "
              f"finite-diff max rel err {fd_err:.1e} over {nchk} entries")
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
    e3 = max(abs(a - b) for a, b in zip(ours, theirs))
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
    md, res, ln, bias, algo, ga, ge, b = FIXTURES[args.preset]
    if args.b is not None:
        b = args.b
    elif args.preset not in ("deltanet", "gated_deltanet"):
        b = 16                                            # SPEC default chunk
    F = args.F if args.F else (8 * args.D // 3 + 63) // 64 * 64
    cfg = make_config(V=args.V, D=args.D, L=args.L, H=args.H, E=args.E, F=F, b=b,
                      mem_depth=md, mem_resid=res, mem_ln=ln, bias=bias, algo=algo,
                      gate_a=ga, gate_eta=ge)
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
          f"F={F} b={b} V={args.V} B={args.B} T={args.T} device={args.device} "
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
    a = sub.add_parser("read")
    a.add_argument("path")
    a = sub.add_parser("bench")
    a.add_argument("--preset", required=True, choices=list(FIXTURES))
    for k_, d_ in (("D", 256), ("L", 4), ("H", 4), ("T", 256), ("B", 4), ("steps", 3),
                   ("V", 50257), ("E", 4), ("F", 0)):
        a.add_argument(f"--{k_}", type=int, default=d_)
    a.add_argument("--b", type=int, default=None)
    a.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    {"fixtures": cmd_fixtures, "selftest": cmd_selftest, "read": cmd_read,
     "bench": cmd_bench}[args.cmd](args)


if __name__ == "__main__":
    main()
