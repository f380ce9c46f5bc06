// dev/cuda/memlab.cu: the kernel lab of the memory (llm.c's dev/cuda manner). One layer's memory at a given
// shape with random inputs; every version of memory_forward_kernel / memory_backward_kernel is run, checked
// against the CPU trainer's chunk functions (train_miras.c section 3) and timed with CUDA events.
//   v1   the kernels as of commit 40ecc0d (dev/cuda/memlab_v1.cuh, frozen): a warp per output of the small
//        products, everything in global memory
//   v2+  train_miras.cu's kernels as they are now (mem_forward_launch / mem_backward_launch), with the
//        versions it offers (MemArgs.ver; see train_miras.cu section 3); v19, v20 split each (sequence, head) over
//        a cluster of -S CTAs (MemArgs.R, default 4), with chunk scratches carved for the slices
// Checks: norm-relative error |gpu - cpu| / |cpu| of y, dq, dk, dv, the gate gradients, dP_0 (and the LN affine)
// over the (sequence, head) pairs the CPU computes (-c; the first and the last by default); outputs are poisoned
// with NaN before every run, and a NaN fails. Timing: one warm-up, the median of -r runs.
//
// build: make memlab (nvcc); run: dev/cuda/memlab.sh, or ./memlab -p titans -B 4 -H 12 -T 4096 -d 64 -E 4
#define main train_miras_cu_main
#include "../../train_miras.cu"
#undef main
// v1 (frozen, commit 40ecc0d) was written inside train_miras.cu's former namespace gpu, whose device helpers had the
// CPU's names; train_miras.cu now calls them name_gpu, so v1's calls are pointed at those here
namespace gpu { namespace v1 {
__device__ __forceinline__ real gelu_tanh(real x) { return gelu_tanh_gpu(x); }
__device__ __forceinline__ real gelu(real x, real th) { return gelu_gpu(x, th); }
__device__ __forceinline__ real gelu_d1(real x, real th) { return gelu_d1_gpu(x, th); }
__device__ __forceinline__ real gelu_d2(real x, real th) { return gelu_d2_gpu(x, th); }
__device__ __forceinline__ real psi_lp(real e) { return psi_lp_gpu(e); }
__device__ __forceinline__ real psi_lp_d(real e) { return psi_lp_d_gpu(e); }
} }
#include "memlab_v1.cuh"
namespace gpu { namespace v1 {   // v1's launches (unqualified kernel names: the emulator's launch rewriting)
static void mem_forward_launch(const MemArgs& A, int nb) { memory_forward_kernel<<<nb, MEM_THREADS>>>(A); KCHECK("v1 fwd"); }
static void mem_backward_launch(const MemArgs& A, int nb) { memory_backward_kernel<<<nb, MEM_THREADS>>>(A); KCHECK("v1 bwd"); }
} }
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

struct Lab {
    MemCfg m; int B, H, T, D, b, nch, Ge;
    std::vector<real> q, k, v, ga, gth, geta, gdel, p0, lng, lnb, dy;   // host inputs
    std::vector<int> pairs;                                            // (sequence, head) pairs the CPU checks
    std::vector<real> y, dq, dk, dv, dga, dgth, dgeta, dgdel, dbh;      // CPU results (full-size arrays, checked rows only)
};

static void rand_fill(std::vector<real>& x, size_t n, uint64_t* rng, double lo, double hi) {
    x.resize(n); for (size_t i = 0; i < n; i++) x[i] = (real)(lo + (hi - lo) * rng_f64(rng));
}
static void l2rows(std::vector<real>& x, size_t rows, int d) {   // as the model's l2norm of q and k per head
    for (size_t r = 0; r < rows; r++) { double s = 0; for (int i = 0; i < d; i++) s += (double)x[r * d + i] * x[r * d + i]; for (int i = 0; i < d; i++) x[r * d + i] /= (real)sqrt(s + 1e-6); }
}

#ifdef MEM_PHASE_TIMING
// -P 1: one launch with the barrier clock on (train_miras.cu's MEM_PHASE_TIMING): block 0's cycles between consecutive
// __syncthreads, summed by the source line of the barrier that ends each interval, the top 25 with their function
static void phase_report(const char* ver, const char* what, std::function<void()> launch, int nch) {
    unsigned n = 0;
    cudaCheck(cudaMemcpyToSymbol(g_phase_n, &n, sizeof n));
    launch();
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpyFromSymbol(&n, g_phase_n, sizeof n));
    if (n < 2) { printf("%s %s: %u barriers recorded\n", ver, what, n); return; }
    std::vector<unsigned long long> clk(n); std::vector<unsigned> line(n);
    cudaCheck(cudaMemcpyFromSymbol(clk.data(), g_phase_clk, n * sizeof(unsigned long long)));
    cudaCheck(cudaMemcpyFromSymbol(line.data(), g_phase_line, n * sizeof(unsigned)));
    std::vector<std::string> src; { FILE* f = fopen("train_miras.cu", "r"); char buf[4096]; while (f && fgets(buf, sizeof buf, f)) src.push_back(buf); if (f) fclose(f); }
    auto fname = [&](unsigned l) {  // the function the line is in: the last definition that starts a line above it
        for (int i = (int)l - 1; i >= 1 && i <= (int)src.size(); i--) {
            const std::string& x = src[i - 1];
            if (x.empty() || x[0] == ' ' || x[0] == '/' || x[0] == '#' || x[0] == '}' || x.find('(') == std::string::npos) continue;
            size_t p = x.find('('), q = p; while (q > 0 && (isalnum((unsigned char)x[q - 1]) || x[q - 1] == '_')) q--;
            return x.substr(q, p - q);
        }
        return std::string("?");
    };
    struct Agg { unsigned line; double cyc; long k; };
    std::vector<Agg> agg;
    for (unsigned i = 1; i < n; i++) {
        double c = (double)(clk[i] - clk[i - 1]); size_t j = 0;
        while (j < agg.size() && agg[j].line != line[i]) j++;
        if (j == agg.size()) agg.push_back({line[i], 0, 0});
        agg[j].cyc += c; agg[j].k++;
    }
    double tot = (double)(clk[n - 1] - clk[0]);
    std::sort(agg.begin(), agg.end(), [](const Agg& a, const Agg& b) { return a.cyc > b.cyc; });
    printf("%s %s, block 0: %u barriers, %.0f cycles (%.0f per chunk), by the barrier that ends the interval:\n", ver, what, n, tot, tot / nch);
    for (size_t j = 0; j < agg.size() && j < 25; j++) {
        std::string t = agg[j].line <= src.size() ? src[agg[j].line - 1] : "";
        while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
        size_t a = t.find_first_not_of(' '); t = a == std::string::npos ? "" : t.substr(a, 70);
        printf("  %5.1f%% %12.0f cyc %6ld x %8.0f  line %5u %-26s %s\n", 100 * agg[j].cyc / tot, agg[j].cyc, agg[j].k, agg[j].cyc / agg[j].k, agg[j].line, fname(agg[j].line).c_str(), t.c_str());
    }
    fflush(stdout);
}
#endif

static void lab_inputs(Lab& L, uint64_t seed) {
    uint64_t rng = seed; int d = L.m.d; size_t N = (size_t)L.B * L.T, ND = N * L.D;
    L.q.resize(ND); L.k.resize(ND); fill_normal(L.q.data(), ND, 1, &rng); fill_normal(L.k.data(), ND, 1, &rng);
    l2rows(L.q, N * L.H, d); l2rows(L.k, N * L.H, d);
    L.v.resize(ND); fill_normal(L.v.data(), ND, 0.5, &rng);
    // gates near the model's init (train_miras.c model_init: a = 0.99, eta = 0.1, theta = 0.9), jittered
    // (with eta / (1 - theta) near 1 the deep memory's dynamics over 4096 random tokens are chaotic: float rounding
    // differences grow until any two implementations disagree; memlab -x 1 measures that)
    rand_fill(L.ga, N * L.H, &rng, 0.95, 1.0);
    rand_fill(L.gth, N * L.H, &rng, 0.5, 0.8);
    rand_fill(L.geta, N * L.Ge, &rng, 0.01, 0.05);
    rand_fill(L.gdel, N * L.Ge, &rng, 0.1, 1.0);         // Huber delta
    if (L.m.depth == 1 && L.m.bias == 1) std::fill(L.ga.begin(), L.ga.end(), (real)1); // linear_attn: fixed gates
    // P_0 as model_init makes it: linear W = 0; deep W1 ~ N(0, 1) with the LN (N(0, 1/dm) without), W2 ~ N(0, 1);
    // Memora's logits N(0, 1); Moneta's A scaled by lq_scales twice
    L.p0.assign((size_t)L.H * L.m.nP, 0);
    for (int h = 0; h < L.H; h++) {
        real* P0 = &L.p0[(size_t)h * L.m.nP]; const MemCfg* m = &L.m;
        if (m->retention == 2) fill_normal(P0, m->nP, 1, &rng);
        else if (m->depth == 2) { fill_normal(P0, (size_t)d * m->dm, m->ln ? 1 : 1 / sqrt((double)m->dm), &rng); fill_normal(P0 + (size_t)d * m->dm, (size_t)d * m->dm, 1, &rng); }
        if (m->retention == 1) { real cs[2]; ::lq_scales(m, P0, P0, cs); ::lq_scales(m, P0, P0, cs); }
    }
    rand_fill(L.lng, (size_t)L.H * d, &rng, 0.8, 1.2); rand_fill(L.lnb, (size_t)L.H * d, &rng, -0.1, 0.1);
    L.dy.resize(ND); fill_normal(L.dy.data(), ND, 1.0 / sqrt((double)ND), &rng);
}

// The CPU reference: train_miras.c's memory_forward / memory_backward, for the checked pairs only.
static void lab_cpu(Lab& L) {
    const MemCfg* m = &L.m; int d = m->d, nP = m->nP, T = L.T, H = L.H, D = L.D, b = L.b, nch = L.nch, Ge = L.Ge, ew = m->cw ? d : 1;
    size_t N = (size_t)L.B * T, ND = N * D;
    L.y.assign(ND, 0); L.dq.assign(ND, 0); L.dk.assign(ND, 0); L.dv.assign(ND, 0); L.dga.assign(N * H, 0); L.dgth.assign(N * H, 0);
    L.dgeta.assign(N * Ge, 0); L.dgdel.assign(N * Ge, 0); L.dbh.assign((size_t)L.B * H * (nP + 2 * d), 0);
    #pragma omp parallel for schedule(dynamic)
    for (int pi = 0; pi < (int)L.pairs.size(); pi++) {
        int bb = L.pairs[pi] / H, h = L.pairs[pi] % H;
        MemChunk c; size_t per = ::memchunk_carve(&c, NULL, b, d, m->dm, nP);
        std::vector<real> buf(per), Pv((size_t)nch * nP), Sv(m->momentum ? (size_t)nch * nP : 0);
        ::memchunk_carve(&c, buf.data(), b, d, m->dm, nP);
        c.p0 = m->anchor ? &L.p0[(size_t)h * nP] : NULL;   // the anchored retention (titans, yaad, moneta by default)
        real* P = Pv.data(); real* S = m->momentum ? Sv.data() : NULL;
        memcpy(P, &L.p0[(size_t)h * nP], nP * sizeof(real));
        if (S) memset(S, 0, nP * sizeof(real));
        const real* lng = m->ln ? &L.lng[(size_t)h * d] : NULL; const real* lnb = m->ln ? &L.lnb[(size_t)h * d] : NULL;
        auto load = [&](int t0, int n) {
            for (int t = 0; t < n; t++) {
                size_t r = (size_t)bb * T + t0 + t;
                chunk_set_row(m, &c, t, &L.q[r * D + h * d], &L.k[r * D + h * d], &L.v[r * D + h * d], L.ga[r * H + h], L.gth[r * H + h],
                              &L.geta[r * Ge + h * ew], &L.gdel[r * Ge + h * ew]);
            }
        };
        for (int ch = 0; ch < nch; ch++) {
            int t0 = ch * b, n = T - t0 < b ? T - t0 : b, last = ch == nch - 1;
            load(t0, n);
            ::mem_step_forward(m, &c, n, P + (size_t)ch * nP, S ? S + (size_t)ch * nP : NULL,
                               last ? NULL : P + (size_t)(ch + 1) * nP, (S && !last) ? S + (size_t)(ch + 1) * nP : NULL, lng, lnb);
            ::scatter_rows(L.y.data(), c.y, bb, h, t0, n, T, H, d);
        }
        memset(c.dlng, 0, d * sizeof(real)); memset(c.dlnb, 0, d * sizeof(real)); memset(c.dp0, 0, nP * sizeof(real));
        real *dPn = NULL, *dSn = NULL, *dPs = c.Pa, *dSs = c.Sa;
        for (int ch = nch - 1; ch >= 0; ch--) {
            int t0 = ch * b, n = T - t0 < b ? T - t0 : b;
            load(t0, n);
            ::gather_rows(c.dy, L.dy.data(), bb, h, t0, n, T, H, d);
            ::mem_step_backward(m, &c, n, c.dy, P + (size_t)ch * nP, S ? S + (size_t)ch * nP : NULL, dPn, dSn, dPs, dSs, lng, lnb);
            for (int t = 0; t < n; t++) {
                size_t r = (size_t)bb * T + t0 + t;
                chunk_get_row_grads(m, &c, t, &L.dq[r * D + h * d], &L.dk[r * D + h * d], &L.dv[r * D + h * d], &L.dga[r * H + h], &L.dgth[r * H + h],
                                    &L.dgeta[r * Ge + h * ew], &L.dgdel[r * Ge + h * ew]);
            }
            if (getenv("MEMLAB_DEBUG")) { double a = 0, b2 = 0; for (int i = 0; i < nP; i++) { a += (double)dPs[i] * dPs[i]; if (S) b2 += (double)dSs[i] * dSs[i]; } if (ch % 16 == 0 || !std::isfinite(a)) fprintf(stderr, "ch %d |dP| %.3e |dS| %.3e\n", ch, sqrt(a), sqrt(b2)); }
            dPn = dPs; dSn = dSs;
            dPs = dPs == c.Pa ? c.Pb : c.Pa; dSs = dSs == c.Sa ? c.Sb : c.Sa;
        }
        real* out = &L.dbh[((size_t)bb * H + h) * (nP + 2 * d)];
        for (int i = 0; i < nP; i++) out[i] = dPn[i] + c.dp0[i];   // (+ through the anchor; 0 without it)
        memcpy(out + nP, c.dlng, d * sizeof(real)); memcpy(out + nP + d, c.dlnb, d * sizeof(real));
    }
}

// device buffers of one lab
struct Dev {
    real *q, *k, *v, *ga, *gth, *geta, *gdel, *p0, *lng, *lnb, *dy;
    real *y, *P, *S, *dq, *dk, *dv, *dga, *dgth, *dgeta, *dgdel, *dbh;
    real* chunk_memory; void* chunks;
    real *aux, *gpart;   // the v5/v6 token kernels' buffers (b = 1 linear memories), or NULL
};
static real* up(const std::vector<real>& x) { real* p = (real*)dmalloc(x.size() * sizeof(real)); h2d(p, x.data(), x.size() * sizeof(real)); return p; }
template <class MA> static MA lab_args(const Lab& L, const Dev& G) {
    MA A; memset(&A, 0, sizeof A);
    *(::MemCfg*)&A.m = L.m; A.B = L.B; A.T = L.T; A.H = L.H; A.D = L.D; A.b = L.b; A.nch = L.nch;
    A.q = G.q; A.k = G.k; A.v = G.v; A.ga = G.ga; A.gth = G.gth; A.geta = G.geta; A.gdel = G.gdel; A.y = G.y;
    A.P = G.P; A.S = G.S; A.p0 = G.p0; A.lng = L.m.ln ? G.lng : NULL; A.lnb = L.m.ln ? G.lnb : NULL;
    A.chunks = (decltype(A.chunks))G.chunks;
    A.dy = G.dy; A.dq = G.dq; A.dk = G.dk; A.dv = G.dv; A.dga = G.dga; A.dgth = G.dgth; A.dgeta = G.dgeta; A.dgdel = G.dgdel; A.dbh = G.dbh;
    return A;
}
template <class MC> static void lab_chunks(const Lab& L, Dev& G, size_t (*carve)(MC*, real*, int, int, int, int)) {
    int nb = L.B * L.H; MC tmp; size_t per = carve(&tmp, NULL, L.b, L.m.d, L.m.dm, L.m.nP);
    G.chunk_memory = (real*)dmalloc((size_t)nb * per * sizeof(real));
    std::vector<MC> hc(nb);
    for (int i = 0; i < nb; i++) carve(&hc[i], G.chunk_memory + (size_t)i * per, L.b, L.m.d, L.m.dm, L.m.nP);
    G.chunks = dmalloc((size_t)nb * sizeof(MC)); h2d(G.chunks, hc.data(), (size_t)nb * sizeof(MC));
}

// |g - c| / |c| over idx; where the reference itself is not finite (the deep memories' dL/dP grows by ~2-3x per
// chunk backwards with random inputs, so over 4096 tokens it overflows: a property of the model, not of a kernel)
// the element is skipped and counted in *skipped. A GPU value that is not finite where the reference is: inf.
static double relerr(const real* g, const real* c, const std::vector<size_t>& idx, size_t* skipped = NULL) {
    double num = 0, den = 0; size_t sk = 0;
    for (size_t i : idx) {
        double a = g[i], b = c[i];
        if (!std::isfinite(b)) { sk++; continue; }
        if (!std::isfinite(a)) return INFINITY;
        num += (a - b) * (a - b); den += b * b;
    }
    if (skipped) *skipped += sk;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

struct Result { const char* name; double fwd_ms, bwd_ms, err; };

int main(int argc, char** argv) {
    const char* preset = "titans"; int B = 4, H = 12, T = 4096, d = 64, E = 4, b = -1, R = 0, reps = 5, ncheck = 2, only = 0, xcond = 0, phase = 0, split = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char* f = argv[i]; const char* v = argv[i + 1];
        if (!strcmp(f, "-p")) preset = v; else if (!strcmp(f, "-B")) B = atoi(v); else if (!strcmp(f, "-H")) H = atoi(v);
        else if (!strcmp(f, "-T")) T = atoi(v); else if (!strcmp(f, "-d")) d = atoi(v); else if (!strcmp(f, "-E")) E = atoi(v);
        else if (!strcmp(f, "-k")) b = atoi(v); else if (!strcmp(f, "-R")) R = atoi(v); else if (!strcmp(f, "-r")) reps = atoi(v);
        else if (!strcmp(f, "-c")) ncheck = atoi(v); else if (!strcmp(f, "-v")) only = atoi(v); else if (!strcmp(f, "-x")) xcond = atoi(v);
        else if (!strcmp(f, "-P")) phase = atoi(v); else if (!strcmp(f, "-S")) split = atoi(v);
        else { fprintf(stderr, "usage: memlab [-p preset] [-B -H -T -d -E -k chunk -R gate_rank] [-r reps] [-c pairs checked] [-v only this version] [-P 1 barrier timing (make memlab_phase)] [-S CTAs per (sequence, head) of v19, v20: 2, 4, 8]\n"); return 1; }
    }
    Config cf; memset(&cf, 0, sizeof cf);
    if (!preset_config(&cf, preset)) { fprintf(stderr, "unknown preset %s (%s)\n", preset, PRESETS); return 1; }
    cf.H = H; cf.D = H * d; cf.E = E; cf.gate_rank = R; if (b > 0) cf.b = b;
    Lab L; L.m = mem_config(&cf); L.B = B; L.H = H; L.T = T; L.D = H * d; L.b = cf.b; L.nch = (T + cf.b - 1) / cf.b; L.Ge = L.m.cw ? L.D : H;
    int npair = B * H;
    for (int i = 0; i < ncheck && i < npair; i++) L.pairs.push_back(ncheck == 1 ? 0 : (int)((long)i * (npair - 1) / (ncheck - 1)));
    printf("memlab: %s B=%d H=%d T=%d d=%d dm=%d b=%d momentum=%d ln=%d resid=%d bias=%d retention=%d cw=%d; %d blocks; CPU checks %d pair(s)\n",
           preset, B, H, T, d, L.m.dm, L.b, L.m.momentum, L.m.ln, L.m.resid, L.m.bias, L.m.retention, L.m.cw, npair, (int)L.pairs.size());
    lab_inputs(L, 1234);
    double t0 = omp_get_wtime(); lab_cpu(L);
    {   // the reference must be finite and of a sane size (a diverging memory makes every comparison meaningless)
        double ny = 0, nq = 0, np = 0; int bad = 0;
        for (size_t i = 0; i < L.y.size(); i++) { bad |= !std::isfinite(L.y[i]) || !std::isfinite(L.dq[i]); ny += (double)L.y[i] * L.y[i]; nq += (double)L.dq[i] * L.dq[i]; }
        for (real x : L.dbh) { bad |= !std::isfinite(x); np += (double)x * x; }
        printf("cpu reference: %.1f s; |y| %.3e |dq| %.3e |dP0| %.3e%s\n", omp_get_wtime() - t0, sqrt(ny), sqrt(nq), sqrt(np), bad ? "  NOT FINITE: the inputs make the memory diverge" : "");
        fflush(stdout);
    }
    if (xcond) {   // conditioning: the reference again with k changed by 1e-6 relative (float rounding is ~1e-7;
                   // k enters the state's writes, so this shows how fast the memory amplifies a state difference)
        Lab X = L; uint64_t r2 = 99;
        for (auto& x : X.k) x *= (real)(1 + 1e-6 * rng_normal(&r2));
        lab_cpu(X);
        std::vector<size_t> all(L.y.size()); for (size_t i = 0; i < all.size(); i++) all[i] = i;
        printf("conditioning: k changed by 1e-6 changes y by %.2e, dq by %.2e, dP0 by %.2e (relative)\n", relerr(X.y.data(), L.y.data(), all),
               relerr(X.dq.data(), L.dq.data(), all), relerr(X.dbh.data(), L.dbh.data(), std::vector<size_t>(all.begin(), all.begin() + std::min(all.size(), L.dbh.size()))));
        fflush(stdout);
    }

    gpu_init(0); printf("device: %s\n", gpu_name());
    Dev G; memset(&G, 0, sizeof G);
    G.q = up(L.q); G.k = up(L.k); G.v = up(L.v); G.ga = up(L.ga); G.gth = up(L.gth); G.geta = up(L.geta); G.gdel = up(L.gdel);
    G.p0 = up(L.p0); G.lng = up(L.lng); G.lnb = up(L.lnb); G.dy = up(L.dy);
    size_t N = (size_t)B * T, ND = N * L.D, nstate = (size_t)npair * mem_state_slots((const MemCfg*)&L.m, L.b, T, 1) * L.m.nP, nbh = (size_t)npair * (L.m.nP + 2 * d);
    G.y = (real*)dmalloc(ND * 4); G.dq = (real*)dmalloc(ND * 4); G.dk = (real*)dmalloc(ND * 4); G.dv = (real*)dmalloc(ND * 4);
    G.dga = (real*)dmalloc(N * H * 4); G.dgth = (real*)dmalloc(N * H * 4); G.dgeta = (real*)dmalloc(N * L.Ge * 4); G.dgdel = (real*)dmalloc(N * L.Ge * 4);
    G.dbh = (real*)dmalloc(nbh * 4); G.P = (real*)dmalloc(nstate * 4); G.S = L.m.momentum ? (real*)dmalloc(nstate * 4) : NULL;
    if (mem_token6_cfg((const MemCfg*)&L.m, L.b)) { G.aux = (real*)dmalloc(N * H * TOK_AUX * 4); G.gpart = (real*)dmalloc(N * H * TOK_R * TOK_GP * 4); }
    printf("state memory: %.2f GB\n", nstate * 4.0 * (L.m.momentum ? 2 : 1) / 1e9);

    // indices of the checked pairs' elements in each output
    std::vector<size_t> iD, iH, iG, iP, iLN;
    int ew = L.m.cw ? d : 1;
    for (int p : L.pairs) {
        int bb = p / H, h = p % H;
        for (int t = 0; t < T; t++) {
            size_t r = (size_t)bb * T + t;
            for (int i = 0; i < d; i++) iD.push_back(r * L.D + h * d + i);
            iH.push_back(r * H + h);
            for (int i = 0; i < ew; i++) iG.push_back(r * L.Ge + h * ew + i);
        }
        size_t o = (size_t)p * (L.m.nP + 2 * d);
        for (int i = 0; i < L.m.nP; i++) iP.push_back(o + i);
        if (L.m.ln) for (int i = 0; i < 2 * d; i++) iLN.push_back(o + L.m.nP + i);
    }

    std::vector<Result> res;
    auto poison = [&]() {
        for (real* p : {G.y, G.dq, G.dk, G.dv}) cudaCheck(cudaMemset(p, 0xff, ND * 4));
        cudaCheck(cudaMemset(G.dga, 0xff, N * H * 4)); cudaCheck(cudaMemset(G.dgth, 0xff, N * H * 4));
        cudaCheck(cudaMemset(G.dgeta, 0xff, N * L.Ge * 4)); cudaCheck(cudaMemset(G.dgdel, 0xff, N * L.Ge * 4));
        cudaCheck(cudaMemset(G.dbh, 0xff, nbh * 4));
    };
    std::map<std::string, std::vector<real>> outs;  // every version's outputs (y, dq, dk, dv, dbh)
    auto run_version = [&](const char* name, std::function<void()> fwd, std::function<void()> bwd) {
        poison();
#ifdef EMU_CUDA
        emu_tc_wide = 0; emu_tc_quad = 0; emu_tc_split = 0;
#endif
        fwd(); cudaCheck(cudaDeviceSynchronize());
        bwd(); cudaCheck(cudaDeviceSynchronize());
        std::vector<real> h(ND), hh(N * H), hg(N * L.Ge), hb(nbh);
        struct { const char* what; double e; } errs[16]; int ne = 0; size_t sk = 0;
        d2h(h.data(), G.y, ND * 4); errs[ne++] = {"y", relerr(h.data(), L.y.data(), iD, &sk)};
        d2h(h.data(), G.dq, ND * 4); errs[ne++] = {"dq", relerr(h.data(), L.dq.data(), iD, &sk)};
        d2h(h.data(), G.dk, ND * 4); errs[ne++] = {"dk", relerr(h.data(), L.dk.data(), iD, &sk)};
        d2h(h.data(), G.dv, ND * 4); errs[ne++] = {"dv", relerr(h.data(), L.dv.data(), iD, &sk)};
        if (!(L.m.depth == 1 && L.m.bias == 1)) {
            d2h(hh.data(), G.dga, N * H * 4); errs[ne++] = {"da", relerr(hh.data(), L.dga.data(), iH, &sk)};
            d2h(hg.data(), G.dgeta, N * L.Ge * 4); errs[ne++] = {"deta", relerr(hg.data(), L.dgeta.data(), iG, &sk)};
        }
        if (L.m.momentum) { d2h(hh.data(), G.dgth, N * H * 4); errs[ne++] = {"dtheta", relerr(hh.data(), L.dgth.data(), iH, &sk)}; }
        if (L.m.bias == 3) { d2h(hg.data(), G.dgdel, N * L.Ge * 4); errs[ne++] = {"ddelta", relerr(hg.data(), L.dgdel.data(), iG, &sk)}; }
        d2h(hb.data(), G.dbh, nbh * 4); errs[ne++] = {"dP0", relerr(hb.data(), L.dbh.data(), iP, &sk)};
        if (L.m.ln) errs[ne++] = {"dln", relerr(hb.data(), L.dbh.data(), iLN, &sk)};
        // v13, v14 (v7's, v8's products in 16 x 16 warp tiles) make the same sums as v7, v8: their outputs must equal
        // those versions' value for value (on a GPU, unless nvcc contracts the epilogues' multiply-adds differently)
        const char* twin = !strcmp(name, "v13") ? "v7" : !strcmp(name, "v14") ? "v8" : NULL;  // (v15, v16: k permuted)
        if (twin || !strcmp(name, "v7") || !strcmp(name, "v8")) {
            std::vector<real>& mine = outs[name];
            for (auto* p : {G.y, G.dq, G.dk, G.dv}) { d2h(h.data(), p, ND * 4); mine.insert(mine.end(), h.begin(), h.end()); }
            mine.insert(mine.end(), hb.begin(), hb.end());
        }
        if (twin && outs.count(twin)) {
            const std::vector<real>& mine = outs[name];
            const std::vector<real>& o = outs[twin]; size_t nd = 0;
            for (size_t i = 0; i < mine.size(); i++) nd += !(mine[i] == o[i] || (std::isnan(mine[i]) && std::isnan(o[i])));
            if (nd) printf("%-4s outputs: %zu of %zu differ from %s's\n", name, nd, mine.size(), twin);
            else printf("%-4s outputs: equal to %s's, all %zu values\n", name, twin, mine.size());
        }
#ifdef EMU_CUDA
        printf("%-4s products in 16 x 16 warp tiles: %ld, with k in quads: %ld, with K split: %ld\n", name,
               (long)emu_tc_wide.exchange(0), (long)emu_tc_quad.exchange(0), (long)emu_tc_split.exchange(0));
#endif
        double mx = 0; printf("%-4s errors:", name);
        for (int i = 0; i < ne; i++) { printf(" %s %.2e", errs[i].what, errs[i].e); mx = std::isfinite(errs[i].e) ? std::max(mx, errs[i].e) : INFINITY; }
        if (sk) printf("     (%zu reference values not finite: skipped)", sk);
        printf("\n"); fflush(stdout);
        cudaEvent_t e0, e1; cudaCheck(cudaEventCreate(&e0)); cudaCheck(cudaEventCreate(&e1));
        auto timeit = [&](std::function<void()> f) {
            std::vector<float> ms;
            for (int r = 0; r < reps; r++) {
                cudaCheck(cudaEventRecord(e0)); f(); cudaCheck(cudaEventRecord(e1)); cudaCheck(cudaEventSynchronize(e1));
                float x; cudaCheck(cudaEventElapsedTime(&x, e0, e1)); ms.push_back(x);
            }
            std::sort(ms.begin(), ms.end()); return (double)ms[ms.size() / 2];
        };
        double f = timeit(fwd), bw = timeit(bwd);
        printf("%-4s fwd %.3f ms  bwd %.3f ms  (median of %d)\n", name, f, bw, reps); fflush(stdout);
        res.push_back({name, f, bw, mx});
#ifdef MEM_PHASE_TIMING
        if (phase) { phase_report(name, "forward", fwd, L.nch); phase_report(name, "backward", bwd, L.nch); }
#endif
    };

#ifndef MEM_PHASE_TIMING
    if (phase) { fprintf(stderr, "memlab: -P needs the barrier-timing build (make memlab_phase)\n"); return 1; }
#endif
    int nb = npair;
    if (L.m.anchor && (!only || only == 1)) printf("v1   skipped: it predates the anchored retention (run -Z 0 presets, e.g. ttt_mlp, to compare it)\n");
    else if (!only || only == 1) {
        lab_chunks<gpu::v1::MemChunk>(L, G, gpu::v1::memchunk_carve);
        gpu::v1::MemArgs A = lab_args<gpu::v1::MemArgs>(L, G);
        run_version("v1", [&]() { gpu::v1::mem_forward_launch(A, nb); }, [&]() { gpu::v1::mem_backward_launch(A, nb); });
        dfree(G.chunk_memory); dfree(G.chunks);
    }
    // (the trainer's carve of the chunks, mem_chunks_alloc: the layout its shared-memory plans are made for)
    G.chunks = mem_chunks_alloc((const MemCfg*)&L.m, L.b, L.B * L.H, &G.chunk_memory);
    {
        MemSmem f = mem_smem_plan((const MemCfg*)&L.m, L.b, 1, mem_smem_bytes()), bw = mem_smem_plan((const MemCfg*)&L.m, L.b, 0, mem_smem_bytes());
        MemChunkGpu tmp; size_t per = memchunk_carve_model_gpu(&tmp, NULL, (const MemCfg*)&L.m, L.b);
        printf("v3 chunk scratch in shared memory: forward %.1f KB (%d arrays), backward %.1f KB (%d arrays); the global scratch is %.1f KB\n",
               f.floats * 4 / 1024.0, f.n, bw.floats * 4 / 1024.0, bw.n, per * 4 / 1024.0);
    }
    for (int ver = 2; ver <= MEM_VERSIONS; ver++) {
        if (only && only != ver) continue;
        if (ver == 5) continue;   // retired: folded into 6 (its numbers: memlab_notes.md, run 3)
        MemArgs A = lab_args<MemArgs>(L, G); A.ver = ver; A.aux = G.aux; A.gpart = G.gpart;
        if (ver >= 9 && ver <= 12 && !mem_wy_ok(A)) { if (only) printf("v%d   skipped: the WY kernels take the b = 1 delta rule with scalar eta at d = %d (deltanet, gated_deltanet)\n", ver, TOK_D); continue; }
        int R = ver >= 19 ? split : 1;   // v19, v20: the cluster split, -S CTAs per (sequence, head), each its chunk scratch
        if (R > 1 && !mem_split_ok((const MemCfg*)&L.m, R)) { if (only) printf("v%d   skipped: the cluster split takes deep memories without retention, Muon or poly, dm %% %d == 0 (-S %d)\n", ver, 8 * R, R); continue; }
        Dev GS = G;
        if (R > 1) {
            MemCfg ms = mem_split_cfg((const MemCfg*)&L.m, R);
            GS.chunks = mem_chunks_alloc(&ms, L.b, nb * R, &GS.chunk_memory);
            A.chunks = (MemChunkGpu*)GS.chunks; A.R = R; A.xn = mem_split_xn((const MemCfg*)&L.m, L.b);
            MemSmem f, bw; int nt = mem_launch_plan((const MemCfg*)&L.m, L.b, 1, R, A.xn, nb, &f); mem_launch_plan((const MemCfg*)&L.m, L.b, 0, R, A.xn, nb, &bw);
            printf("v%d   split: clusters of %d CTAs per (sequence, head), %d hidden units and %d threads each; shared memory per CTA: forward %.1f KB (%d arrays), backward %.1f KB (%d arrays), + %.1f KB exchange buffer\n",
                   ver, R, ms.dm, nt, f.floats * 4 / 1024.0, f.n, bw.floats * 4 / 1024.0, bw.n, 8 * A.xn / 1024.0);
        }
        char* name = (char*)malloc(8); snprintf(name, 8, "v%d", ver);
        run_version(name, [&]() { mem_forward_launch(A, nb); }, [&]() { mem_backward_launch(A, nb); });
        if (R > 1) { dfree(GS.chunk_memory); dfree(GS.chunks); }
    }
    printf("\n%-8s %10s %10s %12s   (%s, B=%d H=%d T=%d d=%d dm=%d b=%d)\n", "version", "fwd ms", "bwd ms", "max rel err", preset, B, H, T, d, L.m.dm, L.b);
    // tolerances: fp32 versions 1e-3; the TF32 ones (v7, v11-v13, v15, v17, v19: MEM_VER_TC & 3 == 1; 10-bit mantissas, chained through the chunks) 5e-2
    auto tol = [](const Result& r) { int v = atoi(r.name + 1); return v > 0 && v <= MEM_VERSIONS && (MEM_VER_TC[v] & 3) == 1 ? 5e-2 : 1e-3; };
    for (auto& r : res) printf("%-8s %10.3f %10.3f %12.2e%s\n", r.name, r.fwd_ms, r.bwd_ms, r.err, std::isfinite(r.err) && r.err < tol(r) ? "" : "  FAIL");
    int bad = 0; for (auto& r : res) bad += !(std::isfinite(r.err) && r.err < tol(r));
    return bad ? 2 : 0;
}
