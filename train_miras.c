/*
train_miras.c: a reference trainer, on the CPU, for Llama-style language models whose
sequence mixer is a test-time memory (Titans, MIRAS, ATLAS family). README.md's "Model definition"
defines what is computed; "SPEC §n" below are the section numbers it gives in brackets.

A memory is a small network M(x; P). While a layer reads the sequence it *trains* P
on the pairs (k_t, v_t) by gradient steps, then reads it with the query q_t. We train
the whole model (the outer loop) by differentiating through every one of those inner
steps, second-order terms included, with a hand-written backward.

The file reads top to bottom:
  1. basics: the `real` type (float, or double with -DMIRAS_DOUBLE for gradient checks)
  2. backbone layers, each forward next to its backward
  3. the memory: chunk coefficients, the dual-form chunk, its backward, the layer
  4. the model: config, presets, parameters, activations, forward, backward, AdamW
  5. token-by-token decoding (the test-time recurrence)
  6. files: checkpoints, token shards, tokenizer; the sampler
  7. main: the training loop (hidden when TESTING is defined)
Shapes are written (B, T, C) row-major. Matrices are (out, in): y = x W^T.
*/
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <tgmath.h>  // sqrt, exp, tanh ... in the precision of their argument (float or double)
#include <time.h>
#include <errno.h>
#include <limits.h>
#include <glob.h>
#include <unistd.h>
#include <sys/stat.h>
#include <fcntl.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <signal.h>
#ifdef USE_MPI
#include <mpi.h>  // data parallel (section 6b): make USE_MPI=1, launched with mpirun or srun
#endif

#ifdef MIRAS_DOUBLE
typedef double real;
#else
typedef float real;
#endif

// ----------------------------------------------------------------------------
// 1. basics: errors that say what went wrong and what to do, checked allocation

// Data parallel (section 6b): this process's rank and the number of ranks (0 and 1 without USE_MPI).
// An error every rank meets alike (the flags, a checkpoint, a global gradient norm) is "collective": rank 0
// reports it and ends the job; an error of one rank only is printed with its rank and ends the job as well.
static int g_rank = 0, g_world = 1;
static volatile sig_atomic_t g_die_collective = 0, g_dying = 0;
// die_hook: NULL except in the fuzz targets (dev/fuzz), which check the message and longjmp back instead of exiting
static void (*die_hook)(const char* msg, const char* hint);
static void die(const char* msg, const char* hint) {
    g_dying = 1;
#ifdef USE_MPI
    if (g_world > 1 && g_rank != 0 && g_die_collective)
        sleep(30);  // rank 0 prints the same line and aborts the job first (30 s: a loaded machine)
#endif
    char who[32] = "";
    if (g_world > 1 && !(g_die_collective && g_rank == 0)) snprintf(who, sizeof who, "rank %d: ", g_rank);
    fprintf(stderr, "error: %s%s%s%s%s\n", who, msg, hint ? " (hint: " : "", hint ? hint : "", hint ? ")" : "");
    if (die_hook) die_hook(msg, hint);
#ifdef USE_MPI
    if (g_world > 1) {
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }  // no rank may wait forever on this one
#endif
    exit(1);
}
#define DIE(hint, ...)                        \
    do {                                      \
        char _m[8192];                        \
        snprintf(_m, sizeof _m, __VA_ARGS__); \
        die(_m, hint);                        \
    } while (0)

static void* xmalloc(size_t n) {
    void* p = calloc(n ? n : 1, 1);
    if (!p) DIE("use a smaller model or batch", "out of memory allocating %zu bytes", n);
    return p;
}

static int thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
static int max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// random numbers: xorshift64*, Box-Muller normals; deterministic for a seed
static uint64_t rng_u64(uint64_t* s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}
static double rng_f64(uint64_t* s) { return (rng_u64(s) >> 11) * (1.0 / 9007199254740992.0); }
static double rng_normal(uint64_t* s) {
    double u = rng_f64(s) + 1e-300, v = rng_f64(s);
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static void fill_normal(real* p, size_t n, double std, uint64_t* rng) {
    for (size_t i = 0; i < n; i++) p[i] = (real)(std * rng_normal(rng));
}
static void fill_const(real* p, size_t n, double v) {
    for (size_t i = 0; i < n; i++) p[i] = (real)v;
}

// dot product; `omp simd` lets the compiler split the sum into vector lanes (a fixed order for a
// given build, so results stay deterministic)
static real dotv(const real* a, const real* b, int n) {
    real s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static real sigmoidr(real x) { return (real)1 / (1 + exp(-x)); }
static real silur(real x) { return x * sigmoidr(x); }
static real silu_grad(real x) {
    real s = sigmoidr(x);
    return s * (1 + x * (1 - s));
}

// GELU, tanh approximation (SPEC §4): g(x) = x/2 (1 + tanh(c (x + 0.044715 x^3))), c = sqrt(2/pi).
// The memory's inner gradient uses g'; training through it (SPEC §6) needs g'' too.
static const real GELU_C = 0.7978845608028654, GELU_A = 0.044715;
// the memory calls these many times per element, so they share th = tanh(c (x + 0.044715 x^3))
static real gelu_tanh(real x) { return tanh(GELU_C * (x + GELU_A * x * x * x)); }
static real gelu(real x, real th) { return (real)0.5 * x * (1 + th); }
static real gelu_d1(real x, real th) {
    return (real)0.5 * (1 + th) + (real)0.5 * x * (1 - th * th) * GELU_C * (1 + 3 * GELU_A * x * x);
}
static real gelu_d2(real x, real th) {  // g'' = sech^2(u) [u' - x tanh(u) u'^2 + x u''/2]
    real du = GELU_C * (1 + 3 * GELU_A * x * x), ddu = GELU_C * 6 * GELU_A * x;
    return (1 - th * th) * (du - x * th * du * du + (real)0.5 * x * ddu);
}

// Small dense products used inside a memory chunk. out = (acc ? out : 0) + s * op.
// v[4 p + q] = <a_p, b_q> for rows a_0..a_3 = A, A + K, .. and b_0..b_3 = Bm, Bm + K, ..: 4 x 4 dot products at once,
// so that each loaded A and B element serves four products (NS5's X X^T at 64 x 64 x 561 runs ~1.7x faster);
// every dot is summed as dotv sums it
static inline __attribute__((always_inline)) void dot4x4(real* v, const real* A, const real* Bm, int K) {
    const real *a0 = A, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;
    const real *b0 = Bm, *b1 = b0 + K, *b2 = b1 + K, *b3 = b2 + K;
    real s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
    real s20 = 0, s21 = 0, s22 = 0, s23 = 0, s30 = 0, s31 = 0, s32 = 0, s33 = 0;
#pragma omp simd reduction(+ : s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23, s30, s31, s32, s33)
    for (int k = 0; k < K; k++) {
        s00 += a0[k] * b0[k], s01 += a0[k] * b1[k], s02 += a0[k] * b2[k], s03 += a0[k] * b3[k];
        s10 += a1[k] * b0[k], s11 += a1[k] * b1[k], s12 += a1[k] * b2[k], s13 += a1[k] * b3[k];
        s20 += a2[k] * b0[k], s21 += a2[k] * b1[k], s22 += a2[k] * b2[k], s23 += a2[k] * b3[k];
        s30 += a3[k] * b0[k], s31 += a3[k] * b1[k], s32 += a3[k] * b2[k], s33 += a3[k] * b3[k];
    }
    real w[16] = {s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23, s30, s31, s32, s33};
    memcpy(v, w, sizeof w);
}
static void mm_nt(real* out, const real* A, const real* Bm, int M, int N, int K, real s,
                  int acc) {  // A (M,K) B (N,K)^T
    int i0 = 0, j0;
    for (; i0 + 4 <= M; i0 += 4)  // 4 x 4 tiles; the ragged edges take dotv
        for (j0 = 0; j0 + 4 <= N; j0 += 4) {
            real v[16];
            dot4x4(v, A + (size_t)i0 * K, Bm + (size_t)j0 * K, K);
            for (int q = 0; q < 16; q++) {
                real* o = out + (size_t)(i0 + q / 4) * N + j0 + q % 4;
                *o = acc ? *o + s * v[q] : s * v[q];
            }
        }
    for (int i = 0; i < M; i++)
        for (int j = i < i0 ? (N & ~3) : 0; j < N; j++) {
            real v = s * dotv(A + (size_t)i * K, Bm + (size_t)j * K, K);
            out[(size_t)i * N + j] = acc ? out[(size_t)i * N + j] + v : v;
        }
}
// out = X X^T (M, M) from X (M, K): mm_nt's dots on and above the diagonal, mirrored below. <x_i, x_j> sums the same
// products in the same order as <x_j, x_i>, so this equals mm_nt(out, X, X, M, M, K, 1, 0) bit for bit (NS5's A)
static void mm_nt_sym(real* out, const real* X, int M, int K) {
    int i0 = 0;
    for (; i0 + 4 <= M; i0 += 4)
        for (int j0 = i0; j0 + 4 <= M; j0 += 4) {
            real v[16];
            dot4x4(v, X + (size_t)i0 * K, X + (size_t)j0 * K, K);
            for (int q = 0; q < 16; q++) out[(size_t)(i0 + q / 4) * M + j0 + q % 4] = v[q];
        }
    for (int i = 0; i < M; i++)
        for (int j = i < i0 ? (M & ~3) : i; j < M; j++)
            out[(size_t)i * M + j] = dotv(X + (size_t)i * K, X + (size_t)j * K, K);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < i; j++) out[(size_t)i * M + j] = out[(size_t)j * M + i];
}
// out (8 rows, W columns from j0) = (acc ? out : 0) + A8 B, where A8 holds the 8 rows' scaled values s A[r][k] k-major
// (A8[8 k + r], made once per row block by mm_nn): the 8 x W block stays in registers while k runs, so that each
// loaded piece of a B row serves eight rows of out (NS5's B X at 64 x 561 x 64: ~2.5x faster than a row at a time;
// the A8 values made once instead of once per block of columns: ~1.35x more). Every element is summed over k in
// order, as mm_nn's other paths sum it. W is a constant where this is inlined; MM_W (32 floats, 16 doubles) fills
// 16 AVX-512 registers.
#define MM_W ((int)(128 / sizeof(real)))
#define MM_KC 512  // k values per pass of mm_nn's row blocks (A8 on the stack: 16 KB of floats)
static inline __attribute__((always_inline)) void mm_nn_block(real* out, const real* A8, const real* Bm, int N, int K,
                                                              int j0, int acc, const int W) {
    real c[8][MM_W];
    for (int r = 0; r < 8; r++)
        for (int j = 0; j < W; j++) c[r][j] = acc ? out[(size_t)r * N + j0 + j] : 0;
    for (int k = 0; k < K; k++) {
        const real* a = A8 + (size_t)k * 8;
        const real* b = Bm + (size_t)k * N + j0;
#pragma omp simd
        for (int j = 0; j < W; j++)
            for (int r = 0; r < 8; r++) c[r][j] += a[r] * b[j];
    }
    for (int r = 0; r < 8; r++)
        for (int j = 0; j < W; j++) out[(size_t)r * N + j0 + j] = c[r][j];
}
static void mm_nn(real* out, const real* A, const real* Bm, int M, int N, int K, real s, int acc) {  // A (M,K) B (K,N)
    int i = 0, nb = N - N % 16;
    real A8[8 * MM_KC];
    for (; i + 8 <= M; i += 8) {  // blocks of 8 rows x MM_W (then 16) columns
        real* o = out + (size_t)i * N;
        const real* Ai = A + (size_t)i * K;
        // k in passes of MM_KC (one when K = 0): a pass adds to what the last one stored, the same sums in order
        for (int k0 = 0; k0 == 0 || k0 < K; k0 += MM_KC) {
            int kn = K - k0 < MM_KC ? K - k0 : MM_KC, ac = acc || k0 > 0;
            for (int k = 0; k < kn; k++)
                for (int r = 0; r < 8; r++) A8[k * 8 + r] = s * Ai[(size_t)r * K + k0 + k];
            const real* Bk = Bm + (size_t)k0 * N;
            int j0 = 0;
            for (; j0 + MM_W <= N; j0 += MM_W) mm_nn_block(o, A8, Bk, N, kn, j0, ac, MM_W);
            for (; j0 + 16 <= N; j0 += 16) mm_nn_block(o, A8, Bk, N, kn, j0, ac, 16);
        }
        for (int r = 0; r < 8; r++)  // the last N % 16 columns, an element at a time (a sum in a register)
            for (int j = nb; j < N; j++) {
                real v = acc ? o[(size_t)r * N + j] : 0;
                for (int k = 0; k < K; k++) v += s * Ai[(size_t)r * K + k] * Bm[(size_t)k * N + j];
                o[(size_t)r * N + j] = v;
            }
    }
    for (; i < M; i++) {  // the last M % 8 rows, a row at a time
        real* o = out + (size_t)i * N;
        if (!acc)
            for (int j = 0; j < N; j++) o[j] = 0;
        for (int k = 0; k < K; k++) {
            real a = s * A[(size_t)i * K + k];
            const real* b = Bm + (size_t)k * N;
            for (int j = 0; j < N; j++) o[j] += a * b[j];
        }
    }
}
static void mm_tn(real* out, const real* A, const real* Bm, int M, int N, int K, real s,
                  int acc) {  // A (K,M)^T B (K,N)
    if (!acc)
        for (size_t i = 0; i < (size_t)M * N; i++) out[i] = 0;
    for (int k = 0; k < K; k++)
        for (int i = 0; i < M; i++) {
            real a = s * A[(size_t)k * M + i];
            const real* b = Bm + (size_t)k * N;
            real* o = out + (size_t)i * N;
            for (int j = 0; j < N; j++) o[j] += a * b[j];
        }
}

// ----------------------------------------------------------------------------
// 2. backbone layers (SPEC §2, §3). N = B*T rows unless said otherwise.

// token embedding: out[n] = wte[tok[n]]
static void encoder_forward(real* out, const int* tok, const real* wte, int N, int C) {
    for (int n = 0; n < N; n++) memcpy(out + (size_t)n * C, wte + (size_t)tok[n] * C, C * sizeof(real));
}
static void encoder_backward(real* dwte, const real* dout, const int* tok, int N, int C) {
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) dwte[(size_t)tok[n] * C + c] += dout[(size_t)n * C + c];
}

// RMSNorm over groups of C channels (G groups per row, weight of G*C):
// y = x / sqrt(mean(x^2) + 1e-6) * w. G = 1 for the block norms, G = H for RMSNorm_head.
static void rmsnorm_forward(real* out, real* rstd, const real* x, const real* w, int N, int G, int C) {
#pragma omp parallel for
    for (int n = 0; n < N; n++)
        for (int g = 0; g < G; g++) {
            const real* xr = x + ((size_t)n * G + g) * C;
            real* o = out + ((size_t)n * G + g) * C;
            real r = 1 / sqrt(dotv(xr, xr, C) / C + 1e-6);
            for (int i = 0; i < C; i++) o[i] = xr[i] * r * w[g * C + i];
            rstd[(size_t)n * G + g] = r;
        }
}
// dx = r w dy - x r^3 mean(x w dy);  dw += dy x r
static void rmsnorm_backward(real* dx, real* dw, const real* dout, const real* x, const real* w, const real* rstd,
                             int N, int G, int C) {
    for (int n = 0; n < N; n++)
        for (int g = 0; g < G; g++) {
            const real* xr = x + ((size_t)n * G + g) * C;
            const real* dy = dout + ((size_t)n * G + g) * C;
            real* dxr = dx + ((size_t)n * G + g) * C;
            real r = rstd[(size_t)n * G + g], m = 0;
            for (int i = 0; i < C; i++) m += xr[i] * w[g * C + i] * dy[i];
            m /= C;
            for (int i = 0; i < C; i++) {
                dxr[i] += r * w[g * C + i] * dy[i] - xr[i] * r * r * r * m;
                dw[g * C + i] += dy[i] * xr[i] * r;
            }
        }
}

// out (N, OC) = x (N, C) W^T + bias, W (OC, C). Four rows at a time share each weight row load.
static void matmul_forward(real* out, const real* x, const real* W, const real* bias, int N, int C, int OC) {
#pragma omp parallel for
    for (int n0 = 0; n0 < N; n0 += 4) {
        if (n0 + 4 > N) {  // the last rows, one by one
            for (int n = n0; n < N; n++)
                for (int j = 0; j < OC; j++)
                    out[(size_t)n * OC + j] = (bias ? bias[j] : 0) + dotv(x + (size_t)n * C, W + (size_t)j * C, C);
            continue;
        }
        const real *x0 = x + (size_t)n0 * C, *x1 = x0 + C, *x2 = x1 + C, *x3 = x2 + C;
        for (int j = 0; j < OC; j++) {
            const real* w = W + (size_t)j * C;
            real s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
            for (int c = 0; c < C; c++) {
                s0 += x0[c] * w[c];
                s1 += x1[c] * w[c];
                s2 += x2[c] * w[c];
                s3 += x3[c] * w[c];
            }
            real bj = bias ? bias[j] : 0;
            out[(size_t)n0 * OC + j] = bj + s0;
            out[(size_t)(n0 + 1) * OC + j] = bj + s1;
            out[(size_t)(n0 + 2) * OC + j] = bj + s2;
            out[(size_t)(n0 + 3) * OC + j] = bj + s3;
        }
    }
}
// dx += dout W ; dW += dout^T x ; dbias += sum dout
static void matmul_backward(real* dx, real* dW, real* dbias, const real* dout, const real* x, const real* W, int N,
                            int C, int OC) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const real* d = dout + (size_t)n * OC;
        real* dxr = dx + (size_t)n * C;
        for (int j = 0; j < OC; j++) {
            real g = d[j];
            if (g == 0) continue;
            const real* w = W + (size_t)j * C;
            for (int c = 0; c < C; c++) dxr[c] += g * w[c];
        }
    }
#pragma omp parallel for
    for (int j = 0; j < OC; j++) {
        real* dw = dW + (size_t)j * C;
        real db = 0;
        for (int n = 0; n < N; n++) {
            real g = dout[(size_t)n * OC + j];
            db += g;
            if (g == 0) continue;
            const real* xr = x + (size_t)n * C;
            for (int c = 0; c < C; c++) dw[c] += g * xr[c];
        }
        if (dbias) dbias[j] += db;
    }
}

// causal depthwise conv (SPEC §3): c_t[i] = sum_j w[i][j] x_{t-K+1+j}[i], zero before t = 0
static void conv_forward(real* out, const real* x, const real* w, int B, int T, int C, int K) {
#pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        int b = bt / T, t = bt % T;
        for (int i = 0; i < C; i++) {
            real s = 0;
            for (int j = 0; j < K; j++) {
                int tt = t - K + 1 + j;
                if (tt >= 0) s += w[i * K + j] * x[((size_t)b * T + tt) * C + i];
            }
            out[(size_t)bt * C + i] = s;
        }
    }
}
static void conv_backward(real* dx, real* dw, const real* dout, const real* x, const real* w, int B, int T, int C,
                          int K) {
#pragma omp parallel for
    for (int i = 0; i < C; i++)
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                real g = dout[((size_t)b * T + t) * C + i];
                for (int j = 0; j < K; j++) {
                    int tt = t - K + 1 + j;
                    if (tt < 0) continue;
                    dx[((size_t)b * T + tt) * C + i] += w[i * K + j] * g;
                    dw[i * K + j] += g * x[((size_t)b * T + tt) * C + i];
                }
            }
}

static void silu_forward(real* out, const real* x, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = silur(x[i]);
}
static void silu_backward(real* dx, const real* dout, const real* x, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] += dout[i] * silu_grad(x[i]);
}

// l2 norm per head (SPEC §3): y = x / sqrt(|x|^2 + 1e-6); rn holds the 1/sqrt(...) per (row, head)
static void l2norm_forward(real* out, real* rn, const real* x, int N, int G, int C) {
    for (size_t r = 0; r < (size_t)N * G; r++) {
        real s = 1 / sqrt(dotv(x + r * C, x + r * C, C) + 1e-6);
        for (int i = 0; i < C; i++) out[r * C + i] = x[r * C + i] * s;
        rn[r] = s;
    }
}
// dx = rn (dy - y <y, dy>)
static void l2norm_backward(real* dx, const real* dout, const real* y, const real* rn, int N, int G, int C) {
    for (size_t r = 0; r < (size_t)N * G; r++) {
        real p = dotv(y + r * C, dout + r * C, C);
        for (int i = 0; i < C; i++) dx[r * C + i] += rn[r] * (dout[r * C + i] - y[r * C + i] * p);
    }
}

// SwiGLU inner product: h = SiLU(h1) * h3
static void swiglu_forward(real* out, const real* h1, const real* h3, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = silur(h1[i]) * h3[i];
}
static void swiglu_backward(real* dh1, real* dh3, const real* dout, const real* h1, const real* h3, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dh1[i] += dout[i] * h3[i] * silu_grad(h1[i]);
        dh3[i] += dout[i] * silur(h1[i]);
    }
}

// gated output of the mixer: z = yn * SiLU(gp)
static void gate_mul_forward(real* out, const real* yn, const real* gp, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = yn[i] * silur(gp[i]);
}
static void gate_mul_backward(real* dyn, real* dgp, const real* dout, const real* yn, const real* gp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dyn[i] += dout[i] * silur(gp[i]);
        dgp[i] += dout[i] * yn[i] * silu_grad(gp[i]);
    }
}

// memory gates (SPEC §3), in place on the pre-activation: g = scale sigmoid(g) (a, theta: scale 1; eta: eta_max)
static void gate_act_forward(real* g, size_t n, real scale) {
    for (size_t i = 0; i < n; i++) g[i] = scale * sigmoidr(g[i]);
}
// d(pre) = d(gate) * gate * (1 - gate/scale)
static void gate_act_backward(real* dpre, const real* dg, const real* g, size_t n, real scale) {
    for (size_t i = 0; i < n; i++) dpre[i] = dg[i] * g[i] * (1 - g[i] / scale);
}

// Huber threshold delta = softplus(pre), in place; d(pre) = d(delta) * (1 - exp(-delta))
static void softplus_forward(real* g, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = g[i] > 20 ? g[i] : log1p(exp(g[i]));
}
static void softplus_backward(real* dpre, const real* dg, const real* g, size_t n) {
    for (size_t i = 0; i < n; i++) dpre[i] = dg[i] * (1 - exp(-g[i]));
}

static void residual_forward(real* out, const real* a, const real* b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// cross-entropy over the first V of Vp logits; losses[n] = -log softmax(logits[n])[target]
static void crossentropy_forward(real* losses, real* probs, const real* logits, const int* targets, int N, int V,
                                 int Vp) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const real* l = logits + (size_t)n * Vp;
        real* p = probs + (size_t)n * Vp;
        real mx = -1e30, s = 0;
        for (int i = 0; i < V; i++)
            if (l[i] > mx) mx = l[i];
        for (int i = 0; i < V; i++) {
            p[i] = exp(l[i] - mx);
            s += p[i];
        }
        for (int i = 0; i < V; i++) p[i] /= s;
        for (int i = V; i < Vp; i++) p[i] = 0;
        losses[n] = -log(p[targets[n]]);
    }
}
// dlogits = (probs - onehot) * dloss, for the positions in mask (NULL: all); padded columns get no gradient
static void crossentropy_backward(real* dlogits, const real* probs, const int* targets, const uint8_t* mask, real dloss,
                                  int N, int V, int Vp) {
    for (int n = 0; n < N; n++)
        if (!mask || mask[n])
            for (int i = 0; i < V; i++)
                dlogits[(size_t)n * Vp + i] += (probs[(size_t)n * Vp + i] - (i == targets[n])) * dloss;
}

// ---- attention layers 'A' and 'S' (SPEC §9.1)
// RoPE with rotate-half pairing on each head of width d (half = d/2), at sequence position pos:
//   th_i = pos * 10000^(-2i/d)  (i < half; the angle and its cos/sin in float64, then rounded to real)
//   x'_i = x_i cos th_i - x_{i+half} sin th_i        x'_{i+half} = x_{i+half} cos th_i + x_i sin th_i
// The backward is the transposed rotation: dx_i = dx'_i cos + dx'_{i+half} sin, dx_{i+half} = dx'_{i+half} cos - dx'_i
// sin.
static void rope_angles(real* cs, real* sn, int pos, int half) {
    for (int i = 0; i < half; i++) {
        double th = (double)pos * pow(10000.0, -2.0 * i / (2.0 * half));
        cs[i] = (real)cos(th);
        sn[i] = (real)sin(th);
    }
}
static void rope_rotate(real* out, const real* x, const real* cs, const real* sn, int H, int d,
                        int dir) {  // dir 1: forward, -1: backward
    int half = d / 2;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < half; i++) {
            real a = x[h * d + i], b = x[h * d + half + i], s = dir * sn[i];
            out[h * d + i] = a * cs[i] - b * s;
            out[h * d + half + i] = b * cs[i] + a * s;
        }
}
// x (B, T, H*d) -> out, row t rotated by position t (out may be x)
static void rope_forward(real* out, const real* x, int B, int T, int H, int d, int dir) {
    int half = d / 2;
#pragma omp parallel for
    for (int t = 0; t < T; t++) {
        real cs[128], sn[128];
        rope_angles(cs, sn, t, half);
        for (int bb = 0; bb < B; bb++) {
            size_t o = ((size_t)bb * T + t) * H * d;
            rope_rotate(out + o, x + o, cs, sn, H, d, dir);
        }
    }
}
static void rope_backward(real* dx, const real* dout, int B, int T, int H, int d) {
    rope_forward(dx, dout, B, T, H, d, -1);
}

// Causal softmax attention per head, key j visible to query i iff j <= i ('A', window = 0) or i - W < j <= i ('S'),
// and, with a prefix of np persistent rows (SPEC §9.2, Titans layers), every j < np too.
// q, k (after RoPE), v: (B, T, H*d). out (B, T, H*d) = concat_heads(softmax(q.k / sqrt(d)) v); lse (B, T, H) the
// log-sum-exp of each query's scores, kept for the backward (no T x T matrix is stored):
//   s_ij = q_i.k_j / sqrt(d),  lse_i = log sum_j exp(s_ij),  p_ij = exp(s_ij - lse_i),  out_i = sum_j p_ij v_j
// The keys of query i, in this order: [0, e1) with e1 = min(np, i+1), then [j0, i] with j0 = max(np, i-W+1) (W = 0:
// np).
static void attn_keys(int i, int np, int W, int* e1, int* j0) {
    *e1 = np < i + 1 ? np : i + 1;
    int lo = W > 0 ? i - W + 1 : 0;
    *j0 = lo > np ? lo : np;
}
// One query row over the keys of attn_keys(i, np, W): key r's k and v rows at k + row(r) * D and v + row(r) * D, with
// row(r) = r, or, in a decoder's cache with ring > 0 (np pinned rows, then ring slots reused), np + (r - np) % ring
// for r >= np. o (d) = sum_r p_ir v_r; returns lse_i. s: i + 1 floats of scratch. The forward and both decoders call
// it, so decoding does the parallel forward's arithmetic in its order.
static real attention_row(real* o, const real* qi, const real* k, const real* v, int D, int d, int i, int np, int W,
                          int ring, real* s) {
#define ROW(r) ((size_t)(ring && (r) >= np ? np + ((r)-np) % ring : (r)) * D)
    real scale = 1 / sqrt((real)d);
    int e1, j0;
    attn_keys(i, np, W, &e1, &j0);
    real mx = -1e30, sum = 0;
    for (int j = 0; j <= i; j++) {  // s_ij = q_i.k_j / sqrt(d)
        if (j == e1) j = j0;
        if (j > i) break;
        s[j] = dotv(qi, k + ROW(j), d) * scale;
        if (s[j] > mx) mx = s[j];
    }
    for (int j = 0; j <= i; j++) {
        if (j == e1) j = j0;
        if (j > i) break;
        s[j] = exp(s[j] - mx);
        sum += s[j];
    }
    for (int c = 0; c < d; c++) o[c] = 0;
    for (int j = 0; j <= i; j++) {  // out_i = sum_j p_ij v_j
        if (j == e1) j = j0;
        if (j > i) break;
        const real* vj = v + ROW(j);
        real p = s[j] / sum;
        for (int c = 0; c < d; c++) o[c] += p * vj[c];
    }
#undef ROW
    return mx + log(sum);
}
static void attention_forward(real* out, real* lse, const real* q, const real* k, const real* v, int B, int T, int H,
                              int d, int window, int np) {
    int D = H * d;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {
            real* s = (real*)xmalloc((size_t)T * sizeof(real));
            size_t r0 = (size_t)bb * T * D + h * d;  // this (sequence, head)'s row 0
            for (int i = 0; i < T; i++)
                lse[((size_t)bb * T + i) * H + h] = attention_row(out + r0 + (size_t)i * D, q + r0 + (size_t)i * D,
                                                                  k + r0, v + r0, D, d, i, np, window, 0, s);
            free(s);
        }
}
// Backward (accumulates into dq, dk, dv), recomputing p_ij from lse, over the same keys:
//   dv_j += sum_i p_ij dout_i;   dp_ij = dout_i.v_j;   ds_ij = p_ij (dp_ij - dout_i.out_i)   (softmax backward)
//   dq_i += sum_j ds_ij k_j / sqrt(d);   dk_j += sum_i ds_ij q_i / sqrt(d)
static void attention_backward(real* dq, real* dk, real* dv, const real* dout, const real* q, const real* k,
                               const real* v, const real* out, const real* lse, int B, int T, int H, int d, int window,
                               int np) {
    real scale = 1 / sqrt((real)d);
    int D = H * d;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {  // one (sequence, head) per task: dk, dv rows are its own
            for (int i = 0; i < T; i++) {
                size_t ri = ((size_t)bb * T + i) * D + h * d;
                const real *qi = q + ri, *doi = dout + ri;
                real* dqi = dq + ri;
                int e1, j0;
                attn_keys(i, np, window, &e1, &j0);
                real li = lse[((size_t)bb * T + i) * H + h], Di = dotv(doi, out + ri, d);
                for (int j = 0; j <= i; j++) {
                    if (j == e1) j = j0;
                    if (j > i) break;
                    size_t rj = ((size_t)bb * T + j) * D + h * d;
                    real p = exp(dotv(qi, k + rj, d) * scale - li);
                    real ds = p * (dotv(doi, v + rj, d) - Di) * scale;
                    for (int c = 0; c < d; c++) {
                        dv[rj + c] += p * doi[c];
                        dqi[c] += ds * k[rj + c];
                        dk[rj + c] += ds * qi[c];
                    }
                }
            }
        }
}

// ----------------------------------------------------------------------------
// 3. the memory (SPEC §4, §5)
//
// One head of one layer reads its sequence chunk by chunk (chunk size b). Inside a chunk
// every inner gradient g_i is taken at the chunk-start state P_s, and the state then
// evolves token by token (read after write). With momentum (S_t = theta_t S_{t-1} - eta_t g_t,
// P_t = a_t P_{t-1} + S_t) and gd as the special case theta = 0 (no S carried), unrolling gives
//     P_t = alpha_t P_s + beta_t S_s - sum_{i<=t} C[t][i] g_i        S_end = sigma S_s - sum_i s[i] g_i
// with scalar coefficients per head (computed below); the anchored retention adds (1 - alpha_t) P_0 to P_t. Every g_i
// is a sum of outer products
// (delta_i x_i^T per memory matrix), so a read W_t x = alpha_t W_s x + beta_t S_s x
// - sum_i C[t][i] (x_i . x) delta_i is a few small matrix products: the "dual form".
// Nothing per-token is ever materialised.

// The memory's kinds. The values are the checkpoint header's (slots 14, 15, 20): never renumber them.
// Attentional bias, r = dloss/dM(k) from e = M(k) - v (SPEC §4): l2 r = e; dot (Hebbian) r = -v;
// lp (Moneta) r = 3 tanh(10 e)(e^2 + 1e-6); huber (Yaad) r = clamp(e, -delta, delta)
enum { BIAS_L2 = 0, BIAS_DOT = 1, BIAS_LP = 2, BIAS_HUBER = 3 };
enum { ALGO_GD = 0, ALGO_MOMENTUM = 1, ALGO_MUON = 2, ALGO_MUON_CHUNK = 3 };  // inner algorithm (SPEC §5.1, §5.2, §5.7)
enum { RET_NONE = 0, RET_LQ = 1, RET_KL = 2 };  // retention: none; lq (Moneta, SPEC §5.3); kl (Memora, SPEC §5.4)

typedef struct {
    int d, dm;  // head width; memory hidden width (d for the linear memory)
    int depth;  // 1 linear M(x) = W x ; 2 deep M(x) = x + LN(W1 GELU(W2 x))
    int gated;  // deep only (ATLAS++, SPEC §4): M(x) = x + LN(W1 (GELU(W2 x) * W3 x)), W3 (dm, din) after W2
    int resid, ln;  // deep memory switches
    int bias;  // BIAS_*
    int momentum;  // 1 for ALGO_MOMENTUM, 0 for ALGO_GD
    int muon;  // 1 for ALGO_MUON (SPEC §5.7): S_t = theta_t S_{t-1} + G_t, P_t = a_t P_{t-1} - eta_t NS5(S_t); 2 chunk-level
    int retention;  // RET_*
    int cw;  // channel-wise eta (and delta): eta scales the error per output channel
    int anchor;  // retention toward P_0 instead of toward 0 (README "anchored retention"; SPEC §10)
    int nP;  // state size per head: deep W1 (d, dm) then W2 (dm, din) (then W3 (dm, din) gated); linear W (d, din)
    int lattice, lat_k,
        lat_ablate;  // Lattice (section 3b): LAT_* kind (0 none), checkpoint interval k, ablation bits LATA_*
    int omega;  // Omega rule window c (SPEC §5.5); 1: off (the plain rule)
    int poly,
        din;  // poly features (SPEC §5.6) on q, k; the memory's input width: d, or D_phi = 1 + d + d(d+1)/2 with poly
    int phistar;  // the phi* memory (section 3c, DT, DOT): W2 or W kept as a kernel sum; 2: with bounded W2 steps
    real phis;  // its kernel scale s: kappa(k, x) = exp(s k.x), s = sqrt(d)
} MemCfg;

// Scratch for one chunk of one head, n <= b rows. One per thread, carved from one allocation.
typedef struct {
    real *q, *k, *v, *a, *eta, *theta, *dy;  // chunk inputs (n, d) and (n); dy the output gradient
    real *etac, *delta;  // channel-wise eta (n, d); Huber threshold (n, d)
    real *alpha, *beta, *sigma, *C, *s;  // coefficients: (n), (n), (n), (n, n), (n, n)
    real *zk, *tk, *hk, *nk, *rk, *r, *u, *g1, *gk, *g2;  // inner gradients at P_s, one row per key (tk: GELU's tanh);
        // g1, g2: the error rows of g_t = (g1 hk^T, g2 k^T) (not dL/d.)
    real *e, *psi;  // e = M(k) - v, psi = the bias' dloss/dM(k) before channel-wise eta
    real *xw1, *xs1, *xx1, *zq, *tq, *hq, *xw2, *xs2, *xx2, *nq, *rq, *y;  // reads
    real* grad0;
    size_t ngrad;  // all gradients below, zeroed per chunk
    real *dq, *dk, *dv, *da, *deta, *dtheta, *dalpha, *dbeta, *dC, *ds, *dsig;
    real *dzk, *dhk, *dnk, *drk, *dr, *du, *dg1, *dgk, *dg2, *dzq, *dhq, *doq, *dok;
    real *detac, *ddelta, *dmk, *dcs;  // dcs: the lq read scales (2)
    real *Pa, *Pb, *Sa, *Sb;  // state / state-gradient carries (nP each)
    real *Wa, *Wb, *Wc, *dWa, *dWb, *save,
        *zero;  // retention scratch: (nP) each, a copy of the gradients, zeros (b, d)
    real *dlng, *dlnb;  // LN affine gradients of this head (d each)
    real *xa1, *xa2, *dp0;  // anchored retention: reads through P_0 (n, dm), (n, d); dL/dP_0 (nP)
    const real* p0;  // the anchor P_0 (A_0 for lq) of this head, NULL without anchor
    int nh, wc;  // omega (SPEC §5.5): halo rows before the chunk's own; window c (1: off)
    real *gam, *C0, *s0, *dgam, *dC0;  // omega: gates (rows, c); C, s before the window mix; their gradients
    real *qr, *kr, *dqr, *dkr;  // poly: q, k are the features (n, din); the raw rows (n, d) for the residual
    real *mP, *mS, *mX, *msv, *mtmp;  // muon: P_j, S_j, X_j = NS5(S_j) per own row (b, nP); NS5's iterates; scratch
    size_t nsv;  // muon: NS5's saved floats per row (all matrices)
    real *zk3, *hk2, *g3, *zq3, *hq2;  // gated memory: W3 k, GELU(W2 k) (hk is their product), dloss/d(W3 k); q's
    real *xw3, *xs3, *xa3;  // gated memory, the dual-form read of W3 (gd, momentum): as xw1, xs1, xa1 for W2
    real *dg3, *dzk3, *dhk2, *dzq3;  // and their gradients (in the zeroed block)
} MemChunk;

// n floats rounded up to whole 16-byte groups: every array of a carve starts 16-byte aligned (given an aligned base),
// so the GPU's 16-byte vector paths take them (an odd-sized array such as dsig (1) shifted all after it off 16 bytes,
// and mem_update_backward_ew's scalar fallback was 19% of titans' backward on the H200, run 6)
static inline size_t carve_al(size_t n) { return (n + 3) & ~(size_t)3; }
// The optional parts of the gradient block (memchunk_carve_in's opt): a memory without one gets those arrays carved
// after the block, so that the block zeroed per chunk (grad0, ngrad) holds only gradients the memory writes. The GPU
// keeps the block in shared memory as one piece: at titans' shape (split over 2 CTAs) the unused gated, channel-wise
// and Huber gradients took 40 KB there, five (n, dm) arrays' room (dev/cuda/memlab_notes.md, "The gradient block").
enum { CARVE_GATED = 1, CARVE_CW = 2, CARVE_HUBER = 4, CARVE_ALL = 7 };
static inline int mem_carve_opt(const MemCfg* m) {
    return (m->gated ? CARVE_GATED : 0) | (m->cw ? CARVE_CW : 0) | (m->bias == BIAS_HUBER ? CARVE_HUBER : 0);
}
static size_t memchunk_carve_in(MemChunk* c, real* base, int b, int d, int din, int dm, int nP, int opt) {
    size_t off = 0, nd = (size_t)b * d, nm = (size_t)b * dm, nn = (size_t)b * b,
           ni = (size_t)b * din;  // (offsets: no arithmetic on a NULL base)
// clang-format off
#define TAKE(f, sz) do { c->f = base ? base + off : NULL; off += carve_al(sz); } while (0)
    TAKE(q, ni); TAKE(k, ni); TAKE(v, nd); TAKE(a, b); TAKE(eta, b); TAKE(theta, b); TAKE(dy, nd); TAKE(etac, nd); TAKE(delta, nd);
    TAKE(alpha, b); TAKE(beta, b); TAKE(sigma, b); TAKE(C, nn); TAKE(s, nn);
    TAKE(zk, nm); TAKE(tk, nm); TAKE(hk, nm); TAKE(nk, nd); TAKE(rk, b); TAKE(r, nd); TAKE(u, nd); TAKE(g1, nd); TAKE(gk, nm); TAKE(g2, nm); TAKE(e, nd); TAKE(psi, nd);
    TAKE(xw1, nm); TAKE(xs1, nm); TAKE(xx1, nn); TAKE(zq, nm); TAKE(tq, nm); TAKE(hq, nm);
    TAKE(xw2, nd); TAKE(xs2, nd); TAKE(xx2, nn); TAKE(nq, nd); TAKE(rq, b); TAKE(y, nd);
    size_t g0 = off;
    TAKE(dq, ni); TAKE(dk, ni); TAKE(dv, nd); TAKE(da, b); TAKE(deta, b); TAKE(dtheta, b);
    TAKE(dalpha, b); TAKE(dbeta, b); TAKE(dC, nn); TAKE(ds, b); TAKE(dsig, 1);
    TAKE(dzk, nm); TAKE(dhk, nm); TAKE(dnk, nd); TAKE(drk, b); TAKE(dr, nd); TAKE(du, nd); TAKE(dg1, nd);
    TAKE(dgk, nm); TAKE(dg2, nm); TAKE(dzq, nm); TAKE(dhq, nm); TAKE(doq, nd); TAKE(dok, nd);
    TAKE(dmk, nd); TAKE(dcs, 2);
    if (opt & CARVE_CW) TAKE(detac, nd);
    if (opt & CARVE_HUBER) TAKE(ddelta, nd);
    if (opt & CARVE_GATED) { TAKE(dg3, nm); TAKE(dzk3, nm); TAKE(dhk2, nm); TAKE(dzq3, nm); }   // gated memory
    if (din != d) { TAKE(dqr, nd); TAKE(dkr, nd); } else { c->dqr = c->dq; c->dkr = c->dk; }   // poly: the raw rows' gradients
    c->grad0 = base ? base + g0 : NULL; c->ngrad = off - g0;
    // (the optional gradients this memory never writes: outside the block, never zeroed)
    if (!(opt & CARVE_CW)) TAKE(detac, nd);
    if (!(opt & CARVE_HUBER)) TAKE(ddelta, nd);
    if (!(opt & CARVE_GATED)) { TAKE(dg3, nm); TAKE(dzk3, nm); TAKE(dhk2, nm); TAKE(dzq3, nm); }
    TAKE(Pa, nP); TAKE(Pb, nP); TAKE(Sa, nP); TAKE(Sb, nP); TAKE(dlng, d); TAKE(dlnb, d);
    TAKE(Wa, nP); TAKE(Wb, nP); TAKE(Wc, nP); TAKE(dWa, nP); TAKE(dWb, nP); TAKE(save, c->ngrad); TAKE(zero, nd);
    TAKE(xa1, nm); TAKE(xa2, nd); TAKE(dp0, nP); c->p0 = NULL;
    TAKE(zk3, nm); TAKE(hk2, nm); TAKE(g3, nm); TAKE(zq3, nm); TAKE(hq2, nm); TAKE(xw3, nm); TAKE(xs3, nm); TAKE(xa3, nm);   // gated memory
    TAKE(gam, nn); TAKE(C0, nn); TAKE(s0, nn); TAKE(dgam, nn); TAKE(dC0, nn + b); c->nh = 0; c->wc = 1;  // omega (b: rows incl. the halo)
    if (din != d) { TAKE(qr, nd); TAKE(kr, nd); } else { c->qr = c->q; c->kr = c->k; }   // poly: the raw rows
#undef TAKE
    // clang-format on
    return off;
}
static size_t memchunk_carve(MemChunk* c, real* base, int b, int d, int dm, int nP) {
    return memchunk_carve_in(c, base, b, d, d, dm, nP, CARVE_ALL);
}

// ---- omega (SPEC §5.5): the sliding-window coefficient mask
// With the Omega rule every step uses G_j = sum_{o<c} gamma_j[o] g_{j-o} instead of g_j. The chunk then holds nh halo
// rows (the c-1 tokens before it, nh = min(c-1, t0)) ahead of its own n rows: their gradients are taken at the
// chunk-start
// state P_s like the others, and their own steps are nothing (a = 1, eta = 0, theta = 1, beta = 0). Since
//     P_t = alpha_t P_s + beta_t S_s - sum_{j<=t} C[t][j] G_j = ... - sum_i (sum_j C[t][j] Gamma[j][i]) g_i,
// Gamma[j][i] = gamma_j[j - i] for 0 <= j - i < c (real rows j only), the reads and the carry keep their dual form with
// the mixed coefficients C' = C Gamma (and s' = s Gamma for the momentum carry). C, s before the mix are kept in C0,
// s0.
static void omega_coef_forward(MemChunk* c, int n) {
    int w = c->wc;
    size_t nn = (size_t)n * n;
    memcpy(c->C0, c->C, nn * sizeof(real));
    memcpy(c->s0, c->s, nn * sizeof(real));
    for (int t = 0; t < n; t++)
        for (int i = 0; i <= t; i++) {
            real sc = 0, ss = 0;
            for (int j = i > c->nh ? i : c->nh; j <= t && j < i + w; j++) {
                real gm = c->gam[(size_t)j * w + j - i];
                sc += c->C0[(size_t)t * n + j] * gm;
                ss += c->s0[(size_t)t * n + j] * gm;
            }
            c->C[(size_t)t * n + i] = sc;
            c->s[(size_t)t * n + i] = ss;
        }
}
// From dC' (all rows) and ds' (last row, c->ds) to dgamma (c->dgam) and dC, ds of the unmixed coefficients, in place;
// C, s get their unmixed values back for the recurrences' backward.
static void omega_coef_backward(MemChunk* c, int n) {
    int w = c->wc;
    size_t nn = (size_t)n * n;
    real* ds0 = c->dC0 + nn;
    memset(c->dgam, 0, (size_t)n * w * sizeof(real));
    for (int t = 0; t < n; t++)
        for (int j = c->nh; j <= t; j++) {
            real g = 0;
            for (int o = 0; o < w && o <= j; o++) {
                real gm = c->gam[(size_t)j * w + o], dc = c->dC[(size_t)t * n + j - o];
                c->dgam[(size_t)j * w + o] +=
                    dc * c->C0[(size_t)t * n + j] + (t == n - 1 ? c->ds[j - o] * c->s0[(size_t)t * n + j] : 0);
                g += dc * gm;
            }
            c->dC0[(size_t)t * n + j] = g;
        }
    for (int j = 0; j < n; j++) {
        real g = 0;
        if (j >= c->nh)
            for (int o = 0; o < w && o <= j; o++) g += c->ds[j - o] * c->gam[(size_t)j * w + o];
        ds0[j] = g;
    }
    for (int t = 0; t < n; t++)
        for (int j = 0; j < c->nh && j <= t; j++) c->dC0[(size_t)t * n + j] = 0;  // halo columns: C = 0
    for (int t = 0; t < n; t++)
        for (int j = t + 1; j < n; j++) c->dC0[(size_t)t * n + j] = 0;
    memcpy(c->dC, c->dC0, nn * sizeof(real));
    memcpy(c->ds, ds0, n * sizeof(real));
    memcpy(c->C, c->C0, nn * sizeof(real));
    memcpy(c->s, c->s0, nn * sizeof(real));
}

// Chunk coefficients by the recurrences (t, i local, 0-based; sigma_{-1} = alpha_{-1} = 1):
//   alpha_t = a_t alpha_{t-1}          sigma_t = theta_t sigma_{t-1}      beta_t = a_t beta_{t-1} + sigma_t
//   s[t][i] = eta_i (t = i), theta_t s[t-1][i] (t > i)       C[t][i] = a_t C[t-1][i] + s[t][i]
static void mem_coef_forward(MemChunk* c, int n, int momentum) {
    for (int t = 0; t < n; t++) {
        real th = momentum ? c->theta[t] : 0;
        c->alpha[t] = c->a[t] * (t ? c->alpha[t - 1] : 1);
        c->sigma[t] = th * (t ? c->sigma[t - 1] : 1);
        c->beta[t] = t < c->nh ? 0 : c->a[t] * (t ? c->beta[t - 1] : 0) + c->sigma[t];  // (omega's halo rows: no step)
        for (int i = 0; i < n; i++) {
            real s = i == t ? c->eta[i] : (i < t ? th * c->s[(t - 1) * n + i] : 0);
            c->s[t * n + i] = s;
            c->C[t * n + i] = i <= t ? c->a[t] * (i < t ? c->C[(t - 1) * n + i] : 0) + s : 0;
        }
    }
    if (c->wc > 1) omega_coef_forward(c, n);
}
// Reverse mode through the recurrences: from dalpha, dbeta, dC (all rows) and dsigma, ds (last row)
// to da, deta, dtheta.
static void mem_coef_backward(MemChunk* c, int n, int momentum) {
    if (c->wc > 1) omega_coef_backward(c, n);
    real ga = 0, gb = 0, gs = 0;  // adjoints of alpha_{t+1}, beta_{t+1}, sigma_{t+1}
    real* gC = c->dzq;
    real* gS = c->dhq;  // per-source adjoints of C[t+1][i], s[t+1][i]; borrowed scratch (n each)
    for (int i = 0; i < n; i++) gC[i] = gS[i] = 0;
    for (int t = n - 1; t >= 0; t--) {
        real an = t + 1 < n ? c->a[t + 1] : 0, thn = (momentum && t + 1 < n) ? c->theta[t + 1] : 0;
        ga = c->dalpha[t] + an * ga;
        c->da[t] += ga * (t ? c->alpha[t - 1] : 1);
        gb = c->dbeta[t] + an * gb;
        c->da[t] += gb * (t ? c->beta[t - 1] : 0);
        gs = (t == n - 1 ? c->dsig[0] : 0) + gb + thn * gs;
        if (momentum) c->dtheta[t] += gs * (t ? c->sigma[t - 1] : 1);
        for (int i = 0; i <= t; i++) {
            real g = c->dC[t * n + i] + an * gC[i];
            c->da[t] += g * (i < t ? c->C[(t - 1) * n + i] : 0);
            real h = (t == n - 1 ? c->ds[i] : 0) + g + thn * gS[i];
            if (i == t)
                c->deta[i] += h;
            else if (momentum)
                c->dtheta[t] += h * c->s[(t - 1) * n + i];
            gC[i] = g;
            gS[i] = h;
        }
    }
}

// A read through one memory matrix W (m, p) as it evolves inside the chunk (dual form):
//   out_t = alpha_t W x_t + (1 - alpha_t) cs W0 x_t + beta_t S x_t - cs sum_{i<=t} C[t][i] (x_t . xk_i) dl_i
// (cs = 1, except 1/s for Moneta's lq retention, whose reads are A_t / s; the W0 term only with the
// anchored retention, W0 = P_0 or A_0: P_t - P_0 follows the plain recurrence)
// x (n, p) the read inputs, xk (n, p) the write inputs, dl (n, m) the error rows of the writes.
// Keeps xw = x W^T, xs = x S^T, xx = x xk^T, xa = x W0^T for the backward. xk NULL: xx already holds x xk^T (the
// gated memory's W3 read has W2's inputs)
static void mem_read_forward(real* out, real* xw, real* xs, real* xx, real* xa, const real* x, const real* xk,
                             const real* dl, const real* W, const real* S, const real* W0, real cs, const MemChunk* c,
                             int n, int m, int p) {
    mm_nt(xw, x, W, n, m, p, 1, 0);
    if (S) mm_nt(xs, x, S, n, m, p, 1, 0);
    if (W0) mm_nt(xa, x, W0, n, m, p, 1, 0);
    if (xk) mm_nt(xx, x, xk, n, n, p, 1, 0);
    for (int t = 0; t < n; t++) {
        real* o = out + (size_t)t * m;
        for (int j = 0; j < m; j++)
            o[j] = c->alpha[t] * xw[(size_t)t * m + j] + (S ? c->beta[t] * xs[(size_t)t * m + j] : 0) +
                   (W0 ? (1 - c->alpha[t]) * cs * xa[(size_t)t * m + j] : 0);
        for (int i = 0; i <= t; i++) {
            real w = cs * c->C[t * n + i] * xx[t * n + i];
            for (int j = 0; j < m; j++) o[j] -= w * dl[(size_t)i * m + j];
        }
    }
}
static void mem_read_backward(real* dx, real* dxk, real* ddl, real* dW, real* dS, real* dW0, real* dcs, MemChunk* c,
                              const real* dout, const real* x, const real* xk, const real* dl, const real* W,
                              const real* S, const real* W0, real cs, const real* xw, const real* xs, const real* xx,
                              const real* xa, int n, int m, int p) {
    for (int t = 0; t < n; t++) {
        const real* g = dout + (size_t)t * m;
        c->dalpha[t] += dotv(g, xw + (size_t)t * m, m);
        if (S) c->dbeta[t] += dotv(g, xs + (size_t)t * m, m);
        if (W0) {  // through (1 - alpha_t) cs W0 x_t
            real ga = dotv(g, xa + (size_t)t * m, m), w0 = (1 - c->alpha[t]) * cs;
            c->dalpha[t] -= cs * ga;
            *dcs += (1 - c->alpha[t]) * ga;
            for (int j = 0; j < m; j++)
                for (int q = 0; q < p; q++) {
                    dx[(size_t)t * p + q] += w0 * g[j] * W0[(size_t)j * p + q];
                    dW0[(size_t)j * p + q] += w0 * g[j] * x[(size_t)t * p + q];
                }
        }
        for (int j = 0; j < m; j++) {  // through alpha_t W x_t and beta_t S x_t
            real ga = c->alpha[t] * g[j], gb = S ? c->beta[t] * g[j] : 0;
            for (int q = 0; q < p; q++) {
                dx[(size_t)t * p + q] += ga * W[(size_t)j * p + q] + (S ? gb * S[(size_t)j * p + q] : 0);
                dW[(size_t)j * p + q] += ga * x[(size_t)t * p + q];
                if (S) dS[(size_t)j * p + q] += gb * x[(size_t)t * p + q];
            }
        }
        for (int i = 0; i <= t; i++) {  // through - cs C[t][i] (x_t . xk_i) dl_i
            real cti = c->C[t * n + i], dA = -dotv(g, dl + (size_t)i * m, m);
            c->dC[t * n + i] += cs * dA * xx[t * n + i];
            *dcs += dA * cti * xx[t * n + i];
            real gx = cs * dA * cti, w = cs * cti * xx[t * n + i];
            for (int q = 0; q < p; q++) {
                dx[(size_t)t * p + q] += gx * xk[(size_t)i * p + q];
                dxk[(size_t)i * p + q] += gx * x[(size_t)t * p + q];
            }
            for (int j = 0; j < m; j++) ddl[(size_t)i * m + j] -= w * g[j];
        }
    }
}

// The chunk-end state of one memory matrix: Wn = ca W + (1 - ca) W0 + cb S - sum_i c_i dl_i xk_i^T   (m, p)
// (the W0 term only with the anchored retention)
static void mem_update_forward(real* Wn, const real* W, real ca, const real* W0, const real* S, real cb, const real* dl,
                               const real* xk, const real* cv, int n, int m, int p) {
    for (size_t e = 0; e < (size_t)m * p; e++) Wn[e] = ca * W[e] + (W0 ? (1 - ca) * W0[e] : 0) + (S ? cb * S[e] : 0);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            real w = cv[i] * dl[(size_t)i * m + j];
            for (int q = 0; q < p; q++) Wn[(size_t)j * p + q] -= w * xk[(size_t)i * p + q];
        }
}
static void mem_update_backward(real* dW, real* dS, real* dW0, real* dca, real* dcb, real* ddl, real* dxk, real* dcv,
                                const real* dWn, const real* W, real ca, const real* W0, const real* S, real cb,
                                const real* dl, const real* xk, const real* cv, int n, int m, int p) {
    for (size_t e = 0; e < (size_t)m * p; e++) {
        dW[e] += ca * dWn[e];
        *dca += dWn[e] * W[e];
        if (W0) {
            dW0[e] += (1 - ca) * dWn[e];
            *dca -= dWn[e] * W0[e];
        }
        if (S) {
            dS[e] += cb * dWn[e];
            *dcb += dWn[e] * S[e];
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            const real* g = dWn + (size_t)j * p;
            real gx = dotv(g, xk + (size_t)i * p, p), dlij = dl[(size_t)i * m + j];
            ddl[(size_t)i * m + j] -= cv[i] * gx;
            dcv[i] -= dlij * gx;
            for (int q = 0; q < p; q++) dxk[(size_t)i * p + q] -= cv[i] * dlij * g[q];
        }
}

// LayerNorm of the deep memory, without its affine (applied by the caller), rows of d:
// x^ = (o - mean) * rstd, rstd = 1/sqrt(var + 1e-5), biased variance; in place.
static void ln_forward(real* o, real* rstd, int n, int d) {
    for (int t = 0; t < n; t++) {
        real *x = o + (size_t)t * d, mu = 0, var = 0;
        for (int i = 0; i < d; i++) mu += x[i];
        mu /= d;
        for (int i = 0; i < d; i++) var += (x[i] - mu) * (x[i] - mu);
        rstd[t] = 1 / sqrt(var / d + 1e-5);
        for (int i = 0; i < d; i++) x[i] = (x[i] - mu) * rstd[t];
    }
}
// do += rstd (dx^ - mean(dx^) - x^ mean(dx^ x^)) - drstd rstd^2 x^ / d   (drstd may be NULL)
static void ln_backward(real* dox, const real* dxh, const real* drstd, const real* xh, const real* rstd, int n, int d) {
    for (int t = 0; t < n; t++) {
        const real* g = dxh + (size_t)t * d;
        const real* x = xh + (size_t)t * d;
        real m1 = 0, m2 = 0, r = rstd[t];
        for (int i = 0; i < d; i++) {
            m1 += g[i];
            m2 += g[i] * x[i];
        }
        m1 /= d;
        m2 /= d;
        for (int i = 0; i < d; i++)
            dox[(size_t)t * d + i] += r * (g[i] - m1 - x[i] * m2) - (drstd ? drstd[t] * r * r * x[i] / d : 0);
    }
}
// The memory's inner gradient passes r back through the LN: g1 = rstd (u - mean(u) - x^ mean(u x^)),
// u = r * g (done with ln_backward). Training through g1 needs its backward (the LN double-backward):
//   du = rstd (G - mean(G) - x^ mean(G x^)),  dx^ += -rstd (G mean(u x^) + u mean(G x^)),  drstd += <G, g1>/rstd
static void ln_backward_backward(real* du, real* dxh, real* drstd, const real* G, const real* u, const real* xh,
                                 const real* rstd, const real* g1, int n, int d) {
    ln_backward(du, G, NULL, xh, rstd, n, d);
    for (int t = 0; t < n; t++) {
        const real *g = G + (size_t)t * d, *uu = u + (size_t)t * d, *x = xh + (size_t)t * d;
        real r = rstd[t];
        real mux = 0, mgx = 0;
        for (int i = 0; i < d; i++) {
            mux += uu[i] * x[i];
            mgx += g[i] * x[i];
        }
        mux /= d;
        mgx /= d;
        for (int i = 0; i < d; i++) dxh[(size_t)t * d + i] -= r * (g[i] * mux + uu[i] * mgx);
        drstd[t] += dotv(g, g1 + (size_t)t * d, d) / r;
    }
}

// out = (resid ? x : 0) + (ln ? x^ g + beta : o)   -- the deep memory's output from its normalised MLP output
static void mem_out_forward(real* out, const real* x, const real* nx, const real* g, const real* bt, const MemCfg* m,
                            int n) {
    for (int t = 0; t < n; t++)
        for (int i = 0; i < m->d; i++) {
            size_t e = (size_t)t * m->d + i;
            out[e] = (m->resid ? x[e] : 0) + (m->ln ? nx[e] * g[i] + bt[i] : nx[e]);
        }
}
// from dout to dx (resid), dg, dbeta and d(nx) (the normalised output, or o without LN)
static void mem_out_backward(real* dx, real* dnx, real* dg, real* dbt, const real* dout, const real* nx, const real* g,
                             const MemCfg* m, int n) {
    for (int t = 0; t < n; t++)
        for (int i = 0; i < m->d; i++) {
            size_t e = (size_t)t * m->d + i;
            if (m->resid) dx[e] += dout[e];
            if (m->ln) {
                dg[i] += dout[e] * nx[e];
                dbt[i] += dout[e];
                dnx[e] += dout[e] * g[i];
            } else
                dnx[e] += dout[e];
        }
}

// The attentional bias (SPEC §4): from e = M(k) - v to r = dloss/dM(k). Moneta's lp (p = 3) is smoothed as
// 3 tanh(10 e)(e^2 + 1e-6); Yaad's Huber gives clamp(e, -delta, delta). With channel-wise gates the error is
// then scaled per output channel by eta (and the scalar eta of the recurrences is 1). In: c->r holds M(k).
static real psi_lp(real e) { return 3 * tanh(10 * e) * (e * e + (real)1e-6); }
static real psi_lp_d(real e) {
    real th = tanh(10 * e);
    return 3 * (10 * (1 - th * th) * (e * e + (real)1e-6) + 2 * e * th);
}
static void mem_bias_forward(const MemCfg* m, MemChunk* c, int n) {
    for (size_t j = 0; j < (size_t)n * m->d; j++) {
        real e = c->r[j] - c->v[j], ps;
        switch (m->bias) {
            case BIAS_L2: ps = e; break;
            case BIAS_DOT: ps = -c->v[j]; break;
            case BIAS_LP: ps = psi_lp(e); break;
            default: /* BIAS_HUBER */ ps = e < -c->delta[j] ? -c->delta[j] : (e > c->delta[j] ? c->delta[j] : e);
        }
        c->e[j] = e;
        c->psi[j] = ps;
        c->r[j] = m->cw ? c->etac[j] * ps : ps;
    }
}
// from dr to dmk = dloss/dM(k) (overwritten), and dv, detac, ddelta (accumulated)
static void mem_bias_backward(const MemCfg* m, MemChunk* c, int n) {
    for (size_t j = 0; j < (size_t)n * m->d; j++) {
        real dps = m->cw ? c->dr[j] * c->etac[j] : c->dr[j], de = 0, e = c->e[j];
        if (m->cw) c->detac[j] += c->dr[j] * c->psi[j];
        switch (m->bias) {
            case BIAS_L2: de = dps; break;
            case BIAS_DOT: c->dv[j] -= dps; break;
            case BIAS_LP: de = dps * psi_lp_d(e); break;
            default: /* BIAS_HUBER */
                if (fabs(e) <= c->delta[j])
                    de = dps;
                else
                    c->ddelta[j] += e > 0 ? dps : -dps;
        }
        c->dmk[j] = de;
        c->dv[j] -= de;
    }
}

// The inner gradients at the state P (SPEC §4) of the chunk's n key rows, g_i = dloss(M(k_i; P), v_i)/dP by backprop:
// linear g_i = r_i k_i^T; deep g_i = (g1_i hk_i^T, g2_i k_i^T) with zk = W2 k, hk = GELU(zk), o = W1 hk, M(k) = k +
// LN(o) g + beta, r = dloss/dM(k), g1 = dloss/do (r back through the LN), g2 = (W1^T g1) * GELU'(zk). Fills c->r
// (and c->zk, tk, hk, nk, rk, u, g1, gk, g2 for the deep memory).
static void mem_grad_forward(const MemCfg* m, MemChunk* c, int n, const real* P, const real* lng, const real* lnb) {
    int d = m->d, dm = m->dm, din = m->din;
    size_t nd = (size_t)n * d;
    if (m->depth == 1) {
        mm_nt(c->r, c->k, P, n, d, din, 1, 0);  // M(k_i) = W_s k_i
        mem_bias_forward(m, c, n);
        return;
    }
    const real *W1 = P, *W2 = P + (size_t)d * dm, *W3 = W2 + (size_t)dm * din;
    mm_nt(c->zk, c->k, W2, n, dm, din, 1, 0);  // z = W2 k
    for (size_t e = 0; e < (size_t)n * dm; e++) {
        c->tk[e] = gelu_tanh(c->zk[e]);
        c->hk[e] = gelu(c->zk[e], c->tk[e]);
    }
    if (m->gated) {  // h = GELU(W2 k) * z3, z3 = W3 k
        mm_nt(c->zk3, c->k, W3, n, dm, din, 1, 0);
        for (size_t e = 0; e < (size_t)n * dm; e++) {
            c->hk2[e] = c->hk[e];
            c->hk[e] = c->hk2[e] * c->zk3[e];
        }
    }
    mm_nt(c->nk, c->hk, W1, n, d, dm, 1, 0);  // o = W1 h
    if (m->ln) ln_forward(c->nk, c->rk, n, d);  // x^ = LN(o)
    mem_out_forward(c->r, c->kr, c->nk, lng, lnb, m, n);  // M(k) (the residual adds the raw k)
    mem_bias_forward(m, c, n);  // r = dloss/dM(k)
    if (m->ln) {  // g1 = dloss/do: r back through the LN affine and norm
        for (int t = 0; t < n; t++)
            for (int i = 0; i < d; i++) c->u[(size_t)t * d + i] = c->r[(size_t)t * d + i] * lng[i];
        memset(c->g1, 0, nd * sizeof(real));
        ln_backward(c->g1, c->u, NULL, c->nk, c->rk, n, d);
    } else
        memcpy(c->g1, c->r, nd * sizeof(real));
    mm_nn(c->gk, c->g1, W1, n, dm, d, 1, 0);  // dloss/dh = W1^T g1
    for (size_t e = 0; e < (size_t)n * dm; e++) c->g2[e] = c->gk[e] * gelu_d1(c->zk[e], c->tk[e]);  // g2 = dloss/dz
    if (m->gated)  // g2 = dloss/dz2 = gk z3 GELU'(z2), g3 = dloss/dz3 = gk GELU(z2)
        for (size_t e = 0; e < (size_t)n * dm; e++) {
            c->g2[e] *= c->zk3[e];
            c->g3[e] = c->gk[e] * c->hk2[e];
        }
}
// Its backward (second order): from the adjoints of the gradient rows (c->dg1, dhk, dg2, dk; linear: c->dr, dk) to
// dk, dv, ddelta, detac, dlng, dlnb (accumulated) and dP += the gradient of P through the g_i.
static void mem_grad_backward(const MemCfg* m, MemChunk* c, int n, const real* P, real* dP, const real* lng) {
    int d = m->d, dm = m->dm, din = m->din;
    size_t nd = (size_t)n * d, nm = (size_t)n * dm;
    if (m->depth == 1) {
        mem_bias_backward(m, c, n);  // r -> M(k_i) = W k_i
        mm_nn(c->dk, c->dmk, P, n, din, d, 1, 1);
        mm_tn(dP, c->dmk, c->k, d, din, n, 1, 1);
        return;
    }
    const real *W1 = P, *W2 = P + (size_t)d * dm, *W3 = W2 + (size_t)dm * din;
    real *dW1 = dP, *dW2 = dP + (size_t)d * dm, *dW3 = dW2 + (size_t)dm * din;
    // second order: back through the inner gradient g2 = (W1^T g1) * GELU'(zk), g1 = LN-back(r g), r = bias(M(k), v)
    for (size_t e = 0; e < nm; e++) {
        real g1d = gelu_d1(c->zk[e], c->tk[e]), z3 = m->gated ? c->zk3[e] : 1;
        c->dgk[e] = c->dg2[e] * z3 * g1d;
        c->dzk[e] += c->dg2[e] * c->gk[e] * z3 * gelu_d2(c->zk[e], c->tk[e]);
        if (m->gated) {  // g2 = gk z3 GELU'(z2), g3 = gk GELU(z2)
            c->dgk[e] += c->dg3[e] * c->hk2[e];
            c->dzk3[e] += c->dg2[e] * c->gk[e] * g1d;
            c->dhk2[e] += c->dg3[e] * c->gk[e];
        }
    }
    mm_nt(c->dg1, c->dgk, W1, n, d, dm, 1, 1);
    mm_tn(dW1, c->g1, c->dgk, d, dm, n, 1, 1);
    if (m->ln) {
        ln_backward_backward(c->du, c->dnk, c->drk, c->dg1, c->u, c->nk, c->rk, c->g1, n, d);
        for (int t = 0; t < n; t++)
            for (int i = 0; i < d; i++) {
                size_t e = (size_t)t * d + i;
                c->dr[e] += c->du[e] * lng[i];
                c->dlng[i] += c->du[e] * c->r[e];
            }
    } else
        for (size_t e = 0; e < nd; e++) c->dr[e] += c->dg1[e];
    mem_bias_backward(m, c, n);  // r -> M(k)
    mem_out_backward(c->dkr, c->dnk, c->dlng, c->dlnb, c->dmk, c->nk, lng, m, n);
    if (m->ln)
        ln_backward(c->dok, c->dnk, c->drk, c->nk, c->rk, n, d);
    else
        memcpy(c->dok, c->dnk, nd * sizeof(real));
    mm_nn(c->dhk, c->dok, W1, n, dm, d, 1, 1);  // o = W1 hk
    mm_tn(dW1, c->dok, c->hk, d, dm, n, 1, 1);
    if (m->gated)  // h = h2 z3
        for (size_t e = 0; e < nm; e++) {
            c->dhk2[e] += c->dhk[e] * c->zk3[e];
            c->dzk3[e] += c->dhk[e] * c->hk2[e];
        }
    const real* dh2 = m->gated ? c->dhk2 : c->dhk;  // dL/dGELU(z2)
    for (size_t e = 0; e < nm; e++) c->dzk[e] += dh2[e] * gelu_d1(c->zk[e], c->tk[e]);
    mm_nn(c->dk, c->dzk, W2, n, din, dm, 1, 1);  // zk = W2 k
    mm_tn(dW2, c->dzk, c->k, dm, din, n, 1, 1);
    if (m->gated) {  // z3 = W3 k
        mm_nn(c->dk, c->dzk3, W3, n, din, dm, 1, 1);
        mm_tn(dW3, c->dzk3, c->k, dm, din, n, 1, 1);
    }
}

// One chunk of n tokens (SPEC §5.1, §5.2) from state (P, S); writes y and, if Pn, the chunk-end state.
// The chunk-end state is base's (P when base is NULL): Pn = alpha_n base [+ (1 - alpha_n) P_0] + beta_n S - sum_i c_i
// g_i. The reads of
// W1 and W2 (or W) scale their write terms by cs[0], cs[1] (NULL: 1). Both are for the retentions below.
static void mem_chunk_forward(const MemCfg* m, MemChunk* c, int n, const real* P, const real* S, real* Pn, real* Sn,
                              const real* lng, const real* lnb, const real* base, const real* cs) {
    int d = m->d, dm = m->dm, din = m->din;  // din: the input width (D_phi with poly, else d)
    const real* Sx = m->momentum ? S : NULL;
    const real* B0 = base ? base : P;
    real cs0 = cs ? cs[0] : 1, cs1 = cs ? cs[1] : 1;
    mem_coef_forward(c, n, m->momentum);
    const real* crow = c->C + (size_t)(n - 1) * n;
    const real* srow = c->s + (size_t)(n - 1) * n;
    mem_grad_forward(m, c, n, P, lng, lnb);
    if (m->depth == 1) {  // linear memory M(x) = W x, g_i = r_i k_i^T
        mem_read_forward(c->y, c->xw1, c->xs1, c->xx1, c->xa2, c->q, c->k, c->r, P, Sx, c->p0, cs0, c, n, d, din);
        if (Pn) mem_update_forward(Pn, B0, c->alpha[n - 1], c->p0, Sx, c->beta[n - 1], c->r, c->k, crow, n, d, din);
        if (Pn && Sx) mem_update_forward(Sn, Sx, c->sigma[n - 1], NULL, NULL, 0, c->r, c->k, srow, n, d, din);
        return;
    }
    // deep memory: W1 (d, dm), W2 (dm, din); g_i = (g1_i hk_i^T, g2_i k_i^T); gated also W3 (dm, din), g3_i k_i^T
    size_t o2 = (size_t)d * dm, o3 = o2 + (size_t)dm * din;  // W2's and W3's offsets in the state
    const real *W1 = P, *W2 = P + o2, *W3 = P + o3, *S1 = Sx, *S2 = Sx ? Sx + o2 : NULL, *S3 = Sx ? Sx + o3 : NULL;
    const real *A1 = c->p0, *A2 = c->p0 ? c->p0 + o2 : NULL, *A3 = c->p0 ? c->p0 + o3 : NULL;  // the anchor (or NULL)
    // reads, after the write: y_t = q_t + LN(W1_t GELU(W2_t q_t))   (gated: LN(W1_t (GELU(W2_t q_t) * W3_t q_t)))
    mem_read_forward(c->zq, c->xw1, c->xs1, c->xx1, c->xa1, c->q, c->k, c->g2, W2, S2, A2, cs1, c, n, dm, din);
    for (size_t e = 0; e < (size_t)n * dm; e++) {
        c->tq[e] = gelu_tanh(c->zq[e]);
        c->hq[e] = gelu(c->zq[e], c->tq[e]);
    }
    if (m->gated) {  // zq3 = W3_t q_t (W2's q.k products, xx1), hq = GELU(zq) * zq3 (GELU(zq) kept in hq2)
        mem_read_forward(c->zq3, c->xw3, c->xs3, c->xx1, c->xa3, c->q, NULL, c->g3, W3, S3, A3, cs1, c, n, dm, din);
        for (size_t e = 0; e < (size_t)n * dm; e++) {
            c->hq2[e] = c->hq[e];
            c->hq[e] = c->hq2[e] * c->zq3[e];
        }
    }
    mem_read_forward(c->nq, c->xw2, c->xs2, c->xx2, c->xa2, c->hq, c->hk, c->g1, W1, S1, A1, cs0, c, n, d, dm);
    if (m->ln) ln_forward(c->nq, c->rq, n, d);
    mem_out_forward(c->y, c->qr, c->nq, lng, lnb, m, n);
    if (Pn) {
        mem_update_forward(Pn, B0, c->alpha[n - 1], A1, S1, c->beta[n - 1], c->g1, c->hk, crow, n, d, dm);
        mem_update_forward(Pn + o2, B0 + o2, c->alpha[n - 1], A2, S2, c->beta[n - 1], c->g2, c->k, crow, n, dm, din);
        if (m->gated)
            mem_update_forward(Pn + o3, B0 + o3, c->alpha[n - 1], A3, S3, c->beta[n - 1], c->g3, c->k, crow, n, dm,
                               din);
    }
    if (Pn && Sx) {
        mem_update_forward(Sn, S1, c->sigma[n - 1], NULL, NULL, 0, c->g1, c->hk, srow, n, d, dm);
        mem_update_forward(Sn + o2, S2, c->sigma[n - 1], NULL, NULL, 0, c->g2, c->k, srow, n, dm, din);
        if (m->gated) mem_update_forward(Sn + o3, S3, c->sigma[n - 1], NULL, NULL, 0, c->g3, c->k, srow, n, dm, din);
    }
}

// Backward of one chunk. Needs the forward's intermediates in c (run mem_chunk_forward first).
// In: dy (n, d); dPn, dSn, the gradients of the chunk-end state (NULL for the last chunk).
// Out: c->dq, dk, dv, da, deta, dtheta, detac, ddelta, dcs (this chunk), c->dlng, dlnb (accumulated);
// dPs, dSs, dBase: the gradients of P, S and base (overwritten; dBase may be dPs when base is P).
static void mem_chunk_backward(const MemCfg* m, MemChunk* c, int n, const real* dy, const real* P, const real* S,
                               const real* dPn, const real* dSn, real* dPs, real* dSs, const real* lng,
                               const real* base, real* dBase, const real* cs) {
    int d = m->d, dm = m->dm, din = m->din;
    size_t nd = (size_t)n * d, nm = (size_t)n * dm;
    const real* Sx = m->momentum ? S : NULL;
    const real* B0 = base ? base : P;
    real cs0 = cs ? cs[0] : 1, cs1 = cs ? cs[1] : 1;
    const real* crow = c->C + (size_t)(n - 1) * n;
    const real* srow = c->s + (size_t)(n - 1) * n;
    real* dcrow = c->dC + (size_t)(n - 1) * n;
    memset(c->grad0, 0, c->ngrad * sizeof(real));
    memset(dPs, 0, m->nP * sizeof(real));
    memset(dBase, 0, m->nP * sizeof(real));
    if (Sx) memset(dSs, 0, m->nP * sizeof(real));
    real* dSx = Sx ? dSs : NULL;
    if (m->depth == 1) {
        if (dPn)
            mem_update_backward(dBase, dSx, c->dp0, &c->dalpha[n - 1], &c->dbeta[n - 1], c->dr, c->dk, dcrow, dPn, B0,
                                c->alpha[n - 1], c->p0, Sx, c->beta[n - 1], c->r, c->k, crow, n, d, din);
        if (dPn && Sx)
            mem_update_backward(dSs, NULL, NULL, c->dsig, NULL, c->dr, c->dk, c->ds, dSn, Sx, c->sigma[n - 1], NULL,
                                NULL, 0, c->r, c->k, srow, n, d, din);
        mem_read_backward(c->dq, c->dk, c->dr, dPs, dSx, c->dp0, &c->dcs[0], c, dy, c->q, c->k, c->r, P, Sx, c->p0, cs0,
                          c->xw1, c->xs1, c->xx1, c->xa2, n, d, din);
        mem_grad_backward(m, c, n, P, dPs, lng);
        mem_coef_backward(c, n, m->momentum);
        return;
    }
    size_t o2 = (size_t)d * dm, o3 = o2 + (size_t)dm * din;  // W2's and W3's offsets (W3: gated)
    const real *W1 = P, *W2 = P + o2, *W3 = P + o3, *S1 = Sx, *S2 = Sx ? Sx + o2 : NULL, *S3 = Sx ? Sx + o3 : NULL;
    real *dW1 = dPs, *dW2 = dPs + o2, *dW3 = dPs + o3, *dS1 = dSx, *dS2 = dSx ? dSx + o2 : NULL,
         *dS3 = dSx ? dSx + o3 : NULL;
    const real *A1 = c->p0, *A2 = c->p0 ? c->p0 + o2 : NULL, *A3 = c->p0 ? c->p0 + o3 : NULL;  // the anchor (or NULL)
    real *dA1 = c->dp0, *dA2 = c->dp0 + o2, *dA3 = c->dp0 + o3;  // and its gradient
    // chunk-end state
    if (dPn) {
        mem_update_backward(dBase, dS1, dA1, &c->dalpha[n - 1], &c->dbeta[n - 1], c->dg1, c->dhk, dcrow, dPn, B0,
                            c->alpha[n - 1], A1, S1, c->beta[n - 1], c->g1, c->hk, crow, n, d, dm);
        mem_update_backward(dBase + o2, dS2, dA2, &c->dalpha[n - 1], &c->dbeta[n - 1], c->dg2, c->dk, dcrow, dPn + o2,
                            B0 + o2, c->alpha[n - 1], A2, S2, c->beta[n - 1], c->g2, c->k, crow, n, dm, din);
        if (m->gated)
            mem_update_backward(dBase + o3, dS3, dA3, &c->dalpha[n - 1], &c->dbeta[n - 1], c->dg3, c->dk, dcrow,
                                dPn + o3, B0 + o3, c->alpha[n - 1], A3, S3, c->beta[n - 1], c->g3, c->k, crow, n, dm,
                                din);
    }
    if (dPn && Sx) {
        mem_update_backward(dS1, NULL, NULL, c->dsig, NULL, c->dg1, c->dhk, c->ds, dSn, S1, c->sigma[n - 1], NULL, NULL,
                            0, c->g1, c->hk, srow, n, d, dm);
        mem_update_backward(dS2, NULL, NULL, c->dsig, NULL, c->dg2, c->dk, c->ds, dSn + o2, S2, c->sigma[n - 1], NULL,
                            NULL, 0, c->g2, c->k, srow, n, dm, din);
        if (m->gated)
            mem_update_backward(dS3, NULL, NULL, c->dsig, NULL, c->dg3, c->dk, c->ds, dSn + o3, S3, c->sigma[n - 1],
                                NULL, NULL, 0, c->g3, c->k, srow, n, dm, din);
    }
    // reads: y = q + LN(o_q) g + beta, o_q = read(W1, hq), hq = GELU(zq) (gated: * zq3, zq3 = read(W3, q)), zq = read(W2, q)
    mem_out_backward(c->dqr, c->doq, c->dlng, c->dlnb, dy, c->nq, lng, m, n);  // (dqr is dq without poly)
    if (m->ln) {
        memcpy(c->dnk, c->doq, nd * sizeof(real));
        memset(c->doq, 0, nd * sizeof(real));
        ln_backward(c->doq, c->dnk, NULL, c->nq, c->rq, n, d);
        memset(c->dnk, 0, nd * sizeof(real));
    }
    mem_read_backward(c->dhq, c->dhk, c->dg1, dW1, dS1, dA1, &c->dcs[0], c, c->doq, c->hq, c->hk, c->g1, W1, S1, A1,
                      cs0, c->xw2, c->xs2, c->xx2, c->xa2, n, d, dm);
    if (m->gated) {  // hq = hq2 zq3: dzq3 = dhq hq2, and dL/dGELU(zq) = dhq zq3 (in place)
        for (size_t e = 0; e < nm; e++) {
            c->dzq3[e] = c->dhq[e] * c->hq2[e];
            c->dhq[e] *= c->zq3[e];
        }
        mem_read_backward(c->dq, c->dk, c->dg3, dW3, dS3, dA3, &c->dcs[1], c, c->dzq3, c->q, c->k, c->g3, W3, S3, A3,
                          cs1, c->xw3, c->xs3, c->xx1, c->xa3, n, dm, din);
    }
    for (size_t e = 0; e < nm; e++) c->dzq[e] = c->dhq[e] * gelu_d1(c->zq[e], c->tq[e]);
    mem_read_backward(c->dq, c->dk, c->dg2, dW2, dS2, dA2, &c->dcs[1], c, c->dzq, c->q, c->k, c->g2, W2, S2, A2, cs1,
                      c->xw1, c->xs1, c->xx1, c->xa1, n, dm, din);
    mem_grad_backward(m, c, n, P, dPs, lng);
    mem_coef_backward(c, n, m->momentum);
}

// ---- retentions (SPEC §5.3, §5.4) around the chunk. The carried state is P itself (none), A (lq) or Z (kl).

// the state's matrices: deep W1 (d, dm) then W2 (dm, din) (then W3 (dm, din), gated); linear W (d, din)
static int mem_matrices(const MemCfg* m, size_t* off, int* rows, int* cols) {
    off[0] = 0;
    rows[0] = m->d;
    cols[0] = m->depth == 2 ? m->dm : m->din;
    if (m->depth == 1) return 1;
    off[1] = (size_t)m->d * m->dm;
    rows[1] = m->dm;
    cols[1] = m->din;
    if (!m->gated) return 2;
    off[2] = off[1] + (size_t)m->dm * m->din;  // W3
    rows[2] = m->dm;
    cols[2] = m->din;
    return 3;
}
// Moneta: s = (|A|_4 + 1e-6)^2 per matrix; P_s = A / s; the reads' write terms scale by 1/s
static void lq_scales(const MemCfg* m, const real* A, real* P, real* cs) {
    size_t off[3];
    int rows[3], cols[3], nm = mem_matrices(m, off, rows, cols);
    cs[0] = cs[1] = 1;
    for (int k = 0; k < nm; k++) {
        size_t n = (size_t)rows[k] * cols[k];
        double q4 = 0;
        for (size_t i = 0; i < n; i++) {
            double x = A[off[k] + i];
            q4 += x * x * x * x;
        }
        real s = (real)((pow(q4, 0.25) + 1e-6) * (pow(q4, 0.25) + 1e-6));
        for (size_t i = 0; i < n; i++) P[off[k] + i] = A[off[k] + i] / s;
        cs[k] = 1 / s;
    }
}
// dA += dP / s + ds ds/dA with ds = -(<dP, A> + dcs) / s^2 and ds/dA = 2 (|A|_4 + 1e-6) A^3 / |A|_4^3
static void lq_scales_backward(const MemCfg* m, const real* A, const real* dP, const real* dcs, real* dA) {
    size_t off[3];
    int rows[3], cols[3], nm = mem_matrices(m, off, rows, cols);
    for (int k = 0; k < nm; k++) {
        size_t n = (size_t)rows[k] * cols[k];
        double q4 = 0, pa = 0;
        for (size_t i = 0; i < n; i++) {
            double x = A[off[k] + i];
            q4 += x * x * x * x;
            pa += (double)dP[off[k] + i] * x;
        }
        double nrm = pow(q4, 0.25), s = (nrm + 1e-6) * (nrm + 1e-6), ds = -(pa + dcs[k]) / (s * s);
        double f = nrm > 0 ? ds * 2 * (nrm + 1e-6) / (nrm * nrm * nrm) : 0;
        for (size_t i = 0; i < n; i++) {
            double x = A[off[k] + i];
            dA[off[k] + i] += (real)(dP[off[k] + i] / s + f * x * x * x);
        }
    }
}
// Memora: W = softmax over each row of each matrix; backward dZ = W (dW - <dW, W>) per row (accumulated)
static void softmax_rows(const MemCfg* m, const real* Z, real* W) {
    size_t off[3];
    int rows[3], cols[3], nm = mem_matrices(m, off, rows, cols);
    for (int k = 0; k < nm; k++)
        for (int r = 0; r < rows[k]; r++) {
            const real* z = Z + off[k] + (size_t)r * cols[k];
            real* w = W + off[k] + (size_t)r * cols[k];
            real mx = z[0], sum = 0;
            for (int j = 1; j < cols[k]; j++)
                if (z[j] > mx) mx = z[j];
            for (int j = 0; j < cols[k]; j++) {
                w[j] = exp(z[j] - mx);
                sum += w[j];
            }
            for (int j = 0; j < cols[k]; j++) w[j] /= sum;
        }
}
static void softmax_rows_backward(const MemCfg* m, const real* W, const real* dW, real* dZ) {
    size_t off[3];
    int rows[3], cols[3], nm = mem_matrices(m, off, rows, cols);
    for (int k = 0; k < nm; k++)
        for (int r = 0; r < rows[k]; r++) {
            size_t o = off[k] + (size_t)r * cols[k];
            real p = dotv(dW + o, W + o, cols[k]);
            for (int j = 0; j < cols[k]; j++) dZ[o + j] += W[o + j] * (dW[o + j] - p);
        }
}
// Memora's chunk: token 0 is the lag token, exact in logit space: Z_1 = a_0 Z_s - eta_0 g_0(W_s), W_1 = softmax(Z_1).
// The rest is the linear chunk from W_1 whose carry is applied to Z_1; token 0 joins it with a = 1, eta = 0
// (no write), so that it is read at W_1 like the others are read at W_t.
// lag = 1: keep token 0's a, eta (and eta per channel) and make its step nothing; lag = 0: put them back
static void kl_gates(const MemCfg* m, MemChunk* c, int lag, real* keep) {
    if (lag) {
        keep[0] = c->a[0];
        keep[1] = c->eta[0];
        c->a[0] = 1;
        c->eta[0] = 0;
        if (m->cw) {
            memcpy(keep + 2, c->etac, m->d * sizeof(real));
            memset(c->etac, 0, m->d * sizeof(real));
        }
    } else {
        c->a[0] = keep[0];
        c->eta[0] = keep[1];
        if (m->cw) memcpy(c->etac, keep + 2, m->d * sizeof(real));
    }
}

// ---- muon's Newton-Schulz (SPEC §5.7), per memory matrix.
// NS5(S): X = S / (|S|_F + 1e-7), transposed so that rows <= cols (m x n), then 5 times
//     A = X X^T ;  X = 3.4445 X + (-4.7750 A + 2.0315 A A) X
// and transposed back; NS5(0) = 0 with zero derivative. The forward keeps X_0..X_5 (6 m n) and A_0..A_4 (5 m m)
// in sv for the backward; tmp: 2 m m + m n scratch.
static const real NS5_A = 3.4445, NS5_B = -4.7750, NS5_C = 2.0315;
static size_t ns5_saved(int r, int cc) {
    size_t m = r < cc ? r : cc, n = r < cc ? cc : r;
    return 6 * m * n + 5 * m * m + 1;
}
static void ns5_forward(real* out, real* sv, real* tmp, const real* S, int r, int cc) {
    int tr = r > cc, m = tr ? cc : r, n = tr ? r : cc;
    size_t mn = (size_t)m * n, mm = (size_t)m * m;
    real *X = sv, *A = sv + 6 * mn, *nrm = A + 5 * mm, *B = tmp;
    double s2 = 0;
    for (size_t e = 0; e < mn; e++) s2 += (double)S[e] * S[e];
    *nrm = (real)sqrt(s2);
    if (*nrm == 0) {
        memset(out, 0, mn * sizeof(real));
        return;
    }
    real f = 1 / (*nrm + (real)1e-7);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < cc; j++) X[tr ? (size_t)j * n + i : (size_t)i * n + j] = f * S[(size_t)i * cc + j];
    for (int k = 0; k < 5; k++) {
        real *Xk = X + k * mn, *Xn = Xk + mn, *Ak = A + k * mm;
        mm_nt_sym(Ak, Xk, m, n);  // A = X X^T
        mm_nn(B, Ak, Ak, m, m, m, NS5_C, 0);  // B = b A + c A A
        for (size_t e = 0; e < mm; e++) B[e] += NS5_B * Ak[e];
        mm_nn(Xn, B, Xk, m, n, m, 1, 0);  // X' = a X + B X
        for (size_t e = 0; e < mn; e++) Xn[e] += NS5_A * Xk[e];
    }
    const real* X5 = X + 5 * mn;
    for (int i = 0; i < r; i++)
        for (int j = 0; j < cc; j++) out[(size_t)i * cc + j] = X5[tr ? (size_t)j * n + i : (size_t)i * n + j];
}
// dS += dNS5/dS^T dout, from the forward's sv (tmp: 3 m m + 2 m n). Per iteration, with B = b A + c A^2 (symmetric):
//   dX = a G + B G + (dA + dA^T) X,  dA = b dB + c (dB A + A dB),  dB = G X^T;  then through X_0 = S / (|S| + eps):
//   dS = G_0 / (|S| + eps) - S <S, G_0> / ((|S| + eps)^2 |S|)
static void ns5_backward(real* dS, const real* dout, const real* sv, real* tmp, const real* S, int r, int cc) {
    int tr = r > cc, m = tr ? cc : r, n = tr ? r : cc;
    size_t mn = (size_t)m * n, mm = (size_t)m * m;
    const real *X = sv, *A = sv + 6 * mn;
    real nrm = A[5 * mm];
    if (nrm == 0) return;
    real *G = tmp, *Gn = G + mn, *B = Gn + mn, *dB = B + mm, *dA = dB + mm;
    for (int i = 0; i < r; i++)
        for (int j = 0; j < cc; j++) G[tr ? (size_t)j * n + i : (size_t)i * n + j] = dout[(size_t)i * cc + j];
    for (int k = 4; k >= 0; k--) {
        const real *Xk = X + k * mn, *Ak = A + k * mm;
        mm_nn(B, Ak, Ak, m, m, m, NS5_C, 0);
        for (size_t e = 0; e < mm; e++) B[e] += NS5_B * Ak[e];
        mm_nn(Gn, B, G, m, n, m, 1, 0);  // B^T G = B G
        for (size_t e = 0; e < mn; e++) Gn[e] += NS5_A * G[e];
        mm_nt(dB, G, Xk, m, m, n, 1, 0);  // dB = G X^T
        mm_nn(dA, dB, Ak, m, m, m, NS5_C, 0);
        mm_nn(dA, Ak, dB, m, m, m, NS5_C, 1);
        for (size_t e = 0; e < mm; e++) dA[e] += NS5_B * dB[e];
        for (int i = 0; i < m; i++)
            for (int j = 0; j < m; j++) dB[(size_t)i * m + j] = dA[(size_t)i * m + j] + dA[(size_t)j * m + i];
        mm_nn(Gn, dB, Xk, m, n, m, 1, 1);  // + (dA + dA^T) X
        memcpy(G, Gn, mn * sizeof(real));
    }
    real f = 1 / (nrm + (real)1e-7);
    double sg = 0;
    for (int i = 0; i < r; i++)
        for (int j = 0; j < cc; j++)
            sg += (double)S[(size_t)i * cc + j] * G[tr ? (size_t)j * n + i : (size_t)i * n + j];
    real w = (real)(sg * f * f / nrm);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < cc; j++)
            dS[(size_t)i * cc + j] += f * G[tr ? (size_t)j * n + i : (size_t)i * n + j] - w * S[(size_t)i * cc + j];
}

// ---- muon (SPEC §5.7), token-level. Per own row j of the chunk (omega's halo rows take no step), with every g_i
// taken at the chunk-start state P_s (mem_grad_forward) and S carried across chunks like P (S = 0 per sequence):
//     G_j = sum_{o<c} gamma_j[o] g_{j-o}       S_j = theta_j S_{j-1} + G_j       X_j = NS5(S_j) per memory matrix
//     P_j = a_j P_{j-1} [+ (1 - a_j) P_0] - eta_j X_j                               y_j = M(q_j; P_j)
// NS5 of a full matrix is not rank one, so there is no dual form: the chunk keeps P_j, S_j, X_j of every own row
// (mP, mS, mX: (b, nP) each) and NS5's iterates (msv), and its backward steps back through them token by token.
// The scratch of a chunk of b rows (muon_carve: NULL base sizes it; 0 without muon)
static size_t muon_carve(MemChunk* c, real* base, int b, const MemCfg* m) {
    c->mP = c->mS = c->mX = c->msv = c->mtmp = NULL;
    c->nsv = 0;
    if (!m->muon) return 0;
    size_t off[3], tmp = 0, nP = m->nP;
    int rows[3], cols[3], nm = mem_matrices(m, off, rows, cols);
    for (int k = 0; k < nm; k++) {
        size_t r = rows[k] < cols[k] ? rows[k] : cols[k], q = rows[k] < cols[k] ? cols[k] : rows[k];
        c->nsv += ns5_saved(rows[k], cols[k]);
        if (3 * r * r + 2 * r * q > tmp) tmp = 3 * r * r + 2 * r * q;  // ns5_backward's scratch (the forward's fits)
    }
    size_t bP = carve_al((size_t)b * nP), bsv = carve_al((size_t)b * c->nsv);  // (16-byte aligned: carve_al)
    if (base) {
        c->mP = base;
        c->mS = c->mP + bP;
        c->mX = c->mS + bP;
        c->msv = c->mX + bP;
        c->mtmp = c->msv + bsv;
    }
    return 3 * bP + bsv + carve_al(tmp);
}
// G += w g_i: linear g_i = r_i k_i^T (d, din); deep (g1_i hk_i^T (d, dm), g2_i k_i^T (dm, din))
static void outer_add(real* G, real w, const real* x, const real* y, int m, int p) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < p; j++) G[(size_t)i * p + j] += w * x[i] * y[j];
}
static void muon_add_grad(const MemCfg* m, const MemChunk* c, real* G, int i, real w) {
    int d = m->d, dm = m->dm, din = m->din;
    if (m->depth == 1) {
        outer_add(G, w, c->r + (size_t)i * d, c->k + (size_t)i * din, d, din);
        return;
    }
    outer_add(G, w, c->g1 + (size_t)i * d, c->hk + (size_t)i * dm, d, dm);
    outer_add(G + (size_t)d * dm, w, c->g2 + (size_t)i * dm, c->k + (size_t)i * din, dm, din);
    if (m->gated)
        outer_add(G + (size_t)d * dm + (size_t)dm * din, w, c->g3 + (size_t)i * dm, c->k + (size_t)i * din, dm, din);
}
// the backward of G += w x y^T for the adjoint dG: dx += w dG y, dy += w dG^T x; returns dw = x^T dG y
static real outer_add_backward(real* dx, real* dy, const real* dG, real w, const real* x, const real* y, int m, int p) {
    real dw = 0;
    for (int i = 0; i < m; i++) {
        const real* g = dG + (size_t)i * p;
        real gy = dotv(g, y, p);
        dx[i] += w * gy;
        dw += x[i] * gy;
        for (int j = 0; j < p; j++) dy[j] += w * x[i] * g[j];
    }
    return dw;
}
static real muon_add_grad_backward(const MemCfg* m, MemChunk* c, const real* dG, int i, real w) {
    int d = m->d, dm = m->dm, din = m->din;
    size_t id = (size_t)i * d, im = (size_t)i * dm, ik = (size_t)i * din;
    if (m->depth == 1) return outer_add_backward(c->dr + id, c->dk + ik, dG, w, c->r + id, c->k + ik, d, din);
    real dw = outer_add_backward(c->dg1 + id, c->dhk + im, dG, w, c->g1 + id, c->hk + im, d, dm) +
              outer_add_backward(c->dg2 + im, c->dk + ik, dG + (size_t)d * dm, w, c->g2 + im, c->k + ik, dm, din);
    if (m->gated)
        dw += outer_add_backward(c->dg3 + im, c->dk + ik, dG + (size_t)d * dm + (size_t)dm * din, w, c->g3 + im,
                                 c->k + ik, dm, din);
    return dw;
}
// the read of row j through the full state Pj: linear y = W q; deep y = q + LN(W1 GELU(W2 q)) g + beta
static void muon_read_forward(const MemCfg* m, MemChunk* c, int j, const real* Pj, const real* lng, const real* lnb) {
    int d = m->d, dm = m->dm, din = m->din;
    if (m->depth == 1) {
        mm_nt(c->y + (size_t)j * d, c->q + (size_t)j * din, Pj, 1, d, din, 1, 0);
        return;
    }
    real *zq = c->zq + (size_t)j * dm, *tq = c->tq + (size_t)j * dm, *hq = c->hq + (size_t)j * dm;
    mm_nt(zq, c->q + (size_t)j * din, Pj + (size_t)d * dm, 1, dm, din, 1, 0);  // z = W2 q
    for (int e = 0; e < dm; e++) {
        tq[e] = gelu_tanh(zq[e]);
        hq[e] = gelu(zq[e], tq[e]);
    }
    if (m->gated) {  // h = GELU(W2 q) * z3, z3 = W3 q
        real *zq3 = c->zq3 + (size_t)j * dm, *hq2 = c->hq2 + (size_t)j * dm;
        mm_nt(zq3, c->q + (size_t)j * din, Pj + (size_t)d * dm + (size_t)dm * din, 1, dm, din, 1, 0);
        for (int e = 0; e < dm; e++) {
            hq2[e] = hq[e];
            hq[e] = hq2[e] * zq3[e];
        }
    }
    mm_nt(c->nq + (size_t)j * d, hq, Pj, 1, d, dm, 1, 0);  // o = W1 h
    if (m->ln) ln_forward(c->nq + (size_t)j * d, c->rq + j, 1, d);
    mem_out_forward(c->y + (size_t)j * d, c->qr + (size_t)j * d, c->nq + (size_t)j * d, lng, lnb, m, 1);
}
// its backward from dy_j: dq_j (the features; the residual's raw row into dqr), dlng, dlnb and dPj += dL/dPj
static void muon_read_backward(const MemCfg* m, MemChunk* c, int j, const real* dyj, const real* Pj, real* dPj,
                               const real* lng) {
    int d = m->d, dm = m->dm, din = m->din;
    const real* q = c->q + (size_t)j * din;
    real* dq = c->dq + (size_t)j * din;
    if (m->depth == 1) {
        mm_nn(dq, dyj, Pj, 1, din, d, 1, 1);  // dq += W^T dy
        outer_add(dPj, 1, dyj, q, d, din);  // dW += dy q^T
        return;
    }
    real *doq = c->doq + (size_t)j * d, *dnq = c->dnk + (size_t)j * d, *dhq = c->dhq + (size_t)j * dm;
    real* dzq = c->dzq + (size_t)j * dm;
    mem_out_backward(c->dqr + (size_t)j * d, doq, c->dlng, c->dlnb, dyj, c->nq + (size_t)j * d, lng, m, 1);
    if (m->ln) {  // through the LN (dnk's row is a temporary: mem_grad_backward needs it zero)
        memcpy(dnq, doq, d * sizeof(real));
        memset(doq, 0, d * sizeof(real));
        ln_backward(doq, dnq, NULL, c->nq + (size_t)j * d, c->rq + j, 1, d);
        memset(dnq, 0, d * sizeof(real));
    }
    mm_nn(dhq, doq, Pj, 1, dm, d, 1, 0);  // o = W1 h: dh = W1^T do, dW1 += do h^T
    outer_add(dPj, 1, doq, c->hq + (size_t)j * dm, d, dm);
    if (m->gated) {  // h = h2 z3: dz3 = dh h2, dh2 = dh z3 (kept in dhq), z3 = W3 q: dq += W3^T dz3, dW3 += dz3 q^T
        real* dzq3 = c->dzq3 + (size_t)j * dm;
        const real* W3 = Pj + (size_t)d * dm + (size_t)dm * din;
        for (int e = 0; e < dm; e++) {
            dzq3[e] = dhq[e] * c->hq2[(size_t)j * dm + e];
            dhq[e] *= c->zq3[(size_t)j * dm + e];
        }
        mm_nn(dq, dzq3, W3, 1, din, dm, 1, 1);
        outer_add(dPj + (size_t)d * dm + (size_t)dm * din, 1, dzq3, q, dm, din);
    }
    for (int e = 0; e < dm; e++) dzq[e] = dhq[e] * gelu_d1(c->zq[(size_t)j * dm + e], c->tq[(size_t)j * dm + e]);
    mm_nn(dq, dzq, Pj + (size_t)d * dm, 1, din, dm, 1, 1);  // z = W2 q: dq += W2^T dz, dW2 += dz q^T
    outer_add(dPj + (size_t)d * dm, 1, dzq, q, dm, din);
}
// One chunk of n rows (nh = c->nh halo rows first) from (P, S) = (P_s, S_s); y of the own rows (halo rows 0); the
// chunk-end (P, S) into Pn, Sn if Pn.
static void muon_chunk_forward(const MemCfg* m, MemChunk* c, int n, const real* P, const real* S, real* Pn, real* Sn,
                               const real* lng, const real* lnb) {
    int nh = c->nh, w = c->wc, d = m->d;
    size_t nP = m->nP, off[3], svo[3] = {0, 0, 0};
    int rows[3], cols[3], nm = mem_matrices(m, off, rows, cols);
    for (int k = 1; k < nm; k++) svo[k] = svo[k - 1] + ns5_saved(rows[k - 1], cols[k - 1]);
    mem_grad_forward(m, c, n, P, lng, lnb);  // every g_i at P_s, the halo rows' too
    memset(c->y, 0, (size_t)nh * d * sizeof(real));
    for (int j = nh; j < n; j++) {
        size_t t = j - nh;
        real *Pj = c->mP + t * nP, *Sj = c->mS + t * nP, *Xj = c->mX + t * nP;
        const real *Pp = t ? Pj - nP : P, *Sp = t ? Sj - nP : S;
        for (size_t e = 0; e < nP; e++) Sj[e] = c->theta[j] * Sp[e];  // S_j = theta_j S_{j-1} + G_j
        for (int o = 0; o < w && o <= j; o++) muon_add_grad(m, c, Sj, j - o, w > 1 ? c->gam[(size_t)j * w + o] : 1);
        for (int k = 0; k < nm; k++)  // X_j = NS5(S_j), per matrix
            ns5_forward(Xj + off[k], c->msv + t * c->nsv + svo[k], c->mtmp, Sj + off[k], rows[k], cols[k]);
        for (size_t e = 0; e < nP; e++)  // P_j = a_j P_{j-1} [+ (1 - a_j) P_0] - eta_j X_j
            Pj[e] = c->a[j] * Pp[e] + (c->p0 ? (1 - c->a[j]) * c->p0[e] : 0) - c->eta[j] * Xj[e];
        muon_read_forward(m, c, j, Pj, lng, lnb);
    }
    if (Pn) {
        memcpy(Pn, c->mP + (size_t)(n - 1 - nh) * nP, nP * sizeof(real));
        memcpy(Sn, c->mS + (size_t)(n - 1 - nh) * nP, nP * sizeof(real));
    }
}
// Its backward (run muon_chunk_forward first): from dy and dPn, dSn (NULL for the last chunk) to the chunk's input
// gradients (c->dq, dk, dv, da, deta, dtheta, dgam, ...), c->dlng, dlnb, c->dp0 (accumulated) and dPs, dSs
// (overwritten), token by token in reverse:
//     dP_j += read_j^T dy_j;  da_j = <dP_j, P_{j-1} [- P_0]>;  deta_j = -<dP_j, X_j>;  dS_j += NS5'(S_j)^T (-eta_j dP_j)
//     dtheta_j = <dS_j, S_{j-1}>;  dgamma_j[o] = <dS_j, g_{j-o}>;  dg_{j-o} += gamma_j[o] dS_j
//     dP_{j-1} = a_j dP_j;  dS_{j-1} = theta_j dS_j
// then the g_i's adjoints through the inner gradients at P_s (mem_grad_backward) into dPs.
static void muon_chunk_backward(const MemCfg* m, MemChunk* c, int n, const real* dy, const real* P, const real* S,
                                const real* dPn, const real* dSn, real* dPs, real* dSs, const real* lng) {
    int nh = c->nh, w = c->wc, d = m->d;
    size_t nP = m->nP, off[3], svo[3] = {0, 0, 0};
    int rows[3], cols[3], nm = mem_matrices(m, off, rows, cols);
    for (int k = 1; k < nm; k++) svo[k] = svo[k - 1] + ns5_saved(rows[k - 1], cols[k - 1]);
    real *gP = dPs, *gS = dSs, *gX = c->Wc;  // dL/dP_j, dL/dS_j as j goes back; dL/dX_j
    memset(c->grad0, 0, c->ngrad * sizeof(real));
    memset(c->dgam, 0, (size_t)n * w * sizeof(real));
    if (dPn) {
        memcpy(gP, dPn, nP * sizeof(real));
        memcpy(gS, dSn, nP * sizeof(real));
    } else {
        memset(gP, 0, nP * sizeof(real));
        memset(gS, 0, nP * sizeof(real));
    }
    for (int j = n - 1; j >= nh; j--) {
        size_t t = j - nh;
        const real *Pj = c->mP + t * nP, *Sj = c->mS + t * nP, *Xj = c->mX + t * nP;
        const real *Pp = t ? Pj - nP : P, *Sp = t ? Sj - nP : S;
        muon_read_backward(m, c, j, dy + (size_t)j * d, Pj, gP, lng);
        real da = dotv(gP, Pp, nP), deta = -dotv(gP, Xj, nP);
        if (c->p0) {
            da -= dotv(gP, c->p0, nP);
            for (size_t e = 0; e < nP; e++) c->dp0[e] += (1 - c->a[j]) * gP[e];
        }
        c->da[j] += da;
        c->deta[j] += deta;
        for (size_t e = 0; e < nP; e++) gX[e] = -c->eta[j] * gP[e];
        for (int k = 0; k < nm; k++)
            ns5_backward(gS + off[k], gX + off[k], c->msv + t * c->nsv + svo[k], c->mtmp, Sj + off[k], rows[k],
                         cols[k]);
        c->dtheta[j] += dotv(gS, Sp, nP);
        for (int o = 0; o < w && o <= j; o++) {
            real dw = muon_add_grad_backward(m, c, gS, j - o, w > 1 ? c->gam[(size_t)j * w + o] : 1);
            if (w > 1) c->dgam[(size_t)j * w + o] += dw;
        }
        for (size_t e = 0; e < nP; e++) {
            gP[e] *= c->a[j];
            gS[e] *= c->theta[j];
        }
    }
    mem_grad_backward(m, c, n, P, dPs, lng);
}

// ---- muon, chunk-level (SPEC §5.7's approximation, preset atlas_chunk). The reads are the omega+gd form from P_s
// (mem_chunk_forward with gd: P_j = a_j P_{j-1} [+ (1 - a_j) P_0] - eta_j G_j), the momentum is scanned per token,
// S_j = theta_j S_{j-1} + G_j, and only the carry takes a Newton-Schulz step:
//     P_end = A P_s [+ (1 - A) P_0] - eta_last NS5(S_end),  A = prod_j a_j  (own rows j; halo rows take no step)
// Unrolled over the chunk's gradients: S_end = Theta S_s + sum_i w_i g_i, Theta = prod_j theta_j,
//     w_i = sum_j Pth_j gamma_j[j - i],  Pth_j = prod_{l > j} theta_l.
// With b = 1 the reads see P_{t-1} - eta_t g_t, not the token-level rule.
static void muonc_coefs(const MemChunk* c, int n, real* Pth, real* w) {
    int nh = c->nh, wc = c->wc;
    for (int j = n - 1; j >= nh; j--) Pth[j] = j == n - 1 ? 1 : c->theta[j + 1] * Pth[j + 1];
    for (int i = 0; i < n; i++) {
        w[i] = 0;
        for (int j = i > nh ? i : nh; j < n && j < i + wc; j++)
            w[i] += Pth[j] * (wc > 1 ? c->gam[(size_t)j * wc + j - i] : 1);
    }
}
// the carry: S_end into Sn, X = NS5(S_end) into c->mX (NS5's iterates in c->msv), P_end into Pn
static void muonc_carry_forward(const MemCfg* m, MemChunk* c, int n, const real* P, const real* S, real* Pn, real* Sn) {
    size_t nP = m->nP, off[3], svo[3] = {0, 0, 0};
    int rows[3], cols[3], nm = mem_matrices(m, off, rows, cols);
    for (int k = 1; k < nm; k++) svo[k] = svo[k - 1] + ns5_saved(rows[k - 1], cols[k - 1]);
    real Pth[1024 + 64], w[1024 + 64], A = 1;
    muonc_coefs(c, n, Pth, w);
    for (int j = c->nh; j < n; j++) A *= c->a[j];
    real Th = c->theta[c->nh] * Pth[c->nh];
    for (size_t e = 0; e < nP; e++) Sn[e] = Th * S[e];  // S_end = Theta S_s + sum_i w_i g_i
    for (int i = 0; i < n; i++) muon_add_grad(m, c, Sn, i, w[i]);
    for (int k = 0; k < nm; k++) ns5_forward(c->mX + off[k], c->msv + svo[k], c->mtmp, Sn + off[k], rows[k], cols[k]);
    for (size_t e = 0; e < nP; e++)  // P_end = A P_s [+ (1 - A) P_0] - eta_last X
        Pn[e] = A * P[e] + (c->p0 ? (1 - A) * c->p0[e] : 0) - c->eta[n - 1] * c->mX[e];
}
static void muonc_chunk_forward(const MemCfg* m, MemChunk* c, int n, const real* P, const real* S, real* Pn, real* Sn,
                                const real* lng, const real* lnb) {
    mem_chunk_forward(m, c, n, P, NULL, NULL, NULL, lng, lnb, NULL, NULL);  // the reads (m is gd: momentum 0)
    if (Pn) muonc_carry_forward(m, c, n, P, S, Pn, Sn);
}
// Its backward (run muonc_chunk_forward first): the reads' (mem_chunk_backward), then the carry's from dPn, dSn:
//     dP_s += A dP_end;  dA = <dP_end, P_s [- P_0]>;  deta_last = -<dP_end, X>;  dS_end = dSn + NS5'^T (-eta_last dP_end)
//     dS_s = Theta dS_end;  dw_i = <dS_end, g_i>;  dg_i += w_i dS_end;  then dw, dTheta, dA to theta, gamma, a
// and the g_i's adjoints through the inner gradients at P_s (a second mem_grad_backward, the reads' kept aside).
static void muonc_chunk_backward(const MemCfg* m, MemChunk* c, int n, const real* dy, const real* P, const real* S,
                                 const real* dPn, const real* dSn, real* dPs, real* dSs, const real* lng) {
    size_t nP = m->nP, off[3], svo[3] = {0, 0, 0};
    int rows[3], cols[3], nm = mem_matrices(m, off, rows, cols), nh = c->nh, wc = c->wc;
    for (int k = 1; k < nm; k++) svo[k] = svo[k - 1] + ns5_saved(rows[k - 1], cols[k - 1]);
    mem_chunk_backward(m, c, n, dy, P, NULL, NULL, NULL, dPs, NULL, lng, NULL, dPs, NULL);
    if (!dPn) {  // the last chunk: no carry
        memset(dSs, 0, nP * sizeof(real));
        return;
    }
    real *Se = c->mS, *gS = dSs, *gX = c->Wc;
    muonc_carry_forward(m, c, n, P, S, c->mP, Se);  // (recomputed: S_end, X and NS5's iterates)
    memcpy(c->save, c->grad0, c->ngrad * sizeof(real));
    memset(c->grad0, 0, c->ngrad * sizeof(real));
    real Pth[1024 + 64], w[1024 + 64], pre[1024 + 64], A = 1, dA = 0;
    muonc_coefs(c, n, Pth, w);
    for (int j = nh; j < n; j++) {
        pre[j] = A;  // prod_{l<j} a_l
        A *= c->a[j];
    }
    real Th = c->theta[nh] * Pth[nh];
    dA = dotv(dPn, P, nP);
    if (c->p0) {
        dA -= dotv(dPn, c->p0, nP);
        for (size_t e = 0; e < nP; e++) c->dp0[e] += (1 - A) * dPn[e];
    }
    for (size_t e = 0; e < nP; e++) {
        dPs[e] += A * dPn[e];
        gX[e] = -c->eta[n - 1] * dPn[e];
    }
    c->deta[n - 1] -= dotv(dPn, c->mX, nP);
    memcpy(gS, dSn, nP * sizeof(real));
    for (int k = 0; k < nm; k++)
        ns5_backward(gS + off[k], gX + off[k], c->msv + svo[k], c->mtmp, Se + off[k], rows[k], cols[k]);
    real dTh = dotv(gS, S, nP), dw[1024 + 64], dPth[1024 + 64];
    for (int i = 0; i < n; i++) dw[i] = muon_add_grad_backward(m, c, gS, i, w[i]);
    for (size_t e = 0; e < nP; e++) gS[e] *= Th;  // dS_s = Theta dS_end
    for (int j = nh; j < n; j++) {  // w_i = sum_j Pth_j gamma_j[j - i]
        dPth[j] = j == nh ? dTh * c->theta[nh] : 0;  // (Theta = theta_nh Pth_nh)
        for (int o = 0; o < wc && o <= j; o++) {
            dPth[j] += dw[j - o] * (wc > 1 ? c->gam[(size_t)j * wc + o] : 1);
            if (wc > 1) c->dgam[(size_t)j * wc + o] += dw[j - o] * Pth[j];
        }
    }
    c->dtheta[nh] += dTh * Pth[nh];
    real g = 0, suf = 1;  // Pth_j = theta_{j+1} Pth_{j+1}: the running adjoint of Pth_j, j ascending
    for (int j = nh; j < n; j++) {
        g = dPth[j] + (j > nh ? c->theta[j] * g : 0);
        if (j + 1 < n) c->dtheta[j + 1] += g * Pth[j + 1];
    }
    for (int j = n - 1; j >= nh; j--) {  // A = prod a_l: dA/da_j = prod_{l != j} a_l
        c->da[j] += dA * pre[j] * suf;
        suf *= c->a[j];
    }
    mem_grad_backward(m, c, n, P, dPs, lng);
    for (size_t i = 0; i < c->ngrad; i++) c->grad0[i] += c->save[i];
}

// a second state S carried across chunks (momentum's and muon's), 0 at every sequence start
static int mem_carries_S(const MemCfg* m) { return m->momentum || m->muon; }
// The chunk as the model runs it: carried state St (and momentum S) in; y; the next carried state if Stn.
static void mem_step_forward(const MemCfg* m, MemChunk* c, int n, const real* St, const real* S, real* Stn, real* Sn,
                             const real* lng, const real* lnb) {
    if (m->muon == 1) {
        muon_chunk_forward(m, c, n, St, S, Stn, Sn, lng, lnb);
        return;
    }
    if (m->muon == 2) {
        muonc_chunk_forward(m, c, n, St, S, Stn, Sn, lng, lnb);
        return;
    }
    if (m->retention == RET_NONE) {
        mem_chunk_forward(m, c, n, St, S, Stn, Sn, lng, lnb, NULL, NULL);
        return;
    }
    if (m->retention == RET_LQ) {
        real cs[2];
        lq_scales(m, St, c->Wa, cs);
        mem_chunk_forward(m, c, n, c->Wa, NULL, Stn, NULL, lng, lnb, St, cs);
        return;
    }
    real keep[2 + 256];
    softmax_rows(m, St, c->Wa);  // W_s
    mem_chunk_forward(m, c, 1, c->Wa, NULL, c->Wb, NULL, lng, lnb, St, NULL);  // Z_1
    softmax_rows(m, c->Wb, c->Wc);  // W_1
    kl_gates(m, c, 1, keep);
    mem_chunk_forward(m, c, n, c->Wc, NULL, Stn, NULL, lng, lnb, c->Wb, NULL);
    kl_gates(m, c, 0, keep);
}
// Its backward (recomputes the forward). dSt, dSs: gradients of the carried state(s) at the chunk start.
static void mem_step_backward(const MemCfg* m, MemChunk* c, int n, const real* dy, const real* St, const real* S,
                              const real* dStn, const real* dSn, real* dSt, real* dSs, const real* lng,
                              const real* lnb) {
    if (m->muon == 1) {
        muon_chunk_forward(m, c, n, St, S, NULL, NULL, lng, lnb);
        muon_chunk_backward(m, c, n, dy, St, S, dStn, dSn, dSt, dSs, lng);
        return;
    }
    if (m->muon == 2) {
        muonc_chunk_forward(m, c, n, St, S, NULL, NULL, lng, lnb);
        muonc_chunk_backward(m, c, n, dy, St, S, dStn, dSn, dSt, dSs, lng);
        return;
    }
    if (m->retention == RET_NONE) {
        mem_chunk_forward(m, c, n, St, S, NULL, NULL, lng, lnb, NULL, NULL);
        mem_chunk_backward(m, c, n, dy, St, S, dStn, dSn, dSt, dSs, lng, NULL, dSt, NULL);
        return;
    }
    if (m->retention == RET_LQ) {
        real cs[2];
        lq_scales(m, St, c->Wa, cs);
        mem_chunk_forward(m, c, n, c->Wa, NULL, NULL, NULL, lng, lnb, St, cs);
        mem_chunk_backward(m, c, n, dy, c->Wa, NULL, dStn, NULL, c->dWa, NULL, lng, St, dSt, cs);
        lq_scales_backward(m, St, c->dWa, c->dcs, dSt);
        return;
    }
    real keep[2 + 256];
    softmax_rows(m, St, c->Wa);
    mem_chunk_forward(m, c, 1, c->Wa, NULL, c->Wb, NULL, lng, lnb, St, NULL);
    softmax_rows(m, c->Wb, c->Wc);
    kl_gates(m, c, 1, keep);
    mem_chunk_forward(m, c, n, c->Wc, NULL, NULL, NULL, lng, lnb, c->Wb, NULL);
    mem_chunk_backward(m, c, n, dy, c->Wc, NULL, dStn, NULL, c->dWa, NULL, lng, c->Wb, c->dWb, NULL);  // dW_1, dZ_1
    kl_gates(m, c, 0, keep);
    c->da[0] = c->deta[0] = 0;
    if (m->cw) memset(c->detac, 0, m->d * sizeof(real));  // token 0's gates were constants here
    memcpy(c->save, c->grad0, c->ngrad * sizeof(real));
    softmax_rows_backward(m, c->Wc, c->dWa, c->dWb);  // dZ_1 += through W_1 = softmax(Z_1)
    mem_chunk_forward(m, c, 1, c->Wa, NULL, c->Wb, NULL, lng, lnb, St, NULL);
    mem_chunk_backward(m, c, 1, c->zero, c->Wa, NULL, c->dWb, NULL, c->dWa, NULL, lng, St, dSt, NULL);  // dW_s, dZ_s
    softmax_rows_backward(m, c->Wa, c->dWa, dSt);
    for (size_t i = 0; i < c->ngrad; i++) c->grad0[i] += c->save[i];
}

// ---- the naive memory (llm.c's matmul_forward_naive manner): the online rule (b = 1) of one head, token by
// token, every state materialised. Slow and plain, for a reader and for the tests (test_miras.c checks the
// chunked functions above at b = 1 against it). Double precision inside. For t = 0..T-1 (SPEC §4, §5):
//   W_{t-1} = weights(X_{t-1})                                  X is the carried state: W itself, or A (lq), or Z (kl)
//   g_t     = d bias(M(k_t; W), v_t) / dW  at W = W_{t-1}        the inner gradient, by explicit backprop through M
//   gd:       X_t = a_t X_{t-1} - eta_t g_t
//   momentum: S_t = theta_t S_{t-1} - eta_t g_t ;  X_t = a_t X_{t-1} + S_t
//   anchored retention (-Z 1) adds (1 - a_t) X_0 to X_t
//   y_t     = M(q_t; W_t)                                       read after the write
// weights(X): X (no retention); A / s(A) with s = (|A|_4 + 1e-6)^2 per matrix (lq; the read of token t uses the
// scale of A_{t-1}, SPEC §5.3); softmax over each row of Z (kl).
static void naive_weights(const MemCfg* m, const double* X, double* W, double* s) {
    size_t off[3];
    int rows[3], cols[3];
    int nm = mem_matrices(m, off, rows, cols);
    for (int k = 0; k < nm; k++) {
        size_t n = (size_t)rows[k] * cols[k];
        const double* x = X + off[k];
        double* w = W + off[k];
        if (m->retention == RET_LQ) {
            double q4 = 0;
            for (size_t i = 0; i < n; i++) q4 += x[i] * x[i] * x[i] * x[i];
            double nrm = pow(q4, 0.25);
            s[k] = (nrm + 1e-6) * (nrm + 1e-6);
            for (size_t i = 0; i < n; i++) w[i] = x[i] / s[k];
        } else if (m->retention == RET_KL) {
            for (int r = 0; r < rows[k]; r++) {
                const double* z = x + (size_t)r * cols[k];
                double mx = z[0], sum = 0;
                for (int j = 1; j < cols[k]; j++) mx = z[j] > mx ? z[j] : mx;
                for (int j = 0; j < cols[k]; j++) sum += exp(z[j] - mx);
                for (int j = 0; j < cols[k]; j++) w[(size_t)r * cols[k] + j] = exp(z[j] - mx) / sum;
            }
        } else {
            for (size_t i = 0; i < n; i++) w[i] = x[i];
        }
    }
}

// M(x; W) for one input row x (SPEC §4), keeping what the inner gradient needs: z = W2 x, hg = GELU(z),
// o = W1 hg, its LN mean and 1/std. lng, lnb: the LN affine of this head.
typedef struct {
    double *z, *hg, *o, mu, rstd;
} NaiveCache;
static void naive_apply(const MemCfg* m, const double* W, const real* x, const real* lng, const real* lnb, double* out,
                        NaiveCache* c) {
    int d = m->d, dm = m->dm;
    if (m->depth == 1) {  // M(x) = W x
        for (int i = 0; i < d; i++) {
            out[i] = 0;
            for (int j = 0; j < d; j++) out[i] += W[(size_t)i * d + j] * x[j];
        }
        return;
    }
    const double* W1 = W;  // (d, dm)
    const double* W2 = W + (size_t)d * dm;  // (dm, d)
    for (int a = 0; a < dm; a++) {
        c->z[a] = 0;
        for (int j = 0; j < d; j++) c->z[a] += W2[(size_t)a * d + j] * x[j];
        c->hg[a] = gelu(c->z[a], gelu_tanh(c->z[a]));
    }
    for (int i = 0; i < d; i++) {
        c->o[i] = 0;
        for (int a = 0; a < dm; a++) c->o[i] += W1[(size_t)i * dm + a] * c->hg[a];
    }
    c->mu = 0;
    c->rstd = 1;
    if (m->ln) {  // LN over d: biased variance, eps 1e-5
        double var = 0;
        for (int i = 0; i < d; i++) c->mu += c->o[i];
        c->mu /= d;
        for (int i = 0; i < d; i++) var += (c->o[i] - c->mu) * (c->o[i] - c->mu);
        c->rstd = 1 / sqrt(var / d + 1e-5);
    }
    for (int i = 0; i < d; i++) {
        double n = m->ln ? (c->o[i] - c->mu) * c->rstd * lng[i] + lnb[i] : c->o[i];
        out[i] = (m->resid ? x[i] : 0) + n;  // M(x) = x + LN(W1 GELU(W2 x))
    }
}

// One head's memory over T tokens. Row t of q, k, v, y is at t*stride; of a, theta at t*gstride; of eta, delta at
// t*estride (channel-wise gates, m->cw: d entries there). P0 the head's initial state, lng/lnb its LN affine.
static void memory_forward_naive(const MemCfg* m, const real* P0, const real* q, const real* k, const real* v,
                                 const real* a, const real* eta, const real* theta, const real* delta, const real* lng,
                                 const real* lnb, int T, int stride, int gstride, int estride, real* y) {
    int d = m->d, dm = m->dm, nP = m->nP;
    double* X = (double*)xmalloc((size_t)nP * 8);  // the carried state X_t
    double* W = (double*)xmalloc((size_t)nP * 8);  // the weights the gradient is taken at
    double* R = (double*)xmalloc((size_t)nP * 8);  // the weights the read uses
    double* S = (double*)xmalloc((size_t)nP * 8);  // momentum
    double* g = (double*)xmalloc((size_t)nP * 8);  // the inner gradient g_t
    double* buf = (double*)xmalloc((size_t)(3 * dm + 4 * d) * 8);  // z, hg (dm); o, out, r, dO (d); dz (dm)
    NaiveCache c = {buf, buf + dm, buf + 2 * dm, 0, 1};
    double *out = buf + 2 * dm + d, *r = out + d, *dO = r + d, *dz = dO + d;
    double s[2] = {1, 1}, s_prev[2];
    size_t n0 = m->depth == 2 ? (size_t)d * dm : (size_t)nP;  // entries of the first matrix (for lq's two scales)
    for (int i = 0; i < nP; i++) {
        X[i] = P0[i];
        S[i] = 0;
    }
    for (int t = 0; t < T; t++) {
        const real* kt = k + (size_t)t * stride;
        const real* vt = v + (size_t)t * stride;
        const real* et = eta + (size_t)t * estride;
        const real* dt = delta + (size_t)t * estride;
        naive_weights(m, X, W, s);
        s_prev[0] = s[0];
        s_prev[1] = s[1];
        // the write: r = dbias/dM(k) (times eta per channel when channel-wise), then back through M to g
        naive_apply(m, W, kt, lng, lnb, out, &c);
        for (int i = 0; i < d; i++) {
            double e = out[i] - vt[i], psi;
            if (m->bias == BIAS_L2)
                psi = e;
            else if (m->bias == BIAS_DOT)
                psi = -vt[i];
            else if (m->bias == BIAS_LP)
                psi = 3 * tanh(10 * e) * (e * e + 1e-6);
            else
                psi = fmin(fmax(e, -dt[m->cw ? i : 0]), dt[m->cw ? i : 0]);  // Huber: clamp(e, -delta, delta)
            r[i] = m->cw ? et[i] * psi : psi;
        }
        if (m->depth == 1) {
            for (int i = 0; i < d; i++)
                for (int j = 0; j < d; j++) g[(size_t)i * d + j] = r[i] * kt[j];  // g = r k^T
        } else {
            if (m->ln) {  // dO = LN backward of r * lng
                double mean_u = 0, mean_ux = 0;
                for (int i = 0; i < d; i++) {
                    double xh = (c.o[i] - c.mu) * c.rstd;
                    mean_u += r[i] * lng[i];
                    mean_ux += r[i] * lng[i] * xh;
                }
                mean_u /= d;
                mean_ux /= d;
                for (int i = 0; i < d; i++)
                    dO[i] = c.rstd * (r[i] * lng[i] - mean_u - (c.o[i] - c.mu) * c.rstd * mean_ux);
            } else {
                for (int i = 0; i < d; i++) dO[i] = r[i];
            }
            for (int i = 0; i < d; i++)
                for (int aa = 0; aa < dm; aa++) g[(size_t)i * dm + aa] = dO[i] * c.hg[aa];  // dW1 = dO GELU(z)^T
            for (int aa = 0; aa < dm; aa++) {
                double back = 0;
                for (int i = 0; i < d; i++) back += W[(size_t)i * dm + aa] * dO[i];
                dz[aa] = back * gelu_d1(c.z[aa], gelu_tanh(c.z[aa]));
            }
            for (int aa = 0; aa < dm; aa++)
                for (int j = 0; j < d; j++) g[n0 + (size_t)aa * d + j] = dz[aa] * kt[j];  // dW2 = dz k^T
        }
        // the step (channel-wise eta is already inside r)
        double at = a[(size_t)t * gstride], eta_t = m->cw ? 1 : et[0], th = theta[(size_t)t * gstride];
        for (int i = 0; i < nP; i++) {
            double keep = at * X[i] + (m->anchor ? (1 - at) * P0[i] : 0);
            if (m->momentum) {
                S[i] = th * S[i] - eta_t * g[i];
                X[i] = keep + S[i];
            } else {
                X[i] = keep - eta_t * g[i];
            }
        }
        // the read, after the write
        if (m->retention == RET_LQ) {
            for (int i = 0; i < nP; i++) R[i] = X[i] / s_prev[(size_t)i < n0 ? 0 : 1];
        } else {
            naive_weights(m, X, R, s);
        }
        naive_apply(m, R, q + (size_t)t * stride, lng, lnb, out, &c);
        for (int i = 0; i < d; i++) y[(size_t)t * stride + i] = (real)out[i];
    }
    free(X);
    free(W);
    free(R);
    free(S);
    free(g);
    free(buf);
}

// ----------------------------------------------------------------------------
// 3b. Lattice (SPEC §5.8): the orthogonal slot memory. Per head a state S (d x m, m = d slots, each a unit column),
// S_0 = I (fixed), updated token by token by the unified template (research/lattice.md 2.2):
//   DEC: h = S k - v, c = k      ENC: h = v, c = S^T v - k      SIM: h = -v, c = k
//   g = S^T h ;  A = mu + eta (c * g) ;  W = S diag(A) - eta h c^T ;  S_t = W diag(1/|W_i|) ;  y_t = S_t q_t
// (|W_i| the explicitly computed column norm, no eps). Ablations (-Y): LATA_NO_ORTHO drops eta (c * g) from A,
// LATA_NO_RENORM keeps S_t = W; with both, DEC is the delta rule S_t = mu S - eta (S k - v) k^T from S_0 = I.
// There is no chunked form: training is backpropagation through the T per-token steps. The forward keeps the state
// only at every lat_k-th token (S before token j*k); the backward recomputes each segment's k states from its
// checkpoint and runs the steps in reverse (section "lattice_memory_backward"). Storage: column i of S is
// S[i*d .. i*d+d) (slot-major), so g_i = S_i . h and the column norms are contiguous.
enum { LAT_NONE = 0, LAT_DEC = 1, LAT_ENC = 2, LAT_SIM = 3 };  // header slot 38; never renumber
enum { LATA_NO_ORTHO = 1, LATA_NO_RENORM = 2 };  // header slot 40 (bits)

// Scratch of one step: h, c, g, A, n (d each) and a column (d); see lattice_scratch_size for the rest.
typedef struct {
    real *h, *c, *g, *A, *n, *col, *dh, *dc, *dg;
} LatVec;
static void latvec_carve(LatVec* v, real* base, int d) {
    v->h = base;
    v->c = base + d;
    v->g = base + 2 * d;
    v->A = base + 3 * d;
    v->n = base + 4 * d;
    v->col = base + 5 * d;
    v->dh = base + 6 * d;
    v->dc = base + 7 * d;
    v->dg = base + 8 * d;
}
#define LAT_NVEC 9

// h, c, g, A of one step from S = S_{t-1} (the quantities the forward and the backward share)
static void lattice_step_coefs(const MemCfg* m, const real* S, const real* k, const real* v, real eta, real mu,
                               LatVec* w) {
    int d = m->d;
    if (m->lattice == LAT_DEC) {
        for (int r = 0; r < d; r++) w->h[r] = -v[r];  // h = S k - v
        for (int i = 0; i < d; i++)
            for (int r = 0; r < d; r++) w->h[r] += S[(size_t)i * d + r] * k[i];
    } else if (m->lattice == LAT_ENC)
        for (int r = 0; r < d; r++) w->h[r] = v[r];  // h = v
    else
        for (int r = 0; r < d; r++) w->h[r] = -v[r];  // h = -v
    for (int i = 0; i < d; i++) w->g[i] = dotv(S + (size_t)i * d, w->h, d);  // g = S^T h
    for (int i = 0; i < d; i++) w->c[i] = m->lattice == LAT_ENC ? w->g[i] - k[i] : k[i];  // ENC: c = S^T v - k
    for (int i = 0; i < d; i++) w->A[i] = mu + (m->lat_ablate & LATA_NO_ORTHO ? 0 : eta * w->c[i] * w->g[i]);
}
// Lattice's read y = S q, y_r = sum_i S[i][r] q_i (column i of S is slot i)
static void lattice_read(const real* S, const real* q, real* y, int d) {
    for (int r = 0; r < d; r++) {
        real s = 0;
        for (int i = 0; i < d; i++) s += S[(size_t)i * d + r] * q[i];
        y[r] = s;
    }
}
// One step: Sn = S_t from S = S_{t-1}; y = S_t q if y. w->n holds the column norms |W_i| (1 without renormalisation).
static void lattice_step_forward(const MemCfg* m, const real* S, real* Sn, const real* q, const real* k, const real* v,
                                 real eta, real mu, real* y, LatVec* w) {
    int d = m->d;
    lattice_step_coefs(m, S, k, v, eta, mu, w);
    for (int i = 0; i < d; i++) {
        const real* Si = S + (size_t)i * d;
        real* Wi = Sn + (size_t)i * d;
        real ec = eta * w->c[i], nn = 0;
        for (int r = 0; r < d; r++) {
            Wi[r] = w->A[i] * Si[r] - ec * w->h[r];
            nn += Wi[r] * Wi[r];
        }  // W_i = A_i S_i - eta c_i h
        if (m->lat_ablate & LATA_NO_RENORM) {
            w->n[i] = 1;
            continue;
        }
        w->n[i] = sqrt(nn);  // explicit norm, no eps
        for (int r = 0; r < d; r++) Wi[r] /= w->n[i];
    }
    if (y) lattice_read(Sn, q, y, d);
}
// Its backward. G: dL/dS_t in, dL/dS_{t-1} out (in place); dy: dL/dy_t. S, Sn: S_{t-1}, S_t. Writes dq, dk, dv, *deta,
// *dmu.
//   G += dy q^T ; dq = S_t^T dy ; dW_i = (G_i - s'_i (s'_i . G_i)) / n_i (renorm; else G_i)
//   dA_i = S_i . dW_i ; dS_i = A_i dW_i ; dh = -eta sum_i c_i dW_i ; dc_i = -eta h . dW_i (+ eta dA_i g_i)
//   deta = sum_i -c_i (h . dW_i) (+ dA_i c_i g_i) ; dmu = sum_i dA_i ; dg_i = eta dA_i c_i (ortho term; ENC: + dc_i)
//   g = S^T h: dS_i += dg_i h, dh += sum_i dg_i S_i ; then DEC dS_i += k_i dh, dk = S^T dh + dc, dv = -dh;
//   ENC dv = dh, dk = -dc ; SIM dv = -dh, dk = dc
static void lattice_step_backward(const MemCfg* m, const real* S, const real* Sn, const real* q, const real* k,
                                  const real* v, real eta, real mu, const real* dy, real* G, real* dq, real* dk,
                                  real* dv, real* deta, real* dmu, LatVec* w) {
    int d = m->d, ortho = !(m->lat_ablate & LATA_NO_ORTHO), renorm = !(m->lat_ablate & LATA_NO_RENORM);
    lattice_step_coefs(m, S, k, v, eta, mu, w);
    for (int i = 0; i < d; i++) {  // the norms |W_i| again (the forward's arithmetic, so the same values)
        if (!renorm) {
            w->n[i] = 1;
            continue;
        }
        const real* Si = S + (size_t)i * d;
        real ec = eta * w->c[i], nn = 0;
        for (int r = 0; r < d; r++) {
            real x = w->A[i] * Si[r] - ec * w->h[r];
            nn += x * x;
        }
        w->n[i] = sqrt(nn);
    }
    for (int i = 0; i < d; i++) {
        real s = 0;
        for (int r = 0; r < d; r++) s += Sn[(size_t)i * d + r] * dy[r];
        dq[i] = s;
    }
    real de = 0, dm = 0;
    for (int r = 0; r < d; r++) w->dh[r] = 0;
    for (int i = 0; i < d; i++) {
        const real* Si = S + (size_t)i * d;
        const real* Sni = Sn + (size_t)i * d;
        real* Gi = G + (size_t)i * d;
        real* dW = w->col;
        for (int r = 0; r < d; r++) Gi[r] += dy[r] * q[i];
        if (renorm) {
            real p = dotv(Sni, Gi, d);
            for (int r = 0; r < d; r++) dW[r] = (Gi[r] - Sni[r] * p) / w->n[i];
        } else
            for (int r = 0; r < d; r++) dW[r] = Gi[r];
        real dA = dotv(Si, dW, d), hdW = dotv(w->h, dW, d);
        for (int r = 0; r < d; r++) {
            Gi[r] = w->A[i] * dW[r];
            w->dh[r] -= eta * w->c[i] * dW[r];
        }
        w->dc[i] = -eta * hdW + (ortho ? eta * dA * w->g[i] : 0);
        de += -w->c[i] * hdW + (ortho ? dA * w->c[i] * w->g[i] : 0);
        dm += dA;
        w->dg[i] = ortho ? eta * dA * w->c[i] : 0;
        if (m->lattice == LAT_ENC) w->dg[i] += w->dc[i];  // c = g - k
    }
    for (int i = 0; i < d; i++) {  // g = S^T h
        const real* Si = S + (size_t)i * d;
        real* Gi = G + (size_t)i * d;
        for (int r = 0; r < d; r++) {
            Gi[r] += w->dg[i] * w->h[r];
            w->dh[r] += w->dg[i] * Si[r];
        }
    }
    if (m->lattice == LAT_DEC) {  // h = S k - v
        for (int i = 0; i < d; i++) {
            real* Gi = G + (size_t)i * d;
            for (int r = 0; r < d; r++) Gi[r] += k[i] * w->dh[r];
            dk[i] = dotv(S + (size_t)i * d, w->dh, d) + w->dc[i];
        }
        for (int r = 0; r < d; r++) dv[r] = -w->dh[r];
    } else if (m->lattice == LAT_ENC) {
        for (int r = 0; r < d; r++) dv[r] = w->dh[r];
        for (int i = 0; i < d; i++) dk[i] = -w->dc[i];
    } else {
        for (int r = 0; r < d; r++) dv[r] = -w->dh[r];
        for (int i = 0; i < d; i++) dk[i] = w->dc[i];
    }
    *deta = de;
    *dmu = dm;
}
static void lattice_identity(real* S, int d) {
    memset(S, 0, (size_t)d * d * sizeof(real));
    for (int i = 0; i < d; i++) S[(size_t)i * d + i] = 1;
}
// floats of one thread's scratch: the k+1 states of a segment, the gradient carry, the step vectors
static size_t lattice_scratch_size(int d, int k) { return ((size_t)k + 2) * d * d + (size_t)LAT_NVEC * d; }

// ----------------------------------------------------------------------------
// 3c. The phi* memory: ATLAS's DeepTransformer (DT) and DOT (README "DT and DOT"; research digest §4.2-4.4, A15).
// phi*(x) is the infinite feature map with phi*(k).phi*(x) = kappa(k, x) = exp(s k.x); q, k are l2-normalised
// (SPEC §3) and s = sqrt(d), so that aligned unit vectors give the logit sqrt(d) of scaled dot-product attention.
// A matrix acting on phi*(x) cannot be stored; it starts at 0 and is kept as its history (non-parametric):
//     W2_t phi*(x) = sum_i omega_{t,i} a_i kappa(k_i, x) / sum_i omega_{t,i} kappa(k_i, x)       (0 for no history)
// the NORMALISED kernel sum (digest A15: the linear memory with a = eta = 1, c = 1 is then exactly causal softmax
// attention). The deep memory is M(x) = W1 GELU(W2 phi*(x)), no residual, no LN; W1 (d, d_m) is an ordinary state
// with its trained initial value in mem_p0. The linear memory M(x) = W phi*(x) keeps W the same way (nP = 0).
// The update is the chunked rule of SPEC §5 with the omega window of §5.5: in the chunk [t0, t0+n) every inner gradient
// (of the chunk's rows and its c-1 halo rows before it) is taken at the chunk-start state (W1_s, W2_s):
//     z_j = W2_s phi*(k_j)     h_j = GELU(z_j)     r_j = dloss/dM(k_j) (l2: W1_s h_j - v_j; dot: -v_j)
//     a_j = -(W1_s^T r_j) * GELU'(z_j)     (linear: a_j = -r_j, with M(k_j) = z_j)     "the W2 signal"
//     with bounded steps (phistar 2, -I 3, both presets): a_j / sqrt(1 + mean(a_j^2)), so RMS(z) < 1
//     W1_t = a_t W1_{t-1} - eta_t sum_{o<c} gamma_t[o] r_{t-o} h_{t-o}^T
//     W2_t = a_t W2_{t-1} + eta_t sum_{o<c} gamma_t[o] a_{t-o} phi*(k_{t-o})^T
// so omega_{t,i} = sum_{n=i}^{min(i+c-1,t)} (A_t/A_n) eta_n gamma_n[n-i] (A_t = prod of the a gates; a row's entry is
// one (token, chunk) pair: a halo token's signal at this chunk's state is a new entry). The read after the write:
//     y_t = W1_t GELU(z^q_t),   z^q_t = W2_t phi*(q_t) over the history and the chunk's rows up to t (linear: y = z^q).
// In the normalised sums A_t cancels, so each entry carries the log offset
//     lambda_j(t) = log sum_n exp(-LA_n + log eta_n + log gamma_n[n-j]),   LA_n = sum_{m<=n} log a_m
// (max-subtracted: 1/A_n grows like e^{n(1-a)}), frozen at the chunk's last row when the chunk is committed, and the
// reads are softmaxes over the logits lambda_e + s k_e.x. The backward walks the chunks in reverse and accumulates the
// entries' dL/da_e and dL/dlambda_e from the later chunks' key and query passes (quadratic in T, like attention).

// one head's token rows: q, k, v at stride sx; the gates a, eta at stride sg; gamma (c per token) at stride sc
typedef struct {
    real *q, *k, *v, *a, *eta, *gam;  // (gam NULL when c = 1: gamma = 1)
    size_t sx, sg, sc;
} PhiSeq;
// Scratch of one chunk, R = nh + n <= b + c - 1 rows (halo first), n <= b own rows, w = d_m (deep) or d (linear) the
// signal width; ne the history's capacity in entries (dav, dlo: the backward's accumulators over all entries)
// (ra: the bounded steps' factor rho per row; da: one row's dL/da before it)
typedef struct {
    real *lg, *z, *tz, *h, *g, *mk, *r, *lam, *LA, *zq, *tq, *hq, *W, *y, *ra;
    real *dz, *dh, *dr, *dlam, *dLA, *dzq, *dhq, *dW, *dav, *dlo, *da;
} PhiScr;
static size_t phi_scr_carve(PhiScr* s, real* base, const MemCfg* m, int b, size_t ne) {
    size_t R = (size_t)b + m->omega - 1, w = m->dm, d = m->d, nP = m->nP, off = 0;
    // clang-format off
#define TAKE(f, sz) do { s->f = base ? base + off : NULL; off += (sz); } while (0)
    TAKE(lg, ne + R); TAKE(z, R * w); TAKE(tz, R * w); TAKE(h, R * w); TAKE(g, R * w); TAKE(mk, R * d); TAKE(r, R * d);
    TAKE(lam, b * R); TAKE(LA, b); TAKE(zq, b * w); TAKE(tq, b * w); TAKE(hq, b * w); TAKE(W, (b + 1) * nP); TAKE(y, b * d);
    TAKE(ra, R);
    TAKE(dz, R * w); TAKE(dh, R * w); TAKE(dr, R * d); TAKE(dlam, b * R); TAKE(dLA, b); TAKE(dzq, b * w); TAKE(dhq, w);
    TAKE(dW, nP); TAKE(dav, ne * w); TAKE(dlo, ne); TAKE(da, w);
#undef TAKE
    // clang-format on
    return off;
}
// the entries of a sequence of T tokens: every token once in its own chunk, plus each chunk's halo rows again
static size_t phi_entries(int T, int b, int c) {
    size_t n = (size_t)T;
    for (int t0 = b; t0 < T; t0 += b) n += t0 < c - 1 ? t0 : c - 1;
    return n;
}

// The normalised kernel read of one query x: out = sum_e p_e av_e, p = softmax_e(off_e + s k_e.x) over the history's
// entries e < ne (off = lo_e) and the chunk's rows e = ne + j, j < na (off = lam_j). Keeps p in s->lg. No entry: 0.
static void phi_read(const MemCfg* m, PhiScr* s, const PhiSeq* x, const real* xq, int ne, int na, const int* etok,
                     const real* av, const real* lo, const real* lam, real* out) {
    int w = m->dm, d = m->d, N = ne + na;
    memset(out, 0, w * sizeof(real));
    if (!N) return;
    real mx = -INFINITY, S = 0;
    for (int e = 0; e < N; e++) {
        real l = (e < ne ? lo[e] : lam[e - ne]) + m->phis * dotv(x->k + (size_t)etok[e] * x->sx, xq, d);
        s->lg[e] = l;
        if (l > mx) mx = l;
    }
    for (int e = 0; e < N; e++) {
        s->lg[e] = exp(s->lg[e] - mx);
        S += s->lg[e];
    }
    for (int e = 0; e < N; e++) {
        real p = s->lg[e] / S;
        s->lg[e] = p;
        for (int j = 0; j < w; j++) out[j] += p * av[(size_t)e * w + j];
    }
}
// its backward, from dout (p in s->lg, out the read's value): dlogit_e = p_e (av_e - out).dout; into dav, dlo (the
// history's entries) or dlam (the chunk's rows), dxq and the keys' gradients gx->k
static void phi_read_backward(const MemCfg* m, PhiScr* s, const PhiSeq* x, const PhiSeq* gx, const real* xq, real* dxq,
                              int ne, int na, const int* etok, const real* av, const real* out, const real* dout,
                              real* dav, real* dlo, real* dlam) {
    int w = m->dm, d = m->d, N = ne + na;
    real zd = dotv(out, dout, w);
    for (int e = 0; e < N; e++) {
        real p = s->lg[e], dl = p * (dotv(av + (size_t)e * w, dout, w) - zd);
        for (int j = 0; j < w; j++) dav[(size_t)e * w + j] += p * dout[j];
        if (e < ne)
            dlo[e] += dl;
        else
            dlam[e - ne] += dl;
        const real* ke = x->k + (size_t)etok[e] * x->sx;
        real* dke = gx->k + (size_t)etok[e] * gx->sx;
        for (int i = 0; i < d; i++) {
            dxq[i] += m->phis * dl * ke[i];
            dke[i] += m->phis * dl * xq[i];
        }
    }
}
// the log-weight term of own row nn (local, >= nh) for the entry row j: -LA_n + log eta_n + log gamma_n[n - j]
static real phi_term(const MemCfg* m, const PhiScr* s, const PhiSeq* x, int t0, int nh, int nn, int j) {
    size_t t = (size_t)(t0 + nn - nh);
    return -s->LA[nn - nh] + log(x->eta[t * x->sg]) + (x->gam ? log(x->gam[t * x->sc + nn - j]) : 0);
}
// the own rows nn whose steps take the entry row j's gradient, up to own row jt: [max(j, nh), min(jt, j + c - 1)]
static void phi_span(const MemCfg* m, int nh, int j, int jt, int* n0, int* n1) {
    *n0 = j > nh ? j : nh;
    *n1 = jt < j + m->omega - 1 ? jt : j + m->omega - 1;
}

// One chunk: own tokens [t0, t0+n), halo rows nh = min(c-1, t0); ne history entries (etok, av, lo), chunk-start W1s
// (deep) and LAs = LA_{t0-1}. Appends the chunk's R = nh + n entries (etok, av at ne + j, lo = lambda_j at the last
// row), writes y (own rows, stride sy) and, if W1n, the chunk-end W1; *LAn = LA at the chunk's last row.
static void phi_chunk_forward(const MemCfg* m, PhiScr* s, const PhiSeq* x, int t0, int n, int nh, int ne, int* etok,
                              real* av, real* lo, const real* W1s, real LAs, real* y, size_t sy, real* W1n, real* LAn) {
    int d = m->d, w = m->dm, c = m->omega, R = nh + n, deep = m->depth == 2;
    size_t nP = m->nP;
    for (int i = 0; i < n; i++) s->LA[i] = (i ? s->LA[i - 1] : LAs) + log(x->a[(size_t)(t0 + i) * x->sg]);
    // the entry rows: key pass over the history, the inner gradient at the chunk-start state
    for (int j = 0; j < R; j++) etok[ne + j] = t0 - nh + j;
    for (int j = 0; j < R; j++) {
        size_t tj = (size_t)(t0 - nh + j);
        const real *kj = x->k + tj * x->sx, *vj = x->v + tj * x->sx;
        real *z = s->z + (size_t)j * w, *avj = av + (size_t)(ne + j) * w, *r = s->r + (size_t)j * d;
        phi_read(m, s, x, kj, ne, 0, etok, av, lo, NULL, z);  // z_j = W2_s phi*(k_j)
        if (!deep) {  // M(k_j) = z_j; a_j = -r_j
            for (int i = 0; i < d; i++) {
                r[i] = m->bias == BIAS_DOT ? -vj[i] : z[i] - vj[i];
                avj[i] = -r[i];
            }
            continue;
        }
        real *tz = s->tz + (size_t)j * w, *h = s->h + (size_t)j * w, *mk = s->mk + (size_t)j * d,
             *g = s->g + (size_t)j * w;
        for (int e = 0; e < w; e++) {
            tz[e] = gelu_tanh(z[e]);
            h[e] = gelu(z[e], tz[e]);
        }
        mm_nt(mk, h, W1s, 1, d, w, 1, 0);  // M(k_j) = W1_s h_j
        for (int i = 0; i < d; i++) r[i] = m->bias == BIAS_DOT ? -vj[i] : mk[i] - vj[i];
        mm_nn(g, r, W1s, 1, w, d, 1, 0);  // g_j = W1_s^T r_j
        for (int e = 0; e < w; e++) avj[e] = -g[e] * gelu_d1(z[e], tz[e]);  // a_j = -g_j * GELU'(z_j)
        if (m->phistar == 2) {  // bounded steps: a_j <- a_j rho_j, rho_j = 1 / sqrt(1 + mean(a_j^2))
            s->ra[j] = 1 / sqrt(1 + dotv(avj, avj, w) / w);
            for (int e = 0; e < w; e++) avj[e] *= s->ra[j];
        }
    }
    // lambda_j(t) for own row jt = nh + i and the rows j <= jt
    for (int i = 0; i < n; i++) {
        int jt = nh + i;
        real* lam = s->lam + (size_t)i * R;
        for (int j = 0; j <= jt; j++) {
            int n0, n1;
            phi_span(m, nh, j, jt, &n0, &n1);
            real mx = -INFINITY, S = 0;
            for (int nn = n0; nn <= n1; nn++) {
                real tm = phi_term(m, s, x, t0, nh, nn, j);
                if (tm > mx) mx = tm;
            }
            for (int nn = n0; nn <= n1; nn++) S += exp(phi_term(m, s, x, t0, nh, nn, j) - mx);
            lam[j] = mx + log(S);
        }
    }
    // the query pass and the reads, W1 stepped token by token (W holds W1_s, then W1 after each own row)
    if (deep) memcpy(s->W, W1s, nP * sizeof(real));
    for (int i = 0; i < n; i++) {
        size_t t = (size_t)(t0 + i);
        int jt = nh + i;
        real *zq = s->zq + (size_t)i * w, *yt = y + (size_t)i * sy;
        phi_read(m, s, x, x->q + t * x->sx, ne, jt + 1, etok, av, lo, s->lam + (size_t)i * R, zq);
        if (!deep) {
            memcpy(yt, zq, d * sizeof(real));
            continue;
        }
        real *tq = s->tq + (size_t)i * w, *hq = s->hq + (size_t)i * w;
        for (int e = 0; e < w; e++) {
            tq[e] = gelu_tanh(zq[e]);
            hq[e] = gelu(zq[e], tq[e]);
        }
        const real* Wp = s->W + (size_t)i * nP;
        real* Wt = s->W + (size_t)(i + 1) * nP;
        real at = x->a[t * x->sg], et = x->eta[t * x->sg];
        for (size_t e = 0; e < nP; e++) Wt[e] = at * Wp[e];
        for (int o = 0; o < c && jt - o >= 0; o++) {  // - eta_t gamma_t[o] r_{t-o} h_{t-o}^T
            real cf = et * (x->gam ? x->gam[t * x->sc + o] : 1);
            const real *r = s->r + (size_t)(jt - o) * d, *h = s->h + (size_t)(jt - o) * w;
            for (int p = 0; p < d; p++)
                for (int e = 0; e < w; e++) Wt[(size_t)p * w + e] -= cf * r[p] * h[e];
        }
        mm_nt(yt, hq, Wt, 1, d, w, 1, 0);  // y_t = W1_t GELU(z^q_t)
    }
    if (W1n) memcpy(W1n, s->W + (size_t)n * nP, nP * sizeof(real));
    for (int j = 0; j < R; j++) lo[ne + j] = s->lam[(size_t)(n - 1) * R + j];
    *LAn = s->LA[n - 1];
}

// Its backward (run phi_chunk_forward first: its intermediates are in s). In: dy (own rows, stride sdy); s->dW
// = dL/dW1 at the chunk end (0 for the last chunk), s->dav, s->dlo: the entries' gradients from the later chunks;
// *gLA = dL/dLA at the chunk's last row from the later chunks. Out: s->dW = dL/dW1_s, the earlier entries' dav, dlo,
// *gLA = dL/dLAs; dq, dk, dv, da, deta, dgamma accumulated into gx.
static void phi_chunk_backward(const MemCfg* m, PhiScr* s, const PhiSeq* x, const PhiSeq* gx, int t0, int n, int nh,
                               int ne, const int* etok, const real* av, const real* lo, const real* W1s, const real* dy,
                               size_t sdy, real* gLA) {
    int d = m->d, w = m->dm, c = m->omega, R = nh + n, deep = m->depth == 2;
    size_t nP = m->nP;
    memset(s->dz, 0, (size_t)R * w * sizeof(real));
    memset(s->dh, 0, (size_t)R * w * sizeof(real));
    memset(s->dr, 0, (size_t)R * d * sizeof(real));
    memset(s->dlam, 0, (size_t)n * R * sizeof(real));
    memset(s->dLA, 0, n * sizeof(real));
    for (int j = 0; j < R; j++) s->dlam[(size_t)(n - 1) * R + j] += s->dlo[ne + j];  // lo_j = lambda_j(last row)
    s->dLA[n - 1] += *gLA;
    real* dW = s->dW;
    for (int i = n - 1; i >= 0; i--) {  // the reads and W1's steps, in reverse
        size_t t = (size_t)(t0 + i);
        int jt = nh + i;
        const real* dyt = dy + (size_t)i * sdy;
        real *zq = s->zq + (size_t)i * w, *dzq = s->dzq + (size_t)i * w;
        if (deep) {
            const real *hq = s->hq + (size_t)i * w, *tq = s->tq + (size_t)i * w, *Wt = s->W + (size_t)(i + 1) * nP,
                       *Wp = s->W + (size_t)i * nP;
            for (int p = 0; p < d; p++)
                for (int e = 0; e < w; e++) dW[(size_t)p * w + e] += dyt[p] * hq[e];  // y_t = W1_t hq_t
            mm_nn(s->dhq, dyt, Wt, 1, w, d, 1, 0);
            for (int e = 0; e < w; e++) dzq[e] = s->dhq[e] * gelu_d1(zq[e], tq[e]);
            real at = x->a[t * x->sg], et = x->eta[t * x->sg], ga = 0;
            for (size_t e = 0; e < nP; e++) ga += dW[e] * Wp[e];
            gx->a[t * gx->sg] += ga;  // W1_t = a_t W1_{t-1} - eta_t sum_o gamma_t[o] r h^T
            for (int o = 0; o < c && jt - o >= 0; o++) {
                real gm = x->gam ? x->gam[t * x->sc + o] : 1, cf = et * gm, sv = 0;
                const real *r = s->r + (size_t)(jt - o) * d, *h = s->h + (size_t)(jt - o) * w;
                real *dr = s->dr + (size_t)(jt - o) * d, *dh = s->dh + (size_t)(jt - o) * w;
                for (int p = 0; p < d; p++) {
                    real rs = 0;
                    for (int e = 0; e < w; e++) {
                        real g = dW[(size_t)p * w + e];
                        rs += g * h[e];
                        dh[e] -= cf * g * r[p];
                    }
                    dr[p] -= cf * rs;
                    sv += r[p] * rs;
                }
                gx->eta[t * gx->sg] -= gm * sv;
                if (x->gam) gx->gam[t * gx->sc + o] -= et * sv;
            }
            for (size_t e = 0; e < nP; e++) dW[e] *= at;
        } else
            memcpy(dzq, dyt, d * sizeof(real));
        // the query read (recomputed for its softmax)
        phi_read(m, s, x, x->q + t * x->sx, ne, jt + 1, etok, av, lo, s->lam + (size_t)i * R, zq);
        phi_read_backward(m, s, x, gx, x->q + t * x->sx, gx->q + t * gx->sx, ne, jt + 1, etok, av, zq, dzq, s->dav,
                          s->dlo, s->dlam + (size_t)i * R);
    }
    // lambda = log sum_n exp(term_n): dterm_n = softmax weight * dlambda
    for (int i = 0; i < n; i++) {
        int jt = nh + i;
        for (int j = 0; j <= jt; j++) {
            real dl = s->dlam[(size_t)i * R + j], lm = s->lam[(size_t)i * R + j];
            if (dl == 0) continue;
            int n0, n1;
            phi_span(m, nh, j, jt, &n0, &n1);
            for (int nn = n0; nn <= n1; nn++) {
                size_t t = (size_t)(t0 + nn - nh);
                real pd = exp(phi_term(m, s, x, t0, nh, nn, j) - lm) * dl;
                s->dLA[nn - nh] -= pd;
                gx->eta[t * gx->sg] += pd / x->eta[t * x->sg];
                if (x->gam) gx->gam[t * gx->sc + nn - j] += pd / x->gam[t * x->sc + nn - j];
            }
        }
    }
    // the entry rows: back through the inner gradient, then the key pass
    for (int j = R - 1; j >= 0; j--) {
        size_t tj = (size_t)(t0 - nh + j);
        const real* davj = s->dav + (size_t)(ne + j) * w;
        real *z = s->z + (size_t)j * w, *dz = s->dz + (size_t)j * w, *dr = s->dr + (size_t)j * d;
        real* dv = gx->v + tj * gx->sx;
        if (!deep) {  // a_j = -r_j; l2: r_j = z_j - v_j; dot: r_j = -v_j
            for (int i = 0; i < d; i++) {
                real g = dr[i] - davj[i];
                dv[i] -= g;
                if (m->bias != BIAS_DOT) dz[i] += g;
            }
        } else {
            const real *tz = s->tz + (size_t)j * w, *g = s->g + (size_t)j * w, *r = s->r + (size_t)j * d,
                       *h = s->h + (size_t)j * w;
            real *dh = s->dh + (size_t)j * w, *dg = s->dhq;  // (dhq: scratch of w)
            if (m->phistar == 2) {  // the bound a^ = a rho: da = rho (da^ - a^ mean(da^ a^))
                const real* an = av + (size_t)(ne + j) * w;
                real m2 = dotv(davj, an, w);
                for (int e = 0; e < w; e++) s->da[e] = s->ra[j] * (davj[e] - an[e] * m2 / w);
                davj = s->da;
            }
            for (int e = 0; e < w; e++) {  // a_j = -g_j * GELU'(z_j)
                dg[e] = -davj[e] * gelu_d1(z[e], tz[e]);
                dz[e] -= davj[e] * g[e] * gelu_d2(z[e], tz[e]);
            }
            for (int p = 0; p < d; p++) {  // g_j = W1_s^T r_j
                real acc = 0;
                for (int e = 0; e < w; e++) {
                    dW[(size_t)p * w + e] += r[p] * dg[e];
                    acc += W1s[(size_t)p * w + e] * dg[e];
                }
                dr[p] += acc;
            }
            for (int p = 0; p < d; p++) {  // r_j = bias(M(k_j), v_j), M(k_j) = W1_s h_j
                dv[p] -= dr[p];
                if (m->bias == BIAS_DOT) continue;
                for (int e = 0; e < w; e++) {
                    dW[(size_t)p * w + e] += dr[p] * h[e];
                    dh[e] += W1s[(size_t)p * w + e] * dr[p];
                }
            }
            for (int e = 0; e < w; e++) dz[e] += dh[e] * gelu_d1(z[e], tz[e]);
        }
        const real* kj = x->k + tj * x->sx;
        phi_read(m, s, x, kj, ne, 0, etok, av, lo, NULL, z);
        phi_read_backward(m, s, x, gx, kj, gx->k + tj * gx->sx, ne, 0, etok, av, z, dz, s->dav, s->dlo, NULL);
    }
    // LA_t = LA_{t-1} + log a_t
    real g = 0;
    for (int i = n - 1; i >= 0; i--) {
        size_t t = (size_t)(t0 + i);
        g += s->dLA[i];
        gx->a[t * gx->sg] += g / x->a[t * x->sg];
    }
    *gLA = g;
}

// A read without update (MAC's h, SPEC §9.3): M(x) at a committed state, the ne history entries and W1s (deep):
//     out = W1s GELU(W2 phi*(x))    (linear: out = W phi*(x)), W2 phi*(x) over the entries e < ne only
static void phi_h_read(const MemCfg* m, PhiScr* s, const PhiSeq* x, const real* xq, int ne, const int* etok,
                       const real* av, const real* lo, const real* W1s, real* out) {
    int w = m->dm;
    real *zq = s->zq, *tq = s->tq, *hq = s->hq;  // (the chunk scratch's first row)
    phi_read(m, s, x, xq, ne, 0, etok, av, lo, NULL, zq);
    if (m->depth != 2) {
        memcpy(out, zq, m->d * sizeof(real));
        return;
    }
    for (int e = 0; e < w; e++) {
        tq[e] = gelu_tanh(zq[e]);
        hq[e] = gelu(zq[e], tq[e]);
    }
    mm_nt(out, hq, W1s, 1, m->d, w, 1, 0);
}
// its backward from dout: dxq (accumulated), dW1 += dout hq^T, the entries' dav, dlo and keys (gx->k)
static void phi_h_read_backward(const MemCfg* m, PhiScr* s, const PhiSeq* x, const PhiSeq* gx, const real* xq,
                                real* dxq, int ne, const int* etok, const real* av, const real* lo, const real* W1s,
                                const real* dout, real* dW1, real* dav, real* dlo) {
    int w = m->dm, d = m->d;
    real tmp[256];
    phi_h_read(m, s, x, xq, ne, etok, av, lo, W1s, tmp);  // (recomputed: zq, hq and the softmax p in s)
    real* dzq = s->dzq;
    if (m->depth == 2) {
        for (int p = 0; p < d; p++)
            for (int e = 0; e < w; e++) dW1[(size_t)p * w + e] += dout[p] * s->hq[e];
        mm_nn(s->dhq, dout, W1s, 1, w, d, 1, 0);  // dhq = W1s^T dout
        for (int e = 0; e < w; e++) dzq[e] = s->dhq[e] * gelu_d1(s->zq[e], s->tq[e]);
    } else
        memcpy(dzq, dout, d * sizeof(real));
    phi_read_backward(m, s, x, gx, xq, dxq, ne, 0, etok, av, s->zq, dzq, dav, dlo, NULL);
}

// ----------------------------------------------------------------------------
// 4. the model

typedef struct {
    int V, Vp, D, L, H, E, F, b,
        K;  // vocab, padded vocab, width, layers, heads, mem expansion, SwiGLU width, chunk, conv
    int mem_depth, mem_resid, mem_ln;  // memory network (SPEC §4)
    int bias, algo;  // BIAS_* (l2, dot, lp, huber); ALGO_GD, ALGO_MOMENTUM, ALGO_MUON, ALGO_MUON_CHUNK (slot 15, -U)
    int gate_a, gate_eta;  // learned gates (1) or fixed a = 1, eta = 1 (0)
    int retention;  // RET_NONE, RET_LQ (Moneta), RET_KL (Memora)
    int gate_rank;  // 0: eta, delta per head; r > 0: per channel through a rank-r projection
    float eta_max;
    int anchor;  // retention toward P_0 (1) or toward 0 (0, SPEC §5): README "anchored retention"
    char pattern
        [129];  // mixer per layer: 'M' memory, 'A' causal attention, 'S' sliding-window attention (SPEC §2, §9.1)
    int window;  // W of the 'S' layers: key j visible to query i iff i - W < j <= i (0 when there is no 'S')
    int lattice, lat_k,
        lat_ablate;  // Lattice (SPEC §5.8, section 3b): LAT_NONE/DEC/ENC/SIM; states kept every lat_k tokens
    // (-w); ablation bits LATA_NO_ORTHO | LATA_NO_RENORM (-Y). The forgetting gate mu (-B 1) is gate_a
    int arch, npers, seg;  // Titans layers (section 4b, SPEC §9.2-9.3): ARCH_*, N_p persistent tokens, MAC segment C
    int omega;  // Omega rule window c (SPEC §5.5); 0 or 1: off (header slot 30, flag -G)
    int poly;  // degree-2 polynomial features on q, k (SPEC §5.6): 1 on (header slot 31, flag -I)
    int gated;  // the gated deep memory of ATLAS++ (SPEC §4): 1 on (header slot 32, flag -T; 0 in older files)
    int phistar;  // the phi* memory (section 3c, DT and DOT): 1 on, 2 with bounded W2 steps (slot 33, -I 2, -I 3)
} Config;
// the Titans arrangements (header slot 24): every layer of the model is of that kind (its pattern letters are all 'M')
enum { ARCH_NONE = 0, ARCH_MAL = 1, ARCH_MAG = 2, ARCH_MAC = 3 };

// SPEC §5.9 presets: the memory part of the config; sizes come from the command line.
// Long sequences (SPEC §10, README "Long sequences"): the deep memories with a retention gate decay toward P_0
// (anchor), and eta_max bounds the inner step where training at T = 2048 drove it into gradient spikes (titans 0.1:
// momentum multiplies the step by ~1/(1-theta); yaad 0.3); Moneta's accounts for its inverted scale (a step in A
// moves P = A/s by eta/s, s ~ |P_0|_4^-2), Memora's for the stiff LN over its softmax rows (0.1 spiked at d_m = 256).
// From the measurements
// of dev/bench_long.sh (norm at init vs T) and dev/train_long.sh (training at T = 2048).
static int preset_config(Config* c, const char* name) {
    // clang-format off
    c->mem_depth = 2; c->mem_resid = 1; c->mem_ln = 1; c->bias = BIAS_L2; c->algo = ALGO_GD; c->gate_a = 1; c->gate_eta = 1;
    c->retention = RET_NONE; c->gate_rank = 0; c->eta_max = 1.0f; c->b = 16; c->anchor = 0; c->omega = 1; c->poly = 0; c->gated = 0;
    c->phistar = 0;
    c->lattice = LAT_NONE; c->lat_k = 0; c->lat_ablate = 0;
    // titans' eta_max: 0.03 since 2026-11-27 (at 0.1 its gradient spiked in training at T = 4096 in 3 seeds of 8:
    // README "Long sequences"); mal, mag and mac take it with the titans memory
    if (!strcmp(name, "titans")) { c->algo = ALGO_MOMENTUM; c->anchor = 1; c->eta_max = 0.03f; }
    else if (!strcmp(name, "moneta")) { c->bias = BIAS_LP; c->retention = RET_LQ; c->anchor = 1; c->eta_max = 0.003f; }
    else if (!strcmp(name, "yaad")) { c->bias = BIAS_HUBER; c->anchor = 1; c->eta_max = 0.3f; }
    else if (!strcmp(name, "memora")) { c->retention = RET_KL; c->eta_max = 0.01f; }  // at d_m = 64: preset_size_defaults
    else if (!strcmp(name, "ttt_mlp")) { c->gate_a = 0; }
    else if (!strcmp(name, "linear_attn")) { c->mem_depth = 1; c->mem_resid = c->mem_ln = 0; c->bias = BIAS_DOT; c->gate_a = c->gate_eta = 0; }
    else if (!strcmp(name, "deltanet")) { c->mem_depth = 1; c->mem_resid = c->mem_ln = 0; c->gate_a = 0; c->b = 1; }
    else if (!strcmp(name, "gated_deltanet")) { c->mem_depth = 1; c->mem_resid = c->mem_ln = 0; c->b = 1; }
    else if (!strcmp(name, "lattice") || !strcmp(name, "lattice_enc") || !strcmp(name, "lattice_sim")) {   // SPEC §5.8: slots, no a gate
        c->mem_depth = 1; c->mem_resid = c->mem_ln = 0; c->gate_a = 0; c->b = 1; c->lat_k = 64;
        c->lattice = name[7] == 0 ? LAT_DEC : name[8] == 'e' ? LAT_ENC : LAT_SIM; }
    else if (!strcmp(name, "omeganet")) { c->omega = 8; c->poly = 1; c->anchor = 1; c->eta_max = 0.3f; }
    else if (!strcmp(name, "atlas")) { c->algo = ALGO_MUON; c->omega = 8; c->poly = 1; c->anchor = 1; c->eta_max = 0.1f; }
    else if (!strcmp(name, "atlas_chunk")) { preset_config(c, "atlas"); c->algo = ALGO_MUON_CHUNK; }  // chunk-level muon
    else if (!strcmp(name, "atlas_pp")) { preset_config(c, "atlas"); c->gated = 1; }  // ATLAS++: the gated deep memory
    else if (!strcmp(name, "deep_transformer") || !strcmp(name, "dot")) {   // section 3c: M(x) = W1 GELU(W2 phi*(x)), no residual, no LN
        c->phistar = 2; c->mem_resid = c->mem_ln = 0; c->eta_max = 0.1f;   // the W2 steps bounded (without, W1 and
        if (name[1] == 'o') { c->omega = 8; c->eta_max = 0.03f; }   // the signals feed each other: both overflowed on
        else c->bias = BIAS_DOT; }   // MQAR at T = 128-256). DOT: l2 with the omega window (its steps sum c gradients;
                                     // 0.1 diverged on text); DT: Hebbian
    else if (!strcmp(name, "transformer")) return preset_config(c, "titans");  // all 'A' (preset_pattern); the memory fields are unused
    else if (!strcmp(name, "mal") || !strcmp(name, "mag") || !strcmp(name, "mac")) {   // Titans layers (section 4b), titans memory (-Q: another)
        preset_config(c, "titans"); c->arch = name[2] == 'l' ? ARCH_MAL : name[2] == 'g' ? ARCH_MAG : ARCH_MAC;
        if (c->arch == ARCH_MAL) c->eta_max = 0.02f;  // MAL's memory went expansive in training at T = 4096 more often
        return 1;                                      // than titans' (README); -Q's preset sets its own eta_max
    }
    // clang-format on
    else {  // "<memory preset>-H": that memory, in the Samba-style hybrid pattern (preset_pattern)
        size_t n = strlen(name);
        char base[64];
        if (n < 3 || n - 2 >= sizeof base || strcmp(name + n - 2, "-H")) return 0;
        memcpy(base, name, n - 2);
        base[n - 2] = 0;
        return strcmp(base, "transformer") && preset_config(c, base);
    }
    return 1;
}
// The defaults that depend on the model's sizes, once D, H and E are set. Memora's inner step stiffens with d_m
// (the gradient norm at init tracks eta_max * d_m; README "Long sequences"), so its eta_max is 0.64 / d_m:
// 0.01 at d_m = 64, 0.0025 at d_m = 256 (the 103M shape).
static void preset_size_defaults(Config* c) {
    if (c->retention == RET_KL && c->mem_depth == 2 && c->E > 0 && c->H > 0 && c->D / c->H > 0)
        c->eta_max = 0.64f / (c->E * (c->D / c->H));
}
// SPEC §9.4: the layer pattern of a preset with L layers: all 'A' for transformer, 'MS' repeated (truncated for odd L)
// for the "-H" hybrids, else all 'M'
static void preset_pattern(char* out, const char* name, int L) {
    size_t n = strlen(name);
    int hybrid = n >= 2 && !strcmp(name + n - 2, "-H");
    for (int l = 0; l < L; l++) out[l] = !strcmp(name, "transformer") ? 'A' : hybrid ? "MS"[l % 2] : 'M';
    out[L] = 0;
}
static const char* const PRESETS =
    "titans, moneta, yaad, memora, ttt_mlp, linear_attn, deltanet, gated_deltanet, lattice, lattice_enc, lattice_sim, omeganet, atlas, "
    "atlas_pp, atlas_chunk, deep_transformer, dot, "
    "transformer; "
    "a memory preset with -H (e.g. titans-H) alternates it with sliding-window attention; "
    "mal, mag, mac (Titans: memory as a layer, a gate, context; -Q the memory preset)";

static MemCfg mem_config(const Config* c) {
    MemCfg m;
    int d = c->D / c->H;
    m.d = d;
    m.depth = c->mem_depth;
    m.dm = c->mem_depth == 2 ? c->E * d : d;
    m.resid = c->mem_depth == 2 && c->mem_resid;
    m.ln = c->mem_depth == 2 && c->mem_ln;
    m.bias = c->bias;
    m.momentum = c->algo == ALGO_MOMENTUM;
    m.muon = c->algo == ALGO_MUON ? 1 : c->algo == ALGO_MUON_CHUNK ? 2 : 0;
    m.retention = c->retention;
    m.cw = c->gate_rank > 0;
    m.anchor = c->anchor;
    m.poly = c->poly;
    m.din = c->poly ? 1 + d + d * (d + 1) / 2 : d;  // D_phi (SPEC §5.6)
    m.gated = c->mem_depth == 2 && c->gated;
    m.nP = c->mem_depth == 2 ? d * m.dm + (1 + m.gated) * m.dm * m.din : d * m.din;
    m.phistar = c->phistar;
    m.phis = (real)sqrt((double)d);
    if (m.phistar) m.nP = c->mem_depth == 2 ? d * m.dm : 0;  // only W1 is finite (linear: no finite state)
    m.omega = c->omega > 1 ? c->omega : 1;
    m.lattice = c->lattice;
    m.lat_k = c->lat_k;
    m.lat_ablate = c->lat_ablate;  // Lattice: S is d x d (m = d slots)
    return m;
}

// Parameters: one allocation, tensors back to back in this order (the checkpoint layout). The table is the one list
// of them: X(name, decay, size). decay: AdamW weight decay (SPEC §8: matrices only; not norms, conv filters, gate
// biases, P_0, the memory LN, persistent tokens, poly's rho). size: in floats, an expression over the local names of
// fill_in_parameter_sizes below. The tensors only a memory mixer uses (conv, gates, P_0, memory LN, wg, rmsh_w) are
// stacked over the Lm = number of 'M' layers (L there), the others over all LL layers.
#define PARAMETER_TABLE(X)                                                                                         \
    X(wte, 1, (size_t)c->Vp* D) /* token embedding, tied with the LM head */                                       \
    X(rms1_w, 0, LL* D) /* the mixer's RMSNorm */                                                                  \
    X(wq, 1, LL* D* D) /* q, k, v projections */                                                                   \
    X(wk, 1, LL* D* D)                                                                                             \
    X(wv, 1, LL* D* D)                                                                                             \
    X(conv_q, 0, L* D* K) /* short causal convolutions */                                                          \
    X(conv_k, 0, L* D* K)                                                                                          \
    X(conv_v, 0, L* D* K)                                                                                          \
    X(gate_a_w, 1, ga* L* H* D) /* retention a_t (SPEC §5.3) */                                                   \
    X(gate_a_b, 0, ga* L* H)                                                                                       \
    X(gate_eta_w, 1, ge* L* gw) /* step size eta_t: per head, or rank R per channel */                             \
    X(gate_eta_b, 0, ge* L* gb)                                                                                    \
    X(gate_theta_w, 1, gt* L* H* D) /* momentum theta_t */                                                         \
    X(gate_theta_b, 0, gt* L* H)                                                                                   \
    X(mem_p0, 0, c->lattice ? 0 : L* H* m.nP) /* the memory's initial state P_0 per head */                        \
    X(mem_ln_g, 0, ln* L* H* d) /* the deep memory's LayerNorm affine */                                           \
    X(mem_ln_b, 0, ln* L* H* d)                                                                                    \
    X(wg, 1, L* D* D) /* output gate */                                                                            \
    X(rmsh_w, 0, L* D) /* per-head RMSNorm of the memory read */                                                   \
    X(wo, 1, LL* D* D) /* output projection */                                                                     \
    X(rms2_w, 0, LL* D) /* SwiGLU MLP and its RMSNorm */                                                           \
    X(mlp_w1, 1, LL* F* D)                                                                                         \
    X(mlp_w3, 1, LL* F* D)                                                                                         \
    X(mlp_w2, 1, LL* D* F)                                                                                         \
    X(rmsf_w, 0, D) /* final RMSNorm */                                                                            \
    X(gate_eta_up, 1, ge* L* D* R) /* channel-wise eta's up-projection (after rmsf_w: older layouts stay valid) */ \
    X(gate_delta_w, 1, hu* L* gw) /* Yaad's Huber threshold delta_t */                                             \
    X(gate_delta_b, 0, hu* L* gb)                                                                                  \
    X(gate_delta_up, 1, hu* L* D* R)                                                                               \
    X(pers, 0, LL * c->npers * D) /* Titans layers (section 4b): N_p persistent D-vectors per layer */             \
    X(att_wq, 1, c->arch ? LL* D* D : 0) /* the Titans layers' attention q, k, v, o */                             \
    X(att_wk, 1, c->arch ? LL* D* D : 0)                                                                           \
    X(att_wv, 1, c->arch ? LL* D* D : 0)                                                                           \
    X(att_wo, 1, c->arch ? LL* D* D : 0)                                                                           \
    X(rmsa_w, 0, c->arch == ARCH_MAL ? LL * D : 0) /* MAL's RMSNorm_attn */                                        \
    X(og1_w, 0, c->arch >= ARCH_MAG ? LL * D : 0) /* the o(y, m) gate's two RMSNorms (MAG, MAC) */                 \
    X(og2_w, 0, c->arch >= ARCH_MAG ? LL * D : 0)                                                                  \
    X(gate_gamma_w, 1, L* Hc* D) /* ATLAS: omega's window gates (SPEC §5.5), H*c outputs */                       \
    X(gate_gamma_b, 0, L* Hc)                                                                                      \
    X(poly_rho, 0, c->poly ? L * 3 : 0) /* poly (SPEC §5.6): a_i = softplus(rho_i) */
#define PARAM_FIELD(name, decay, size) real* name;
#define PARAM_NAME(name, decay, size) #name,
#define PARAM_DECAY_OF(name, decay, size) decay,
#define PARAM_SIZE(name, decay, size) (size),
#define PARAM_PTR(name, decay, size) &p->name,
typedef struct {
    PARAMETER_TABLE(PARAM_FIELD)
} ParameterTensors;
#define NUM_PARAM_TENSORS ((int)(sizeof(ParameterTensors) / sizeof(real*)))
static const char* const PARAM_NAMES[] = {PARAMETER_TABLE(PARAM_NAME)};
static const int PARAM_DECAY[] = {PARAMETER_TABLE(PARAM_DECAY_OF)};

static int memory_layers(const Config* c) {
    int n = 0;
    for (int l = 0; l < c->L; l++) n += c->pattern[l] == 'M';
    return n;
}
static void fill_in_parameter_sizes(size_t* s, const Config* c) {
    size_t LL = c->L, L = memory_layers(c), D = c->D, H = c->H, d = D / H, K = c->K, F = c->F;
    MemCfg m = mem_config(c);
    size_t ga = c->gate_a, ge = c->gate_eta, gt = c->algo != ALGO_GD, ln = m.ln, hu = c->bias == BIAS_HUBER,
           R = c->gate_rank;
    size_t gw = R ? R * D : H * D,
           gb = R ? D : H;  // a gate's first matrix and its bias: per head, or rank R per channel
    size_t Hc = m.omega > 1 ? H * m.omega : 0;  // omega's gamma gates: H*c outputs (none without omega)
    size_t v[] = {PARAMETER_TABLE(PARAM_SIZE)};
    memcpy(s, v, sizeof v);
}
static void point_parameters(ParameterTensors* p, real* mem, const size_t* sizes) {
    real** ptrs[] = {PARAMETER_TABLE(PARAM_PTR)};
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        *ptrs[i] = mem;
        mem += sizes[i];
    }
}

// Activations: one allocation; every per-layer tensor stacked as (L, ...). N = B*T.
#define NUM_ACT_TENSORS 39
typedef struct {
    real* encoded;  // (N, D) token embeddings
    real *ln1, *ln1_rstd;  // (L, N, D), (L, N)   u = RMSNorm(x)
    real *qp, *kp, *vp;  // (L, N, D) u Wq^T ... before the conv
    real *qc, *kc, *vc;  // (L, N, D) after the conv
    real *qs, *ks;  // (L, N, D) SiLU(qc), SiLU(kc)
    real *q, *k, *qrn, *krn, *v;  // (L, N, D) l2-normed q, k; (L, N, H) their 1/norm; v = SiLU(vc)
    real *ga, *geta, *gth, *gdel;  // (L, N, H) gates a, theta; (L, N, Ge) eta, delta (Ge = D channel-wise, else H)
    real *geta_lr, *gdel_lr;  // (L, N, R) the rank-R projections of channel-wise eta and delta
    real *y, *yrstd, *yn;  // (L, N, D) memory read, (L, N, H), RMSNorm_head(y)
    real *gp, *z, *mo, *res2;  // (L, N, D) u Wg^T, yn*SiLU(gp), z Wo^T, x + mo
    real *ln2, *ln2_rstd;  // (L, N, D), (L, N)
    real *h1, *h3, *hg;  // (L, N, F) SwiGLU branches and product
    real *mlpo, *res3;  // (L, N, D) hg W2^T, res2 + mlpo (the layer output)
    real *lnf, *lnf_rstd, *logits, *probs, *losses;  // (N, D), (N), (N, Vp), (N, Vp), (N)
    real* ggam;  // (L, N, H*c) omega's gamma gates (none without omega)
    real *qf, *kf;  // (L, N, H*D_phi) poly features of q, k (none without poly)
} ActivationTensors;

static void fill_in_activation_sizes(size_t* s, const Config* c, int B, int T) {
    size_t N = (size_t)B * T, L = c->L, D = c->D, H = c->H, F = c->F, Ge = c->gate_rank ? D : H, R = c->gate_rank;
    size_t v[NUM_ACT_TENSORS] = {N * D,
                                 L * N * D,
                                 L * N,
                                 L * N * D,
                                 L * N * D,
                                 L * N * D,
                                 L * N * D,
                                 L * N * D,
                                 L * N * D,
                                 L * N * D,
                                 L * N * D,
                                 L * N * D,
                                 L * N * D,
                                 L * N * H,
                                 L * N * H,
                                 L * N * D,
                                 L * N * H,
                                 L * N * Ge,
                                 L * N * H,
                                 L * N * Ge,
                                 L * N * R,
                                 L * N * R,
                                 L * N * D,
                                 L * N * H,
                                 L * N * D,
                                 L * N * D,
                                 L * N * D,
                                 L * N * D,
                                 L * N * D,
                                 L * N * D,
                                 L * N,
                                 L * N * F,
                                 L * N * F,
                                 L * N * F,
                                 L * N * D,
                                 L * N * D,
                                 c->omega > 1 ? L * N * H * c->omega : 0,
                                 c->poly ? L * N * H * mem_config(c).din : 0,
                                 c->poly ? L * N * H * mem_config(c).din : 0};
    memcpy(s, v, sizeof v);
}
static void point_activations(ActivationTensors* a, real* mem, const size_t* sizes, const Config* c, int B, int T) {
    real** ptrs[NUM_ACT_TENSORS] = {
        &a->encoded,  &a->ln1,     &a->ln1_rstd, &a->qp,    &a->kp,   &a->vp,   &a->qc,   &a->kc,   &a->vc,   &a->qs,
        &a->ks,       &a->q,       &a->k,        &a->qrn,   &a->krn,  &a->v,    &a->ga,   &a->geta, &a->gth,  &a->gdel,
        &a->geta_lr,  &a->gdel_lr, &a->y,        &a->yrstd, &a->yn,   &a->gp,   &a->z,    &a->mo,   &a->res2, &a->ln2,
        &a->ln2_rstd, &a->h1,      &a->h3,       &a->hg,    &a->mlpo, &a->res3, &a->ggam, &a->qf,   &a->kf};
    for (int i = 0; i < NUM_ACT_TENSORS; i++) {
        *ptrs[i] = mem;
        mem += sizes[i];
    }
    size_t N = (size_t)B * T;  // the head: not layer-stacked
    a->lnf = mem;
    mem += N * c->D;
    a->lnf_rstd = mem;
    mem += N;
    a->logits = mem;
    mem += N * c->Vp;
    a->probs = mem;
    mem += N * c->Vp;
    a->losses = mem;
}
static size_t head_act_size(const Config* c, int B, int T) {
    size_t N = (size_t)B * T;
    return N * c->D + N + 2 * N * c->Vp + N;
}

typedef struct {
    Config cfg;
    MemCfg mem;
    size_t param_sizes[NUM_PARAM_TENSORS], num_params;
    ParameterTensors params, grads;
    real *params_memory, *grads_memory, *m_memory, *v_memory;  // v_memory: AdamW second moment
    int B, T;  // the activations' shape (a forward of a new shape reallocates)
    size_t act_sizes[NUM_ACT_TENSORS], num_acts;
    ActivationTensors acts, grads_acts;
    real *acts_memory, *grads_acts_memory;
    real *mem_P, *mem_S;  // (L, B, H, nchunks, nP) memory state at every chunk start (S: momentum only)
    real* mem_dbh;  // (B, H, nP + 2d) per-sequence gradients of P_0 and the memory LN, summed over B after
    MemChunk* chunks;
    real* chunk_memory;  // one chunk scratch per thread
    int* inputs;
    int* targets;  // (B, T)
    real mean_loss;  // -1 when the last forward had no targets
    const uint8_t* loss_mask;  // (B, T) 1 where a position's loss counts (answers of a synthetic task); NULL: all
    long adam_t;  // AdamW step count (bias correction)
    size_t opt_lo, opt_n;  // the parameters [opt_lo, opt_lo + opt_n) whose AdamW moments this process keeps and updates
        // (all of them, unless -K 1 shards the optimizer over data-parallel ranks: ZeRO stage 1)
    int nf_layer, nf_chunk;
    const char* nf_what;  // where the last backward first went non-finite in a memory (nf_what NULL: nowhere)
    int mlayer
        [128];  // layer l's index in the memory-only parameter tensors (its rank among the 'M' layers); -1: attention
    real* lat_scratch;  // Lattice: per thread, a segment's states, the carry and vectors (lattice_scratch_size)
    real *phi_av, *phi_lo, *phi_LA, *phi_scr_mem;  // phi* memory (section 3c): (L, B, H, entries) signals (d_m each),
    int* phi_etok;  // offsets and tokens; (L, B, H, nchunks) chunk-start LA; per-thread scratch
    PhiScr* phi_scr;
    struct Titans* tx;
    int tx_sub;  // Titans layers (section 4b): the stream model and its buffers; tx_sub: this is that stream model
} Model;
// section 4b (Titans layers), called from the model's functions below
static void titans_alloc(Model* M, int B, int T);
static void titans_free(Model* M);
static void titans_init(Model* M, uint64_t* r);
static void titans_layer_forward(Model* M, int l, const real* x);
static void titans_layer_backward(Model* M, int l, real* dx, real* du);

static int nchunks(const Model* M, int T) { return (T + M->cfg.b - 1) / M->cfg.b; }

// copy rows [t0, t0+n) of head h of sequence bb from a (B, T, G*w) tensor into dst (n, w), and back
static void gather_rows(real* dst, const real* src, int bb, int h, int t0, int n, int T, int G, int w) {
    for (int t = 0; t < n; t++)
        memcpy(dst + (size_t)t * w, src + (((size_t)bb * T + t0 + t) * G + h) * w, w * sizeof(real));
}
static void scatter_rows(real* dst, const real* src, int bb, int h, int t0, int n, int T, int G, int w) {
    for (int t = 0; t < n; t++)
        memcpy(dst + (((size_t)bb * T + t0 + t) * G + h) * w, src + (size_t)t * w, w * sizeof(real));
}
// One token's memory inputs into row t of a chunk: q, k, v (d each), a, theta, and eta, delta (d values each
// when channel-wise, else one). Channel-wise eta scales the error, so the recurrences' scalar eta is then 1.
static void chunk_set_row(const MemCfg* m, MemChunk* c, int t, const real* q, const real* k, const real* v, real a,
                          real theta, const real* eta, const real* delta) {
    int d = m->d;
    memcpy(c->q + (size_t)t * d, q, d * sizeof(real));
    memcpy(c->k + (size_t)t * d, k, d * sizeof(real));
    memcpy(c->v + (size_t)t * d, v, d * sizeof(real));
    c->a[t] = a;
    c->theta[t] = theta;
    if (m->cw) {
        c->eta[t] = 1;
        memcpy(c->etac + (size_t)t * d, eta, d * sizeof(real));
    } else
        c->eta[t] = eta[0];
    if (m->bias == BIAS_HUBER)
        for (int i = 0; i < d; i++) c->delta[(size_t)t * d + i] = delta[m->cw ? i : 0];
}
// and the gradients of row t back (a per-head delta gets the sum over the head's channels)
static void chunk_get_row_grads(const MemCfg* m, const MemChunk* c, int t, real* dq, real* dk, real* dv, real* da,
                                real* dtheta, real* deta, real* ddelta) {
    int d = m->d;
    memcpy(dq, c->dq + (size_t)t * d, d * sizeof(real));
    memcpy(dk, c->dk + (size_t)t * d, d * sizeof(real));
    memcpy(dv, c->dv + (size_t)t * d, d * sizeof(real));
    *da = c->da[t];
    *dtheta = c->dtheta[t];
    if (m->cw)
        memcpy(deta, c->detac + (size_t)t * d, d * sizeof(real));
    else
        *deta = c->deta[t];
    if (m->bias == BIAS_HUBER) {
        if (m->cw)
            memcpy(ddelta, c->ddelta + (size_t)t * d, d * sizeof(real));
        else {
            real s = 0;
            for (int i = 0; i < d; i++) s += c->ddelta[(size_t)t * d + i];
            *ddelta = s;
        }
    }
}
// rows [t0, t0+n) of sequence bb, head h of layer l (from a, the activations) into the chunk, and gradients back (into
// g)
static void load_chunk_inputs(MemChunk* c, const Model* M, int l, int bb, int h, int t0, int n) {
    const ActivationTensors* a = &M->acts;
    int T = M->T, H = M->cfg.H, D = M->cfg.D, d = M->mem.d, ew = M->mem.cw ? d : 1, Ge = M->mem.cw ? D : H;
    for (int t = 0; t < n; t++) {
        size_t r = (size_t)l * M->B * T + (size_t)bb * T + t0 + t;  // row in the layer-stacked (L, B*T, .) tensors
        chunk_set_row(&M->mem, c, t, a->q + r * D + h * d, a->k + r * D + h * d, a->v + r * D + h * d, a->ga[r * H + h],
                      a->gth[r * H + h], a->geta + r * Ge + h * ew, a->gdel + r * Ge + h * ew);
    }
}
static void store_chunk_grads(const MemChunk* c, Model* M, int l, int bb, int h, int t0, int n) {
    ActivationTensors* g = &M->grads_acts;
    int T = M->T, H = M->cfg.H, D = M->cfg.D, d = M->mem.d, ew = M->mem.cw ? d : 1, Ge = M->mem.cw ? D : H;
    for (int t = 0; t < n; t++) {
        size_t r = (size_t)l * M->B * T + (size_t)bb * T + t0 + t;
        chunk_get_row_grads(&M->mem, c, t, g->q + r * D + h * d, g->k + r * D + h * d, g->v + r * D + h * d,
                            &g->ga[r * H + h], &g->gth[r * H + h], g->geta + r * Ge + h * ew,
                            g->gdel + r * Ge + h * ew);
    }
}

// The gates of layer l for N rows of u (SPEC §3): a, theta per head (sigmoid); eta = eta_max sigmoid and
// Yaad's delta = softplus, per head, or per channel through a rank-R projection u -> R^R -> R^D.
// Gates a preset does not learn are constants: a = 1, eta = 1, theta = 0 (gd).
static void gate_forward(real* out, real* lr, const real* u, const real* w, const real* bias, const real* up, int N,
                         int D, int G, int R) {
    if (R) {
        matmul_forward(lr, u, w, NULL, N, D, R);
        matmul_forward(out, lr, up, bias, N, R, G);
    } else
        matmul_forward(out, u, w, bias, N, D, G);
}
static void gate_backward(real* du, real* dw, real* dbias, real* dup, real* dlr, const real* dout, const real* u,
                          const real* w, const real* up, const real* lr, int N, int D, int G, int R) {
    if (R) {
        matmul_backward(dlr, dup, dbias, dout, lr, up, N, R, G);
        matmul_backward(du, dw, NULL, dlr, u, w, N, D, R);
    } else
        matmul_backward(du, dw, dbias, dout, u, w, N, D, G);
}
static void gates_forward(const Model* M, int l, const real* u, int N, real* ga, real* geta, real* gth, real* gdel,
                          real* eta_lr, real* del_lr) {
    l = M->mlayer[l];  // the gate tensors are stacked over the memory layers
    const Config* c = &M->cfg;
    const ParameterTensors* p = &M->params;
    int D = c->D, H = c->H, R = c->gate_rank, Ge = R ? D : H;
    size_t gw = R ? (size_t)R * D : (size_t)H * D;
    if (c->gate_a) {
        matmul_forward(ga, u, p->gate_a_w + (size_t)l * H * D, p->gate_a_b + (size_t)l * H, N, D, H);
        gate_act_forward(ga, (size_t)N * H, 1);
    } else
        fill_const(ga, (size_t)N * H, 1);
    if (c->gate_eta) {
        gate_forward(geta, eta_lr, u, p->gate_eta_w + l * gw, p->gate_eta_b + (size_t)l * Ge,
                     R ? p->gate_eta_up + (size_t)l * D * R : NULL, N, D, Ge, R);
        gate_act_forward(geta, (size_t)N * Ge, c->eta_max);
    } else
        fill_const(geta, (size_t)N * Ge, 1);
    if (c->algo != ALGO_GD) {  // momentum's and muon's theta
        matmul_forward(gth, u, p->gate_theta_w + (size_t)l * H * D, p->gate_theta_b + (size_t)l * H, N, D, H);
        gate_act_forward(gth, (size_t)N * H, 1);
    } else
        fill_const(gth, (size_t)N * H, 0);
    if (c->bias == BIAS_HUBER) {
        gate_forward(gdel, del_lr, u, p->gate_delta_w + l * gw, p->gate_delta_b + (size_t)l * Ge,
                     R ? p->gate_delta_up + (size_t)l * D * R : NULL, N, D, Ge, R);
        softplus_forward(gdel, (size_t)N * Ge);
    }
}
// from the gates' gradients (turned into pre-activation gradients in place) to du and the gate parameters
static void gates_backward(Model* M, int l, real* du, const real* u, int N, const ActivationTensors* a,
                           ActivationTensors* g, size_t oH, size_t oG, size_t oR) {
    l = M->mlayer[l];  // the gate tensors are stacked over the memory layers (the offsets oH, oG, oR are the caller's)
    const Config* c = &M->cfg;
    const ParameterTensors* p = &M->params;
    ParameterTensors* dp = &M->grads;
    int D = c->D, H = c->H, R = c->gate_rank, Ge = R ? D : H;
    size_t gw = R ? (size_t)R * D : (size_t)H * D, nH = (size_t)N * H, nG = (size_t)N * Ge;
    if (c->gate_a) {
        gate_act_backward(g->ga + oH, g->ga + oH, a->ga + oH, nH, 1);
        matmul_backward(du, dp->gate_a_w + (size_t)l * H * D, dp->gate_a_b + (size_t)l * H, g->ga + oH, u,
                        p->gate_a_w + (size_t)l * H * D, N, D, H);
    }
    if (c->gate_eta) {
        gate_act_backward(g->geta + oG, g->geta + oG, a->geta + oG, nG, c->eta_max);
        gate_backward(du, dp->gate_eta_w + l * gw, dp->gate_eta_b + (size_t)l * Ge,
                      R ? dp->gate_eta_up + (size_t)l * D * R : NULL, g->geta_lr + oR, g->geta + oG, u,
                      p->gate_eta_w + l * gw, R ? p->gate_eta_up + (size_t)l * D * R : NULL, a->geta_lr + oR, N, D, Ge,
                      R);
    }
    if (c->algo != ALGO_GD) {
        gate_act_backward(g->gth + oH, g->gth + oH, a->gth + oH, nH, 1);
        matmul_backward(du, dp->gate_theta_w + (size_t)l * H * D, dp->gate_theta_b + (size_t)l * H, g->gth + oH, u,
                        p->gate_theta_w + (size_t)l * H * D, N, D, H);
    }
    if (c->bias == BIAS_HUBER) {
        softplus_backward(g->gdel + oG, g->gdel + oG, a->gdel + oG, nG);
        gate_backward(du, dp->gate_delta_w + l * gw, dp->gate_delta_b + (size_t)l * Ge,
                      R ? dp->gate_delta_up + (size_t)l * D * R : NULL, g->gdel_lr + oR, g->gdel + oG, u,
                      p->gate_delta_w + l * gw, R ? p->gate_delta_up + (size_t)l * D * R : NULL, a->gdel_lr + oR, N, D,
                      Ge, R);
    }
}

// poly (SPEC §5.6): phi(x) = [sqrt(a0); sqrt(a1) x; sqrt(a2) (x_i^2)_i; sqrt(2 a2) (x_i x_j)_{i<j}], a = softplus(rho),
// so phi(q).phi(k) = a0 + a1 q.k + a2 (q.k)^2; per head, rows x (N, H*d) -> out (N, H*D_phi); the pairs row-major (i,
// then j > i)
static void poly_forward(real* out, const real* x, const real* rho, int N, int H, int d) {
    int dp = 1 + d + d * (d + 1) / 2;
    real sa[3];
    for (int i = 0; i < 3; i++) sa[i] = sqrt(rho[i] > 20 ? rho[i] : log1p(exp(rho[i])));
    real s2b = sqrt((real)2) * sa[2];
    for (size_t r = 0; r < (size_t)N * H; r++) {
        const real* xi = x + r * d;
        real* o = out + r * dp;
        int e = 1 + d + d;
        o[0] = sa[0];
        for (int i = 0; i < d; i++) {
            o[1 + i] = sa[1] * xi[i];
            o[1 + d + i] = sa[2] * xi[i] * xi[i];
        }
        for (int i = 0; i < d; i++)
            for (int j = i + 1; j < d; j++) o[e++] = s2b * xi[i] * xi[j];
    }
}
// dx += dphi/dx^T dout; drho += dphi/drho^T dout (d sqrt(c a)/da = sqrt(c a) / (2 a), da/drho = sigmoid(rho))
static void poly_backward(real* dx, real* drho, const real* dout, const real* x, const real* rho, int N, int H, int d) {
    int dp = 1 + d + d * (d + 1) / 2;
    real a[3], sa[3], g[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        a[i] = rho[i] > 20 ? rho[i] : log1p(exp(rho[i]));
        sa[i] = sqrt(a[i]);
    }
    real s2b = sqrt((real)2) * sa[2];
    for (size_t r = 0; r < (size_t)N * H; r++) {
        const real* xi = x + r * d;
        const real* go = dout + r * dp;
        real* dxi = dx + r * d;
        int e = 1 + d + d;
        real g1 = 0, g2 = 0, g2b = 0;
        g[0] += go[0];
        for (int i = 0; i < d; i++) {
            dxi[i] += sa[1] * go[1 + i] + 2 * sa[2] * xi[i] * go[1 + d + i];
            g1 += go[1 + i] * xi[i];
            g2 += go[1 + d + i] * xi[i] * xi[i];
        }
        for (int i = 0; i < d; i++)
            for (int j = i + 1; j < d; j++, e++) {
                dxi[i] += s2b * xi[j] * go[e];
                dxi[j] += s2b * xi[i] * go[e];
                g2b += go[e] * xi[i] * xi[j];
            }
        g[1] += g1;
        g[2] += g2 + sqrt((real)2) * g2b;  // (the sqrt(2 a2) block: sqrt(2) sqrt(a2))
    }
    for (int i = 0; i < 3; i++) drho[i] += g[i] * sa[i] / (2 * a[i]) * sigmoidr(rho[i]);
}

// omega's window gates (SPEC §5.5): gamma_t[o] = sigmoid(u_t W_gamma + b_gamma)[h*c + o], out (N, H*c) of layer l
static void omega_gates_forward(const Model* M, int l, const real* u, int N, real* out) {
    int D = M->cfg.D, Hc = M->cfg.H * M->mem.omega;
    size_t ml = M->mlayer[l];
    matmul_forward(out, u, M->params.gate_gamma_w + ml * Hc * D, M->params.gate_gamma_b + ml * Hc, N, D, Hc);
    gate_act_forward(out, (size_t)N * Hc, 1);
}
// dg (the gates' gradients, turned into pre-activation gradients in place) -> du, dW_gamma, db_gamma
static void omega_gates_backward(Model* M, int l, real* du, const real* u, int N, const real* g, real* dg) {
    int D = M->cfg.D, Hc = M->cfg.H * M->mem.omega;
    size_t ml = M->mlayer[l];
    gate_act_backward(dg, dg, g, (size_t)N * Hc, 1);
    matmul_backward(du, M->grads.gate_gamma_w + ml * Hc * D, M->grads.gate_gamma_b + ml * Hc, dg, u,
                    M->params.gate_gamma_w + ml * Hc * D, N, D, Hc);
}
// The chunk of rows [t0, t0+n) with its halo: rows [t0-nh, t0) first (nh = min(c-1, t0)), whose own steps are nothing
// (a = 1, eta = 0, theta = 1; beta is held at 0 by mem_coef_forward); the gates gamma of the chunk's own rows.
static int omega_halo(MemChunk* c, const MemCfg* m, int nh) {
    c->nh = nh;
    c->wc = m->omega;
    for (int t = 0; t < nh; t++) {
        c->a[t] = 1;
        c->eta[t] = 0;
        c->theta[t] = 1;
    }
    return nh;
}
// poly: the chunk's q, k rows become the features (n, din), the raw rows go to qr, kr (all rows set first: the raw
// rows were written at stride d into q, k)
static void poly_rows(MemChunk* c, const MemCfg* m, int n, const real* const* qf, const real* const* kf) {
    int d = m->d, din = m->din;
    memcpy(c->qr, c->q, (size_t)n * d * sizeof(real));
    memcpy(c->kr, c->k, (size_t)n * d * sizeof(real));
    for (int t = 0; t < n; t++) {
        memcpy(c->q + (size_t)t * din, qf[t], din * sizeof(real));
        memcpy(c->k + (size_t)t * din, kf[t], din * sizeof(real));
    }
}
// the chunk's rows for the ATLAS family (omega and/or poly): returns the halo rows nh (0 without omega)
static int omega_load_chunk(MemChunk* c, const Model* M, int l, int bb, int h, int t0, int n) {
    int w = M->mem.omega, nh = t0 < w - 1 ? t0 : w - 1, Hc = M->cfg.H * w, din = M->mem.din;
    size_t Hp = (size_t)M->cfg.H * din;
    load_chunk_inputs(c, M, l, bb, h, t0 - nh, nh + n);
    if (M->mem.poly) {
        const real* qf[1024 + 64];
        const real* kf[1024 + 64];
        for (int t = 0; t < nh + n; t++) {
            size_t r = (size_t)l * M->B * M->T + (size_t)bb * M->T + t0 - nh + t;
            qf[t] = M->acts.qf + r * Hp + (size_t)h * din;
            kf[t] = M->acts.kf + r * Hp + (size_t)h * din;
        }
        poly_rows(c, &M->mem, nh + n, qf, kf);
    }
    if (w == 1) return 0;
    for (int t = 0; t < n; t++) {
        size_t r = (size_t)l * M->B * M->T + (size_t)bb * M->T + t0 + t;
        memcpy(c->gam + (size_t)(nh + t) * w, M->acts.ggam + r * Hc + (size_t)h * w, w * sizeof(real));
    }
    return omega_halo(c, &M->mem, nh);
}
// the gradients back: the chunk's own rows all of them, the halo rows dk, dv (and delta) only; accumulated (a later
// chunk's halo has already added to these rows, and this chunk's halo adds to the previous chunk's)
// (poly: dq, dk are the features' gradients, into qf, kf; the residual's raw ones dqr, dkr into q, k)
static void omega_store_chunk_grads(const MemChunk* c, Model* M, int l, int bb, int h, int t0, int n) {
    ActivationTensors* g = &M->grads_acts;
    int T = M->T, H = M->cfg.H, D = M->cfg.D, d = M->mem.d, w = M->mem.omega, nh = c->nh, din = M->mem.din;
    for (int t = 0; t < nh + n; t++) {
        size_t r = (size_t)l * M->B * T + (size_t)bb * T + t0 - nh + t;
        int own = t >= nh;
        for (int i = 0; i < d; i++) {
            size_t e = (size_t)t * d + i;
            g->q[r * D + h * d + i] += own ? c->dqr[e] : 0;
            g->k[r * D + h * d + i] += c->dkr[e];
            g->v[r * D + h * d + i] += c->dv[e];
        }
        if (M->mem.poly)
            for (int i = 0; i < din; i++) {
                size_t e = (size_t)t * din + i, o = r * H * din + (size_t)h * din + i;
                g->qf[o] += own ? c->dq[e] : 0;
                g->kf[o] += c->dk[e];
            }
        if (M->mem.bias == BIAS_HUBER) {
            real s = 0;
            for (int i = 0; i < d; i++) s += c->ddelta[(size_t)t * d + i];
            g->gdel[r * H + h] += s;
        }
        if (!own) continue;
        g->ga[r * H + h] += c->da[t];
        g->gth[r * H + h] += c->dtheta[t];
        if (M->mem.cw)
            for (int i = 0; i < d; i++) g->geta[r * D + h * d + i] += c->detac[(size_t)t * d + i];
        else
            g->geta[r * H + h] += c->deta[t];
        if (w > 1)
            for (int o = 0; o < w; o++) g->ggam[r * H * w + (size_t)h * w + o] += c->dgam[(size_t)t * w + o];
    }
}

// a chunk's inputs and gradients, whatever the memory: omega's halo and poly's features when it has them (returns the
// halo rows nh, 0 without omega)
static int mem_load_chunk(MemChunk* c, const Model* M, int l, int bb, int h, int t0, int n) {
    if (M->mem.omega > 1 || M->mem.poly) return omega_load_chunk(c, M, l, bb, h, t0, n);
    load_chunk_inputs(c, M, l, bb, h, t0, n);
    return 0;
}
static void mem_store_chunk_grads(const MemChunk* c, Model* M, int l, int bb, int h, int t0, int n) {
    if (M->mem.omega > 1 || M->mem.poly)
        omega_store_chunk_grads(c, M, l, bb, h, t0, n);
    else
        store_chunk_grads(c, M, l, bb, h, t0, n);
}

// The first non-finite quantity of a chunk's backward, or NULL: the gradient arriving from the layers above (dy),
// the gradient of the memory state at the chunk start (dL/dP_s; the recurrence's product grows here when a chunk
// map amplifies), or the chunk's input gradients (q, k, v, gates).
static int all_finite(const real* x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}
static const char* mem_chunk_nonfinite(const MemCfg* m, const MemChunk* c, int n, const real* dPs) {
    size_t nd = (size_t)n * m->d;
    if (!all_finite(c->dy, nd)) return "the output gradient dL/dy arriving from above";
    if (!all_finite(dPs, m->nP)) return "the memory state gradient dL/dP at the chunk start";
    if (!all_finite(c->dq, nd) || !all_finite(c->dk, nd) || !all_finite(c->dv, nd)) return "dL/dq, dL/dk or dL/dv";
    if (!all_finite(c->da, n) || !all_finite(c->deta, n) || !all_finite(c->dtheta, n))
        return "the gate gradients (a, eta, theta)";
    return NULL;
}

// Lattice (section 3b) for layer l, all sequences and heads: y = S_t q_t token by token from S_0 = I. Keeps S at every
// lat_k-th token (slot j: the state before token j*k) in M->mem_P for the backward. eta, mu: the gates geta, ga
// (ga is 1 without the forgetting gate).
static int lattice_slots(const Config* c, int T) { return (T + c->lat_k - 1) / c->lat_k; }
// this thread's Lattice scratch: lat_k + 2 states (a segment's and the carry), the step's vectors in w
static real* lattice_thread_scratch(const Model* M, LatVec* w) {
    int d = M->mem.d, k = M->mem.lat_k;
    real* scr = M->lat_scratch + (size_t)thread_id() * lattice_scratch_size(d, k);
    latvec_carve(w, scr + ((size_t)k + 2) * M->mem.nP, d);
    return scr;
}
// rows [t0, t1) of sequence bb, head h of layer l from the state in Sa (Sb: a second buffer): the reads into acts.y,
// the state before every lat_k-th token into mem_P; returns the buffer that holds the state after row t1 - 1
static real* lattice_rows_forward(Model* M, int l, int bb, int h, int t0, int t1, real* Sa, real* Sb, LatVec* w) {
    const MemCfg* m = &M->mem;
    int B = M->B, T = M->T, H = M->cfg.H, D = M->cfg.D, d = m->d, k = m->lat_k;
    size_t nP = m->nP;
    const ActivationTensors* a = &M->acts;
    real* ck = M->mem_P + (((size_t)l * B + bb) * H + h) * lattice_slots(&M->cfg, T) * nP;
    for (int t = t0; t < t1; t++) {
        if (t % k == 0) memcpy(ck + (size_t)(t / k) * nP, Sa, nP * sizeof(real));
        size_t r = (size_t)l * B * T + (size_t)bb * T + t;  // row in the layer-stacked tensors
        lattice_step_forward(m, Sa, Sb, a->q + r * D + h * d, a->k + r * D + h * d, a->v + r * D + h * d,
                             a->geta[r * H + h], a->ga[r * H + h], M->acts.y + r * D + h * d, w);
        real* tmp = Sa;
        Sa = Sb;
        Sb = tmp;
    }
    return Sa;
}
static void lattice_memory_forward(Model* M, int l) {
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < M->B; bb++)
        for (int h = 0; h < M->cfg.H; h++) {
            LatVec w;
            real* scr = lattice_thread_scratch(M, &w);
            lattice_identity(scr, M->mem.d);
            lattice_rows_forward(M, l, bb, h, 0, M->T, scr, scr + M->mem.nP, &w);
        }
}
// a memory's backward went non-finite at (layer l, chunk or block ch): keep the first place in backward order for the
// error line (the first layer found so, and in it the latest chunk: the parallel loops find them in any order)
static void note_nonfinite(Model* M, const char* what, int l, int ch) {
#pragma omp critical
    if (!M->nf_what || (M->nf_layer == l && ch > M->nf_chunk)) {
        M->nf_what = what;
        M->nf_layer = l;
        M->nf_chunk = ch;
    }
}
// Its backward: segments in reverse; each recomputes its states S_{t0-1} .. S_{t0+n-1} from its checkpoint (the
// forward's own arithmetic: the same values bit for bit, so k changes nothing), then steps back through them
// carrying G = dL/dS. Writes dq, dk, dv, deta, dmu (into the gate gradients; gates_backward takes them from there).
// lattice_rows_backward does it for rows [t0, t1) of sequence bb, head h, with G = dL/dS after row t1 - 1 in and
// before row t0 out: the lat_k blocks that meet the rows, a block that begins before t0 from S0 (the state there).
static void lattice_rows_backward(Model* M, int l, int bb, int h, int t0, int t1, const real* S0, real* St, real* G,
                                  LatVec* w) {
    const MemCfg* m = &M->mem;
    int B = M->B, T = M->T, H = M->cfg.H, D = M->cfg.D, d = m->d, k = m->lat_k;
    size_t nP = m->nP;
    const ActivationTensors* a = &M->acts;
    ActivationTensors* g = &M->grads_acts;
    const real* ck = M->mem_P + (((size_t)l * B + bb) * H + h) * lattice_slots(&M->cfg, T) * nP;
    for (int sg = (t1 - 1) / k; sg >= t0 / k; sg--) {
        int b0 = sg * k < t0 ? t0 : sg * k, b1 = sg * k + k < t1 ? sg * k + k : t1, n = b1 - b0;
        memcpy(St, sg * k < t0 ? S0 : ck + (size_t)sg * nP, nP * sizeof(real));
        for (int j = 0; j < n; j++) {  // recompute the block's states (no reads needed)
            size_t r = (size_t)l * B * T + (size_t)bb * T + b0 + j;
            lattice_step_forward(m, St + (size_t)j * nP, St + (size_t)(j + 1) * nP, NULL, a->k + r * D + h * d,
                                 a->v + r * D + h * d, a->geta[r * H + h], a->ga[r * H + h], NULL, w);
        }
        for (int j = n - 1; j >= 0; j--) {
            size_t r = (size_t)l * B * T + (size_t)bb * T + b0 + j;
            lattice_step_backward(m, St + (size_t)j * nP, St + (size_t)(j + 1) * nP, a->q + r * D + h * d,
                                  a->k + r * D + h * d, a->v + r * D + h * d, a->geta[r * H + h], a->ga[r * H + h],
                                  g->y + r * D + h * d, G, g->q + r * D + h * d, g->k + r * D + h * d,
                                  g->v + r * D + h * d, &g->geta[r * H + h], &g->ga[r * H + h], w);
        }
        if (!all_finite(G, nP)) note_nonfinite(M, "the Lattice state gradient dL/dS", l, b0);
    }
}
static void lattice_memory_backward(Model* M, int l) {
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < M->B; bb++)
        for (int h = 0; h < M->cfg.H; h++) {
            LatVec w;
            real* scr = lattice_thread_scratch(M, &w);
            real* G = scr + ((size_t)M->mem.lat_k + 1) * M->mem.nP;
            memset(G, 0, M->mem.nP * sizeof(real));  // dL/dS_T = 0
            lattice_rows_backward(M, l, bb, h, 0, M->T, NULL, scr, G, &w);
        }
}

// The phi* memory (section 3c) of layer l, all sequences and heads: the chunks in order, each chunk-start W1 kept in
// mem_P, the entries (signals, offsets, tokens) in phi_av, phi_lo, phi_etok and the chunk-start LA in phi_LA.
static PhiSeq phi_seq(const Model* M, const ActivationTensors* a, int l, int bb, int h) {
    int B = M->B, T = M->T, H = M->cfg.H, D = M->cfg.D, d = M->mem.d, c = M->mem.omega;
    size_t r = (size_t)l * B * T + (size_t)bb * T;  // the sequence's first row in the layer-stacked tensors
    PhiSeq x = {a->q + r * D + (size_t)h * d,
                a->k + r * D + (size_t)h * d,
                a->v + r * D + (size_t)h * d,
                a->ga + r * H + h,
                a->geta + r * H + h,
                c > 1 ? a->ggam + (r * H + h) * c : NULL,
                (size_t)D,
                (size_t)H,
                (size_t)H * c};
    return x;
}
// the chunks [ch0, ch1) of (layer l, sequence bb, head h), from the state of chunk ch0 (W1 in mem_P, LA in phi_LA,
// the entries before it), keeping each next chunk's start state (MAC runs a segment's chunks at a time)
static void phi_chunks_forward(Model* M, int l, int bb, int h, int ch0, int ch1) {
    const MemCfg* m = &M->mem;
    int B = M->B, T = M->T, H = M->cfg.H, D = M->cfg.D, b = M->cfg.b, c = m->omega, nch = nchunks(M, T), d = m->d;
    size_t nP = m->nP, NE = phi_entries(T, b, c), hx = ((size_t)l * B + bb) * H + h;
    PhiScr* s = &M->phi_scr[thread_id()];
    PhiSeq x = phi_seq(M, &M->acts, l, bb, h);
    real *P = M->mem_P + hx * nch * nP, *av = M->phi_av + hx * NE * m->dm, *lo = M->phi_lo + hx * NE,
         *LAs = M->phi_LA + hx * nch, LA;
    int *etok = M->phi_etok + hx * NE, ne = (int)phi_entries(ch0 * b, b, c);  // (the entries before chunk ch0)
    for (int ch = ch0; ch < ch1; ch++) {
        int t0 = ch * b, n = T - t0 < b ? T - t0 : b, nh = t0 < c - 1 ? t0 : c - 1, last = ch == nch - 1;
        phi_chunk_forward(m, s, &x, t0, n, nh, ne, etok, av, lo, P + (size_t)ch * nP, LAs[ch],
                          M->acts.y + ((size_t)l * B * T + (size_t)bb * T + t0) * D + (size_t)h * d, D,
                          last ? NULL : P + (size_t)(ch + 1) * nP, &LA);
        if (!last) LAs[ch + 1] = LA;
        ne += nh + n;
    }
}
// their backward, chunks ch1-1 down to ch0, with s's accumulators carried in and out (dW: dL/dW1 at chunk ch1's
// start on entry, at ch0's on return; dav, dlo: the entries'; *gLA: dL/dLA at that point)
static void phi_chunks_backward(Model* M, int l, int bb, int h, int ch0, int ch1, PhiScr* s, real* gLA) {
    const MemCfg* m = &M->mem;
    int B = M->B, T = M->T, H = M->cfg.H, D = M->cfg.D, b = M->cfg.b, c = m->omega, nch = nchunks(M, T), d = m->d;
    size_t nP = m->nP, NE = phi_entries(T, b, c), hx = ((size_t)l * B + bb) * H + h;
    PhiSeq x = phi_seq(M, &M->acts, l, bb, h), gx = phi_seq(M, &M->grads_acts, l, bb, h);
    real *P = M->mem_P + hx * nch * nP, *av = M->phi_av + hx * NE * m->dm, *lo = M->phi_lo + hx * NE,
         *LAs = M->phi_LA + hx * nch, LA;
    int *etok = M->phi_etok + hx * NE, ne = (int)phi_entries(ch1 * b < T ? ch1 * b : T, b, c);  // (before chunk ch1)
    for (int ch = ch1 - 1; ch >= ch0; ch--) {
        int t0 = ch * b, n = T - t0 < b ? T - t0 : b, nh = t0 < c - 1 ? t0 : c - 1;
        ne -= nh + n;
        phi_chunk_forward(m, s, &x, t0, n, nh, ne, etok, av, lo, P + (size_t)ch * nP, LAs[ch], s->y, d, NULL, &LA);
        phi_chunk_backward(m, s, &x, &gx, t0, n, nh, ne, etok, av, lo, P + (size_t)ch * nP,
                           M->grads_acts.y + ((size_t)l * B * T + (size_t)bb * T + t0) * D + (size_t)h * d, D, gLA);
        if (!all_finite(s->dW, nP) || !isfinite(*gLA) ||
            !all_finite(s->dav + (size_t)ne * m->dm, (size_t)(nh + n) * m->dm))
            note_nonfinite(M, "the phi* memory's gradients (dL/dW1, the entries' dL/da)", l, ch);
    }
}
static void phi_memory_forward(Model* M, int l) {
    int B = M->B, H = M->cfg.H, nch = nchunks(M, M->T);
    size_t nP = M->mem.nP;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {
            size_t hx = ((size_t)l * B + bb) * H + h;
            memcpy(M->mem_P + hx * nch * nP, M->params.mem_p0 + ((size_t)M->mlayer[l] * H + h) * nP,
                   nP * sizeof(real));  // W1_0
            M->phi_LA[hx * nch] = 0;
            phi_chunks_forward(M, l, bb, h, 0, nch);
        }
}
static void phi_memory_backward(Model* M, int l) {
    const MemCfg* m = &M->mem;
    int B = M->B, H = M->cfg.H, nch = nchunks(M, M->T), d = m->d;
    size_t nP = m->nP, NE = phi_entries(M->T, M->cfg.b, m->omega);
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {
            PhiScr* s = &M->phi_scr[thread_id()];
            real gLA = 0;
            memset(s->dav, 0, NE * m->dm * sizeof(real));
            memset(s->dlo, 0, NE * sizeof(real));
            memset(s->dW, 0, nP * sizeof(real));
            phi_chunks_backward(M, l, bb, h, 0, nch, s, &gLA);
            real* out = M->mem_dbh + ((size_t)bb * H + h) * (nP + 2 * d);  // dL/dW1_0 of this sequence
            memcpy(out, s->dW, nP * sizeof(real));
        }
    for (int h = 0; h < H; h++)
        for (int bb = 0; bb < B; bb++) {  // sum over the batch in a fixed order
            const real* src = M->mem_dbh + ((size_t)bb * H + h) * (nP + 2 * d);
            real* dp0 = M->grads.mem_p0 + ((size_t)M->mlayer[l] * H + h) * nP;
            for (size_t i = 0; i < nP; i++) dp0[i] += src[i];
        }
}

// The memory read of layer l for all sequences and heads (SPEC §5): y = MemoryRead(q, k, v, gates).
// Each (sequence, head) runs its chunks in order; every chunk-start state is kept for the backward.
static void memory_forward(Model* M, int l) {
    if (M->mem.lattice) {
        lattice_memory_forward(M, l);
        return;
    }
    if (M->mem.phistar) {  // DT, DOT: section 3c
        phi_memory_forward(M, l);
        return;
    }  // Lattice: per token, section 3b
    const MemCfg* m = &M->mem;
    int B = M->B, T = M->T, H = M->cfg.H, b = M->cfg.b, nch = nchunks(M, T), nP = m->nP;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {
            MemChunk* c = &M->chunks[thread_id()];
            size_t base = ((((size_t)l * B + bb) * H + h) * nch) * nP;
            real* P = M->mem_P + base;
            real* S = mem_carries_S(m) ? M->mem_S + base : NULL;
            memcpy(P, M->params.mem_p0 + ((size_t)M->mlayer[l] * H + h) * nP,
                   nP * sizeof(real));  // P_0, restored every sequence
            if (S) memset(S, 0, nP * sizeof(real));
            size_t lh = (size_t)M->mlayer[l] * H + h;  // in the memory-only parameter tensors
            const real* lng = m->ln ? M->params.mem_ln_g + lh * m->d : NULL;
            const real* lnb = m->ln ? M->params.mem_ln_b + lh * m->d : NULL;
            c->p0 = m->anchor ? M->params.mem_p0 + lh * nP : NULL;
            for (int ch = 0; ch < nch; ch++) {
                int t0 = ch * b, n = T - t0 < b ? T - t0 : b, last = ch == nch - 1;
                int nh = mem_load_chunk(c, M, l, bb, h, t0, n);  // omega's halo rows
                mem_step_forward(m, c, nh + n, P + (size_t)ch * nP, S ? S + (size_t)ch * nP : NULL,
                                 last ? NULL : P + (size_t)(ch + 1) * nP,
                                 (S && !last) ? S + (size_t)(ch + 1) * nP : NULL, lng, lnb);
                scatter_rows(M->acts.y + (size_t)l * B * T * M->cfg.D, c->y + (size_t)nh * m->d, bb, h, t0, n, T, H,
                             m->d);
            }
        }
}

// Backward through all chunks in reverse, carrying dL/dP and dL/dS across chunk boundaries
// (each chunk's intermediates are recomputed from its stored start state).
static void memory_backward(Model* M, int l) {
    if (M->mem.lattice) {
        lattice_memory_backward(M, l);
        return;
    }
    if (M->mem.phistar) {
        phi_memory_backward(M, l);
        return;
    }
    const MemCfg* m = &M->mem;
    int B = M->B, T = M->T, H = M->cfg.H, D = M->cfg.D, b = M->cfg.b, nch = nchunks(M, T), nP = m->nP, d = m->d;
    ActivationTensors* g = &M->grads_acts;
    size_t o = (size_t)l * B * T;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {
            MemChunk* c = &M->chunks[thread_id()];
            size_t base = ((((size_t)l * B + bb) * H + h) * nch) * nP;
            real* P = M->mem_P + base;
            real* S = mem_carries_S(m) ? M->mem_S + base : NULL;
            size_t lh = (size_t)M->mlayer[l] * H + h;  // in the memory-only parameter tensors
            const real* lng = m->ln ? M->params.mem_ln_g + lh * d : NULL;
            const real* lnb = m->ln ? M->params.mem_ln_b + lh * d : NULL;
            memset(c->dlng, 0, d * sizeof(real));
            memset(c->dlnb, 0, d * sizeof(real));
            memset(c->dp0, 0, nP * sizeof(real));
            c->p0 = m->anchor ? M->params.mem_p0 + lh * nP : NULL;
            real *dPn = NULL, *dSn = NULL, *dPs = c->Pa, *dSs = c->Sa;
            for (int ch = nch - 1; ch >= 0; ch--) {
                int t0 = ch * b, n = T - t0 < b ? T - t0 : b;
                real* Pc = P + (size_t)ch * nP;
                real* Sc = S ? S + (size_t)ch * nP : NULL;
                int nh = mem_load_chunk(c, M, l, bb, h, t0, n);  // omega's halo rows (their dy is 0)
                memset(c->dy, 0, (size_t)nh * d * sizeof(real));
                gather_rows(c->dy + (size_t)nh * d, g->y + o * D, bb, h, t0, n, T, H, d);
                mem_step_backward(m, c, nh + n, c->dy, Pc, Sc, dPn, dSn, dPs, dSs, lng, lnb);
                mem_store_chunk_grads(c, M, l, bb, h, t0, n);
                const char* what = mem_chunk_nonfinite(m, c, nh + n, dPs);
                if (what) note_nonfinite(M, what, l, ch);
                dPn = dPs;
                dSn = dSs;  // this chunk's start is the previous chunk's end
                dPs = dPs == c->Pa ? c->Pb : c->Pa;
                dSs = dSs == c->Sa ? c->Sb : c->Sa;
            }
            real* out = M->mem_dbh + ((size_t)bb * H + h) * (nP + 2 * d);  // dL/dP_0 and the LN affine of this sequence
            for (int i = 0; i < nP; i++) out[i] = dPn[i] + c->dp0[i];  // (dp0: through the anchor, 0 without it)
            memcpy(out + nP, c->dlng, d * sizeof(real));
            memcpy(out + nP + d, c->dlnb, d * sizeof(real));
        }
    for (int h = 0; h < H; h++)
        for (int bb = 0; bb < B; bb++) {  // sum over the batch in a fixed order
            const real* src = M->mem_dbh + ((size_t)bb * H + h) * (nP + 2 * d);
            size_t lh = (size_t)M->mlayer[l] * H + h;
            real* dp0 = M->grads.mem_p0 + lh * nP;
            for (int i = 0; i < nP; i++) dp0[i] += src[i];
            if (m->ln)
                for (int i = 0; i < d; i++) {
                    M->grads.mem_ln_g[lh * d + i] += src[nP + i];
                    M->grads.mem_ln_b[lh * d + i] += src[nP + d + i];
                }
        }
}
// Section 3's memory mixer of layer l (SPEC §3), from u = M->acts.ln1 to M->acts.mo (model_forward then adds x):
// q, k, v = SiLU(conv(u W^T)), q and k l2-normed per head (poly: their features, SPEC §5.6); the gates (omega: its
// window gates, SPEC §5.5); y = the memory's read (section 5); mo = (RMSNorm_head(y) * SiLU(u Wg^T)) Wo^T. Also the
// stream model's of a Titans layer (section 4b), on its rows [P || u].
static void mixer_forward(Model* M, int l) {
    const Config* c = &M->cfg;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = D / H;
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H;
    size_t ml = M->mlayer[l];  // the layer's index in the memory-only parameter tensors
    ParameterTensors* p = &M->params;
    ActivationTensors* a = &M->acts;
    const real* u = a->ln1 + oD;
    matmul_forward(a->qp + oD, u, p->wq + (size_t)l * D * D, NULL, N, D, D);
    matmul_forward(a->kp + oD, u, p->wk + (size_t)l * D * D, NULL, N, D, D);
    matmul_forward(a->vp + oD, u, p->wv + (size_t)l * D * D, NULL, N, D, D);
    conv_forward(a->qc + oD, a->qp + oD, p->conv_q + ml * D * c->K, B, T, D, c->K);
    conv_forward(a->kc + oD, a->kp + oD, p->conv_k + ml * D * c->K, B, T, D, c->K);
    conv_forward(a->vc + oD, a->vp + oD, p->conv_v + ml * D * c->K, B, T, D, c->K);
    silu_forward(a->qs + oD, a->qc + oD, N * D);
    silu_forward(a->ks + oD, a->kc + oD, N * D);
    silu_forward(a->v + oD, a->vc + oD, N * D);
    l2norm_forward(a->q + oD, a->qrn + oH, a->qs + oD, N, H, d);
    l2norm_forward(a->k + oD, a->krn + oH, a->ks + oD, N, H, d);
    if (M->mem.poly) {  // poly features (SPEC §5.6) of the l2-normed q, k
        size_t oP = oH * M->mem.din;
        poly_forward(a->qf + oP, a->q + oD, p->poly_rho + ml * 3, N, H, d);
        poly_forward(a->kf + oP, a->k + oD, p->poly_rho + ml * 3, N, H, d);
    }
    size_t oG = (size_t)l * N * (c->gate_rank ? D : H), oR = (size_t)l * N * c->gate_rank;
    gates_forward(M, l, u, N, a->ga + oH, a->geta + oG, a->gth + oH, a->gdel + oG, a->geta_lr + oR, a->gdel_lr + oR);
    if (M->mem.omega > 1) omega_gates_forward(M, l, u, N, a->ggam + oH * M->mem.omega);
    memory_forward(M, l);
    rmsnorm_forward(a->yn + oD, a->yrstd + oH, a->y + oD, p->rmsh_w + ml * D, N, H, d);
    matmul_forward(a->gp + oD, u, p->wg + ml * D * D, NULL, N, D, D);
    gate_mul_forward(a->z + oD, a->yn + oD, a->gp + oD, N * D);
    matmul_forward(a->mo + oD, a->z + oD, p->wo + (size_t)l * D * D, NULL, N, D, D);
}
// its backward: from dmo = dL/d mo to M->grads_acts.ln1 (accumulated) and the parameters' gradients
static void mixer_backward(Model* M, int l, const real* dmo) {
    const Config* c = &M->cfg;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = D / H;
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H;
    size_t ml = M->mlayer[l];
    ParameterTensors *p = &M->params, *dp = &M->grads;
    ActivationTensors *a = &M->acts, *g = &M->grads_acts;
    const real* u = a->ln1 + oD;
    real* du = g->ln1 + oD;
    matmul_backward(g->z + oD, dp->wo + (size_t)l * D * D, NULL, dmo, a->z + oD, p->wo + (size_t)l * D * D, N, D, D);
    gate_mul_backward(g->yn + oD, g->gp + oD, g->z + oD, a->yn + oD, a->gp + oD, N * D);
    matmul_backward(du, dp->wg + ml * D * D, NULL, g->gp + oD, u, p->wg + ml * D * D, N, D, D);
    rmsnorm_backward(g->y + oD, dp->rmsh_w + ml * D, g->yn + oD, a->y + oD, p->rmsh_w + ml * D, a->yrstd + oH, N, H, d);
    memory_backward(M, l);
    gates_backward(M, l, du, u, N, a, g, oH, (size_t)l * N * (c->gate_rank ? D : H), (size_t)l * N * c->gate_rank);
    if (M->mem.omega > 1)
        omega_gates_backward(M, l, du, u, N, a->ggam + oH * M->mem.omega, g->ggam + oH * M->mem.omega);
    if (M->mem.poly) {  // poly: the features' gradients into q, k (which hold the residual's) and rho
        size_t oP = oH * M->mem.din;
        const real* rho = p->poly_rho + ml * 3;
        poly_backward(g->q + oD, dp->poly_rho + ml * 3, g->qf + oP, a->q + oD, rho, N, H, d);
        poly_backward(g->k + oD, dp->poly_rho + ml * 3, g->kf + oP, a->k + oD, rho, N, H, d);
    }
    l2norm_backward(g->qs + oD, g->q + oD, a->q + oD, a->qrn + oH, N, H, d);
    l2norm_backward(g->ks + oD, g->k + oD, a->k + oD, a->krn + oH, N, H, d);
    silu_backward(g->qc + oD, g->qs + oD, a->qc + oD, N * D);
    silu_backward(g->kc + oD, g->ks + oD, a->kc + oD, N * D);
    silu_backward(g->vc + oD, g->v + oD, a->vc + oD, N * D);
    conv_backward(g->qp + oD, dp->conv_q + ml * D * c->K, g->qc + oD, a->qp + oD, p->conv_q + ml * D * c->K, B, T, D,
                  c->K);
    conv_backward(g->kp + oD, dp->conv_k + ml * D * c->K, g->kc + oD, a->kp + oD, p->conv_k + ml * D * c->K, B, T, D,
                  c->K);
    conv_backward(g->vp + oD, dp->conv_v + ml * D * c->K, g->vc + oD, a->vp + oD, p->conv_v + ml * D * c->K, B, T, D,
                  c->K);
    matmul_backward(du, dp->wq + (size_t)l * D * D, NULL, g->qp + oD, u, p->wq + (size_t)l * D * D, N, D, D);
    matmul_backward(du, dp->wk + (size_t)l * D * D, NULL, g->kp + oD, u, p->wk + (size_t)l * D * D, N, D, D);
    matmul_backward(du, dp->wv + (size_t)l * D * D, NULL, g->vp + oD, u, p->wv + (size_t)l * D * D, N, D, D);
}

static const char* cfg_origin = "";  // where the config being checked comes from ("" for the flags): "FILE: "
// Every field of a config is bounded here, before anything is sized from it: a config may come from a file
// (checkpoint, fixture), so a bad one must end in an error, never in a division by zero or a huge allocation.
static void config_check(const Config* c) {
    if (c->H < 1 || c->D < 1 || c->D > 65536)
        DIE("check -D and -H", "%sbad width D = %d or heads H = %d (D in 1..65536, H >= 1)", cfg_origin, c->D, c->H);
    if (c->D % c->H)
        DIE("pick -D a multiple of -H", "%swidth D = %d is not divisible by heads H = %d", cfg_origin, c->D, c->H);
    if (c->V < 1 || c->V > 65536)
        DIE("token shards hold uint16 ids", "%svocab size %d out of range 1..65536", cfg_origin, c->V);
    if (c->Vp != (c->V + 63) / 64 * 64)
        DIE("Vp is V rounded up to a multiple of 64", "%spadded vocab Vp = %d for vocab V = %d (expected %d)",
            cfg_origin, c->Vp, c->V, (c->V + 63) / 64 * 64);
    if (c->b < 1 || c->b > 1024 || c->L < 1 || c->L > 128 || c->F < 1 || c->F > 1048576 || c->E < 1 || c->E > 64 ||
        c->K < 1 || c->K > 8)
        DIE("check -k, -L, -F, -E",
            "%sbad config: b=%d L=%d F=%d E=%d K=%d (b in 1..1024, L 1..128, F 1..2^20, E 1..64, K 1..8)", cfg_origin,
            c->b, c->L, c->F, c->E, c->K);
    if (c->mem_depth < 1 || c->mem_depth > 2 || c->mem_resid < 0 || c->mem_resid > 1 || c->mem_ln < 0 ||
        c->mem_ln > 1 || c->gate_a < 0 || c->gate_a > 1 || c->gate_eta < 0 || c->gate_eta > 1)
        DIE("is this file from a newer train_miras?",
            "%sbad memory config: depth %d, residual %d, LN %d, gates a %d eta %d", cfg_origin, c->mem_depth,
            c->mem_resid, c->mem_ln, c->gate_a, c->gate_eta);
    if (c->bias < BIAS_L2 || c->bias > BIAS_HUBER || c->algo < ALGO_GD || c->algo > ALGO_MUON_CHUNK ||
        c->retention < RET_NONE || c->retention > RET_KL || c->gate_rank < 0 || c->gate_rank > c->D)
        DIE("is this file from a newer train_miras? (-R is at most D)",
            "%sbad memory config: bias %d, algo %d, retention %d, gate rank %d", cfg_origin, c->bias, c->algo,
            c->retention, c->gate_rank);
    if (c->retention != RET_NONE && c->algo != ALGO_GD)
        DIE("use gd (-U 0) with the lq and kl retentions", "%s%s with retention %d is not implemented", cfg_origin,
            c->algo >= ALGO_MUON ? "muon" : "momentum", c->retention);
    if (c->gated < 0 || c->gated > 1 || (c->gated && (c->mem_depth != 2 || c->retention != RET_NONE)))
        DIE("-T 1 goes with a deep memory without the lq / kl retentions, e.g. -p atlas_pp or -p titans -T 1",
            "%sbad gated-memory config: gated %d, depth %d, retention %d (the gated deep memory needs depth 2 and the "
            "plain or anchored retention)",
            cfg_origin, c->gated, c->mem_depth, c->retention);
    if (c->algo >= ALGO_MUON && (c->gate_rank || !c->gate_eta))
        DIE("muon (-U 2) takes -R 0 and a preset with a learned eta gate (not linear_attn)",
            "%smuon (SPEC 5.7) needs a learned per-head step eta (gate rank %d, eta gate %d): NS5 removes the scale of the error",
            cfg_origin, c->gate_rank, c->gate_eta);
    if (c->anchor < 0 || c->anchor > 1) DIE("-Z is 0 or 1", "%sbad anchor flag %d", cfg_origin, c->anchor);
    if (c->anchor && (c->retention == RET_KL || !c->gate_a))
        DIE("use -Z 0 here", "%sthe anchored retention needs a learned retention gate a and no kl retention (memora)",
            cfg_origin);
    if (!(c->eta_max > 0) || c->eta_max > 1e6) DIE("pick -X in (0, 1e6]", "%sbad eta_max %g", cfg_origin, c->eta_max);
    if (c->D / c->H > 256) DIE("use more heads", "%shead width %d above 256", cfg_origin, c->D / c->H);
    if (c->lattice < LAT_NONE || c->lattice > LAT_SIM || c->lat_ablate < 0 || c->lat_ablate > 3 ||
        (c->lattice ? c->lat_k < 1 || c->lat_k > 65536 : c->lat_k || c->lat_ablate))
        DIE("-w is 1..65536 and -Y 0..3, for the lattice presets only",
            "%sbad Lattice config: kind %d, checkpoint interval %d, ablation bits %d", cfg_origin, c->lattice, c->lat_k,
            c->lat_ablate);
    if (c->lattice && (c->mem_depth != 1 || c->algo != ALGO_GD || c->retention != RET_NONE || c->gate_rank ||
                       c->anchor || !c->gate_eta))
        DIE("use the lattice presets as they are (-R 0, -Z 0)",
            "%sLattice needs its own memory: linear slots, gd, no retention, per-head eta (gate rank %d, anchor %d)",
            cfg_origin, c->gate_rank, c->anchor);
    if (c->omega < 0 || c->omega > 64)
        DIE("-G is the Omega window c in 1..64", "%sbad omega window %d", cfg_origin, c->omega);
    if (c->poly < 0 || c->poly > 1) DIE("-I is 0 or 1", "%sbad poly flag %d", cfg_origin, c->poly);
    if (c->poly && (c->retention != RET_NONE || c->gate_rank || c->D / c->H > 64))
        DIE("use -I 0 here, or more heads",
            "%sthe poly features (SPEC 5.6) work without the lq/kl retentions and channel-wise gates (-R 0), and with a head width of at most 64 (D_phi = 1 + d + d(d+1)/2), got d = %d",
            cfg_origin, c->D / c->H);
    if (c->omega > 1 && (c->retention != RET_NONE || c->gate_rank))
        DIE("use -G 1 here",
            "%sthe omega rule (window %d) works with gd or momentum, without the lq/kl retentions and channel-wise gates (-R 0)",
            cfg_origin, c->omega);
    char pat[4 * sizeof c->pattern + 1];
    size_t np = 0;  // the pattern as printable text (it may come from a file)
    for (const unsigned char* q = (const unsigned char*)c->pattern; *q && np + 5 < sizeof pat; q++)
        np += (size_t)(*q >= 32 && *q < 127 ? snprintf(pat + np, 2, "%c", *q) : snprintf(pat + np, 5, "\\x%02x", *q));
    pat[np] = 0;
    if ((int)strlen(c->pattern) != c->L)
        DIE("one letter per layer", "%slayer pattern '%s' has %d letters for %d layers", cfg_origin, pat,
            (int)strlen(c->pattern), c->L);
    for (int l = 0; l < c->L; l++)
        if (!c->pattern[l] || !strchr("MAS", c->pattern[l]))
            DIE("use M (memory), A (attention) or S (sliding-window attention)",
                "%slayer pattern '%s': letter %d is not a layer kind", cfg_origin, pat, l + 1);
    if ((strchr(c->pattern, 'A') || strchr(c->pattern, 'S')) && (c->D / c->H) % 2)
        DIE("pick an even head width D/H", "%sattention layers need an even head width for RoPE, got %d", cfg_origin,
            c->D / c->H);
    int swa = strchr(c->pattern, 'S') || c->arch == ARCH_MAL ||
              c->arch == ARCH_MAG;  // MAL, MAG: sliding-window attention too
    if (c->window < 0 || c->window > (1 << 24) || (swa ? c->window < 1 : c->window != 0))
        DIE("give -W in 1..2^24 with 'S' layers or mal, mag (and none otherwise)",
            "%sbad attention window %d for layer pattern '%s'", cfg_origin, c->window, pat);
    // Titans layers (section 4b): every layer 'M' (it holds the memory; the attention is part of the layer)
    if (c->arch < ARCH_NONE || c->arch > ARCH_MAC || c->npers < 0 || c->npers > 4096 || c->seg < 0 ||
        c->seg > (1 << 20))
        DIE("is this file from a newer train_miras? (-M is 0..4096)",
            "%sbad Titans config: arch %d, N_p %d, segment %d", cfg_origin, c->arch, c->npers, c->seg);
    if (!c->arch && (c->npers || c->seg))
        DIE("-M and -C need -p mal, mag or mac",
            "%spersistent tokens (%d) or a segment (%d) without a Titans arrangement", cfg_origin, c->npers, c->seg);
    if (c->arch) {
        if (strspn(c->pattern, "M") != strlen(c->pattern))
            DIE("drop -P with mal, mag, mac", "%sthe Titans arrangements have every layer 'M' (pattern '%s')",
                cfg_origin, pat);
        if ((c->D / c->H) % 2)
            DIE("pick an even head width D/H", "%sattention layers need an even head width for RoPE, got %d",
                cfg_origin, c->D / c->H);
        if (c->arch == ARCH_MAC ? (c->seg < 1 || c->seg % c->b) : c->seg != 0)
            DIE("give -C a multiple of the chunk size -k (MAC only)", "%sbad MAC segment length %d for chunk size %d",
                cfg_origin, c->seg, c->b);
    }
    if (c->lattice && (c->omega > 1 || c->poly))
        DIE("drop -G and -I with the lattice presets", "%sLattice takes no omega window or poly features", cfg_origin);
    // the phi* memory (section 3c): built for gd with the plain retention, per-head gates, the l2 or dot bias
    if (c->phistar < 0 || c->phistar > 2)
        DIE("is this file from a newer train_miras?", "%sbad phi* flag %d", cfg_origin, c->phistar);
    if (c->phistar && (c->poly || c->gated || c->algo != ALGO_GD || c->retention != RET_NONE || c->gate_rank ||
                       c->anchor || c->lattice || (c->bias != BIAS_L2 && c->bias != BIAS_DOT)))
        DIE("use -p deep_transformer or -p dot as they are (or -I 2 with a gd memory: -U 0 -R 0 -Z 0, l2 or dot bias)",
            "%sthe phi* memory is built for gd with the l2 or dot bias only, without poly, the gated memory, muon, momentum, the lq/kl "
            "retentions, channel-wise gates, anchored retention or Lattice (algo %d, bias %d, retention "
            "%d, gate rank %d, anchor %d)",
            cfg_origin, c->algo, c->bias, c->retention, c->gate_rank, c->anchor);
    if (c->phistar && c->mem_depth == 2 && (c->mem_resid || c->mem_ln))
        DIE("use -p deep_transformer or -p dot (M(x) = W1 GELU(W2 phi*(x)))",
            "%sthe deep phi* memory has no residual and no LN (residual %d, LN %d): phi*(x) cannot be added to the output",
            cfg_origin, c->mem_resid, c->mem_ln);
    if (c->phistar == 2 && c->mem_depth != 2)
        DIE("use -I 2 with a linear memory", "%sthe bounded W2 steps (-I 3) are built for the deep phi* memory",
            cfg_origin);
}

// The parameter count of a config (checked first: the sizes are bounded, so the sum cannot overflow)
static size_t config_num_params(const Config* c) {
    config_check(c);
    size_t s[NUM_PARAM_TENSORS], n = 0;
    fill_in_parameter_sizes(s, c);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) n += s[i];
    return n;
}

// Allocate the parameters of a config (zeros). The caller fills them (init or checkpoint).
static void model_build(Model* M, const Config* cfg) {
    memset(M, 0, sizeof *M);
    M->cfg = *cfg;
    config_check(cfg);
    M->mem = mem_config(cfg);
    for (int l = 0, n = 0; l < cfg->L; l++) M->mlayer[l] = cfg->pattern[l] == 'M' ? n++ : -1;
    fill_in_parameter_sizes(M->param_sizes, cfg);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) M->num_params += M->param_sizes[i];
    M->params_memory = (real*)xmalloc(M->num_params * sizeof(real));
    point_parameters(&M->params, M->params_memory, M->param_sizes);
    M->opt_lo = 0;
    M->opt_n = M->num_params;
    M->mean_loss = -1;
}

// Fresh initialisation (SPEC §3 recommendations; other choices in the README's model definition).
static void model_init(Model* M, uint64_t seed) {
    const Config* c = &M->cfg;
    ParameterTensors* p = &M->params;
    uint64_t r = seed * 2654435761ULL + 1;
    size_t LL = c->L, L = memory_layers(c), D = c->D, H = c->H, d = D / H, F = c->F;
    MemCfg* m = &M->mem;  // L: memory layers
    double s_res = 0.02 / sqrt(2.0 * c->L);  // output projections into the residual stream, GPT-2 style
    fill_normal(p->wte, (size_t)c->V * D, 0.02, &r);  // padded rows stay zero
    fill_const(p->rms1_w, LL * D, 1);
    fill_const(p->rms2_w, LL * D, 1);
    fill_const(p->rmsf_w, D, 1);
    fill_const(p->rmsh_w, L * D, 1);
    fill_normal(p->wq, LL * D * D, 0.02, &r);
    fill_normal(p->wk, LL * D * D, 0.02, &r);
    fill_normal(p->wv, LL * D * D, 0.02, &r);
    for (size_t i = 0; i < L * D * c->K; i++) {  // like a depthwise Conv1d: uniform(-1/sqrt(K), 1/sqrt(K))
        p->conv_q[i] = (real)((2 * rng_f64(&r) - 1) / sqrt(c->K));
        p->conv_k[i] = (real)((2 * rng_f64(&r) - 1) / sqrt(c->K));
        p->conv_v[i] = (real)((2 * rng_f64(&r) - 1) / sqrt(c->K));
    }
    if (c->gate_a) {
        fill_normal(p->gate_a_w, L * H * D, 0.02, &r);
        fill_const(p->gate_a_b, L * H, log(0.99 / 0.01));
    }  // a = 0.99
    size_t R = c->gate_rank, gw = R ? R * D : H * D, Ge = R ? D : H;  // per head, or rank R per channel
    if (c->gate_eta) {
        fill_normal(p->gate_eta_w, L * gw, 0.02, &r);
        fill_const(p->gate_eta_b, L * Ge, log(0.1 / 0.9));  // eta = 0.1 eta_max
        if (R) fill_normal(p->gate_eta_up, L * D * R, 0.02, &r);
    }
    if (c->bias == BIAS_HUBER) {
        fill_normal(p->gate_delta_w, L * gw, 0.02, &r);
        fill_const(p->gate_delta_b, L * Ge, log(exp(1.0) - 1));  // delta = 1
        if (R) fill_normal(p->gate_delta_up, L * D * R, 0.02, &r);
    }
    if (c->algo != ALGO_GD) {
        fill_normal(p->gate_theta_w, L * H * D, 0.02, &r);
        fill_const(p->gate_theta_b, L * H, log(0.9 / 0.1));
    }  // theta = 0.9
    if (m->poly)
        for (size_t l = 0; l < L; l++) {  // a = (1, 1, 1/2) (SPEC §5.6)
            p->poly_rho[l * 3] = (real)log(exp(1.0) - 1);
            p->poly_rho[l * 3 + 1] = (real)log(exp(1.0) - 1);
            p->poly_rho[l * 3 + 2] = (real)log(exp(0.5) - 1);
        }
    if (m->omega > 1) {
        size_t Hc = H * m->omega;
        fill_normal(p->gate_gamma_w, L * Hc * D, 0.02, &r);
        fill_const(p->gate_gamma_b, L * Hc, log(0.88 / 0.12));
    }  // gamma = 0.88
    // P_0: linear W = 0. Deep W2 ~ N(0, 1) so that W2 k (k unit-norm) is O(1) at the GELU; W1 ~ N(0, 1) with
    // the LN (which makes the inner step on W1 scale like eta/|W1|^2: small W1 would make it unstable),
    // N(0, 1/d_m) without it.
    // Memora's state is logits: N(0, 1) (a uniform start would keep all hidden units alike). Moneta's state A is
    // scaled so that its weights A / s start like the other deep memories' (each matrix divided by |A|_4^2).
    for (size_t lh = 0; lh < L * H; lh++) {
        real* P0 = p->mem_p0 + lh * m->nP;
        if (m->retention == RET_KL)
            fill_normal(P0, m->nP, 1, &r);
        else if (m->depth == 2) {
            fill_normal(P0, d * m->dm, m->ln ? 1 : 1 / sqrt((double)m->dm), &r);
            if (!m->phistar) fill_normal(P0 + d * m->dm, m->dm * m->din, 1, &r);  // (phi*: W1 only, W2_0 = 0)
            if (m->gated) fill_normal(P0 + d * m->dm + m->dm * m->din, m->dm * m->din, 1, &r);  // W3, as W2
        }
        if (m->retention == RET_LQ) {
            real cs[2];
            lq_scales(m, P0, P0, cs);
        }  // A_0 = P / |P|_4^2, so A_0 / s(A_0) = P
    }
    if (m->ln) {
        fill_const(p->mem_ln_g, L * H * d, 1);
        fill_const(p->mem_ln_b, L * H * d, 0);
    }
    fill_normal(p->wg, L * D * D, 0.02, &r);
    fill_normal(p->wo, LL * D * D, s_res, &r);
    fill_normal(p->mlp_w1, LL * F * D, 0.02, &r);
    fill_normal(p->mlp_w3, LL * F * D, 0.02, &r);
    fill_normal(p->mlp_w2, LL * D * F, s_res, &r);
    titans_init(M, &r);  // Titans layers' own tensors (none otherwise)
}

// (Re)allocate activations for batch B, length T (lazily, like llm.c; a new shape reallocates).
// The floats model_alloc_acts takes for a batch (B, T), as a double: a budget check before allocating, for
// sizes that come from a file (dump mode). Mirrors the allocations below.
static double model_act_floats(const Config* c, int B, int T) {
    MemCfg m = mem_config(c);
    size_t s[NUM_ACT_TENSORS];
    MemChunk tmp;
    fill_in_activation_sizes(s, c, B, T);
    double n = (double)head_act_size(c, B, T);
    for (int i = 0; i < NUM_ACT_TENSORS; i++) n += (double)s[i];
    double nstate = (double)c->L * B * c->H * (c->lattice ? lattice_slots(c, T) : (T + c->b - 1) / c->b) * m.nP;
    if (c->lattice) nstate += (double)max_threads() * lattice_scratch_size(m.d, c->lat_k);
    if (m.phistar) {
        PhiScr ps;
        double ne = (double)phi_entries(T, c->b, m.omega);
        nstate += (double)c->L * B * c->H * (ne * (m.dm + 2) + (T + c->b - 1) / c->b) +
                  (double)max_threads() * phi_scr_carve(&ps, NULL, &m, c->b, (size_t)ne);
    }
    return 2 * n + nstate * (1 + mem_carries_S(&m)) + (double)B * c->H * (m.nP + 2 * m.d) +
           (double)max_threads() *
               (memchunk_carve_in(&tmp, NULL, c->b + m.omega - 1, m.d, m.din, m.dm, m.nP, mem_carve_opt(&m)) +
                muon_carve(&tmp, NULL, c->b, &m)) +
           2.0 * B * T;
}
// Frees what model_alloc_acts allocates (every buffer whose size depends on B and T) and sets the pointers to NULL:
// model_alloc_acts allocates the Lattice and phi* buffers only for those models, and model_free may follow.
static void model_free_acts(Model* M) {
    free(M->acts_memory);
    free(M->grads_acts_memory);
    free(M->mem_P);
    free(M->mem_S);
    free(M->mem_dbh);
    free(M->chunk_memory);
    free(M->chunks);
    free(M->inputs);
    free(M->targets);
    free(M->lat_scratch);
    free(M->phi_av);
    free(M->phi_lo);
    free(M->phi_LA);
    free(M->phi_etok);
    free(M->phi_scr_mem);
    free(M->phi_scr);
    M->acts_memory = M->grads_acts_memory = M->mem_P = M->mem_S = M->mem_dbh = M->chunk_memory = NULL;
    M->lat_scratch = M->phi_av = M->phi_lo = M->phi_LA = M->phi_scr_mem = NULL;
    M->inputs = M->targets = M->phi_etok = NULL;
    M->chunks = NULL;
    M->phi_scr = NULL;
}
static void model_alloc_acts(Model* M, int B, int T) {
    if (M->acts_memory && M->B == B && M->T == T) return;
    model_free_acts(M);
    M->B = B;
    M->T = T;
    fill_in_activation_sizes(M->act_sizes, &M->cfg, B, T);
    M->num_acts = head_act_size(&M->cfg, B, T);
    for (int i = 0; i < NUM_ACT_TENSORS; i++) M->num_acts += M->act_sizes[i];
    M->acts_memory = (real*)xmalloc(M->num_acts * sizeof(real));
    M->grads_acts_memory = (real*)xmalloc(M->num_acts * sizeof(real));
    point_activations(&M->acts, M->acts_memory, M->act_sizes, &M->cfg, B, T);
    point_activations(&M->grads_acts, M->grads_acts_memory, M->act_sizes, &M->cfg, B, T);
    size_t nstate =
        (size_t)M->cfg.L * B * M->cfg.H * (M->cfg.lattice ? lattice_slots(&M->cfg, T) : nchunks(M, T)) * M->mem.nP;
    M->mem_P = (real*)xmalloc(nstate * sizeof(real));
    if (M->cfg.lattice)
        M->lat_scratch =
            (real*)xmalloc((size_t)max_threads() * lattice_scratch_size(M->mem.d, M->cfg.lat_k) * sizeof(real));
    M->mem_S = NULL;
    if (mem_carries_S(&M->mem)) M->mem_S = (real*)xmalloc(nstate * sizeof(real));
    M->mem_dbh = (real*)xmalloc((size_t)B * M->cfg.H * (M->mem.nP + 2 * M->mem.d) * sizeof(real));
    int nt = max_threads();
    MemChunk tmp;
    size_t per1 = memchunk_carve_in(&tmp, NULL, M->cfg.b + M->mem.omega - 1, M->mem.d, M->mem.din, M->mem.dm, M->mem.nP,
                                    mem_carve_opt(&M->mem));  // (omega: + halo)
    size_t per = per1 + muon_carve(&tmp, NULL, M->cfg.b, &M->mem);
    M->chunk_memory = (real*)xmalloc((size_t)nt * per * sizeof(real));
    M->chunks = (MemChunk*)xmalloc((size_t)nt * sizeof(MemChunk));
    for (int i = 0; i < nt; i++) {
        memchunk_carve_in(&M->chunks[i], M->chunk_memory + (size_t)i * per, M->cfg.b + M->mem.omega - 1, M->mem.d,
                          M->mem.din, M->mem.dm, M->mem.nP, mem_carve_opt(&M->mem));
        muon_carve(&M->chunks[i], M->chunk_memory + (size_t)i * per + per1, M->cfg.b, &M->mem);
    }
    if (M->mem.phistar) {  // section 3c: the entries of every (layer, sequence, head) and a scratch per thread
        size_t ne = phi_entries(T, M->cfg.b, M->mem.omega), LBH = (size_t)M->cfg.L * B * M->cfg.H;
        M->phi_av = (real*)xmalloc(LBH * ne * M->mem.dm * sizeof(real));
        M->phi_lo = (real*)xmalloc(LBH * ne * sizeof(real));
        M->phi_etok = (int*)xmalloc(LBH * ne * sizeof(int));
        M->phi_LA = (real*)xmalloc(LBH * nchunks(M, T) * sizeof(real));
        PhiScr tmp2;
        size_t per2 = phi_scr_carve(&tmp2, NULL, &M->mem, M->cfg.b, ne);
        M->phi_scr_mem = (real*)xmalloc((size_t)nt * per2 * sizeof(real));
        M->phi_scr = (PhiScr*)xmalloc((size_t)nt * sizeof(PhiScr));
        for (int i = 0; i < nt; i++)
            phi_scr_carve(&M->phi_scr[i], M->phi_scr_mem + (size_t)i * per2, &M->mem, M->cfg.b, ne);
    }
    M->inputs = (int*)xmalloc((size_t)B * T * sizeof(int));
    M->targets = (int*)xmalloc((size_t)B * T * sizeof(int));
    if (M->cfg.arch && !M->tx_sub) titans_alloc(M, B, T);  // Titans layers: the stream model at (B, N_p + T)
}

// The forward pass (SPEC §2, §3). targets may be NULL (no loss).
static void model_forward(Model* M, const int* inputs, const int* targets, int B, int T) {
    const Config* c = &M->cfg;
    int L = c->L, D = c->D, H = c->H, F = c->F, Vp = c->Vp, d = M->mem.d;
    size_t N = (size_t)B * T;
    for (size_t i = 0; i < N; i++)
        if (inputs[i] < 0 || inputs[i] >= c->V || (targets && (targets[i] < 0 || targets[i] >= c->V)))
            DIE("the data's tokenizer must match the model's vocab (-V)", "token id %d out of range for vocab size %d",
                targets && (targets[i] < 0 || targets[i] >= c->V) ? targets[i] : inputs[i], c->V);
    model_alloc_acts(M, B, T);
    memcpy(M->inputs, inputs, N * sizeof(int));
    if (targets) memcpy(M->targets, targets, N * sizeof(int));
    ParameterTensors* p = &M->params;
    ActivationTensors* a = &M->acts;
    encoder_forward(a->encoded, inputs, p->wte, N, D);
    for (int l = 0; l < L; l++) {
        size_t oD = (size_t)l * N * D, oH = (size_t)l * N * H, oF = (size_t)l * N * F;
        real* x = l == 0 ? a->encoded : a->res3 + oD - N * D;
        real* u = a->ln1 + oD;
        rmsnorm_forward(u, a->ln1_rstd + (size_t)l * N, x, p->rms1_w + (size_t)l * D, N, 1, D);
        if (c->arch)
            titans_layer_forward(M, l, x);  // MAL, MAG (section 4b): a->mo from x and u
        else if (c->pattern[l] == 'M')
            mixer_forward(M, l);  // the memory mixer (section 3): a->mo from u
        else {
            // attention (SPEC §9.1): q, k = RoPE(u Wq^T), RoPE(u Wk^T); v = u Wv^T; z = attn(q, k, v) (stored in z; its
            // log-sum-exps in qrn); x = x + z Wo^T. The memory's activations of this layer stay unused.
            matmul_forward(a->qp + oD, u, p->wq + (size_t)l * D * D, NULL, N, D, D);
            matmul_forward(a->kp + oD, u, p->wk + (size_t)l * D * D, NULL, N, D, D);
            matmul_forward(a->vp + oD, u, p->wv + (size_t)l * D * D, NULL, N, D, D);
            rope_forward(a->q + oD, a->qp + oD, B, T, H, d, 1);
            rope_forward(a->k + oD, a->kp + oD, B, T, H, d, 1);
            attention_forward(a->z + oD, a->qrn + oH, a->q + oD, a->k + oD, a->vp + oD, B, T, H, d,
                              c->pattern[l] == 'S' ? c->window : 0, 0);
            matmul_forward(a->mo + oD, a->z + oD, p->wo + (size_t)l * D * D, NULL, N, D, D);
        }
        residual_forward(a->res2 + oD, x, a->mo + oD, N * D);
        // x = x + SwiGLU(RMSNorm(x))
        rmsnorm_forward(a->ln2 + oD, a->ln2_rstd + (size_t)l * N, a->res2 + oD, p->rms2_w + (size_t)l * D, N, 1, D);
        matmul_forward(a->h1 + oF, a->ln2 + oD, p->mlp_w1 + (size_t)l * F * D, NULL, N, D, F);
        matmul_forward(a->h3 + oF, a->ln2 + oD, p->mlp_w3 + (size_t)l * F * D, NULL, N, D, F);
        swiglu_forward(a->hg + oF, a->h1 + oF, a->h3 + oF, N * F);
        matmul_forward(a->mlpo + oD, a->hg + oF, p->mlp_w2 + (size_t)l * D * F, NULL, N, F, D);
        residual_forward(a->res3 + oD, a->res2 + oD, a->mlpo + oD, N * D);
    }
    rmsnorm_forward(a->lnf, a->lnf_rstd, a->res3 + (size_t)(L - 1) * N * D, p->rmsf_w, N, 1, D);
    matmul_forward(a->logits, a->lnf, p->wte, NULL, N, D, Vp);
    if (!targets) {
        M->mean_loss = -1;
        return;
    }
    crossentropy_forward(a->losses, a->probs, a->logits, targets, N, c->V, Vp);
    double s = 0, cnt = 0;
    for (size_t i = 0; i < N; i++)
        if (!M->loss_mask || M->loss_mask[i]) {
            s += a->losses[i];
            cnt++;
        }
    M->mean_loss = (real)(cnt ? s / cnt : 0);
}

static void model_zero_grad(Model* M) {
    if (!M->grads_memory) {
        M->grads_memory = (real*)xmalloc(M->num_params * sizeof(real));
        point_parameters(&M->grads, M->grads_memory, M->param_sizes);
    }
    memset(M->grads_memory, 0, M->num_params * sizeof(real));
    M->nf_what = NULL;  // no non-finite memory gradient seen in this step's backward passes yet
}

// The backward pass: accumulates d(mean loss * loss_scale)/d(params) into M->grads.
static void model_backward(Model* M, real loss_scale) {
    if (M->mean_loss == -1) DIE(NULL, "internal: backward called without a forward with targets");
    if (!M->grads_memory) model_zero_grad(M);
    const Config* c = &M->cfg;
    int B = M->B, T = M->T, L = c->L, D = c->D, H = c->H, F = c->F, Vp = c->Vp, d = M->mem.d;
    size_t N = (size_t)B * T;
    ParameterTensors *p = &M->params, *dp = &M->grads;
    ActivationTensors *a = &M->acts, *g = &M->grads_acts;
    memset(M->grads_acts_memory, 0, M->num_acts * sizeof(real));
    size_t cnt = N;
    if (M->loss_mask) {
        cnt = 0;
        for (size_t i = 0; i < N; i++) cnt += M->loss_mask[i] != 0;
    }
    crossentropy_backward(g->logits, a->probs, M->targets, M->loss_mask, cnt ? loss_scale / cnt : 0, N, c->V, Vp);
    matmul_backward(g->lnf, dp->wte, NULL, g->logits, a->lnf, p->wte, N, D, Vp);
    rmsnorm_backward(g->res3 + (size_t)(L - 1) * N * D, dp->rmsf_w, g->lnf, a->res3 + (size_t)(L - 1) * N * D,
                     p->rmsf_w, a->lnf_rstd, N, 1, D);
    for (int l = L - 1; l >= 0; l--) {
        size_t oD = (size_t)l * N * D, oH = (size_t)l * N * H, oF = (size_t)l * N * F;
        real* x = l == 0 ? a->encoded : a->res3 + oD - N * D;
        real* dx = l == 0 ? g->encoded : g->res3 + oD - N * D;
        real *u = a->ln1 + oD, *du = g->ln1 + oD;
        // x = res2 + SwiGLU(RMSNorm(res2))
        residual_forward(g->res2 + oD, g->res2 + oD, g->res3 + oD, N * D);
        matmul_backward(g->hg + oF, dp->mlp_w2 + (size_t)l * D * F, NULL, g->res3 + oD, a->hg + oF,
                        p->mlp_w2 + (size_t)l * D * F, N, F, D);
        swiglu_backward(g->h1 + oF, g->h3 + oF, g->hg + oF, a->h1 + oF, a->h3 + oF, N * F);
        matmul_backward(g->ln2 + oD, dp->mlp_w1 + (size_t)l * F * D, NULL, g->h1 + oF, a->ln2 + oD,
                        p->mlp_w1 + (size_t)l * F * D, N, D, F);
        matmul_backward(g->ln2 + oD, dp->mlp_w3 + (size_t)l * F * D, NULL, g->h3 + oF, a->ln2 + oD,
                        p->mlp_w3 + (size_t)l * F * D, N, D, F);
        rmsnorm_backward(g->res2 + oD, dp->rms2_w + (size_t)l * D, g->ln2 + oD, a->res2 + oD, p->rms2_w + (size_t)l * D,
                         a->ln2_rstd + (size_t)l * N, N, 1, D);
        // res2 = x + (RMSNorm_head(y) * SiLU(u Wg^T)) Wo^T
        residual_forward(dx, dx, g->res2 + oD, N * D);
        if (c->arch)
            titans_layer_backward(M, l, dx, du);  // MAL, MAG (section 4b)
        else if (c->pattern[l] == 'M')
            mixer_backward(M, l, g->res2 + oD);  // res2 = x + (RMSNorm_head(y) * SiLU(u Wg^T)) Wo^T
        else {  // attention (SPEC §9.1): back through Wo, attn, RoPE and the projections
            matmul_backward(g->z + oD, dp->wo + (size_t)l * D * D, NULL, g->res2 + oD, a->z + oD,
                            p->wo + (size_t)l * D * D, N, D, D);
            attention_backward(g->q + oD, g->k + oD, g->vp + oD, g->z + oD, a->q + oD, a->k + oD, a->vp + oD, a->z + oD,
                               a->qrn + oH, B, T, H, d, c->pattern[l] == 'S' ? c->window : 0, 0);
            rope_backward(g->qp + oD, g->q + oD, B, T, H, d);
            rope_backward(g->kp + oD, g->k + oD, B, T, H, d);
            matmul_backward(du, dp->wq + (size_t)l * D * D, NULL, g->qp + oD, u, p->wq + (size_t)l * D * D, N, D, D);
            matmul_backward(du, dp->wk + (size_t)l * D * D, NULL, g->kp + oD, u, p->wk + (size_t)l * D * D, N, D, D);
            matmul_backward(du, dp->wv + (size_t)l * D * D, NULL, g->vp + oD, u, p->wv + (size_t)l * D * D, N, D, D);
        }
        rmsnorm_backward(dx, dp->rms1_w + (size_t)l * D, du, x, p->rms1_w + (size_t)l * D, a->ln1_rstd + (size_t)l * N,
                         N, 1, D);
    }
    encoder_backward(dp->wte, g->encoded, M->inputs, N, D);
}

// The error for a non-finite gradient norm: the tensor, and where in the memories' backward it first overflowed.
// Not the learning rate (the first step has this gradient too): long sequences multiply the chunk maps' Jacobians.
static void die_nonfinite_grad(real norm, long step, const char* tensor, int layer, int chunk, const char* what,
                               int b) {
    char where[256] = "";
    if (what)
        snprintf(where, sizeof where,
                 "; in the backward it first overflowed in layer %d, chunk %d (tokens %d..%d), in %s", layer, chunk,
                 chunk * b, chunk * b + b - 1, what);
    DIE("the memory recurrence amplifies over long sequences: use the preset's long-sequence defaults (README \"Long sequences\": "
        "anchored retention -Z 1, a smaller eta_max -X), a shorter -t, or a retention gate a closer to 1",
        "gradient norm is not finite (%s) at step %ld, first in %s%s", isnan(norm) ? "nan" : "inf", step,
        tensor ? tensor : "?", where);
}

// global gradient norm, and clipping to it (SPEC §8): if |g| > clip, g *= clip/|g|
static real grad_norm(const Model* M) {
    double s = 0;
    for (size_t i = 0; i < M->num_params; i++) s += (double)M->grads_memory[i] * M->grads_memory[i];
    return (real)sqrt(s);
}
// the first parameter tensor whose gradient holds a NaN or infinity (for the error message), or NULL
static const char* nonfinite_grad_tensor(const Model* M) {
    size_t off = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        for (size_t i = off; i < off + M->param_sizes[t]; i++)
            if (!isfinite(M->grads_memory[i])) return PARAM_NAMES[t];
        off += M->param_sizes[t];
    }
    return NULL;
}
static void grad_clip(Model* M, real norm, real clip) {
    if (clip > 0 && norm > clip) {
        real sc = clip / norm;
        for (size_t i = 0; i < M->num_params; i++) M->grads_memory[i] *= sc;
    }
}

// AdamW as torch.optim.AdamW: decoupled decay (on PARAM_DECAY tensors), bias-corrected moments. It updates the
// parameters [opt_lo, opt_lo + opt_n) (all, or this rank's shard with -K 1), whose moments m_memory, v_memory hold.
static void model_update(Model* M, real lr, real beta1, real beta2, real eps, real wd) {
    if (!M->m_memory) {
        M->m_memory = (real*)xmalloc(M->opt_n * sizeof(real));
        M->v_memory = (real*)xmalloc(M->opt_n * sizeof(real));
    }
    M->adam_t++;
    real bc1 = 1 - pow(beta1, M->adam_t), bc2 = 1 - pow(beta2, M->adam_t);
    size_t off = 0, lo = M->opt_lo, hi = M->opt_lo + M->opt_n;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        real decay = PARAM_DECAY[t] ? wd : 0;
        size_t i0 = off > lo ? off : lo, i1 = off + M->param_sizes[t] < hi ? off + M->param_sizes[t] : hi;
#pragma omp parallel for
        for (size_t i = i0; i < i1; i++) {
            real gr = M->grads_memory[i], *w = &M->params_memory[i];
            real m = beta1 * M->m_memory[i - lo] + (1 - beta1) * gr,
                 v = beta2 * M->v_memory[i - lo] + (1 - beta2) * gr * gr;
            M->m_memory[i - lo] = m;
            M->v_memory[i - lo] = v;
            *w -= lr * decay * *w;
            *w -= lr * (m / bc1) / (sqrt(v / bc2) + eps);
        }
        off += M->param_sizes[t];
    }
}

static void model_free(Model* M) {
    free(M->params_memory);
    free(M->grads_memory);
    free(M->m_memory);
    free(M->v_memory);
    model_free_acts(M);
    titans_free(M);
}

// ----------------------------------------------------------------------------
// 4b. Titans layers (SPEC §9.2-9.3): persistent memory, MAL, MAG, MAC
//
// Every layer of a Titans model is of one kind (Config.arch). Its memory mixer runs over the stream [P || u] of
// Tn = N_p + T rows: section 3 unchanged (chunks counted from the stream start, the conv over the stream, the gates
// from the P rows too), and only the sequence rows of its output are kept. A second Model X shares the model's
// parameters and gradients and holds the mixer's activations at (B, Tn); the mixer code below is section 3's, run on
// X. The stream's prefix rows are the layer's N_p persistent tokens P (learned D-vectors, in place of u's rows).
//   MAL: x += Mixer([P||u])[seq];  x += attn_SWA(RMSNorm_attn(x)) Wo_a  (RoPE positions t, no prefix);  x += SwiGLU
//   MAG: y = attn_SWA([P||u]) Wo_a at the sequence queries: P rows are keys/values every query sees (also outside the
//        window), at RoPE positions 0..N_p-1, token t at N_p + t;  m = Mixer([P||u])[seq];
//        x += o(y, m) = RMSNorm_g1(y) * sigmoid(RMSNorm_g2(m));  x += SwiGLU
// The attention of a Titans layer has its own projections att_wq, att_wk, att_wv, att_wo (D x D each).
typedef struct {
    real *q, *k, *v, *z, *lse, *y;  // attention: (L, Nq, D) RoPE'd q, k; v; softmax(.) v; lse (L, Nq, H); y = z Wo_a^T
        // (Nq = B*Tn stream rows for MAG, B*T sequence rows for MAL)
    real *m, *ua, *ra;  // (L, N, D) the mixer's sequence rows m (MAL: x + m); MAL: RMSNorm_attn(x + m), (L, N) rstd
    real *ys, *n1, *n2, *r1, *r2;  // MAG: (L, N, D) y's sequence rows, RMSNorm_g1(y), RMSNorm_g2(m); (L, N) their rstd
        // (MAC: y holds y Wo_a^T, n1, n2 the gate's norms of it and of m)
    real *uqp, *uqc, *uqs, *uq,
        *uqrn;  // MAC: (L, N, D) the u sequence's memory q: u Wq^T, conv, SiLU, l2 norm; (L, N, H)
    real* uqf;  // MAC with poly: (L, N, H*din) the poly features of uq (SPEC §5.6)
    real* Sseg;  // MAC with Lattice: (L, B, H, nseg + 1, nP) the state S at every segment start (and the end)
    real *h, *kh, *vh, *kP, *vP;  // MAC: (L, N, D) h, its RoPE'd keys and values; (L, N_p, D) P's
    real *dPc, *dSc;  // MAC (gradients only): (B, H, nP) dL/dP, dL/dS carried across segments
    real* phd;  // MAC with the phi* memory (gradients only): (B, H, entries * (d_m + 1) + 1) the entries' dL/da,
        // dL/dlo and dL/dLA carried across segments (dL/dW1 in dPc); the GPU keeps the entries' in each block's
        // scratch and here only dL/dLA, (B, H)
} TxActs;
typedef struct Titans {
    Model X;
    int Tn;
    real *mem, *gmem;
    size_t n;
    TxActs a, g;
} Titans;

// MAC with the phi* memory: floats of one (sequence, head)'s carried accumulators (TxActs phd)
static size_t mac_phi_acc_size(const Config* c, int T) {
    MemCfg m = mem_config(c);
    return phi_entries(T, c->b, m.omega) * (m.dm + 1) + 1;
}
// (phd_bh: floats of phd per (sequence, head), mac_phi_acc_size on the CPU, 1 on the GPU)
static size_t tx_point(TxActs* t, real* p, const Config* c, int B, int T, size_t phd_bh) {
    size_t L = c->L, D = c->D, H = c->H, N = (size_t)B * T, Nq = c->arch == ARCH_MAG ? (size_t)B * (T + c->npers) : N,
           off = 0;
#define TX(f, sz)                  \
    do {                           \
        t->f = p ? p + off : NULL; \
        off += (sz);               \
    } while (0)
    TX(q, L * Nq * D);
    TX(k, L * Nq * D);
    TX(v, L * Nq * D);
    TX(z, L * Nq * D);
    TX(lse, L * Nq * H);
    TX(y, L * Nq * D);
    TX(m, L * N * D);
    TX(ua, L * N * D);
    TX(ra, L * N);
    TX(ys, L * N * D);
    TX(n1, L * N * D);
    TX(n2, L * N * D);
    TX(r1, L * N);
    TX(r2, L * N);
    MemCfg mc = mem_config(c);
    size_t Lc = c->arch == ARCH_MAC ? L : 0, nP = mc.nP;
    TX(uqp, Lc * N * D);
    TX(uqc, Lc * N * D);
    TX(uqs, Lc * N * D);
    TX(uq, Lc * N * D);
    TX(uqrn, Lc * N * H);
    TX(uqf, mc.poly ? Lc * N * H * mc.din : 0);
    TX(Sseg, Lc && c->lattice ? Lc * B * H * ((T + c->seg - 1) / c->seg + 1) * nP : 0);
    TX(h, Lc * N * D);
    TX(kh, Lc * N * D);
    TX(vh, Lc * N * D);
    TX(kP, Lc * c->npers * D);
    TX(vP, Lc * c->npers * D);
    TX(dPc, Lc ? (size_t)B * H * nP : 0);
    TX(dSc, Lc ? (size_t)B * H * nP : 0);
    TX(phd, Lc && mc.phistar ? (size_t)B * H * phd_bh : 0);
#undef TX
    return off;
}
static void model_alloc_acts(Model* M, int B, int T);
// (re)allocate with the model's activations (model_alloc_acts)
static void titans_alloc(Model* M, int B, int T) {
    Titans* t = M->tx;
    if (!t) {
        t = M->tx = (Titans*)xmalloc(sizeof(Titans));
        memset(t, 0, sizeof *t);
    } else {
        free(t->mem);
        free(t->gmem);
    }
    Model* X = &t->X;
    t->Tn = T + M->cfg.npers;
    X->cfg = M->cfg;
    X->mem = M->mem;
    X->tx_sub = 1;
    memcpy(X->mlayer, M->mlayer, sizeof M->mlayer);
    X->cfg.F = 1;
    X->cfg.Vp = 1;  // X runs the mixers only: no room for its (unused) SwiGLU and logits activations
    memcpy(X->param_sizes, M->param_sizes, sizeof M->param_sizes);
    X->num_params = M->num_params;
    X->params = M->params;
    X->params_memory = M->params_memory;
    if (M->cfg.arch != ARCH_MAC) model_alloc_acts(X, B, t->Tn);  // (MAC's memory sees no prefix: no stream)
    size_t phd_bh = mac_phi_acc_size(&M->cfg, T);
    t->n = tx_point(&t->a, NULL, &M->cfg, B, T, phd_bh);
    t->mem = (real*)xmalloc(t->n * sizeof(real));
    t->gmem = (real*)xmalloc(t->n * sizeof(real));
    tx_point(&t->a, t->mem, &M->cfg, B, T, phd_bh);
    tx_point(&t->g, t->gmem, &M->cfg, B, T, phd_bh);
}
static void titans_free(Model* M) {
    Titans* t = M->tx;
    if (!t) return;
    Model* X = &t->X;
    X->params_memory = NULL;
    X->grads_memory = NULL;  // shared with M
    model_free(X);
    free(t->mem);
    free(t->gmem);
    free(t);
    M->tx = NULL;
}
// Init (README "Model definition"): P ~ N(0, 1) (like the unit-RMS rows of u); the attention's projections as the
// mixer's (N(0, 0.02), Wo_a N(0, 0.02/sqrt(2L))); the norms' weights 1
static void titans_init(Model* M, uint64_t* r) {
    const Config* c = &M->cfg;
    ParameterTensors* p = &M->params;
    size_t L = c->L, D = c->D;
    if (!c->arch) return;
    fill_normal(p->pers, L * c->npers * D, 1, r);
    fill_normal(p->att_wq, L * D * D, 0.02, r);
    fill_normal(p->att_wk, L * D * D, 0.02, r);
    fill_normal(p->att_wv, L * D * D, 0.02, r);
    fill_normal(p->att_wo, L * D * D, 0.02 / sqrt(2.0 * c->L), r);
    if (c->arch == ARCH_MAL) fill_const(p->rmsa_w, L * D, 1);
    if (c->arch >= ARCH_MAG) {
        fill_const(p->og1_w, L * D, 1);
        fill_const(p->og2_w, L * D, 1);
    }
}

// The attention of a Titans layer on rows ua (Nq = B*Tr of them): q, k = RoPE(ua Wq_a^T), RoPE(ua Wk_a^T) at the rows'
// positions 0..Tr-1; v = ua Wv_a^T; z = attn (window W, prefix np); y = z Wo_a^T
static void tx_attn_forward(Model* M, int l, const real* ua, int Tr, int np, size_t o, size_t oh) {
    const Config* c = &M->cfg;
    ParameterTensors* p = &M->params;
    TxActs* t = &M->tx->a;
    int B = M->B, D = c->D, H = c->H, d = D / H, Nq = B * Tr;
    size_t oW = (size_t)l * D * D;
    matmul_forward(t->q + o, ua, p->att_wq + oW, NULL, Nq, D, D);
    rope_forward(t->q + o, t->q + o, B, Tr, H, d, 1);
    matmul_forward(t->k + o, ua, p->att_wk + oW, NULL, Nq, D, D);
    rope_forward(t->k + o, t->k + o, B, Tr, H, d, 1);
    matmul_forward(t->v + o, ua, p->att_wv + oW, NULL, Nq, D, D);
    attention_forward(t->z + o, t->lse + oh, t->q + o, t->k + o, t->v + o, B, Tr, H, d, c->window, np);
    matmul_forward(t->y + o, t->z + o, p->att_wo + oW, NULL, Nq, D, D);
}
// its backward, from t->g.y to dua (accumulated)
static void tx_attn_backward(Model* M, int l, real* dua, const real* ua, int Tr, int np, size_t o, size_t oh) {
    const Config* c = &M->cfg;
    ParameterTensors *p = &M->params, *dp = &M->grads;
    TxActs *t = &M->tx->a, *g = &M->tx->g;
    int B = M->B, D = c->D, H = c->H, d = D / H, Nq = B * Tr;
    size_t oW = (size_t)l * D * D;
    matmul_backward(g->z + o, dp->att_wo + oW, NULL, g->y + o, t->z + o, p->att_wo + oW, Nq, D, D);
    attention_backward(g->q + o, g->k + o, g->v + o, g->z + o, t->q + o, t->k + o, t->v + o, t->z + o, t->lse + oh, B,
                       Tr, H, d, c->window, np);
    rope_backward(g->q + o, g->q + o, B, Tr, H, d);
    rope_backward(g->k + o, g->k + o, B, Tr, H, d);
    matmul_backward(dua, dp->att_wq + oW, NULL, g->q + o, ua, p->att_wq + oW, Nq, D, D);
    matmul_backward(dua, dp->att_wk + oW, NULL, g->k + o, ua, p->att_wk + oW, Nq, D, D);
    matmul_backward(dua, dp->att_wv + oW, NULL, g->v + o, ua, p->att_wv + oW, Nq, D, D);
}

// ---- MAC, memory as context (SPEC §9.3). Segments of C tokens (C a multiple of b, so segments are whole chunks).
// For segment s (rows s0..s1-1 of each sequence), with the memory state P_(s) at the segment start (the stored
// chunk-start state of chunk s0/b):
//   h_t = M(uq_t; P_(s))      a read without update; uq = l2norm(SiLU(conv_q(u Wq^T))) over the u sequence
//                             (a chunk with a = 1, eta = 0: with lq it reads A_(s)/s, with kl softmax(Z_(s)))
//   y_t = attn over keys/values [P || h_s0..t || u_s0..t] (att_wk, att_wv; RoPE: P at 0..N_p-1, h_t and u_t at
//         N_p + t), query att_wq u_t at N_p + t; y = the attention output before Wo_a
//   the memory (section 3's projections, conv over the y sequence, gates) takes q, k, v, gates from y, writes
//   and reads per section 5: m_t = M(q_t; P_t) (raw: no Wg, head norm or Wo of the mixer)
//   x += RMSNorm_g1(y Wo_a^T) * sigmoid(RMSNorm_g2(m))
// The forward runs segment after segment (segment s's attention needs the state the earlier segments wrote);
// the backward sweeps the segments in reverse, carrying dL/dP across them, and adds at each segment start the
// gradient of the h reads (dL/dP_(s)), once the segment's dy (from the gate and the memory's inputs) is complete.
// The memory's wg, rmsh_w and wo are not used by MAC (their gradients stay zero).
// The ATLAS family's memories (SPEC §5.5-5.6): omega's window reaches back across segments (the first chunk of a
// segment takes the previous segment's last c-1 rows as its halo, their gradients flowing back into that segment's
// memory inputs before their backward runs); poly's features of uq feed the h reads (the residual adds the raw uq).
// Lattice (section 3b, per token): mac_lat_* below, the state kept at every segment start.

// RoPE on rows [t0, t1) of each sequence of x (B, T, H*d), at positions off + t, in place (dir -1: backward)
static void rope_rows(real* x, int B, int T, int H, int d, int t0, int t1, int off, int dir) {
#pragma omp parallel for
    for (int t = t0; t < t1; t++) {
        real cs[128], sn[128];
        rope_angles(cs, sn, off + t, d / 2);
        for (int bb = 0; bb < B; bb++) {
            size_t o = ((size_t)bb * T + t) * H * d;
            rope_rotate(x + o, x + o, cs, sn, H, d, dir);
        }
    }
}
// the causal conv of rows [t0, t1) only (conv_forward's sums), and its backward for those output rows
static void conv_rows_forward(real* out, const real* x, const real* w, int B, int T, int C, int K, int t0, int t1) {
#pragma omp parallel for collapse(2)
    for (int bb = 0; bb < B; bb++)
        for (int t = t0; t < t1; t++)
            for (int i = 0; i < C; i++) {
                real s = 0;
                for (int j = 0; j < K; j++) {
                    int tt = t - K + 1 + j;
                    if (tt >= 0) s += w[i * K + j] * x[((size_t)bb * T + tt) * C + i];
                }
                out[((size_t)bb * T + t) * C + i] = s;
            }
}
static void conv_rows_backward(real* dx, real* dw, const real* dout, const real* x, const real* w, int B, int T, int C,
                               int K, int t0, int t1) {
#pragma omp parallel for
    for (int i = 0; i < C; i++)
        for (int b = 0; b < B; b++)
            for (int t = t0; t < t1; t++) {
                real g = dout[((size_t)b * T + t) * C + i];
                for (int j = 0; j < K; j++) {
                    int tt = t - K + 1 + j;
                    if (tt < 0) continue;
                    dx[((size_t)b * T + tt) * C + i] += w[i * K + j] * g;
                    dw[i * K + j] += g * x[((size_t)b * T + tt) * C + i];
                }
            }
}
// rows [t0, t0+n) of head h of sequence bb as a read-without-update chunk: q from q (B*T, D), no write (a = 1, eta = 0;
// no omega halo or window: nothing is written); with poly the features of q from qf (B*T, H*din), also standing in for
// k's (any finite row: eta = 0)
static void mac_read_rows(const Model* M, MemChunk* c, const real* q, const real* qf, int bb, int h, int t0, int n) {
    const MemCfg* m = &M->mem;
    int d = m->d, D = M->cfg.D, T = M->T, din = m->din;
    real zero[256] = {0}, one[256];
    for (int i = 0; i < d; i++) one[i] = 1;
    for (int t = 0; t < n; t++)
        chunk_set_row(m, c, t, q + ((size_t)bb * T + t0 + t) * D + h * d, zero, zero, 1, 0, zero, one);
    c->nh = 0;
    c->wc = 1;
    if (m->poly) {
        const real* f[1024];
        for (int t = 0; t < n; t++) f[t] = qf + ((size_t)bb * T + t0 + t) * M->cfg.H * din + (size_t)h * din;
        poly_rows(c, m, n, f, f);
    }
}
// the memory chunks [ch0, ch1) of layer l for all sequences and heads (memory_forward's loop over a range; the
// start state of chunk ch0 is in M->mem_P already)
static void mac_memory_forward(Model* M, int l, int ch0, int ch1) {
    const MemCfg* m = &M->mem;
    int B = M->B, T = M->T, H = M->cfg.H, b = M->cfg.b, nch = nchunks(M, T), nP = m->nP;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {
            MemChunk* c = &M->chunks[thread_id()];
            size_t base = ((((size_t)l * B + bb) * H + h) * nch) * nP, lh = (size_t)l * H + h;
            real* P = M->mem_P + base;
            real* S = mem_carries_S(m) ? M->mem_S + base : NULL;
            const real* lng = m->ln ? M->params.mem_ln_g + lh * m->d : NULL;
            const real* lnb = m->ln ? M->params.mem_ln_b + lh * m->d : NULL;
            c->p0 = m->anchor ? M->params.mem_p0 + lh * nP : NULL;
            for (int ch = ch0; ch < ch1; ch++) {
                int t0 = ch * b, n = T - t0 < b ? T - t0 : b, last = ch == nch - 1;
                int nh = mem_load_chunk(c, M, l, bb, h, t0, n);  // omega's halo (a segment's first: the previous one's)
                mem_step_forward(m, c, nh + n, P + (size_t)ch * nP, S ? S + (size_t)ch * nP : NULL,
                                 last ? NULL : P + (size_t)(ch + 1) * nP,
                                 (S && !last) ? S + (size_t)(ch + 1) * nP : NULL, lng, lnb);
                scatter_rows(M->acts.y + (size_t)l * B * T * M->cfg.D, c->y + (size_t)nh * m->d, bb, h, t0, n, T, H,
                             m->d);
            }
        }
}
// the segment attention of queries [s0, s1): keys P (np), h_s0..j, u_s0..j (in this order)
static void mac_attn_forward(Model* M, int l, int s0, int s1) {
    const Config* c = &M->cfg;
    TxActs* t = &M->tx->a;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = D / H, np = c->npers;
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H;
    real scale = 1 / sqrt((real)d);
    const real *kP = t->kP + (size_t)l * np * D, *vP = t->vP + (size_t)l * np * D;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {
            real* s = (real*)xmalloc((size_t)(np + 2 * (s1 - s0)) * sizeof(real));
            for (int j = s0; j < s1; j++) {
                size_t rj = oD + ((size_t)bb * T + j) * D + h * d;
                const real* qj = t->q + rj;
                real* oj = t->z + rj;
                int n = j - s0 + 1, nk = np + 2 * n;
                real mx = -1e30, sum = 0;
                for (int e = 0; e < nk; e++) {
                    const real* ke =
                        e < np ? kP + (size_t)e * D + h * d
                               : (e < np + n ? t->kh : t->k) + oD + ((size_t)bb * T + s0 + (e - np) % n) * D + h * d;
                    s[e] = dotv(qj, ke, d) * scale;
                    if (s[e] > mx) mx = s[e];
                }
                for (int e = 0; e < nk; e++) {
                    s[e] = exp(s[e] - mx);
                    sum += s[e];
                }
                for (int i = 0; i < d; i++) oj[i] = 0;
                for (int e = 0; e < nk; e++) {
                    const real* ve =
                        e < np ? vP + (size_t)e * D + h * d
                               : (e < np + n ? t->vh : t->v) + oD + ((size_t)bb * T + s0 + (e - np) % n) * D + h * d;
                    real pe = s[e] / sum;
                    for (int i = 0; i < d; i++) oj[i] += pe * ve[i];
                }
                t->lse[oH + ((size_t)bb * T + j) * H + h] = mx + log(sum);
            }
            free(s);
        }
}
// its backward (accumulates): dq, dk, dv (u rows), dkh, dvh (h rows), dkP, dvP. One task per head: the P rows are
// shared
static void mac_attn_backward(Model* M, int l, int s0, int s1) {
    const Config* c = &M->cfg;
    TxActs *t = &M->tx->a, *g = &M->tx->g;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = D / H, np = c->npers;
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H;
    real scale = 1 / sqrt((real)d);
    const real *kP = t->kP + (size_t)l * np * D, *vP = t->vP + (size_t)l * np * D;
    real *dkP = g->kP + (size_t)l * np * D, *dvP = g->vP + (size_t)l * np * D;
#pragma omp parallel for schedule(dynamic)
    for (int h = 0; h < H; h++)
        for (int bb = 0; bb < B; bb++)
            for (int j = s0; j < s1; j++) {
                size_t rj = oD + ((size_t)bb * T + j) * D + h * d;
                const real *qj = t->q + rj, *doj = g->z + rj;
                real* dqj = g->q + rj;
                int n = j - s0 + 1, nk = np + 2 * n;
                real lj = t->lse[oH + ((size_t)bb * T + j) * H + h], Dj = dotv(doj, t->z + rj, d);
                for (int e = 0; e < nk; e++) {
                    size_t re = e < np ? (size_t)e * D + h * d : oD + ((size_t)bb * T + s0 + (e - np) % n) * D + h * d;
                    const real *ke, *ve;
                    real *dke, *dve;
                    if (e < np) {
                        ke = kP + re;
                        ve = vP + re;
                        dke = dkP + re;
                        dve = dvP + re;
                    } else if (e < np + n) {
                        ke = t->kh + re;
                        ve = t->vh + re;
                        dke = g->kh + re;
                        dve = g->vh + re;
                    } else {
                        ke = t->k + re;
                        ve = t->v + re;
                        dke = g->k + re;
                        dve = g->v + re;
                    }
                    real p = exp(dotv(qj, ke, d) * scale - lj), ds = p * (dotv(doj, ve, d) - Dj) * scale;
                    for (int i = 0; i < d; i++) {
                        dve[i] += p * doj[i];
                        dqj[i] += ds * ke[i];
                        dke[i] += ds * qj[i];
                    }
                }
            }
}
// y rows [s0, s1) -> the memory's inputs of those rows (projections, conv over the y sequence, SiLU, l2 norm, gates)
static void mac_inputs_forward(Model* M, int l, int s0, int s1) {
    const Config* c = &M->cfg;
    ParameterTensors* p = &M->params;
    ActivationTensors* a = &M->acts;
    TxActs* t = &M->tx->a;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = D / H, K = c->K, n = s1 - s0, Ge = c->gate_rank ? D : H,
        R = c->gate_rank;
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H, oW = (size_t)l * D * D;
    for (int bb = 0; bb < B; bb++) {
        size_t r = (size_t)bb * T + s0;
        const real* y = t->z + oD + r * D;
        matmul_forward(a->qp + oD + r * D, y, p->wq + oW, NULL, n, D, D);
        matmul_forward(a->kp + oD + r * D, y, p->wk + oW, NULL, n, D, D);
        matmul_forward(a->vp + oD + r * D, y, p->wv + oW, NULL, n, D, D);
    }
    conv_rows_forward(a->qc + oD, a->qp + oD, p->conv_q + (size_t)l * D * K, B, T, D, K, s0, s1);
    conv_rows_forward(a->kc + oD, a->kp + oD, p->conv_k + (size_t)l * D * K, B, T, D, K, s0, s1);
    conv_rows_forward(a->vc + oD, a->vp + oD, p->conv_v + (size_t)l * D * K, B, T, D, K, s0, s1);
    for (int bb = 0; bb < B; bb++) {
        size_t r = (size_t)bb * T + s0, o = oD + r * D, oh = oH + r * H;
        silu_forward(a->qs + o, a->qc + o, (size_t)n * D);
        silu_forward(a->ks + o, a->kc + o, (size_t)n * D);
        silu_forward(a->v + o, a->vc + o, (size_t)n * D);
        l2norm_forward(a->q + o, a->qrn + oh, a->qs + o, n, H, d);
        l2norm_forward(a->k + o, a->krn + oh, a->ks + o, n, H, d);
        if (M->mem.poly) {  // poly features (SPEC §5.6) of the l2-normed q, k
            poly_forward(a->qf + oh * M->mem.din, a->q + o, p->poly_rho + (size_t)l * 3, n, H, d);
            poly_forward(a->kf + oh * M->mem.din, a->k + o, p->poly_rho + (size_t)l * 3, n, H, d);
        }
        gates_forward(M, l, t->z + o, n, a->ga + oh, a->geta + (size_t)l * N * Ge + r * Ge, a->gth + oh,
                      a->gdel + (size_t)l * N * Ge + r * Ge, a->geta_lr + (size_t)l * N * R + r * R,
                      a->gdel_lr + (size_t)l * N * R + r * R);
        if (M->mem.omega > 1) omega_gates_forward(M, l, t->z + o, n, a->ggam + oh * M->mem.omega);
    }
}
// its backward for rows [s0, s1): from g->q, k, v, gates of those rows to dy (t->g.z) rows (conv: the input rows back
// to s0 - K + 1)
static void mac_inputs_backward(Model* M, int l, int s0, int s1) {
    const Config* c = &M->cfg;
    ParameterTensors *p = &M->params, *dp = &M->grads;
    ActivationTensors *a = &M->acts, *g = &M->grads_acts;
    TxActs *t = &M->tx->a, *tg = &M->tx->g;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = D / H, K = c->K, n = s1 - s0, Ge = c->gate_rank ? D : H,
        R = c->gate_rank;
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H, oW = (size_t)l * D * D;
    for (int bb = 0; bb < B; bb++) {
        size_t r = (size_t)bb * T + s0, o = oD + r * D, oh = oH + r * H;
        gates_backward(M, l, tg->z + o, t->z + o, n, a, g, oh, (size_t)l * N * Ge + r * Ge, (size_t)l * N * R + r * R);
        int w = M->mem.omega, din = M->mem.din;
        if (w > 1) omega_gates_backward(M, l, tg->z + o, t->z + o, n, a->ggam + oh * w, g->ggam + oh * w);
        if (M->mem.poly) {  // the features' gradients into q, k (which hold the residual's) and rho
            poly_backward(g->q + o, dp->poly_rho + (size_t)l * 3, g->qf + oh * din, a->q + o,
                          p->poly_rho + (size_t)l * 3, n, H, d);
            poly_backward(g->k + o, dp->poly_rho + (size_t)l * 3, g->kf + oh * din, a->k + o,
                          p->poly_rho + (size_t)l * 3, n, H, d);
        }
        l2norm_backward(g->qs + o, g->q + o, a->q + o, a->qrn + oh, n, H, d);
        l2norm_backward(g->ks + o, g->k + o, a->k + o, a->krn + oh, n, H, d);
        silu_backward(g->qc + o, g->qs + o, a->qc + o, (size_t)n * D);
        silu_backward(g->kc + o, g->ks + o, a->kc + o, (size_t)n * D);
        silu_backward(g->vc + o, g->v + o, a->vc + o, (size_t)n * D);
    }
    conv_rows_backward(g->qp + oD, dp->conv_q + (size_t)l * D * K, g->qc + oD, a->qp + oD,
                       p->conv_q + (size_t)l * D * K, B, T, D, K, s0, s1);
    conv_rows_backward(g->kp + oD, dp->conv_k + (size_t)l * D * K, g->kc + oD, a->kp + oD,
                       p->conv_k + (size_t)l * D * K, B, T, D, K, s0, s1);
    conv_rows_backward(g->vp + oD, dp->conv_v + (size_t)l * D * K, g->vc + oD, a->vp + oD,
                       p->conv_v + (size_t)l * D * K, B, T, D, K, s0, s1);
    for (int bb = 0; bb < B; bb++) {  // the projections' rows [s0, s1) are complete: later rows' convs are done
        size_t r = (size_t)bb * T + s0, o = oD + r * D;
        const real* y = t->z + o;
        matmul_backward(tg->z + o, dp->wq + oW, NULL, g->qp + o, y, p->wq + oW, n, D, D);
        matmul_backward(tg->z + o, dp->wk + oW, NULL, g->kp + o, y, p->wk + oW, n, D, D);
        matmul_backward(tg->z + o, dp->wv + oW, NULL, g->vp + o, y, p->wv + oW, n, D, D);
    }
}
// h rows [s0, s1) (or their backward): per sequence and head, reads at the segment-start state in pieces of <= b rows
static void mac_h_forward(Model* M, int l, int s0, int s1) {
    const MemCfg* m = &M->mem;
    int B = M->B, T = M->T, H = M->cfg.H, b = M->cfg.b, nch = nchunks(M, T), nP = m->nP;
    TxActs* t = &M->tx->a;
    size_t oD = (size_t)l * B * T * M->cfg.D, oH = (size_t)l * B * T * H;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {
            MemChunk* c = &M->chunks[thread_id()];
            size_t lh = (size_t)l * H + h;
            size_t base = ((((size_t)l * B + bb) * H + h) * nch + s0 / b) * nP;
            c->p0 = m->anchor ? M->params.mem_p0 + lh * nP : NULL;
            for (int t0 = s0; t0 < s1; t0 += b) {
                int n = s1 - t0 < b ? s1 - t0 : b;
                mac_read_rows(M, c, t->uq + oD, m->poly ? t->uqf + oH * m->din : NULL, bb, h, t0, n);
                mem_step_forward(m, c, n, M->mem_P + base, mem_carries_S(m) ? M->mem_S + base : NULL, NULL, NULL,
                                 m->ln ? M->params.mem_ln_g + lh * m->d : NULL,
                                 m->ln ? M->params.mem_ln_b + lh * m->d : NULL);
                scatter_rows(t->h + oD, c->y, bb, h, t0, n, T, H, m->d);
            }
        }
}

// MAC with Lattice (section 3b's memory, per token): the state S of (sequence bb, head h) at the start of segment s
// (TxActs Sseg; slot nseg: the end), and lattice_memory_forward's checkpoints every lat_k-th token in mem_P
static real* mac_lat_seg(const Model* M, int l, int bb, int h, int s) {
    size_t ns = (M->T + M->cfg.seg - 1) / M->cfg.seg + 1;
    return M->tx->a.Sseg + ((((size_t)l * M->B + bb) * M->cfg.H + h) * ns + s) * M->mem.nP;
}
// h rows [s0, s1) of segment s: Lattice's read y = S_(s) q (no update), q = uq
static void mac_lat_h_forward(Model* M, int l, int s, int s0, int s1) {
    int B = M->B, T = M->T, H = M->cfg.H, D = M->cfg.D, d = M->mem.d;
    size_t oD = (size_t)l * B * T * D;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {
            const real* S = mac_lat_seg(M, l, bb, h, s);
            for (int t = s0; t < s1; t++) {
                size_t o = oD + ((size_t)bb * T + t) * D + (size_t)h * d;
                lattice_read(S, M->tx->a.uq + o, M->tx->a.h + o, d);
            }
        }
}
// the memory's steps over rows [s0, s1) of segment s from S_(s): reads into acts.y, checkpoints at every lat_k-th
// token (as lattice_memory_forward), the end state into S_(s+1)
static void mac_lat_memory_forward(Model* M, int l, int s, int s0, int s1) {
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < M->B; bb++)
        for (int h = 0; h < M->cfg.H; h++) {
            LatVec w;
            real* scr = lattice_thread_scratch(M, &w);
            size_t nP = M->mem.nP;
            memcpy(scr, mac_lat_seg(M, l, bb, h, s), nP * sizeof(real));
            real* end = lattice_rows_forward(M, l, bb, h, s0, s1, scr, scr + nP, &w);
            memcpy(mac_lat_seg(M, l, bb, h, s + 1), end, nP * sizeof(real));
        }
}
// its backward over rows [s0, s1) in reverse, from the carried G = dL/dS at s1 (tx g.dPc) to G at s0
// (lattice_rows_backward; its first block, when it begins before s0, from S_(s), the same state bit for bit)
static void mac_lat_memory_backward(Model* M, int l, int s, int s0, int s1) {
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < M->B; bb++)
        for (int h = 0; h < M->cfg.H; h++) {
            LatVec w;
            real* scr = lattice_thread_scratch(M, &w);
            lattice_rows_backward(M, l, bb, h, s0, s1, mac_lat_seg(M, l, bb, h, s), scr,
                                  M->tx->g.dPc + ((size_t)bb * M->cfg.H + h) * M->mem.nP, &w);
        }
}
// the h reads' backward of segment s: duq = S_(s)^T dh (written), G += sum_t dh_t uq_t^T (dS[i][r] += dh_r q_i)
static void mac_lat_h_backward(Model* M, int l, int s, int s0, int s1) {
    int B = M->B, T = M->T, H = M->cfg.H, D = M->cfg.D, d = M->mem.d;
    size_t oD = (size_t)l * B * T * D, nP = M->mem.nP;
    TxActs *t = &M->tx->a, *tg = &M->tx->g;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {
            const real* S = mac_lat_seg(M, l, bb, h, s);
            real* G = tg->dPc + ((size_t)bb * H + h) * nP;
            for (int j = s0; j < s1; j++) {
                size_t o = oD + ((size_t)bb * T + j) * D + (size_t)h * d;
                const real *dy = tg->h + o, *q = t->uq + o;
                for (int i = 0; i < d; i++) {
                    tg->uq[o + i] = dotv(S + (size_t)i * d, dy, d);
                    for (int r = 0; r < d; r++) G[(size_t)i * d + r] += dy[r] * q[i];
                }
            }
        }
}

// MAC with the phi* memory (section 3c): its chunks as phi_memory_forward's, a segment's at a time (the entries, W1
// and LA at every chunk start kept as there); h is a read without update at the segment-start state, over the entries
// committed before s0 with W1 at s0 (phi_h_read). The backward carries the accumulators of phi_memory_backward (dL/dW1
// in tx g.dPc, the entries' dL/da, dL/dlo and dL/dLA in tx g.phd) across the segments.
static void mac_phi_h_forward(Model* M, int l, int s0, int s1) {
    const MemCfg* m = &M->mem;
    int B = M->B, T = M->T, H = M->cfg.H, D = M->cfg.D, b = M->cfg.b, nch = nchunks(M, T), d = m->d;
    size_t NE = phi_entries(T, b, m->omega), oD = (size_t)l * B * T * D;
    int ne = (int)phi_entries(s0, b, m->omega);
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {
            size_t hx = ((size_t)l * B + bb) * H + h;
            PhiSeq x = phi_seq(M, &M->acts, l, bb, h);
            const real* W1s = M->mem_P + (hx * nch + s0 / b) * m->nP;
            for (int t = s0; t < s1; t++) {
                size_t o = oD + ((size_t)bb * T + t) * D + (size_t)h * d;
                phi_h_read(m, &M->phi_scr[thread_id()], &x, M->tx->a.uq + o, ne, M->phi_etok + hx * NE,
                           M->phi_av + hx * NE * m->dm, M->phi_lo + hx * NE, W1s, M->tx->a.h + o);
            }
        }
}
static void mac_phi_memory_forward(Model* M, int l, int ch0, int ch1) {
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < M->B; bb++)
        for (int h = 0; h < M->cfg.H; h++) phi_chunks_forward(M, l, bb, h, ch0, ch1);
}
// the thread's scratch with the accumulators of (sequence bb, head h) in place of its own; returns dL/dLA's place
static real* mac_phi_scratch(Model* M, int bb, int h, PhiScr* s) {
    size_t bh = (size_t)bb * M->cfg.H + h, NE = phi_entries(M->T, M->cfg.b, M->mem.omega);
    *s = M->phi_scr[thread_id()];
    s->dW = M->tx->g.dPc + bh * M->mem.nP;
    s->dav = M->tx->g.phd + bh * mac_phi_acc_size(&M->cfg, M->T);
    s->dlo = s->dav + NE * M->mem.dm;
    return s->dlo + NE;
}
static void mac_phi_memory_backward(Model* M, int l, int s0, int s1) {
    int b = M->cfg.b;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < M->B; bb++)
        for (int h = 0; h < M->cfg.H; h++) {
            PhiScr s;
            real* gLA = mac_phi_scratch(M, bb, h, &s);
            phi_chunks_backward(M, l, bb, h, s0 / b, (s1 + b - 1) / b, &s, gLA);
        }
}
// the h reads' backward of rows [s0, s1): duq (tx g.uq), and dL/dW1_(s), the entries' dL/da, dL/dlo, dL/dk added
static void mac_phi_h_backward(Model* M, int l, int s0, int s1) {
    const MemCfg* m = &M->mem;
    int B = M->B, T = M->T, H = M->cfg.H, D = M->cfg.D, b = M->cfg.b, nch = nchunks(M, T), d = m->d;
    size_t NE = phi_entries(T, b, m->omega), oD = (size_t)l * B * T * D;
    int ne = (int)phi_entries(s0, b, m->omega);
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {
            size_t hx = ((size_t)l * B + bb) * H + h;
            PhiScr s;
            mac_phi_scratch(M, bb, h, &s);
            PhiSeq x = phi_seq(M, &M->acts, l, bb, h), gx = phi_seq(M, &M->grads_acts, l, bb, h);
            const real* W1s = M->mem_P + (hx * nch + s0 / b) * m->nP;
            for (int t = s0; t < s1; t++) {
                size_t o = oD + ((size_t)bb * T + t) * D + (size_t)h * d;
                phi_h_read_backward(m, &s, &x, &gx, M->tx->a.uq + o, M->tx->g.uq + o, ne, M->phi_etok + hx * NE,
                                    M->phi_av + hx * NE * m->dm, M->phi_lo + hx * NE, W1s, M->tx->g.h + o, s.dW, s.dav,
                                    s.dlo);
            }
        }
}

// MAC's mixing part of layer l: M->acts.mo from u = M->acts.ln1 (model_forward then adds x)
static void mac_layer_forward(Model* M, int l) {
    const Config* c = &M->cfg;
    ParameterTensors* p = &M->params;
    ActivationTensors* a = &M->acts;
    TxActs* t = &M->tx->a;
    const MemCfg* m = &M->mem;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = D / H, K = c->K, np = c->npers, C = c->seg, b = c->b,
        nch = nchunks(M, T);
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H, oW = (size_t)l * D * D;
    const real* u = a->ln1 + oD;
    // the u sequence: the memory's q for h; the attention's q, k, v (positions N_p + t); P's keys and values
    matmul_forward(t->uqp + oD, u, p->wq + oW, NULL, N, D, D);
    conv_forward(t->uqc + oD, t->uqp + oD, p->conv_q + (size_t)l * D * K, B, T, D, K);
    silu_forward(t->uqs + oD, t->uqc + oD, N * D);
    l2norm_forward(t->uq + oD, t->uqrn + oH, t->uqs + oD, N, H, d);
    if (m->poly) poly_forward(t->uqf + oH * m->din, t->uq + oD, p->poly_rho + (size_t)l * 3, N, H, d);
    matmul_forward(t->q + oD, u, p->att_wq + oW, NULL, N, D, D);
    rope_rows(t->q + oD, B, T, H, d, 0, T, np, 1);
    matmul_forward(t->k + oD, u, p->att_wk + oW, NULL, N, D, D);
    rope_rows(t->k + oD, B, T, H, d, 0, T, np, 1);
    matmul_forward(t->v + oD, u, p->att_wv + oW, NULL, N, D, D);
    if (np) {
        const real* Pr = p->pers + (size_t)l * np * D;
        real* kP = t->kP + (size_t)l * np * D;
        matmul_forward(kP, Pr, p->att_wk + oW, NULL, np, D, D);
        rope_rows(kP, 1, np, H, d, 0, np, 0, 1);
        matmul_forward(t->vP + (size_t)l * np * D, Pr, p->att_wv + oW, NULL, np, D, D);
    }
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++) {  // the state at the first segment's start: P_0, S = 0 (Lattice: S_0 = I)
            if (m->lattice) {
                lattice_identity(mac_lat_seg(M, l, bb, h, 0), m->d);
                continue;
            }
            size_t base = ((((size_t)l * B + bb) * H + h) * nch) * m->nP;
            memcpy(M->mem_P + base, p->mem_p0 + ((size_t)l * H + h) * m->nP, m->nP * sizeof(real));
            if (mem_carries_S(m)) memset(M->mem_S + base, 0, m->nP * sizeof(real));
            if (m->phistar) M->phi_LA[((size_t)l * B + bb) * H * nch + (size_t)h * nch] = 0;  // (and no entries)
        }
    for (int s0 = 0; s0 < T; s0 += C) {
        int s1 = s0 + C < T ? s0 + C : T, n = s1 - s0;
        if (m->lattice)
            mac_lat_h_forward(M, l, s0 / C, s0, s1);
        else if (m->phistar)
            mac_phi_h_forward(M, l, s0, s1);
        else
            mac_h_forward(M, l, s0, s1);
        for (int bb = 0; bb < B; bb++) {
            size_t o = oD + ((size_t)bb * T + s0) * D;
            matmul_forward(t->kh + o, t->h + o, p->att_wk + oW, NULL, n, D, D);
            matmul_forward(t->vh + o, t->h + o, p->att_wv + oW, NULL, n, D, D);
        }
        rope_rows(t->kh + oD, B, T, H, d, s0, s1, np, 1);
        mac_attn_forward(M, l, s0, s1);
        mac_inputs_forward(M, l, s0, s1);
        if (m->lattice)
            mac_lat_memory_forward(M, l, s0 / C, s0, s1);
        else if (m->phistar)
            mac_phi_memory_forward(M, l, s0 / b, (s1 + b - 1) / b);
        else
            mac_memory_forward(M, l, s0 / b, (s1 + b - 1) / b);
    }
    // x += RMSNorm_g1(y Wo_a^T) * sigmoid(RMSNorm_g2(m))
    matmul_forward(t->y + oD, t->z + oD, p->att_wo + oW, NULL, N, D, D);
    rmsnorm_forward(t->n1 + oD, t->r1 + (size_t)l * N, t->y + oD, p->og1_w + (size_t)l * D, N, 1, D);
    rmsnorm_forward(t->n2 + oD, t->r2 + (size_t)l * N, a->y + oD, p->og2_w + (size_t)l * D, N, 1, D);
    for (size_t i = 0; i < N * D; i++) a->mo[oD + i] = t->n1[oD + i] * sigmoidr(t->n2[oD + i]);
}
// Its backward: from M->grads_acts.res2 to du (M->grads_acts.ln1, accumulated) and the parameters
static void mac_layer_backward(Model* M, int l) {
    const Config* c = &M->cfg;
    ParameterTensors *p = &M->params, *dp = &M->grads;
    ActivationTensors *a = &M->acts, *g = &M->grads_acts;
    TxActs *t = &M->tx->a, *tg = &M->tx->g;
    const MemCfg* m = &M->mem;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = D / H, K = c->K, np = c->npers, C = c->seg, b = c->b,
        nch = nchunks(M, T), nP = m->nP, din = m->din;
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H, oW = (size_t)l * D * D;
    const real* u = a->ln1 + oD;
    real* du = g->ln1 + oD;
    memset(M->tx->gmem, 0, M->tx->n * sizeof(real));
    memset(M->mem_dbh, 0, (size_t)B * H * (nP + 2 * d) * sizeof(real));
    const real* dres = g->res2 + oD;
    for (size_t i = 0; i < N * D; i++) {  // o = n1 * sigmoid(n2)
        real s = sigmoidr(t->n2[oD + i]);
        tg->n1[oD + i] = dres[i] * s;
        tg->n2[oD + i] = dres[i] * t->n1[oD + i] * s * (1 - s);
    }
    rmsnorm_backward(tg->y + oD, dp->og1_w + (size_t)l * D, tg->n1 + oD, t->y + oD, p->og1_w + (size_t)l * D,
                     t->r1 + (size_t)l * N, N, 1, D);
    rmsnorm_backward(g->y + oD, dp->og2_w + (size_t)l * D, tg->n2 + oD, a->y + oD, p->og2_w + (size_t)l * D,
                     t->r2 + (size_t)l * N, N, 1, D);
    matmul_backward(tg->z + oD, dp->att_wo + oW, NULL, tg->y + oD, t->z + oD, p->att_wo + oW, N, D, D);
    int nseg = (T + C - 1) / C;
    for (int s = nseg - 1; s >= 0; s--) {
        int s0 = s * C, s1 = s0 + C < T ? s0 + C : T, n = s1 - s0;
        // the memory's chunks of the segment, in reverse, from the carried dL/dP (none after the last chunk)
        if (m->lattice)  // (its carry: tg->dPc, 0 after the last segment)
            mac_lat_memory_backward(M, l, s, s0, s1);
        else if (m->phistar)  // (its carries: tg->dPc, tg->phd)
            mac_phi_memory_backward(M, l, s0, s1);
        else {
#pragma omp parallel for collapse(2) schedule(dynamic)
            for (int bb = 0; bb < B; bb++)
                for (int h = 0; h < H; h++) {
                    MemChunk* ck = &M->chunks[thread_id()];
                    size_t lh = (size_t)l * H + h, bh = (size_t)bb * H + h;
                    size_t base = ((((size_t)l * B + bb) * H + h) * nch) * nP;
                    const real* lng = m->ln ? p->mem_ln_g + lh * d : NULL;
                    const real* lnb = m->ln ? p->mem_ln_b + lh * d : NULL;
                    real* carry = tg->dPc + bh * nP;
                    real* carryS = tg->dSc + bh * nP;
                    real* acc = M->mem_dbh + bh * (nP + 2 * d);
                    memset(ck->dlng, 0, d * sizeof(real));
                    memset(ck->dlnb, 0, d * sizeof(real));
                    memset(ck->dp0, 0, nP * sizeof(real));
                    ck->p0 = m->anchor ? p->mem_p0 + lh * nP : NULL;
                    const real *dPn = s1 == T ? NULL : carry, *dSn = s1 == T ? NULL : carryS;
                    real *dPs = ck->Pa, *dSs = ck->Sa;
                    for (int ch = (s1 + b - 1) / b - 1; ch >= s0 / b; ch--) {
                        int t0 = ch * b, nn = T - t0 < b ? T - t0 : b;
                        int nh = mem_load_chunk(ck, M, l, bb, h, t0, nn);  // omega's halo rows (their dy is 0)
                        memset(ck->dy, 0, (size_t)nh * d * sizeof(real));
                        gather_rows(ck->dy + (size_t)nh * d, g->y + oD, bb, h, t0, nn, T, H, d);
                        mem_step_backward(m, ck, nh + nn, ck->dy, M->mem_P + base + (size_t)ch * nP,
                                          mem_carries_S(m) ? M->mem_S + base + (size_t)ch * nP : NULL, dPn, dSn, dPs,
                                          dSs, lng, lnb);
                        // (omega accumulates: the halo's rows are the previous segment's, whose inputs' backward runs
                        // after this one)
                        mem_store_chunk_grads(ck, M, l, bb, h, t0, nn);
                        dPn = dPs;
                        dSn = dSs;
                        dPs = dPs == ck->Pa ? ck->Pb : ck->Pa;
                        dSs = dSs == ck->Sa ? ck->Sb : ck->Sa;
                    }
                    memcpy(carry, dPn, nP * sizeof(real));
                    if (mem_carries_S(m)) memcpy(carryS, dSn, nP * sizeof(real));
                    for (int i = 0; i < nP; i++) acc[i] += ck->dp0[i];
                    for (int i = 0; i < d; i++) {
                        acc[nP + i] += ck->dlng[i];
                        acc[nP + d + i] += ck->dlnb[i];
                    }
                }
        }
        mac_inputs_backward(M, l, s0, s1);  // dy of the segment is complete: from the gate and the memory's inputs
        mac_attn_backward(M, l, s0, s1);
        rope_rows(tg->kh + oD, B, T, H, d, s0, s1, np, -1);
        for (int bb = 0; bb < B; bb++) {
            size_t o = oD + ((size_t)bb * T + s0) * D;
            matmul_backward(tg->h + o, dp->att_wk + oW, NULL, tg->kh + o, t->h + o, p->att_wk + oW, n, D, D);
            matmul_backward(tg->h + o, dp->att_wv + oW, NULL, tg->vh + o, t->h + o, p->att_wv + oW, n, D, D);
        }
        // the h reads: dL/duq and dL/dP_(s), added to the carry
        if (m->lattice)
            mac_lat_h_backward(M, l, s, s0, s1);
        else if (m->phistar)
            mac_phi_h_backward(M, l, s0, s1);
        else {
#pragma omp parallel for collapse(2) schedule(dynamic)
            for (int bb = 0; bb < B; bb++)
                for (int h = 0; h < H; h++) {
                    MemChunk* ck = &M->chunks[thread_id()];
                    size_t lh = (size_t)l * H + h, bh = (size_t)bb * H + h;
                    size_t base = ((((size_t)l * B + bb) * H + h) * nch + s0 / b) * nP;
                    const real* lng = m->ln ? p->mem_ln_g + lh * d : NULL;
                    const real* lnb = m->ln ? p->mem_ln_b + lh * d : NULL;
                    real* carry = tg->dPc + bh * nP;
                    real* carryS = tg->dSc + bh * nP;
                    real* acc = M->mem_dbh + bh * (nP + 2 * d);
                    ck->p0 = m->anchor ? p->mem_p0 + lh * nP : NULL;
                    for (int t0 = s0; t0 < s1; t0 += b) {
                        int nn = s1 - t0 < b ? s1 - t0 : b;
                        memset(ck->dlng, 0, d * sizeof(real));
                        memset(ck->dlnb, 0, d * sizeof(real));
                        memset(ck->dp0, 0, nP * sizeof(real));
                        mac_read_rows(M, ck, t->uq + oD, m->poly ? t->uqf + oH * din : NULL, bb, h, t0, nn);
                        gather_rows(ck->dy, tg->h + oD, bb, h, t0, nn, T, H, d);
                        mem_step_backward(m, ck, nn, ck->dy, M->mem_P + base, mem_carries_S(m) ? M->mem_S + base : NULL,
                                          NULL, NULL, ck->Pa, ck->Sa, lng, lnb);
                        for (int r = 0; r < nn; r++) {  // (dqr: the raw row's; with poly dq is the features')
                            memcpy(tg->uq + oD + ((size_t)bb * T + t0 + r) * D + h * d, ck->dqr + (size_t)r * d,
                                   d * sizeof(real));
                            if (m->poly)
                                memcpy(tg->uqf + oH * din + (((size_t)bb * T + t0 + r) * H + h) * din,
                                       ck->dq + (size_t)r * din, din * sizeof(real));
                        }
                        for (int i = 0; i < nP; i++) {
                            carry[i] += ck->Pa[i];
                            acc[i] += ck->dp0[i];
                        }
                        if (mem_carries_S(m))
                            for (int i = 0; i < nP; i++) carryS[i] += ck->Sa[i];
                        for (int i = 0; i < d; i++) {
                            acc[nP + i] += ck->dlng[i];
                            acc[nP + d + i] += ck->dlnb[i];
                        }
                    }
                }
        }
    }
    for (int h = 0; h < H && !m->lattice; h++)  // (Lattice: S_0 = I is no parameter)
        for (int bb = 0; bb < B; bb++) {  // P_0 and the memory LN, summed over the batch in a fixed order
            size_t bh = (size_t)bb * H + h, lh = (size_t)l * H + h;
            const real* acc = M->mem_dbh + bh * (nP + 2 * d);
            for (int i = 0; i < nP; i++) dp->mem_p0[lh * nP + i] += acc[i] + tg->dPc[bh * nP + i];
            if (m->ln)
                for (int i = 0; i < d; i++) {
                    dp->mem_ln_g[lh * d + i] += acc[nP + i];
                    dp->mem_ln_b[lh * d + i] += acc[nP + d + i];
                }
        }
    // the u sequence: the attention's q, k, v; the memory's q for h; P's keys and values
    rope_rows(tg->q + oD, B, T, H, d, 0, T, np, -1);
    rope_rows(tg->k + oD, B, T, H, d, 0, T, np, -1);
    matmul_backward(du, dp->att_wq + oW, NULL, tg->q + oD, u, p->att_wq + oW, N, D, D);
    matmul_backward(du, dp->att_wk + oW, NULL, tg->k + oD, u, p->att_wk + oW, N, D, D);
    matmul_backward(du, dp->att_wv + oW, NULL, tg->v + oD, u, p->att_wv + oW, N, D, D);
    if (m->poly)  // the h reads' feature gradients into uq's (which holds the residual's) and rho
        poly_backward(tg->uq + oD, dp->poly_rho + (size_t)l * 3, tg->uqf + oH * din, t->uq + oD,
                      p->poly_rho + (size_t)l * 3, N, H, d);
    l2norm_backward(tg->uqs + oD, tg->uq + oD, t->uq + oD, t->uqrn + oH, N, H, d);
    silu_backward(tg->uqc + oD, tg->uqs + oD, t->uqc + oD, N * D);
    conv_backward(tg->uqp + oD, dp->conv_q + (size_t)l * D * K, tg->uqc + oD, t->uqp + oD,
                  p->conv_q + (size_t)l * D * K, B, T, D, K);
    matmul_backward(du, dp->wq + oW, NULL, tg->uqp + oD, u, p->wq + oW, N, D, D);
    if (np) {
        const real* Pr = p->pers + (size_t)l * np * D;
        real *dPr = dp->pers + (size_t)l * np * D, *dkP = tg->kP + (size_t)l * np * D;
        rope_rows(dkP, 1, np, H, d, 0, np, 0, -1);
        matmul_backward(dPr, dp->att_wk + oW, NULL, dkP, Pr, p->att_wk + oW, np, D, D);
        matmul_backward(dPr, dp->att_wv + oW, NULL, tg->vP + (size_t)l * np * D, Pr, p->att_wv + oW, np, D, D);
    }
}

// The layer's mixing part, from x and u = RMSNorm(x) (M->acts.ln1) to M->acts.mo, so that model_forward's
// res2 = x + mo: MAL mo = m + attn_SWA(RMSNorm_attn(x + m)) Wo_a, MAG mo = o(y, m)
static void titans_layer_forward(Model* M, int l, const real* x) {
    if (M->cfg.arch == ARCH_MAC) {
        mac_layer_forward(M, l);
        return;
    }
    Titans* t = M->tx;
    Model* X = &t->X;
    const Config* c = &M->cfg;
    ParameterTensors* p = &M->params;
    int B = M->B, T = M->T, Tn = t->Tn, np = c->npers, D = c->D, H = c->H;
    size_t N = (size_t)B * T, Ns = (size_t)B * Tn;
    size_t oD = (size_t)l * N * D, oS = (size_t)l * Ns * D;
    real *us = X->acts.ln1 + oS, *m = t->a.m + oD, *mo = M->acts.mo + oD;
    const real* u = M->acts.ln1 + oD;
    for (int bb = 0; bb < B; bb++) {  // the stream [P || u]
        memcpy(us + (size_t)bb * Tn * D, p->pers + (size_t)l * np * D, (size_t)np * D * sizeof(real));
        memcpy(us + ((size_t)bb * Tn + np) * D, u + (size_t)bb * T * D, (size_t)T * D * sizeof(real));
    }
    mixer_forward(X, l);
    for (int bb = 0; bb < B; bb++)
        memcpy(m + (size_t)bb * T * D, X->acts.mo + oS + ((size_t)bb * Tn + np) * D, (size_t)T * D * sizeof(real));
    if (c->arch == ARCH_MAL) {
        memcpy(mo, m, N * D * sizeof(real));
        residual_forward(m, x, m, N * D);  // m := x + m, the attention sublayer's input
        rmsnorm_forward(t->a.ua + oD, t->a.ra + (size_t)l * N, m, p->rmsa_w + (size_t)l * D, N, 1, D);
        tx_attn_forward(M, l, t->a.ua + oD, T, 0, oD, (size_t)l * N * H);
        residual_forward(mo, mo, t->a.y + oD, N * D);
    } else {  // MAG
        tx_attn_forward(M, l, us, Tn, np, oS, (size_t)l * Ns * H);
        real* ys = t->a.ys + oD;
        for (int bb = 0; bb < B; bb++)
            memcpy(ys + (size_t)bb * T * D, t->a.y + oS + ((size_t)bb * Tn + np) * D, (size_t)T * D * sizeof(real));
        rmsnorm_forward(t->a.n1 + oD, t->a.r1 + (size_t)l * N, ys, p->og1_w + (size_t)l * D, N, 1, D);
        rmsnorm_forward(t->a.n2 + oD, t->a.r2 + (size_t)l * N, m, p->og2_w + (size_t)l * D, N, 1, D);
        for (size_t i = 0; i < N * D; i++) mo[i] = t->a.n1[oD + i] * sigmoidr(t->a.n2[oD + i]);
    }
}
// Its backward: from M->grads_acts.res2 (= dL/d mo; model_backward has added it to dx already) to dx (MAL: the path
// through RMSNorm_attn), du (the sequence rows of the stream's gradient) and the parameters (P: the prefix rows)
static void titans_layer_backward(Model* M, int l, real* dx, real* du) {
    if (M->cfg.arch == ARCH_MAC) {
        mac_layer_backward(M, l);
        return;
    }
    Titans* t = M->tx;
    Model* X = &t->X;
    const Config* c = &M->cfg;
    ParameterTensors *p = &M->params, *dp = &M->grads;
    int B = M->B, T = M->T, Tn = t->Tn, np = c->npers, D = c->D, H = c->H;
    size_t N = (size_t)B * T, Ns = (size_t)B * Tn;
    size_t oD = (size_t)l * N * D, oS = (size_t)l * Ns * D;
    X->grads = M->grads;
    X->grads_memory = M->grads_memory;
    X->nf_what = NULL;
    memset(X->grads_acts_memory, 0, X->num_acts * sizeof(real));
    memset(t->gmem, 0, t->n * sizeof(real));
    const real* dres = M->grads_acts.res2 + oD;
    real* dm = t->g.m + oD;
    if (c->arch == ARCH_MAL) {
        memcpy(t->g.y + oD, dres, N * D * sizeof(real));
        tx_attn_backward(M, l, t->g.ua + oD, t->a.ua + oD, T, 0, oD, (size_t)l * N * H);
        rmsnorm_backward(dm, dp->rmsa_w + (size_t)l * D, t->g.ua + oD, t->a.m + oD, p->rmsa_w + (size_t)l * D,
                         t->a.ra + (size_t)l * N, N, 1, D);
        residual_forward(dx, dx, dm, N * D);  // x's path through the attention sublayer's input x + m
        residual_forward(dm, dm, dres, N * D);  // dm = dres + that path
    } else {  // MAG: o = n1 * sigmoid(n2)
        real *dn1 = t->g.n1 + oD, *dn2 = t->g.n2 + oD, *dys = t->g.ys + oD;
        for (size_t i = 0; i < N * D; i++) {
            real s = sigmoidr(t->a.n2[oD + i]);
            dn1[i] = dres[i] * s;
            dn2[i] = dres[i] * t->a.n1[oD + i] * s * (1 - s);
        }
        rmsnorm_backward(dys, dp->og1_w + (size_t)l * D, dn1, t->a.ys + oD, p->og1_w + (size_t)l * D,
                         t->a.r1 + (size_t)l * N, N, 1, D);
        rmsnorm_backward(dm, dp->og2_w + (size_t)l * D, dn2, t->a.m + oD, p->og2_w + (size_t)l * D,
                         t->a.r2 + (size_t)l * N, N, 1, D);
        for (int bb = 0; bb < B; bb++)
            memcpy(t->g.y + oS + ((size_t)bb * Tn + np) * D, dys + (size_t)bb * T * D, (size_t)T * D * sizeof(real));
        tx_attn_backward(M, l, X->grads_acts.ln1 + oS, X->acts.ln1 + oS, Tn, np, oS, (size_t)l * Ns * H);
    }
    for (int bb = 0; bb < B; bb++)
        memcpy(X->grads_acts.mo + oS + ((size_t)bb * Tn + np) * D, dm + (size_t)bb * T * D,
               (size_t)T * D * sizeof(real));
    mixer_backward(X, l, X->grads_acts.mo + oS);
    if (X->nf_what && !M->nf_what) {
        M->nf_what = X->nf_what;
        M->nf_layer = X->nf_layer;
        M->nf_chunk = X->nf_chunk;
    }
    const real* dus = X->grads_acts.ln1 + oS;
    real* dP = dp->pers + (size_t)l * np * D;
    for (int bb = 0; bb < B; bb++) {  // the stream's rows: P's, then the sequence's
        const real* src = dus + (size_t)bb * Tn * D;
        for (size_t i = 0; i < (size_t)np * D; i++) dP[i] += src[i];
        residual_forward(du + (size_t)bb * T * D, du + (size_t)bb * T * D, src + (size_t)np * D, (size_t)T * D);
    }
}

// ----------------------------------------------------------------------------
// 5. token-by-token decoding (SPEC §7): the test-time recurrence
//
// Per layer we keep the last K-1 rows before the conv, the memory state at the last chunk
// boundary, and the q, k, v and gates of the tokens of the current, partial chunk. A new token
// is read by the same chunk function over the partial chunk (its last row is the new output);
// when the chunk is full its end state becomes the new boundary state. Row for row this is the
// computation of the parallel forward, so the logits agree to float precision. Every memory but
// phi* and Lattice (mem_decode_recurrent) instead steps a running state token by token
// (mem_decode_step; omega with a window of the tokens' gradient factors): one row's work per
// token, the same logits to rounding. Lattice steps its own state (no chunks).
// An attention layer keeps a KV cache of its keys (after RoPE) and values: every position for 'A' (grown
// as needed), a ring of the last W positions for 'S' (position j in slot j mod W).

typedef struct {
    Model* M;
    int pos;
    ActivationTensors a;
    real* acts_memory;
    size_t act_sizes[NUM_ACT_TENSORS];  // one row (B = T = 1)
    real* conv_hist;  // (L, 3, K-1, D) inputs of the q, k, v convs at the previous K-1 positions
    real *P, *S, *Pn, *Sn;  // (L, H, nP) boundary state; chunk-end scratch (nP)
    real* Pt;  // (L, H, nP) the running state of the recurrent step (mem_decode_step; S is then the running momentum)
    real *win,
        *pa;  // with Pt: (L, H, dec_win_rows, dec_fac_width) the window's gradient factors; (L, H) atlas_chunk's prod a
    real*
        // (L, H, b + c-1, rw) q, k, v, a, theta, eta, delta (gamma) of the current chunk's tokens (decoder_row_width),
        part;
    // after omega's halo: the c-1 tokens before the chunk
    MemChunk c;
    real* chunk_memory;
    real *kc[128], *vc[128];
    int kvcap;  // per attention layer: keys and values, (kvcap, D) for 'A', (W, D) for 'S'
    real* lat_w;  // Lattice: the step vectors (LAT_NVEC * d); its state is P, updated every token
    // phi* memory (section 3c), per (layer, head): every token's row (q, k, v, a, eta, gamma), the committed entries
    // (signals, offsets, tokens) and LA at the last chunk end; P holds W1 at the last chunk end
    real **ph_rows, **ph_av, **ph_lo, *ph_LA, *ph_scr_mem;
    int **ph_etok, *ph_ne, ph_cap;
    PhiScr ph_scr;
} Decoder;

// does the decoder step the memory token by token (mem_decode_step, section 5's decoder_mixer; train_miras.cu's
// decoder_recurrent_kernel)? The plain recurrence, with Moneta's or Memora's retention, the ATLAS family's omega, poly
// and muon; not phi* (it re-runs the partial chunk), Lattice (it steps its own state) or MAC (its segments), and only
// with memory layers
static int mem_decode_recurrent(const Config* c, const MemCfg* m) {
    return !m->phistar && !c->lattice && c->arch != ARCH_MAC && memory_layers(c) > 0;
}
static int decoder_row_width(const MemCfg* m) {
    return 3 * m->d + 2 + 2 * (m->cw ? m->d : 1) + (m->poly ? 2 * m->din : 0) + (m->omega > 1 ? m->omega : 0);
}  // (+ poly's features, omega's gamma)
// a slot of the recurrent step's window: one token's inner gradient factors (section 5's DecTerms)
static int dec_fac_width(const MemCfg* m) {
    return m->depth == 1 ? m->d + m->din : m->d + (2 + (m->gated ? 1 : 0)) * m->dm + m->din;
}
// the window's slots: omega's, one per row of the chunk with its halo (as part's rows); without omega one
static int dec_win_rows(const MemCfg* m, int b) { return m->omega > 1 ? b + m->omega - 1 : 1; }
static void titans_dec_init(Decoder* dec);  // section 5b
static void decoder_init(Decoder* dec, Model* M) {
    const Config* c = &M->cfg;
    MemCfg* m = &M->mem;
    memset(dec, 0, sizeof *dec);
    dec->M = M;
    fill_in_activation_sizes(dec->act_sizes, c, 1, 1);
    size_t n = head_act_size(c, 1, 1);
    for (int i = 0; i < NUM_ACT_TENSORS; i++) n += dec->act_sizes[i];
    dec->acts_memory = (real*)xmalloc(n * sizeof(real));
    point_activations(&dec->a, dec->acts_memory, dec->act_sizes, c, 1, 1);
    size_t LH = (size_t)c->L * c->H;
    dec->conv_hist = (real*)xmalloc((size_t)c->L * 3 * (c->K - 1 + 1) * c->D * sizeof(real));
    dec->P = (real*)xmalloc(LH * m->nP * sizeof(real));
    dec->S = (real*)xmalloc(LH * m->nP * sizeof(real));
    dec->Pn = (real*)xmalloc(m->nP * sizeof(real));
    dec->Sn = (real*)xmalloc(m->nP * sizeof(real));
    int rows = c->b + m->omega - 1;  // (omega: + the halo)
    dec->part = (real*)xmalloc(LH * rows * decoder_row_width(m) * sizeof(real));
    size_t per1 = memchunk_carve_in(&dec->c, NULL, rows, m->d, m->din, m->dm, m->nP, mem_carve_opt(m));
    dec->chunk_memory = (real*)xmalloc((per1 + muon_carve(&dec->c, NULL, c->b, m)) * sizeof(real));
    memchunk_carve_in(&dec->c, dec->chunk_memory, rows, m->d, m->din, m->dm, m->nP, mem_carve_opt(m));
    muon_carve(&dec->c, dec->chunk_memory + per1, c->b, m);
    dec->lat_w = (real*)xmalloc((size_t)LAT_NVEC * m->d * sizeof(real));
    for (int l = 0; l < c->L; l++)
        if (M->mlayer[l] >= 0 && c->lattice)  // Lattice: S_0 = I per head
            for (int h = 0; h < c->H; h++) lattice_identity(dec->P + ((size_t)l * c->H + h) * m->nP, m->d);
    if (mem_decode_recurrent(c, m)) {
        dec->Pt = (real*)xmalloc(LH * m->nP * sizeof(real));
        dec->win = (real*)xmalloc(LH * dec_win_rows(m, c->b) * dec_fac_width(m) * sizeof(real));
        dec->pa = (real*)xmalloc(LH * sizeof(real));
    }
    for (int l = 0; l < c->L; l++)
        if (M->mlayer[l] >= 0 && !c->lattice) {  // P_0 of each memory layer
            size_t o = (size_t)l * c->H * m->nP, sz = (size_t)c->H * m->nP * sizeof(real);
            memcpy(dec->P + o, M->params.mem_p0 + (size_t)M->mlayer[l] * c->H * m->nP, sz);
            if (dec->Pt) memcpy(dec->Pt + o, dec->P + o, sz);
        }
    dec->kvcap = 64;
    for (int l = 0; l < c->L; l++)
        if (c->pattern[l] != 'M') {
            size_t rows = c->pattern[l] == 'S' ? (size_t)c->window : (size_t)dec->kvcap;
            dec->kc[l] = (real*)xmalloc(rows * c->D * sizeof(real));
            dec->vc[l] = (real*)xmalloc(rows * c->D * sizeof(real));
        }
    if (m->phistar) {
        dec->ph_rows = (real**)xmalloc(LH * sizeof(real*));
        dec->ph_av = (real**)xmalloc(LH * sizeof(real*));
        dec->ph_lo = (real**)xmalloc(LH * sizeof(real*));
        dec->ph_etok = (int**)xmalloc(LH * sizeof(int*));
        dec->ph_LA = (real*)xmalloc(LH * sizeof(real));
        dec->ph_ne = (int*)xmalloc(LH * sizeof(int));
    }
    if (c->arch) titans_dec_init(dec);  // Titans layers: their caches, and the P rows through each layer (section 5b)
}
// phi*: room for token rows up to pos (grown by doubling) and the entries with the current chunk's
static void phi_dec_grow(Decoder* dec, int pos) {
    const MemCfg* m = &dec->M->mem;
    const Config* c = &dec->M->cfg;
    if (pos < dec->ph_cap) return;
    int cap = dec->ph_cap ? dec->ph_cap : 64;
    while (cap <= pos) cap *= 2;
    size_t LH = (size_t)c->L * c->H, rw = 3 * (size_t)m->d + 2 + m->omega,
           ne = phi_entries(cap, c->b, m->omega) + c->b + m->omega;
    for (size_t i = 0; i < LH; i++) {
        dec->ph_rows[i] = (real*)realloc(dec->ph_rows[i], (size_t)cap * rw * sizeof(real));
        dec->ph_av[i] = (real*)realloc(dec->ph_av[i], ne * m->dm * sizeof(real));
        dec->ph_lo[i] = (real*)realloc(dec->ph_lo[i], ne * sizeof(real));
        dec->ph_etok[i] = (int*)realloc(dec->ph_etok[i], ne * sizeof(int));
        if (!dec->ph_rows[i] || !dec->ph_av[i] || !dec->ph_lo[i] || !dec->ph_etok[i])
            DIE("use a shorter generation", "out of memory growing the phi* decoder to %d tokens", cap);
    }
    free(dec->ph_scr_mem);
    dec->ph_scr_mem = (real*)xmalloc(phi_scr_carve(&dec->ph_scr, NULL, m, c->b, ne) * sizeof(real));
    phi_scr_carve(&dec->ph_scr, dec->ph_scr_mem, m, c->b, ne);
    dec->ph_cap = cap;
}
// one token of a phi* layer's head: the chunk so far (own rows t0..pos) recomputed from the committed state, exactly
// the parallel forward's arithmetic for these rows; at the chunk's end its entries, W1 and LA are committed
// the token rows of (layer, head) lh as a PhiSeq: q, k, v, a, eta, gamma per row
static PhiSeq phi_dec_seq(const Decoder* dec, size_t lh) {
    int d = dec->M->mem.d, c = dec->M->mem.omega;
    size_t rw = 3 * (size_t)d + 2 + c;
    real* rows = dec->ph_rows[lh];
    PhiSeq x = {rows, rows + d, rows + 2 * d, rows + 3 * d, rows + 3 * d + 1, c > 1 ? rows + 3 * d + 2 : NULL, rw,
                rw,   rw};
    return x;
}
static void phi_dec_head(Decoder* dec, int l, int h, int pos, real* y) {
    Model* M = dec->M;
    const MemCfg* m = &M->mem;
    int H = M->cfg.H, d = m->d, b = M->cfg.b, c = m->omega, cnt = pos % b, t0 = pos - cnt, n = cnt + 1,
        nh = t0 < c - 1 ? t0 : c - 1;
    size_t lh = (size_t)l * H + h, rw = 3 * (size_t)d + 2 + c;
    real* row = dec->ph_rows[lh] + (size_t)pos * rw;
    const ActivationTensors* a = &dec->a;
    memcpy(row, a->q + (size_t)h * d, d * sizeof(real));
    memcpy(row + d, a->k + (size_t)h * d, d * sizeof(real));
    memcpy(row + 2 * d, a->v + (size_t)h * d, d * sizeof(real));
    row[3 * d] = a->ga[h];
    row[3 * d + 1] = a->geta[h];
    if (c > 1) memcpy(row + 3 * d + 2, a->ggam + (size_t)h * c, c * sizeof(real));
    PhiSeq x = phi_dec_seq(dec, lh);
    real LAn, *P = dec->P + lh * m->nP;
    int full = n == b;
    phi_chunk_forward(m, &dec->ph_scr, &x, t0, n, nh, dec->ph_ne[lh], dec->ph_etok[lh], dec->ph_av[lh], dec->ph_lo[lh],
                      P, dec->ph_LA[lh], dec->ph_scr.y, d, full ? dec->Pn : NULL, &LAn);
    memcpy(y, dec->ph_scr.y + (size_t)cnt * d, d * sizeof(real));
    if (full) {
        memcpy(P, dec->Pn, m->nP * sizeof(real));
        dec->ph_ne[lh] += nh + n;
        dec->ph_LA[lh] = LAn;
    }
}
// One query row of an attention layer against its cache, the computation of attention_forward's row i = pos
// (the same order of keys j). Grows the 'A' caches when full.
static void decoder_attention(Decoder* dec, int l, real* out, const real* u) {
    Model* M = dec->M;
    const Config* c = &M->cfg;
    const ParameterTensors* p = &M->params;
    ActivationTensors* a = &dec->a;
    int D = c->D, H = c->H, d = D / H, pos = dec->pos, W = c->pattern[l] == 'S' ? c->window : 0;
    if (!W && pos >= dec->kvcap) {  // the 'A' caches are full: double them all (the 'S' rings keep W rows)
        int nc = 2 * dec->kvcap;
        for (int i = 0; i < c->L; i++)
            if (c->pattern[i] == 'A') {
                real* k2 = (real*)xmalloc((size_t)nc * D * sizeof(real));
                real* v2 = (real*)xmalloc((size_t)nc * D * sizeof(real));
                memcpy(k2, dec->kc[i], (size_t)dec->kvcap * D * sizeof(real));
                memcpy(v2, dec->vc[i], (size_t)dec->kvcap * D * sizeof(real));
                free(dec->kc[i]);
                free(dec->vc[i]);
                dec->kc[i] = k2;
                dec->vc[i] = v2;
            }
        dec->kvcap = nc;
    }
    real cs[128], sn[128];
    rope_angles(cs, sn, pos, d / 2);
    matmul_forward(a->qp, u, p->wq + (size_t)l * D * D, NULL, 1, D, D);
    matmul_forward(a->kp, u, p->wk + (size_t)l * D * D, NULL, 1, D, D);
    int slot = W ? pos % W : pos;
    rope_rotate(a->q, a->qp, cs, sn, H, d, 1);
    rope_rotate(dec->kc[l] + (size_t)slot * D, a->kp, cs, sn, H, d, 1);
    matmul_forward(dec->vc[l] + (size_t)slot * D, u, p->wv + (size_t)l * D * D, NULL, 1, D, D);
    real* s = (real*)xmalloc((size_t)(pos + 1) * sizeof(real));
    for (int h = 0; h < H; h++)  // the 'S' ring holds key j in slot j % W
        attention_row(out + h * d, a->q + h * d, dec->kc[l] + h * d, dec->vc[l] + h * d, D, d, pos, 0, W, W, s);
    free(s);
}
static void decoder_free(Decoder* dec) {
    for (int l = 0; l < dec->M->cfg.L; l++) {
        free(dec->kc[l]);
        free(dec->vc[l]);
    }
    free(dec->acts_memory);
    free(dec->conv_hist);
    free(dec->P);
    free(dec->S);
    free(dec->Pn);
    free(dec->Sn);
    free(dec->Pt);
    free(dec->win);
    free(dec->pa);
    free(dec->part);
    free(dec->chunk_memory);
    free(dec->lat_w);
    if (dec->ph_rows)
        for (size_t i = 0; i < (size_t)dec->M->cfg.L * dec->M->cfg.H; i++) {
            free(dec->ph_rows[i]);
            free(dec->ph_av[i]);
            free(dec->ph_lo[i]);
            free(dec->ph_etok[i]);
        }
    free(dec->ph_rows);
    free(dec->ph_av);
    free(dec->ph_lo);
    free(dec->ph_etok);
    free(dec->ph_LA);
    free(dec->ph_ne);
    free(dec->ph_scr_mem);
}

// one conv output row from the history of K-1 rows and the current row x; then shift the history
static void conv_step(real* out, real* hist, const real* x, const real* w, int C, int K) {
    for (int i = 0; i < C; i++) {
        real s = w[i * K + K - 1] * x[i];
        for (int j = 0; j < K - 1; j++) s += w[i * K + j] * hist[(size_t)j * C + i];
        out[i] = s;
    }
    if (K > 1) {
        memmove(hist, hist + C, (size_t)(K - 2) * C * sizeof(real));
        memcpy(hist + (size_t)(K - 2) * C, x, C * sizeof(real));
    }
}

// The decoder's window of inner gradients (omega's G_t = sum_{o<c} gamma_t[o] g_{t-o}, SPEC §5.5; one term with
// gamma 1 without omega). Every g_i is rank one per memory matrix, g = dl xk^T, so a token's gradient is kept as its
// factors, a slot of dec_fac_width values: linear [r (d), k (din)]; deep [g1 (d), hk (dm), g2 (dm), (g3 (dm),)
// k (din)] (the gradient of W1 is g1 hk^T, of W2 g2 k^T, of W3 g3 k^T; k the features with poly).
typedef struct {
    int n;  // terms o = 0..n-1: G_t = sum_o w[o] g(f[o])
    real w[64];
    const real* f[64];
} DecTerms;
static void dec_fac_store(const MemCfg* m, const MemChunk* c, int i, real* f) {  // row i of c's gradients into f
    int d = m->d, dm = m->dm, din = m->din;
    if (m->depth == 1) {
        memcpy(f, c->r + (size_t)i * d, d * sizeof(real));
        memcpy(f + d, c->k + (size_t)i * din, din * sizeof(real));
        return;
    }
    memcpy(f, c->g1 + (size_t)i * d, d * sizeof(real));
    memcpy(f + d, c->hk + (size_t)i * dm, dm * sizeof(real));
    memcpy(f + d + dm, c->g2 + (size_t)i * dm, dm * sizeof(real));
    if (m->gated) memcpy(f + d + 2 * dm, c->g3 + (size_t)i * dm, dm * sizeof(real));
    memcpy(f + d + (2 + (m->gated ? 1 : 0)) * dm, c->k + (size_t)i * din, din * sizeof(real));
}
// memory matrix k's factors in slot f: its gradient is dl xk^T
static void dec_fac_mat(const MemCfg* m, const real* f, int k, const real** dl, const real** xk) {
    int d = m->d, dm = m->dm;
    const real* kk = f + (m->depth == 1 ? d : d + (2 + (m->gated ? 1 : 0)) * dm);
    *dl = k == 0 ? f : f + d + (size_t)k * dm;
    *xk = k == 0 && m->depth == 2 ? f + d : kk;
}
// One memory matrix k (rows, cols, at offset o) of the state stepped with G = sum_o w_o dl_o xk_o^T, as the rule
// takes it (the token's a, theta, eta in c's row 0):
//   momentum:  S = theta S - eta G,  P = a P + S       gd:  P = a P - eta G       (+ (1 - a) P_0 if anchored)
//   muon (token level, SPEC §5.7): S = theta S + G only (the caller steps P with NS5(S) after every matrix's S)
//   muon, chunk level: S = theta S + G and the reads' gd step P = a P - eta G (+ (1 - a) P_0)
static void mem_decode_update(const MemCfg* m, const MemChunk* c, real* Pt, real* S, size_t o, const DecTerms* T, int k,
                              int rows, int cols) {
    real a = c->a[0], th = c->theta[0], eta = c->eta[0];
    const real *dl[64], *xk[64];
    for (int t = 0; t < T->n; t++) dec_fac_mat(m, T->f[t], k, &dl[t], &xk[t]);
#pragma omp parallel for if ((size_t)rows * cols * T->n >= 65536)
    for (int j = 0; j < rows; j++) {
        real wd[64], g[256];  // the terms' row factors w_o dl_o[j]; G's row j, 256 columns at a time
        for (int t = 0; t < T->n; t++) wd[t] = T->w[t] * dl[t][j];
        for (int q0 = 0; q0 < cols; q0 += 256) {
            int nq = cols - q0 < 256 ? cols - q0 : 256;
            for (int q = 0; q < nq; q++) g[q] = wd[0] * xk[0][q0 + q];
            for (int t = 1; t < T->n; t++)
                for (int q = 0; q < nq; q++) g[q] += wd[t] * xk[t][q0 + q];
            real *P = Pt + o + (size_t)j * cols + q0, *Sm = S ? S + o + (size_t)j * cols + q0 : NULL;
            const real* z = m->anchor ? c->p0 + o + (size_t)j * cols + q0 : NULL;
            if (m->muon == 1)
                for (int q = 0; q < nq; q++) Sm[q] = th * Sm[q] + g[q];
            else if (m->muon == 2)
                for (int q = 0; q < nq; q++) {
                    Sm[q] = th * Sm[q] + g[q];
                    P[q] = a * P[q] - eta * g[q];
                }
            else if (m->momentum)
                for (int q = 0; q < nq; q++) {
                    Sm[q] = th * Sm[q] - eta * g[q];
                    P[q] = a * P[q] + Sm[q];
                }
            else
                for (int q = 0; q < nq; q++) P[q] = a * P[q] - eta * g[q];
            if (z && m->muon != 1)
                for (int q = 0; q < nq; q++) P[q] += (1 - a) * z[q];
        }
    }
}
// muon's step of the state from S (SPEC §5.7): X = NS5(S) per matrix (c's muon scratch), P = a P [+ (1 - a) P_0] - eta X
static void dec_ns5_step(const MemCfg* m, MemChunk* c, real* P, const real* S, real a, real eta) {
    size_t off[3];
    int rows[3], cols[3], nm = mem_matrices(m, off, rows, cols);
    real* X = c->mX;
    for (int k = 0; k < nm; k++) ns5_forward(X + off[k], c->msv, c->mtmp, S + off[k], rows[k], cols[k]);
    for (size_t e = 0; e < m->nP; e++) P[e] = a * P[e] + (c->p0 ? (1 - a) * c->p0[e] : 0) - eta * X[e];
}
// the write: every memory matrix of the state Pt (and momentum S) stepped with G_t; muon's token-level rule then
// P = a P [+ (1 - a) P_0] - eta NS5(S) per matrix (NS5's scratch: c's muon arrays)
static void mem_decode_write(const MemCfg* m, MemChunk* c, real* Pt, real* S, const DecTerms* T) {
    size_t off[3];
    int rows[3], cols[3], nm = mem_matrices(m, off, rows, cols);
    for (int k = 0; k < nm; k++) mem_decode_update(m, c, Pt, S, off[k], T, k, rows[k], cols[k]);
    if (m->muon == 1) dec_ns5_step(m, c, Pt, S, c->a[0], c->eta[0]);
}
// the read y = M(q; P), the reads of W1 (or W) and W2 scaled by cs[0], cs[1]: y = q + LN(W1 GELU(W2 q)) (gated:
// W1 (GELU(W2 q) * W3 q)); linear y = W q
static void mem_decode_read(const MemCfg* m, MemChunk* c, const real* P, const real* cs, const real* lng,
                            const real* lnb) {
    int d = m->d, dm = m->dm, din = m->din;
    if (m->depth == 1) {
        mm_nt(c->y, c->q, P, 1, d, din, cs[0], 0);
        return;
    }
    size_t o2 = (size_t)d * dm, o3 = o2 + (size_t)dm * din;
    mm_nt(c->zq, c->q, P + o2, 1, dm, din, cs[1], 0);
    for (int j = 0; j < dm; j++) c->hq[j] = gelu(c->zq[j], gelu_tanh(c->zq[j]));
    if (m->gated) {
        mm_nt(c->zq3, c->q, P + o3, 1, dm, din, 1, 0);
        for (int j = 0; j < dm; j++) c->hq[j] *= c->zq3[j];
    }
    mm_nt(c->nq, c->hq, P, 1, d, dm, cs[0], 0);
    if (m->ln) ln_forward(c->nq, c->rq, 1, d);
    mem_out_forward(c->y, c->qr, c->nq, lng, lnb, m, 1);
}
// The decoder's step of one head's memory, token by token: SPEC §5 as written, rather than the chunk's dual form
// over the partial chunk. The token's inner gradient g_t at the chunk-start state Ps (mem_grad_forward, one row) goes
// into its slot of the window win (the chunk's rows after its halo, as the chunk lays them out), and with G_t = sum_{o<c} gamma_t[o] g_{t-o} (omega; G_t =
// g_t without it; the c-1 tokens before the chunk, its halo, were re-taken at Ps by the caller at the chunk's start):
//   momentum:  S_t = theta_t S_{t-1} - eta_t G_t,   P_t = a_t P_{t-1} + S_t        [+ (1 - a_t) P_0, anchored]
//   gd:        P_t = a_t P_{t-1} - eta_t G_t                                       [+ (1 - a_t) P_0, anchored]
//   muon:      S_t = theta_t S_{t-1} + G_t,         P_t = a_t P_{t-1} [+ (1 - a_t) P_0] - eta_t NS5(S_t)
//   muon, chunk level (atlas_chunk): the reads' P_t as gd, S_t as muon; at the chunk's end the carry
//              P_end = A P_s [+ (1 - A) P_0] - eta_last NS5(S_end), A = prod a (pa: the product so far)
// (P_{t-1} the running state Pt, updated in place; S the running momentum), then the read after the write,
// y_t = M(q_t; P_t). Unrolled over a chunk this is the dual form's P_t = alpha_t P_s + beta_t S_s - sum_i C[t][i] g_i
// (muon: the chunk's token-by-token scan), so decoding equals the parallel forward to rounding, at one row's work per
// token (and one NS5 per matrix for muon) instead of the partial chunk's. At the chunk's end the running state
// becomes the next chunk's start state Ps (atlas_chunk: the carry becomes both).
// The retentions (gd only, no omega), as their chunks (mem_step_forward) take them:
// - Moneta's lq (SPEC §5.3): the state is A; the gradients at W_s = A_s / s_s (lq_scales, per matrix), the reads
//   through A_t / s_s, s_s the chunk start's scale;
// - Memora's kl (SPEC §5.4): Ps holds the running logits Z, S the chunk's W_1, Pt the read state R. The chunk's first
//   token (first) steps the logits from W_s = softmax(Z_s), Z_1 = a_0 Z_s - eta_0 g_0(W_s), and is read at W_1 =
//   softmax(Z_1) = R_0; every later token takes its gradient at W_1 and steps both, Z_t = a_t Z_{t-1} - eta_t g_t,
//   R_t = a_t R_{t-1} - eta_t g_t (the chunk's carry on Z_1, and its read from W_1); Z at the chunk's end is the next
//   chunk's Z_s, so nothing is copied there.
// For the memories mem_decode_recurrent takes. Row 0 of c holds the token (chunk_set_row; poly: its features), gam
// its omega gates (NULL without omega); cnt its row in the chunk of b rows, s its slot in win (omega: its row after
// the chunk's halo, whose slots 0..s-cnt-1 the caller filled; else 0).
static void mem_decode_step(const MemCfg* m, MemChunk* c, real* Ps, real* Pt, real* S, real* win, int s, real* pa,
                            int cnt, int b, const real* gam, const real* lng, const real* lnb) {
    int first = cnt == 0, last = cnt == b - 1, w = m->omega, fw = dec_fac_width(m);
    c->nh = 0;
    c->wc = 1;
    real cs[2] = {1, 1};  // the reads' scales (lq: 1 / s_s per matrix)
    const real* Pg = Ps;  // where the gradient is taken
    if (m->retention == RET_LQ) {
        lq_scales(m, Ps, c->Wa, cs);
        Pg = c->Wa;
    } else if (m->retention == RET_KL) {
        if (first) softmax_rows(m, Ps, c->Wa);  // W_s
        Pg = first ? c->Wa : S;
    }
    mem_grad_forward(m, c, 1, Pg, lng, lnb);
    dec_fac_store(m, c, 0, win + (size_t)s * fw);
    DecTerms T;  // G_t's terms: g_{t-o} in slot s - o, o < c, positions >= 0 (the slots there are)
    T.n = s + 1 < w ? s + 1 : w;
    for (int o = 0; o < T.n; o++) {
        T.w[o] = w > 1 ? gam[o] : 1;
        T.f[o] = win + (size_t)(s - o) * fw;
    }
    if (m->retention == RET_KL) {
        mem_decode_write(m, c, Ps, NULL, &T);  // Z_t
        if (first) {  // W_1 = softmax(Z_1), the chunk's gradient point and token 0's read
            softmax_rows(m, Ps, S);
            memcpy(Pt, S, m->nP * sizeof(real));
        } else
            mem_decode_write(m, c, Pt, NULL, &T);  // R_t
    } else
        mem_decode_write(m, c, Pt, S, &T);
    if (m->muon == 2) *pa = (first ? 1 : *pa) * c->a[0];
    mem_decode_read(m, c, Pt, cs, lng, lnb);
    if (!last || m->retention == RET_KL) return;
    if (m->muon == 2) {  // atlas_chunk's carry from S_end
        dec_ns5_step(m, c, Ps, S, *pa, c->eta[0]);
        memcpy(Pt, Ps, m->nP * sizeof(real));
    } else
        memcpy(Ps, Pt, m->nP * sizeof(real));
}

// chunk_set_row of the decoder's n rows (decoder_row_width rw each: q, k, v, a, theta, eta, delta, poly's features of
// q and k, omega's gamma) into c's rows 0..n-1 (poly_rows: the features as q, k)
static void dec_load_rows(const MemCfg* m, MemChunk* c, const real* rows, int rw, int n) {
    int d = m->d, ew = m->cw ? d : 1, w = m->omega, din = m->din, fo = rw - (w > 1 ? w : 0) - 2 * din;
    const real* qf[1024 + 64];
    const real* kf[1024 + 64];
    for (int t = 0; t < n; t++) {
        const real* r = rows + (size_t)t * rw;
        chunk_set_row(m, c, t, r, r + d, r + 2 * d, r[3 * d], r[3 * d + 1], r + 3 * d + 2, r + 3 * d + 2 + ew);
        if (w > 1) memcpy(c->gam + (size_t)t * w, r + rw - w, w * sizeof(real));
        qf[t] = r + fo;
        kf[t] = r + fo + din;
    }
    if (m->poly) poly_rows(c, m, n, qf, kf);
}

// ---- 5b. decoding Titans layers (section 4b). Sequence token pos is stream row N_p + pos of its layer's memory:
// decoder_init feeds each layer's P rows through its memory (conv buffers, chunk state) and MAG's attention cache
// first, and every token then continues the stream. The attention caches hold N_p + W rows: P pinned in slots
// 0..N_p-1 (MAG; none for MAL), then a ring of the last W rows (stream row j >= N_p in slot N_p + (j - N_p) mod W).
// One row of layer l's section-3 mixer at stream position pos (the model's position, or a Titans layer's stream row):
// q, k, v, gates of this row, the memory's partial chunk (plus omega's halo rows), the read after the write, then
// the head norm, the output gate and Wo into out (D). Lattice steps its state instead (one token, no chunk).
static void decoder_mixer(Decoder* dec, int l, const real* u, int pos, real* out) {
    Model* M = dec->M;
    const Config* c = &M->cfg;
    const MemCfg* m = &M->mem;
    ParameterTensors* p = &M->params;
    ActivationTensors* a = &dec->a;
    int D = c->D, H = c->H, d = m->d, K = c->K, nP = m->nP, b = c->b;
    int cnt = pos % b, rw = decoder_row_width(m);
    real* hist = dec->conv_hist + (size_t)l * 3 * (K - 1) * D;
    size_t ml = M->mlayer[l];
    matmul_forward(a->qp, u, p->wq + (size_t)l * D * D, NULL, 1, D, D);
    matmul_forward(a->kp, u, p->wk + (size_t)l * D * D, NULL, 1, D, D);
    matmul_forward(a->vp, u, p->wv + (size_t)l * D * D, NULL, 1, D, D);
    conv_step(a->qc, hist, a->qp, p->conv_q + ml * D * K, D, K);
    conv_step(a->kc, hist + (size_t)(K - 1) * D, a->kp, p->conv_k + ml * D * K, D, K);
    conv_step(a->vc, hist + (size_t)2 * (K - 1) * D, a->vp, p->conv_v + ml * D * K, D, K);
    silu_forward(a->qs, a->qc, D);
    silu_forward(a->ks, a->kc, D);
    silu_forward(a->v, a->vc, D);
    l2norm_forward(a->q, a->qrn, a->qs, 1, H, d);
    l2norm_forward(a->k, a->krn, a->ks, 1, H, d);
    gates_forward(M, l, u, 1, a->ga, a->geta, a->gth, a->gdel, a->geta_lr, a->gdel_lr);
    for (int h = 0; h < H && c->lattice; h++) {  // Lattice: one step of the state, S_t from S_{t-1}, and the read
        real* P = dec->P + ((size_t)l * H + h) * nP;
        LatVec w;
        latvec_carve(&w, dec->lat_w, d);
        lattice_step_forward(m, P, dec->Pn, a->q + h * d, a->k + h * d, a->v + h * d, a->geta[h], a->ga[h],
                             a->y + h * d, &w);
        memcpy(P, dec->Pn, nP * sizeof(real));
    }
    int w = m->omega, nh = pos - cnt < w - 1 ? pos - cnt : w - 1;  // omega: window, halo rows of this chunk
    if (w > 1) omega_gates_forward(M, l, u, 1, a->ggam);
    if (m->phistar) phi_dec_grow(dec, pos);
    for (int h = 0; h < H && m->phistar; h++) phi_dec_head(dec, l, h, pos, a->y + (size_t)h * d);
    int din = m->din, fo = rw - (w > 1 ? w : 0) - 2 * din;  // poly: the features' place in a row
    if (m->poly) {
        poly_forward(a->qf, a->q, p->poly_rho + ml * 3, 1, H, d);
        poly_forward(a->kf, a->k, p->poly_rho + ml * 3, 1, H, d);
    }
    for (int h = 0; h < H && !c->lattice && !m->phistar; h++) {
        size_t lh = (size_t)l * H + h;
        real* part = dec->part + lh * (b + w - 1) * rw;
        real* row = part + (size_t)(nh + cnt) * rw;
        int ew = m->cw ? d : 1;  // this token's row: q, k, v, a, theta, eta, delta
        memcpy(row, a->q + h * d, d * sizeof(real));
        memcpy(row + d, a->k + h * d, d * sizeof(real));
        memcpy(row + 2 * d, a->v + h * d, d * sizeof(real));
        row[3 * d] = a->ga[h];
        row[3 * d + 1] = a->gth[h];
        memcpy(row + 3 * d + 2, a->geta + h * ew, ew * sizeof(real));
        if (m->bias == BIAS_HUBER) memcpy(row + 3 * d + 2 + ew, a->gdel + h * ew, ew * sizeof(real));
        if (w > 1) memcpy(row + rw - w, a->ggam + h * w, w * sizeof(real));
        if (m->poly) {
            memcpy(row + fo, a->qf + (size_t)h * din, din * sizeof(real));
            memcpy(row + fo + din, a->kf + (size_t)h * din, din * sizeof(real));
        }
        MemChunk* ch = &dec->c;
        int n = cnt + 1;
        real* P = dec->P + lh * nP;
        real* S = dec->S + lh * nP;
        size_t mh = ml * H + h;  // in the memory-only parameter tensors
        ch->p0 = m->anchor ? p->mem_p0 + mh * nP : NULL;
        const real *lng = m->ln ? p->mem_ln_g + mh * d : NULL, *lnb = m->ln ? p->mem_ln_b + mh * d : NULL;
        int full = n == b;
        if (dec->Pt) {  // the recurrent step (mem_decode_step): P holds P_s, Pt the running state, S the momentum
            // (Memora: P the running logits, Pt the read state, S the chunk's W_1)
            int fw = dec_fac_width(m);
            real *Pt = dec->Pt + lh * nP, *win = dec->win + lh * dec_win_rows(m, b) * fw;
            if (cnt == 0 && nh > 0) {  // omega: the halo's gradients (the chunk's c-1 tokens before) at the new P_s
                dec_load_rows(m, ch, part, rw, nh);
                mem_grad_forward(m, ch, nh, P, lng, lnb);
                for (int t = 0; t < nh; t++) dec_fac_store(m, ch, t, win + (size_t)t * fw);
            }
            dec_load_rows(m, ch, row, rw, 1);  // the token as row 0
            mem_decode_step(m, ch, P, Pt, S, win, w > 1 ? nh + cnt : 0, dec->pa + lh, cnt, b,
                            w > 1 ? row + rw - w : NULL, lng, lnb);
            memcpy(a->y + h * d, ch->y, d * sizeof(real));
        } else {
            dec_load_rows(m, ch, part, rw, nh + n);
            if (w > 1) omega_halo(ch, m, nh);
            mem_step_forward(m, ch, nh + n, P, S, full ? dec->Pn : NULL, full ? dec->Sn : NULL, lng, lnb);
            memcpy(a->y + h * d, ch->y + (size_t)(nh + n - 1) * d, d * sizeof(real));
            if (full) {
                memcpy(P, dec->Pn, nP * sizeof(real));
                if (mem_carries_S(m)) memcpy(S, dec->Sn, nP * sizeof(real));
            }
        }
        if (full && w > 1) {  // omega: the chunk's last c-1 rows are the next chunk's halo
            int keep = nh + n < w - 1 ? nh + n : w - 1;
            memmove(part, part + (size_t)(nh + n - keep) * rw, (size_t)keep * rw * sizeof(real));
        }
    }
    rmsnorm_forward(a->yn, a->yrstd, a->y, p->rmsh_w + ml * D, 1, H, d);
    matmul_forward(a->gp, u, p->wg + ml * D * D, NULL, 1, D, D);
    gate_mul_forward(a->z, a->yn, a->gp, D);
    matmul_forward(out, a->z, p->wo + (size_t)l * D * D, NULL, 1, D, D);
}
// One row of layer l's attention (row j of its rows: RoPE position j; np pinned prefix rows): out = attn Wo_a^T (D)
static void tx_dec_attn(Decoder* dec, int l, const real* ua, int j, int np, real* out) {
    Model* M = dec->M;
    const Config* c = &M->cfg;
    const ParameterTensors* p = &M->params;
    int D = c->D, H = c->H, d = D / H, W = c->window;
    size_t oW = (size_t)l * D * D;
    real* buf = (real*)xmalloc((size_t)(3 * D + j + 1) * sizeof(real));
    real *q = buf, *kp = buf + D, *z = buf + 2 * D, *s = buf + 3 * D;
    real cs[128], sn[128];
    rope_angles(cs, sn, j, d / 2);
#define SLOT(r) ((size_t)((r) < np ? (r) : np + ((r)-np) % W))
    matmul_forward(kp, ua, p->att_wq + oW, NULL, 1, D, D);
    rope_rotate(q, kp, cs, sn, H, d, 1);
    matmul_forward(kp, ua, p->att_wk + oW, NULL, 1, D, D);
    rope_rotate(dec->kc[l] + SLOT(j) * D, kp, cs, sn, H, d, 1);
    matmul_forward(dec->vc[l] + SLOT(j) * D, ua, p->att_wv + oW, NULL, 1, D, D);
    for (int h = 0; h < H; h++)  // the keys in attention_forward's order
        attention_row(z + h * d, q + h * d, dec->kc[l] + h * d, dec->vc[l] + h * d, D, d, j, np, W, W, s);
#undef SLOT
    matmul_forward(out, z, p->att_wo + oW, NULL, 1, D, D);
    free(buf);
}
// MAC (section 4b): kc[l] holds the keys of P (N_p rows) and of the segment's h and u (C rows each), vc[l] their
// values, then the u sequence's conv buffer for the memory's q (K-1 rows) and the segment-start state (P, S).
static void mac_dec_init(Decoder* dec, int l) {
    Model* M = dec->M;
    const Config* c = &M->cfg;
    const ParameterTensors* p = &M->params;
    int D = c->D, H = c->H, d = D / H, np = c->npers, C = c->seg, nP = M->mem.nP;
    size_t oW = (size_t)l * D * D;
    dec->kc[l] = (real*)xmalloc((size_t)(np + 2 * C) * D * sizeof(real));
    dec->vc[l] = (real*)xmalloc(((size_t)(np + 2 * C + c->K - 1) * D + 2 * (size_t)H * nP) * sizeof(real));
    real* kp = (real*)xmalloc((size_t)D * sizeof(real));
    for (int e = 0; e < np; e++) {
        const real* Pr = p->pers + ((size_t)l * np + e) * D;
        real cs[128], sn[128];
        rope_angles(cs, sn, e, d / 2);
        matmul_forward(kp, Pr, p->att_wk + oW, NULL, 1, D, D);
        rope_rotate(dec->kc[l] + (size_t)e * D, kp, cs, sn, H, d, 1);
        matmul_forward(dec->vc[l] + (size_t)e * D, Pr, p->att_wv + oW, NULL, 1, D, D);
    }
    free(kp);
}
static void mac_dec_layer(Decoder* dec, int l, const real* u) {
    Model* M = dec->M;
    const Config* c = &M->cfg;
    const MemCfg* m = &M->mem;
    const ParameterTensors* p = &M->params;
    int D = c->D, H = c->H, d = D / H, np = c->npers, C = c->seg, K = c->K, nP = m->nP, pos = dec->pos, j = pos % C;
    size_t oW = (size_t)l * D * D;
    real *kc = dec->kc[l], *vc = dec->vc[l];
    real *hist = vc + (size_t)(np + 2 * C) * D, *Pseg = hist + (size_t)(K - 1) * D, *Sseg = Pseg + (size_t)H * nP;
    real* buf = (real*)xmalloc((size_t)(8 * D + np + 2 * C) * sizeof(real));
    real *uq = buf, *t1 = buf + D, *t2 = buf + 2 * D, *hrow = buf + 3 * D, *q = buf + 4 * D, *y = buf + 5 * D,
         *yo = buf + 6 * D, *rn = buf + 7 * D, *s = buf + 8 * D, r1, r2;
    if (j == 0) {  // a new segment: its start state, and an empty h / u cache
        memcpy(Pseg, dec->P + (size_t)l * H * nP, (size_t)H * nP * sizeof(real));
        memcpy(Sseg, dec->S + (size_t)l * H * nP, (size_t)H * nP * sizeof(real));
    }
    // the u sequence's memory q, and h = M(uq; P_(s)) per head (a one-row read without update)
    matmul_forward(t1, u, p->wq + oW, NULL, 1, D, D);
    conv_step(t2, hist, t1, p->conv_q + (size_t)l * D * K, D, K);
    silu_forward(t1, t2, D);
    l2norm_forward(uq, rn, t1, 1, H, d);
    real* uqf = m->poly ? (real*)xmalloc((size_t)H * m->din * sizeof(real)) : NULL;  // poly: uq's features
    if (m->poly) poly_forward(uqf, uq, p->poly_rho + (size_t)l * 3, 1, H, d);
    real zero[256] = {0}, one[256];
    for (int i = 0; i < d; i++) one[i] = 1;
    if (m->phistar) phi_dec_grow(dec, pos);
    for (int h = 0; h < H; h++) {  // (as mac_read_rows: no halo, no window; k's features any finite row)
        if (m->lattice) {  // Lattice's read y = S_(s) q (mac_lat_h_forward)
            lattice_read(Pseg + (size_t)h * nP, uq + h * d, hrow + h * d, d);
            continue;
        }
        if (m->phistar) {  // the phi* read at the segment start: its entries (committed before it, unchanged), W1
            size_t lh = (size_t)l * H + h;
            PhiSeq x = phi_dec_seq(dec, lh);
            phi_h_read(m, &dec->ph_scr, &x, uq + h * d, (int)phi_entries(pos - j, c->b, m->omega), dec->ph_etok[lh],
                       dec->ph_av[lh], dec->ph_lo[lh], Pseg + (size_t)h * nP, hrow + h * d);
            continue;
        }
        MemChunk* ch = &dec->c;
        size_t lh = (size_t)l * H + h;
        chunk_set_row(m, ch, 0, uq + h * d, zero, zero, 1, 0, zero, one);
        ch->nh = 0;
        ch->wc = 1;
        if (m->poly) {
            const real* f = uqf + (size_t)h * m->din;
            poly_rows(ch, m, 1, &f, &f);
        }
        ch->p0 = m->anchor ? p->mem_p0 + lh * nP : NULL;
        mem_step_forward(m, ch, 1, Pseg + (size_t)h * nP, mem_carries_S(m) ? Sseg + (size_t)h * nP : NULL, NULL, NULL,
                         m->ln ? p->mem_ln_g + lh * d : NULL, m->ln ? p->mem_ln_b + lh * d : NULL);
        memcpy(hrow + h * d, ch->y, d * sizeof(real));
    }
    free(uqf);
    // keys and values of h_j and u_j (RoPE position N_p + pos), the query; attention over P, h_0..j, u_0..j
    real cs[128], sn[128];
    rope_angles(cs, sn, np + pos, d / 2);
    matmul_forward(t1, hrow, p->att_wk + oW, NULL, 1, D, D);
    rope_rotate(kc + (size_t)(np + j) * D, t1, cs, sn, H, d, 1);
    matmul_forward(vc + (size_t)(np + j) * D, hrow, p->att_wv + oW, NULL, 1, D, D);
    matmul_forward(t1, u, p->att_wk + oW, NULL, 1, D, D);
    rope_rotate(kc + (size_t)(np + C + j) * D, t1, cs, sn, H, d, 1);
    matmul_forward(vc + (size_t)(np + C + j) * D, u, p->att_wv + oW, NULL, 1, D, D);
    matmul_forward(t1, u, p->att_wq + oW, NULL, 1, D, D);
    rope_rotate(q, t1, cs, sn, H, d, 1);
    int n = j + 1, nk = np + 2 * n;
    real scale = 1 / sqrt((real)d);
#define ROW(e) ((size_t)((e) < np ? (e) : (e) < np + n ? (e) : (e)-n + C) * D)  // P, h_0..j, u_0..j
    for (int h = 0; h < H; h++) {
        real mx = -1e30, sum = 0;
        real* oh = y + h * d;
        for (int e = 0; e < nk; e++) {
            s[e] = dotv(q + h * d, kc + ROW(e) + h * d, d) * scale;
            if (s[e] > mx) mx = s[e];
        }
        for (int e = 0; e < nk; e++) {
            s[e] = exp(s[e] - mx);
            sum += s[e];
        }
        for (int i = 0; i < d; i++) oh[i] = 0;
        for (int e = 0; e < nk; e++) {
            const real* ve = vc + ROW(e) + h * d;
            real pe = s[e] / sum;
            for (int i = 0; i < d; i++) oh[i] += pe * ve[i];
        }
    }
#undef ROW
    // the memory on the y stream (its write and read; m = the raw read, in dec->a.y), then the gate
    decoder_mixer(dec, l, y, pos, t1);
    matmul_forward(yo, y, p->att_wo + oW, NULL, 1, D, D);
    rmsnorm_forward(t1, &r1, yo, p->og1_w + (size_t)l * D, 1, 1, D);
    rmsnorm_forward(t2, &r2, dec->a.y, p->og2_w + (size_t)l * D, 1, 1, D);
    for (int i = 0; i < D; i++) dec->a.mo[i] = t1[i] * sigmoidr(t2[i]);
    free(buf);
}
// decoder_init's part: the caches, and each layer's P rows through its memory and MAG's attention
static void titans_dec_init(Decoder* dec) {
    Model* M = dec->M;
    const Config* c = &M->cfg;
    int D = c->D, np = c->npers;
    if (c->arch == ARCH_MAC) {
        for (int l = 0; l < c->L; l++) mac_dec_init(dec, l);
        return;
    }
    real* junk = (real*)xmalloc((size_t)D * sizeof(real));
    for (int l = 0; l < c->L; l++) {
        size_t rows = (size_t)(c->arch == ARCH_MAG ? np : 0) + c->window;
        dec->kc[l] = (real*)xmalloc(rows * D * sizeof(real));
        dec->vc[l] = (real*)xmalloc(rows * D * sizeof(real));
        for (int s = 0; s < np; s++) {
            const real* P = M->params.pers + ((size_t)l * np + s) * D;
            decoder_mixer(dec, l, P, s, junk);
            if (c->arch == ARCH_MAG) tx_dec_attn(dec, l, P, s, np, junk);
        }
    }
    free(junk);
}
// decoder_step's part: layer l's a->mo from x and u (as titans_layer_forward)
static void titans_dec_layer(Decoder* dec, int l, const real* x, const real* u) {
    Model* M = dec->M;
    const Config* c = &M->cfg;
    const ParameterTensors* p = &M->params;
    int D = c->D, np = c->npers;
    if (c->arch == ARCH_MAC) {
        mac_dec_layer(dec, l, u);
        return;
    }
    real* buf = (real*)xmalloc((size_t)4 * D * sizeof(real));
    real *m = buf, *t1 = buf + D, *t2 = buf + 2 * D, *y = buf + 3 * D, r1, r2;
    real* mo = dec->a.mo;
    decoder_mixer(dec, l, u, np + dec->pos, m);
    if (c->arch == ARCH_MAL) {
        residual_forward(t1, x, m, D);
        rmsnorm_forward(t2, &r1, t1, p->rmsa_w + (size_t)l * D, 1, 1, D);
        tx_dec_attn(dec, l, t2, dec->pos, 0, y);
        residual_forward(mo, m, y, D);
    } else {
        tx_dec_attn(dec, l, u, np + dec->pos, np, y);
        rmsnorm_forward(t1, &r1, y, p->og1_w + (size_t)l * D, 1, 1, D);
        rmsnorm_forward(t2, &r2, m, p->og2_w + (size_t)l * D, 1, 1, D);
        for (int i = 0; i < D; i++) mo[i] = t1[i] * sigmoidr(t2[i]);
    }
    free(buf);
}

// Feed one token; returns the Vp logits of the next-token distribution (valid until the next call).
static const real* decoder_step(Decoder* dec, int token) {
    Model* M = dec->M;
    const Config* c = &M->cfg;
    ParameterTensors* p = &M->params;
    ActivationTensors* a = &dec->a;
    int D = c->D, F = c->F;
    if (token < 0 || token >= c->V)
        DIE("prompt tokens must be < vocab size", "token %d out of range for vocab %d", token, c->V);
    encoder_forward(a->encoded, &token, p->wte, 1, D);
    real* x = a->encoded;
    for (int l = 0; l < c->L; l++) {
        // with one row, the layer-stacked activations of dec->a hold one layer; reuse them per layer
        real* u = a->ln1;
        rmsnorm_forward(u, a->ln1_rstd, x, p->rms1_w + (size_t)l * D, 1, 1, D);
        if (c->arch)
            titans_dec_layer(dec, l, x, u);  // MAL, MAG (section 5b)
        else if (c->pattern[l] != 'M') {  // attention: this position's row against the KV cache, then Wo
            decoder_attention(dec, l, a->z, u);
            matmul_forward(a->mo, a->z, p->wo + (size_t)l * D * D, NULL, 1, D, D);
        } else
            decoder_mixer(dec, l, u, dec->pos, a->mo);  // 'M'
        residual_forward(a->res2, x, a->mo, D);
        rmsnorm_forward(a->ln2, a->ln2_rstd, a->res2, p->rms2_w + (size_t)l * D, 1, 1, D);
        matmul_forward(a->h1, a->ln2, p->mlp_w1 + (size_t)l * F * D, NULL, 1, D, F);
        matmul_forward(a->h3, a->ln2, p->mlp_w3 + (size_t)l * F * D, NULL, 1, D, F);
        swiglu_forward(a->hg, a->h1, a->h3, F);
        matmul_forward(a->mlpo, a->hg, p->mlp_w2 + (size_t)l * D * F, NULL, 1, F, D);
        residual_forward(a->res3, a->res2, a->mlpo, D);
        memcpy(a->encoded, a->res3, D * sizeof(real));
        x = a->encoded;  // the next layer's input
    }
    rmsnorm_forward(a->lnf, a->lnf_rstd, x, p->rmsf_w, 1, 1, D);
    matmul_forward(a->logits, a->lnf, p->wte, NULL, 1, D, c->Vp);
    dec->pos++;
    return a->logits;
}

// ----------------------------------------------------------------------------
// 6. files. All binary files start with 256 int32 (llm.c style); see the README for the layouts.

#define MODEL_MAGIC 20261101
#define STATE_MAGIC 20261102
#define SHARD_MAGIC 20240520
#define MASK_MAGIC 20261110
#define TOKENIZER_MAGIC 20240328

static int f32_bits(float f) {
    int i;
    memcpy(&i, &f, 4);
    return i;
}
static float bits_f32(int i) {
    float f;
    memcpy(&f, &i, 4);
    return f;
}

static void config_to_header(int* h, const Config* c, size_t num_params) {
    // clang-format off
    h[2] = c->V; h[3] = c->Vp; h[4] = c->D; h[5] = c->L; h[6] = c->H; h[7] = c->E; h[8] = c->F; h[9] = c->b; h[10] = c->K;
    h[11] = c->mem_depth; h[12] = c->mem_resid; h[13] = c->mem_ln; h[14] = c->bias; h[15] = c->algo;
    h[16] = c->gate_a; h[17] = c->gate_eta; h[18] = f32_bits(c->eta_max); h[19] = (int)num_params;
    h[20] = c->retention; h[21] = c->gate_rank; h[22] = c->anchor; h[23] = c->window;
    h[38] = c->lattice; h[39] = c->lat_k; h[40] = c->lat_ablate;   // Lattice (slots 38..45 are its)
    h[24] = c->arch; h[25] = c->npers; h[26] = c->seg;   // Titans layers (section 4b)
    h[30] = c->omega > 1 ? c->omega : 0;   // ATLAS family (README "ATLAS"): omega window (0: off; older files)
    h[31] = c->poly;
    h[32] = c->gated;   // (older files: 0)
    h[33] = c->phistar;   // (older files: 0)
    for (int l = 0; l < c->L; l++) h[64 + l] = c->pattern[l];
}
static void header_to_config(Config* c, const int* h) {
    memset(c, 0, sizeof *c);
    c->V = h[2]; c->Vp = h[3]; c->D = h[4]; c->L = h[5]; c->H = h[6]; c->E = h[7]; c->F = h[8]; c->b = h[9]; c->K = h[10];
    c->mem_depth = h[11]; c->mem_resid = h[12]; c->mem_ln = h[13]; c->bias = h[14]; c->algo = h[15];
    c->gate_a = h[16]; c->gate_eta = h[17]; c->eta_max = bits_f32(h[18]); c->retention = h[20]; c->gate_rank = h[21]; c->anchor = h[22];
    c->window = h[23]; c->arch = h[24]; c->npers = h[25]; c->seg = h[26];
    c->lattice = h[38]; c->lat_k = h[39]; c->lat_ablate = h[40];
    c->omega = h[30] ? h[30] : 1; c->poly = h[31]; c->gated = h[32]; c->phistar = h[33];
    for (int l = 0; l < c->L && l < 128; l++) c->pattern[l] = (char)h[64 + l];
    // clang-format on
}

// reals are stored as float32 whatever `real` is
static long write_delay_us;  // > 0 only inside save_checkpoint with MIRAS_CKPT_DELAY_US set (the kill -9 test)
static int write_reals(FILE* f, const real* x, size_t n) {
    float buf[4096];
    for (size_t i = 0; i < n; i += 4096) {
        size_t k = n - i < 4096 ? n - i : 4096;
        for (size_t j = 0; j < k; j++) buf[j] = (float)x[i + j];
        if (fwrite(buf, 4, k, f) != k) return 0;
        if (write_delay_us > 0) {
            fflush(f);
            usleep((useconds_t)write_delay_us);
        }
    }
    return 1;
}
static int read_reals(FILE* f, real* x, size_t n) {
    float buf[4096];
    for (size_t i = 0; i < n; i += 4096) {
        size_t k = n - i < 4096 ? n - i : 4096;
        if (fread(buf, 4, k, f) != k) return 0;
        for (size_t j = 0; j < k; j++) x[i + j] = buf[j];
    }
    return 1;
}
static long file_size(const char* path) {
    struct stat st;
    return stat(path, &st) ? -1 : (long)st.st_size;
}

// Training state saved with a checkpoint, so that a resumed run continues bit for bit.
// With data parallel ranks (section 6b) it also holds the number of ranks and every rank's data position
// (shard, pos above are rank 0's; rank_shard/rank_pos have world entries when world > 1, else NULL).
typedef struct {
    long step;
    int shard;
    long pos;
    uint64_t rng;
    int world;
    int* rank_shard;
    long* rank_pos;
} TrainState;

// Checkpoint: model header + params [+ state header + AdamW m, v]. Written to PATH.tmp, flushed to disk (fsync),
// then renamed over PATH, and the directory is fsynced: PATH is always a whole old or a whole new checkpoint, even
// if the process is killed mid-write (make test kills it with SIGKILL at random points, many times: test 5e).
// MIRAS_CKPT_DELAY_US=N (a test hook) sleeps N us after every 16 KB written, so that such kills land mid-write.
static void save_checkpoint(const Model* M, const char* path, const TrainState* st) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    const char* delay = getenv("MIRAS_CKPT_DELAY_US");
    write_delay_us = delay ? atol(delay) : 0;
    FILE* f = fopen(tmp, "wb");
    if (!f)
        DIE("check that the output directory exists and is writable", "cannot write checkpoint %s: %s", tmp,
            strerror(errno));
    int h[256] = {0};
    h[0] = MODEL_MAGIC;
    h[1] = 1;
    config_to_header(h, &M->cfg, M->num_params);
    int ok = fwrite(h, 4, 256, f) == 256 && write_reals(f, M->params_memory, M->num_params);
    if (st && M->m_memory) {
        int s[256] = {0};
        s[0] = STATE_MAGIC;
        s[1] = 1;
        s[2] = (int)st->step;
        s[3] = st->shard;
        s[4] = (int)(st->pos & 0x7fffffff);
        s[5] = (int)(st->pos >> 31);
        s[6] = (int)(st->rng & 0xffffffffu);
        s[7] = (int)(st->rng >> 32);
        s[8] = (int)M->adam_t;
        s[9] = st->world > 1 ? st->world : 1;
        ok = ok && fwrite(s, 4, 256, f) == 256 && write_reals(f, M->m_memory, M->num_params) &&
             write_reals(f, M->v_memory, M->num_params);
        for (int r = 0; ok && st->world > 1 && r < st->world; r++) {  // every rank's data position
            int p[3] = {st->rank_shard[r], (int)(st->rank_pos[r] & 0x7fffffff), (int)(st->rank_pos[r] >> 31)};
            ok = fwrite(p, 4, 3, f) == 3;
        }
    }
    write_delay_us = 0;
    ok = fflush(f) == 0 && ok;
    if (ok) ok = fsync(fileno(f)) == 0;
    if (fclose(f) != 0 || !ok) {
        remove(tmp);
        DIE("is the disk full?", "failed writing checkpoint %s", tmp);
    }
    if (rename(tmp, path) != 0)
        DIE("check the output directory's permissions", "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char* slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = 0;
    else
        snprintf(dir, sizeof dir, ".");
    int dfd = open(dir, O_RDONLY);  // the rename itself reaches the disk with the directory
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

// Read a checkpoint's header into cfg (returns 1 if it also carries a training state).
static int peek_checkpoint(const char* path, Config* cfg) {
    FILE* f = fopen(path, "rb");
    if (!f)
        DIE("give an existing checkpoint with -e, or drop -r to start fresh", "cannot open checkpoint %s: %s", path,
            strerror(errno));
    int h[256];
    int got = fread(h, 4, 256, f) == 256;
    fclose(f);
    if (!got)
        DIE("the file was cut short; use an older checkpoint", "checkpoint %s is truncated (no full header)", path);
    if (h[0] != MODEL_MAGIC)
        DIE("is this a train_miras checkpoint?", "%s has magic %d, expected %d", path, h[0], MODEL_MAGIC);
    if (h[1] != 1) DIE("written by another version of train_miras", "%s has version %d, expected 1", path, h[1]);
    header_to_config(cfg, h);
    static char origin[4200];
    snprintf(origin, sizeof origin, "checkpoint %s: ", path);
    cfg_origin = origin;
    size_t nc = config_num_params(cfg);  // (the config is checked first: nothing is sized from a bad one)
    cfg_origin = "";
    if (nc != (size_t)(unsigned)h[19])
        DIE("the header is corrupt; use an older checkpoint", "checkpoint %s says %d params, its config makes %zu",
            path, h[19], nc);
    long np = h[19], need = 1024 + 4 * np, have = file_size(path);
    if (have < need)
        DIE("the file was cut short; use an older checkpoint", "checkpoint %s is truncated (%ld bytes, expected %ld)",
            path, have, need);
    if (have == need) return 0;
    if (have > need + 1024 + 8 * np) {  // a run of several ranks appends their data positions (3 int32 each)
        int s[256] = {0};
        FILE* g = fopen(path, "rb");
        int got = g && !fseek(g, need, SEEK_SET) && fread(s, 4, 256, g) == 256;
        if (g) fclose(g);
        if (got && s[0] == STATE_MAGIC && s[9] > 1 && have == need + 1024 + 8 * np + 12L * s[9]) return 1;
    }
    if (have != need + 1024 + 8 * np)
        DIE("the file was cut short; use an older checkpoint",
            "checkpoint %s is truncated or has trailing bytes (%ld bytes, expected %ld)", path, have,
            need + 1024 + 8 * np);
    return 1;
}
// Load the parameters (and, if st, the optimizer and data position) of a checkpoint into a built model.
static void load_checkpoint(Model* M, const char* path, TrainState* st) {
    FILE* f = fopen(path, "rb");
    if (!f) DIE(NULL, "cannot open checkpoint %s: %s", path, strerror(errno));
    int h[256];
    if (fread(h, 4, 256, f) != 256 || h[19] != (int)M->num_params) {
        fclose(f);
        DIE("the checkpoint changed while it was read; run again",
            "checkpoint %s does not match the model (%d params, model has %zu)", path, h[19], M->num_params);
    }
    if (!read_reals(f, M->params_memory, M->num_params)) {
        fclose(f);
        DIE("the file was cut short", "checkpoint %s is truncated", path);
    }
    if (st) {
        int s[256];
        if (fread(s, 4, 256, f) != 256 || s[0] != STATE_MAGIC) {
            fclose(f);
            DIE("this file holds a model only; start a run from it with -e instead of -r",
                "checkpoint %s has no training state", path);
        }
        if (s[1] != 1 || s[2] < 0 || s[3] < 0 || s[4] < 0 || s[5] < 0 || s[8] < 0) {
            fclose(f);
            DIE("the training state is corrupt; use an older checkpoint, or start from this one with -e",
                "checkpoint %s has a bad training state (version %d, step %d, shard %d, position %d/%d, AdamW step %d)",
                path, s[1], s[2], s[3], s[4], s[5], s[8]);
        }
        st->step = s[2];
        st->shard = s[3];
        st->pos = (long)s[4] | ((long)s[5] << 31);
        st->rng = (uint64_t)(uint32_t)s[6] | ((uint64_t)(uint32_t)s[7] << 32);
        M->adam_t = s[8];
        if (!M->m_memory) M->m_memory = (real*)xmalloc(M->num_params * sizeof(real));
        if (!M->v_memory) M->v_memory = (real*)xmalloc(M->num_params * sizeof(real));
        if (!read_reals(f, M->m_memory, M->num_params) || !read_reals(f, M->v_memory, M->num_params)) {
            fclose(f);
            DIE("the file was cut short", "checkpoint %s is truncated", path);
        }
        st->world =
            s[9] > 1 ? s[9]
                     : 1;  // older files hold 0: one process (peek_checkpoint checked the count against the file size)
        if (st->world >
            1) {  // the ranks' data positions must be what is left of the file: nothing is sized from a bad count
            long at = ftell(f), end = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
            if (at < 0 || end - at != 12L * st->world || fseek(f, at, SEEK_SET)) {
                fclose(f);
                DIE("the training state is corrupt; use an older checkpoint, or start from this one with -e",
                    "checkpoint %s has a bad rank count %d (data positions for %ld ranks follow)", path, st->world,
                    (end - at) / 12);
            }
            st->rank_shard = (int*)xmalloc(st->world * sizeof(int));
            st->rank_pos = (long*)xmalloc(st->world * sizeof(long));
            for (int r = 0; r < st->world; r++) {
                int p[3];
                if (fread(p, 4, 3, f) != 3) {
                    fclose(f);
                    DIE("the file was cut short", "checkpoint %s is truncated", path);
                }
                if (p[0] < 0 || p[1] < 0 || p[2] < 0) {
                    fclose(f);
                    DIE("the training state is corrupt; use an older checkpoint, or start from this one with -e",
                        "checkpoint %s has a bad data position for rank %d (shard %d)", path, r, p[0]);
                }
                st->rank_shard[r] = p[0];
                st->rank_pos[r] = (long)p[1] | ((long)p[2] << 31);
            }
        }
    }
    fclose(f);
}

// Token shards (llm.c): 256 int32 header (20240520, 1, ntok), then uint16 tokens. The loader reads
// B*T+1 consecutive tokens per batch; row r has inputs tokens[rT .. rT+T-1] and targets shifted by one.
typedef struct {
    glob_t g;
    int nfiles, B, T;
    int shard;
    long pos;
    long* ntok;
    uint16_t* buf;
    int* inputs;
    int* targets;
    uint8_t* mask;
    int has_mask;
} DataLoader;

static long shard_check(const char* path, int B, int T) {
    FILE* f = fopen(path, "rb");
    if (!f)
        DIE("check the -i / -j globs and the file's permissions", "cannot open shard %s: %s", path, strerror(errno));
    int h[256];
    int got = fread(h, 4, 256, f) == 256;
    fclose(f);
    if (!got) DIE("re-create it with data_prep/text2shards", "shard %s is truncated (no full 1024-byte header)", path);
    if (h[0] != SHARD_MAGIC)
        DIE("token shards are made by data_prep/text2shards (llm.c format)", "shard %s has magic %d, expected %d", path,
            h[0], SHARD_MAGIC);
    if (h[1] != 1)
        DIE("only llm.c's GPT-2 style uint16 shards are read", "shard %s has version %d, expected 1", path, h[1]);
    long n = h[2], sz = file_size(path);
    if (sz != 1024 + 2 * n)
        DIE("re-create it with data_prep/text2shards",
            "shard %s is truncated or corrupt (%ld bytes, header says %ld tokens = %ld bytes)", path, sz, n,
            1024 + 2 * n);
    if (n < (long)B * T + 1)
        DIE("use a smaller -b or -t, or more data", "shard %s has %ld tokens, fewer than one batch needs (B*T+1 = %ld)",
            path, n, (long)B * T + 1);
    return n;
}
static void mask_path(char* out, size_t cap, const char* shard) {
    snprintf(out, cap, "%s", shard);
    size_t n = strlen(out);
    if (n > 4 && !strcmp(out + n - 4, ".bin")) strcpy(out + n - 4, ".mask");
}
// An answer mask beside a shard (X.mask for X.bin): 1 if it is there and valid, 0 if there is none; an error if it
// is there but does not belong to the shard (a wrong header, size or count would silently misplace the answers).
static int mask_check(const char* path, long ntok) {
    long sz = file_size(path);
    if (sz < 0) return 0;
    FILE* f = fopen(path, "rb");
    int h[256] = {0};
    int got = f && fread(h, 4, 256, f) == 256;
    if (f) fclose(f);
    if (!got)
        DIE("re-create the shards and masks with data_prep/synth, or remove the .mask file",
            "answer mask %s is unreadable or has no full 1024-byte header", path);
    if (h[0] != MASK_MAGIC || h[1] != 1)
        DIE("re-create the shards and masks with data_prep/synth, or remove the .mask file",
            "answer mask %s has magic %d version %d, expected %d version 1", path, h[0], h[1], MASK_MAGIC);
    if (h[2] != ntok || sz != 1024 + ntok)
        DIE("re-create the shards and masks with data_prep/synth, or remove the .mask file",
            "answer mask %s does not match its shard (%d entries, %ld bytes; the shard has %ld tokens)", path, h[2], sz,
            ntok);
    return 1;
}
static void dataloader_init(DataLoader* dl, const char* pattern, int B, int T) {
    memset(dl, 0, sizeof *dl);
    dl->B = B;
    dl->T = T;
    if (glob(pattern, 0, NULL, &dl->g) != 0 || dl->g.gl_pathc == 0)
        DIE("make the default corpus with `make data`, or shards with data_prep/text2shards",
            "no token shards match '%s'", pattern);
    dl->nfiles = (int)dl->g.gl_pathc;
    dl->ntok = (long*)xmalloc(dl->nfiles * sizeof(long));
    dl->has_mask = 1;
    for (int i = 0; i < dl->nfiles; i++) {
        dl->ntok[i] = shard_check(dl->g.gl_pathv[i], B, T);
        char mp[4096];
        mask_path(mp, sizeof mp, dl->g.gl_pathv[i]);
        if (!mask_check(mp, dl->ntok[i])) dl->has_mask = 0;
    }
    dl->buf = (uint16_t*)xmalloc(((size_t)B * T + 1) * sizeof(uint16_t));
    dl->inputs = (int*)xmalloc((size_t)B * T * sizeof(int));
    dl->targets = (int*)xmalloc((size_t)B * T * sizeof(int));
    dl->mask = (uint8_t*)xmalloc((size_t)B * T + 1);
}
static void dataloader_reset(DataLoader* dl) {
    dl->shard = 0;
    dl->pos = 0;
}
static void dataloader_next(DataLoader* dl) {
    long need = (long)dl->B * dl->T + 1;
    if (dl->pos + need > dl->ntok[dl->shard]) {
        dl->shard = (dl->shard + 1) % dl->nfiles;
        dl->pos = 0;
    }
    const char* path = dl->g.gl_pathv[dl->shard];
    FILE* f = fopen(path, "rb");
    int ok = f && !fseek(f, 1024 + 2 * dl->pos, SEEK_SET) && fread(dl->buf, 2, need, f) == (size_t)need;
    if (f) fclose(f);
    if (!ok) DIE("was the shard changed or removed during the run?", "failed reading shard %s", path);
    if (dl->has_mask) {
        char mp[4096];
        mask_path(mp, sizeof mp, path);
        FILE* g = fopen(mp, "rb");
        ok = g && !fseek(g, 1024 + dl->pos, SEEK_SET) && fread(dl->mask, 1, need, g) == (size_t)need;
        if (g) fclose(g);
        if (!ok) DIE("was the mask changed or removed during the run?", "failed reading mask %s", mp);
    }
    for (long i = 0; i < need - 1; i++) {
        dl->inputs[i] = dl->buf[i];
        dl->targets[i] = dl->buf[i + 1];
    }
    dl->pos += need - 1;
}
// move on by n batches without reading them, exactly as n calls of dataloader_next would (the batches of the
// other data-parallel ranks, section 6b)
static void dataloader_skip(DataLoader* dl, long n) {
    long need = (long)dl->B * dl->T + 1;
    for (long i = 0; i < n; i++) {
        if (dl->pos + need > dl->ntok[dl->shard]) {
            dl->shard = (dl->shard + 1) % dl->nfiles;
            dl->pos = 0;
        }
        dl->pos += need - 1;
    }
}
static void dataloader_free(DataLoader* dl) {
    globfree(&dl->g);
    free(dl->ntok);
    free(dl->buf);
    free(dl->inputs);
    free(dl->targets);
    free(dl->mask);
}

// Tokenizer (llm.c): 256 uint32 header (20240328, 2, vocab, eot), then per token a uint8 length and bytes.
typedef struct {
    int n, eot;
    char** tok;
} Tokenizer;
static void tokenizer_free(Tokenizer* tk) {
    for (int i = 0; tk->tok && i < tk->n; i++) free(tk->tok[i]);
    free(tk->tok);
    tk->tok = NULL;
    tk->n = 0;
}
// Returns 1 when loaded, 0 when there is no such file (-z none: samples print as ids). A file that is there but is
// not a valid tokenizer is an error; its vocab is checked against the file size before anything is allocated.
static int tokenizer_load(Tokenizer* tk, const char* path) {
    memset(tk, 0, sizeof *tk);
    tk->eot = -1;
    FILE* f = path ? fopen(path, "rb") : NULL;
    if (!f) return 0;
    const char* hint = "give the tokenizer file written with the shards with -z, or -z none";
    uint32_t h[256];
    long sz = file_size(path);
    if (fread(h, 4, 256, f) != 256 || h[0] != TOKENIZER_MAGIC || (h[1] != 1 && h[1] != 2)) {
        fclose(f);
        DIE(hint, "%s is not a tokenizer file (no llm.c header with magic %d, version 1 or 2)", path, TOKENIZER_MAGIC);
    }
    if (h[2] < 1 || h[2] > 65536 || (long)h[2] > sz - 1024) {  // every token takes at least its length byte
        fclose(f);
        DIE(hint, "tokenizer %s has a bad vocab size %u (1..65536, at most one per byte of its %ld-byte body)", path,
            h[2], sz - 1024);
    }
    tk->n = (int)h[2];
    tk->eot = h[1] >= 2 ? (int)h[3] : -1;
    tk->tok = (char**)xmalloc(tk->n * sizeof(char*));
    for (int i = 0; i < tk->n; i++) {
        unsigned char len;
        int ok = fread(&len, 1, 1, f) == 1;
        if (ok) {
            tk->tok[i] = (char*)xmalloc(len + 1);
            ok = fread(tk->tok[i], 1, len, f) == len;
        }
        if (!ok) {
            fclose(f);
            tokenizer_free(tk);
            DIE(hint, "tokenizer %s is truncated (in token %d of %u)", path, i, h[2]);
        }
    }
    fclose(f);
    return 1;
}
// print a token as text: through the tokenizer, or as a byte when the model is byte-level, else as <id>
static void print_token(const Tokenizer* tk, int id, int V) {
    const char* s = NULL;
    char one[2] = {0, 0};
    if (tk->n && id < tk->n)
        s = tk->tok[id];
    else if (V == 256) {
        one[0] = (char)id;
        s = one;
    }
    if (!s) {
        printf("<%d>", id);
        return;
    }
    for (const unsigned char* p = (const unsigned char*)s; *p; p++)
        if (*p >= 32 || *p == '\n' || *p == '\t' || *p >= 128)
            putchar(*p);
        else
            printf("\\x%02x", *p);
}

// sample from softmax(logits[:V] / temperature); returns a token id
// (each exp once, kept for the cumulative pass: at V = 50257 the two passes of exp were ~0.4 ms per token, a sixth
// of the GPU decoder's whole per-token time in run 7; the same values summed in the same order)
static int sample_token(const real* logits, int V, real temperature, uint64_t* rng) {
    static double* ex = NULL;
    static int ex_n = 0;
    if (V > ex_n) {
        free(ex);
        ex = (double*)xmalloc((size_t)V * sizeof(double));
        ex_n = V;
    }
    real mx = -1e30;
    for (int i = 0; i < V; i++)
        if (logits[i] > mx) mx = logits[i];
    double s = 0;
    for (int i = 0; i < V; i++) {
        ex[i] = exp((logits[i] - mx) / temperature);
        s += ex[i];
    }
    double u = rng_f64(rng) * s, cum = 0;
    for (int i = 0; i < V; i++) {
        cum += ex[i];
        if (u < cum) return i;
    }
    return V - 1;
}

// validation: mean loss over nb batches from the start of the val shards; with answer masks
// (synthetic tasks) also the accuracy of argmax predictions on the answer tokens only
static real evaluate(Model* M, DataLoader* dl, int nb, real* acc) {
    dataloader_reset(dl);
    double loss = 0;
    long right = 0, total = 0;
    int N = dl->B * dl->T, V = M->cfg.V, Vp = M->cfg.Vp;
    const uint8_t* keep = M->loss_mask;
    for (int i = 0; i < nb; i++) {
        dataloader_next(dl);
        if (M->loss_mask) M->loss_mask = dl->mask + 1;  // answers-only runs score val on answers too
        model_forward(M, dl->inputs, dl->targets, dl->B, dl->T);
        loss += M->mean_loss;
        if (dl->has_mask)
            for (int n = 0; n < N; n++) {
                if (!dl->mask[n + 1]) continue;  // mask marks the answer token; it is the target of position n
                const real* lg = M->acts.logits + (size_t)n * Vp;
                int best = 0;
                for (int v = 1; v < V; v++)
                    if (lg[v] > lg[best]) best = v;
                right += best == dl->targets[n];
                total++;
            }
    }
    *acc = total ? (real)right / total : -1;
    M->loss_mask = keep;
    return (real)(loss / nb);
}

static void generate(Model* M, const Tokenizer* tk, const int* prompt, int np, int ngen, uint64_t* rng) {
    Decoder dec;
    decoder_init(&dec, M);
    const real* logits = NULL;
    for (int i = 0; i < np; i++) {
        logits = decoder_step(&dec, prompt[i]);
        print_token(tk, prompt[i], M->cfg.V);
    }
    for (int i = 0; i < ngen; i++) {
        int t = sample_token(logits, M->cfg.V, 1.0, rng);
        print_token(tk, t, M->cfg.V);
        fflush(stdout);
        if (i + 1 < ngen) logits = decoder_step(&dec, t);
    }
    printf("\n");
    decoder_free(&dec);
}

// The warmup's default: 20 steps, MAL 60. MAL's first attention reads RMSNorm(x + m), and early in training the
// memory's output m outgrows the token embedding x there, which turns that attention off. Taken at the peak lr (step
// ~25 with 20 warmup steps) the turn was a loss cliff in 2 of 8 seeds at T = 4096; inside a 60-step warmup it is a
// bump (one step above norm 10 in 16 seeds). README "Training at T = 4096, eight seeds".
static int default_warmup(const Config* c) { return c->arch == ARCH_MAL ? 60 : 20; }
// linear warmup, then cosine decay to final_frac * lr (SPEC §8)
static real lr_at(long step, long max_steps, real lr, int warmup, real final_frac) {
    if (step < warmup) return lr * (step + 1) / warmup;
    if (max_steps <= warmup) return lr;
    double p = (double)(step - warmup) / (max_steps - warmup), c = 0.5 * (1 + cos(3.141592653589793 * p));
    return (real)(lr * (final_frac + (1 - final_frac) * c));
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
// norm-relative error |a - b| / |b| (NaN if either holds one), as the checks measure it (test_miras.c; train_miras.cu's
// --decode-test)
static double relerr_rr(const real* a, const real* b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        num += e * e;
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1e-300));
}

// Dump mode, shared with train_miras.cu so that the two can be diffed: IN is a fixture-layout file (model header
// with B, T, nsteps and the AdamW settings in slots 100..108, then float32 params and int32 tokens; anything after
// is ignored). OUT: 256 int32 (20261104, 1, B, T, V, num_params, nsteps), then float32 logits (B*T*V), loss, every
// gradient, the losses of nsteps AdamW steps on the batch (the first is the loss above), and the params after them.
#define DUMP_MAGIC 20261104
#define FIXTURE_MAGIC 20261103
#define DUMP_MAX_STEPS 1000  // AdamW steps of a dump run
#define DUMP_MAX_FLOATS (1.0 * (1 << 28))  // the activations of its batch (1 GiB in float)
static const char* const FIXTURE_HINT = "give a fixture file from dev/fixtures (or one from train_miras --make-input)";
// Check a fixture-layout header (h: its 256 ints) against the size of its file before anything is sized from it:
// the config, the batch and step counts, the parameter count, and that the params and tokens are there. Fills cfg;
// returns the byte offset where the tokens end (the reference outputs of dev/reference.py follow).
static long fixture_check(const char* in, const int* h, Config* cfg, long size) {
    if (h[0] != FIXTURE_MAGIC || h[1] != 1)
        DIE(FIXTURE_HINT, "%s is not a fixture-layout file (magic %d version %d, expected %d version 1)", in, h[0],
            h[1], FIXTURE_MAGIC);
    header_to_config(cfg, h);
    int B = h[100], T = h[101], nsteps = h[102];
    if (B < 1 || B > 65536 || T < 1 || T > 1048576 || nsteps < 0 || nsteps > DUMP_MAX_STEPS || (long)B * T > (1L << 24))
        DIE(FIXTURE_HINT, "%s has a bad batch header: B %d, T %d, nsteps %d (B*T at most 2^24, nsteps 0..%d)", in, B, T,
            nsteps, DUMP_MAX_STEPS);
    static char origin[4200];
    snprintf(origin, sizeof origin, "%s: ", in);
    cfg_origin = origin;
    size_t np = config_num_params(cfg);
    cfg_origin = "";
    if (np != (size_t)(unsigned)h[19]) DIE(FIXTURE_HINT, "%s says %d params, its config makes %zu", in, h[19], np);
    long end = 1024 + 4 * (long)np + 4L * B * (T + 1);
    if (size < end) DIE(FIXTURE_HINT, "%s is truncated (%ld bytes; its params and tokens need %ld)", in, size, end);
    if (model_act_floats(cfg, B, T) > DUMP_MAX_FLOATS)
        DIE("use a smaller batch in the input",
            "%s: a batch of B %d, T %d for this model needs %.3g floats of activations, above the %.3g of dump mode",
            in, B, T, model_act_floats(cfg, B, T), DUMP_MAX_FLOATS);
    return end;
}
// Read a fixture-layout file (dump mode, here and in train_miras.cu): the header into h and cfg, the params into M
// (built here), and the B x (T+1) tokens as inputs and targets (B*T each, allocated here).
static void dump_input_read(const char* in, Model* M, Config* cfg, int* h, int** inp, int** tgt) {
    FILE* f = fopen(in, "rb");
    if (!f) DIE(FIXTURE_HINT, "cannot open dump input %s: %s", in, strerror(errno));
    int got = fread(h, 4, 256, f) == 256;
    long size = file_size(in);
    if (!got) {
        fclose(f);
        DIE(FIXTURE_HINT, "dump input %s is truncated (no full 1024-byte header)", in);
    }
    fclose(f);
    fixture_check(in, h, cfg, size);
    int B = h[100], T = h[101];
    model_build(M, cfg);
    size_t N = (size_t)B * T;
    int* tok = (int*)xmalloc(((size_t)B * (T + 1)) * sizeof(int));
    *inp = (int*)xmalloc(N * sizeof(int));
    *tgt = (int*)xmalloc(N * sizeof(int));
    f = fopen(in, "rb");
    int ok = f && !fseek(f, 1024, SEEK_SET) && read_reals(f, M->params_memory, M->num_params) &&
             fread(tok, 4, (size_t)B * (T + 1), f) == (size_t)B * (T + 1);
    if (f) fclose(f);
    if (!ok) {
        free(tok);
        DIE("was the file changed while it was read?", "dump input %s is truncated", in);
    }
    for (int r = 0; r < B; r++)
        for (int t = 0; t < T; t++) {
            (*inp)[r * T + t] = tok[r * (T + 1) + t];
            (*tgt)[r * T + t] = tok[r * (T + 1) + t + 1];
        }
    free(tok);
}
static void dump_run(const char* in, const char* out) {
    int h[256];
    Config cfg;
    Model M;
    int *inp, *tgt;
    dump_input_read(in, &M, &cfg, h, &inp, &tgt);
    int B = h[100], T = h[101], nsteps = h[102];
    real lr = bits_f32(h[103]), b1 = bits_f32(h[104]), b2 = bits_f32(h[105]), eps = bits_f32(h[106]),
         wd = bits_f32(h[107]), clip = bits_f32(h[108]);
    size_t N = (size_t)B * T;
    FILE* g = fopen(out, "wb");
    if (!g) DIE("check that the output directory exists and is writable", "cannot write %s: %s", out, strerror(errno));
    int oh[256] = {0};
    oh[0] = DUMP_MAGIC;
    oh[1] = 1;
    oh[2] = B;
    oh[3] = T;
    oh[4] = cfg.V;
    oh[5] = (int)M.num_params;
    oh[6] = nsteps;
    fwrite(oh, 4, 256, g);
    real* losses = (real*)xmalloc((nsteps + 1) * sizeof(real));
    for (int s = 0; s <= nsteps; s++) {
        model_forward(&M, inp, tgt, B, T);
        model_zero_grad(&M);
        model_backward(&M, 1);
        if (s == 0) {
            for (size_t n = 0; n < N; n++) write_reals(g, M.acts.logits + n * cfg.Vp, cfg.V);
            write_reals(g, &M.mean_loss, 1);
            write_reals(g, M.grads_memory, M.num_params);
        }
        losses[s] = M.mean_loss;
        if (s == nsteps) break;
        grad_clip(&M, grad_norm(&M), clip);
        model_update(&M, lr, b1, b2, eps, wd);
    }
    write_reals(g, losses, nsteps);
    write_reals(g, M.params_memory, M.num_params);
    if (fclose(g) != 0) DIE("is the disk full?", "failed writing %s", out);
    free(losses);
    free(inp);
    free(tgt);
    model_free(&M);
}

// --make-input OUT (train_miras and train_miras_cu): a fixture-layout dump input for the model of the flags, freshly
// initialised (model_init with -y) or the weights of -e CKPT (a trained model), with random tokens; B, T from -b, -t;
// 3 AdamW steps at lr 1e-3. For diffing two builds in dump mode (-J) at shapes and presets that dev/fixtures does not
// cover: CPU against GPU (dev/test_gpu.sh), float against double at long T (dev/test_precision.sh).
static void make_input(const char* out, const Config* cfg, const char* load_path, int B, int T, uint64_t seed) {
    if (model_act_floats(cfg, B, T) > DUMP_MAX_FLOATS)  // (what fixture_check refuses when -J reads it)
        DIE("use a smaller batch: -b 1, or a smaller -t",
            "a batch of B %d, T %d for this model needs %.3g floats of activations, above the %.3g of dump mode", B, T,
            model_act_floats(cfg, B, T), DUMP_MAX_FLOATS);
    Model M;
    model_build(&M, cfg);
    if (load_path)
        load_checkpoint(&M, load_path, NULL);
    else
        model_init(&M, seed);
    int h[256] = {0};
    h[0] = FIXTURE_MAGIC;
    h[1] = 1;
    config_to_header(h, cfg, M.num_params);
    h[100] = B;
    h[101] = T;
    h[102] = 3;
    h[103] = f32_bits(1e-3f);
    h[104] = f32_bits(0.9f);
    h[105] = f32_bits(0.95f);
    h[106] = f32_bits(1e-8f);
    h[107] = f32_bits(0.1f);
    h[108] = f32_bits(1.0f);
    FILE* f = fopen(out, "wb");
    if (!f) DIE(NULL, "cannot write %s", out);
    fwrite(h, 4, 256, f);
    write_reals(f, M.params_memory, M.num_params);
    uint64_t r = seed * 0x9E3779B97F4A7C15ULL + 7;
    for (size_t i = 0; i < (size_t)B * (T + 1); i++) {
        int t = (int)(rng_u64(&r) % (uint64_t)cfg->V);
        fwrite(&t, 4, 1, f);
    }
    if (fclose(f) != 0) DIE(NULL, "failed writing %s", out);
    model_free(&M);
}

// ---- the command line and the run's files, shared with train_miras.cu (whose main differs only in the model calls)
typedef struct {
    const char *train_glob, *val_glob, *tok_path, *out_dir, *init_ckpt, *preset, *pattern, *dump_in, *dump_out;
    int B, T, V, D, L, H, E, F, chunk, gate_rank, warmup, val_every, val_batches, sample_every, gen_tokens, ckpt_every,
        resume, answers_only;
    long tokens_per_step, max_steps, stop_at;
    real lr, final_frac, wd, clip;
    uint64_t seed;
    unsigned given;  // which model flags were given (a checkpoint's config must agree with those)
    int anchor;
    float eta_max;  // -Z, -X: the preset's unless given
    int max_skip;  // -N: steps with a non-finite loss or gradient that may be skipped before stopping
    int window;  // -W: the window of 'S' layers
    int zero;  // -K 1: shard the AdamW moments over the data-parallel ranks (ZeRO stage 1)
    int lat_k, lat_ablate,
        lat_mu;  // -w, -Y, -B: Lattice's checkpoint interval, ablation bits, forgetting gate (-1: the preset's)
    int npers, seg;
    const char* mem_preset;  // -M N_p, -C MAC segment, -Q the memory preset of mal / mag / mac (section 4b)
    int omega;  // -G: the Omega window c (README "ATLAS"); the preset's unless given
    int poly;  // -I: poly features 0/1 (README "ATLAS"); the preset's unless given
    int algo;  // -U: the inner algorithm ALGO_* (0 gd, 1 momentum, 2 muon); the preset's unless given
    int gated;  // -T: the gated deep memory 0/1 (ATLAS++); the preset's unless given
} Args;
enum {
    G_P = 1,
    G_V = 2,
    G_D = 4,
    G_L = 8,
    G_H = 16,
    G_E = 32,
    G_F = 64,
    G_K = 128,
    G_PAT = 256,
    G_R = 512,
    G_Z = 1024,
    G_X = 2048,
    G_W = 4096,
    G_M = 8192,
    G_C = 16384,
    G_Q = 32768,
    G_G = 1 << 20,
    G_I = 1 << 21,
    G_U = 1 << 22,
    G_T = 1 << 23
};

static const char* const USAGE =  // a printf format: %s is PRESETS
    " data:  -i train shards glob [build/data/repo_train_*.bin]  -j val shards glob [build/data/repo_val_*.bin]\n"
    "        -z tokenizer file [build/data/repo_tokenizer.bin]\n"
    " model: -p preset (%s) [titans]\n"
    "        -V vocab [256] -D width [128] -L layers [4] -H heads [4] -E memory expansion [2]\n"
    "        -F SwiGLU width [8D/3 rounded up to 64] -k chunk size b [preset]\n"
    "        -P layer pattern, a letter per layer: M memory, A attention, S sliding-window attention [preset: all M;\n"
    "           transformer all A; <preset>-H MS repeated] -W window of the S layers [512]\n"
    "        -R rank of channel-wise eta/delta gates, 0 = per head [0]\n"
    "        -Z 1 anchored retention (the state decays toward P_0), 0 toward zero [preset] -X eta_max [preset]\n"
    "        mal, mag, mac: -M persistent tokens N_p per layer [16] -Q memory preset [titans]; mal, mag: -W window of\n"
    "           their attention [512]; mac: -C segment length, a multiple of -k [4b]\n"
    "        -G Omega rule window c, 1 = off (omega, SPEC 5.5) [preset: omeganet, atlas 8, else 1]\n"
    "        -I 1 degree-2 polynomial features on q, k (poly, SPEC 5.6), 2 the infinite exp map phi* (DT, DOT: W2 a\n"
    "           normalised kernel sum), 3 phi* with bounded W2 steps, 0 off\n"
    "           [preset: omeganet, atlas 1, deep_transformer, dot 3, else 0]\n"
    "        -U inner algorithm: 0 gd, 1 momentum, 2 muon (token-level, SPEC 5.7), 3 chunk-level muon\n"
    "           [preset: titans 1, atlas, atlas_pp 2, atlas_chunk 3, else 0]\n"
    "        -T 1 gated deep memory x + LN(W1 (GELU(W2 x) * W3 x)) (ATLAS++, SPEC 4; a deep memory,\n"
    "           any -U, not the moneta / memora retentions), 0 off [atlas_pp 1]\n"
    " train: -b batch [8] -t seq len [128] -d tokens per step, via gradient accumulation [B*T]\n"
    "        -l lr [3e-3] -u warmup steps [20, mal 60] -q final lr fraction [0.1] -c weight decay [0.1] -a grad clip [1.0]\n"
    "        -x steps [300] -y seed [1337] -S stop after this step, as if preempted (the schedule still runs to -x)\n"
    " eval:  -v val every [50] -m val batches [8] -s sample every [0 = at the end] -g sample tokens [128]\n"
    " files: -o output dir for log.txt and ckpt.bin [build/run] -n checkpoint every [100] -e init from checkpoint\n"
    "        -r 1 resume from <out>/ckpt.bin (model, optimizer and data position; bit-for-bit)\n"
    " -x 0 with -e evaluates once (loss, and answer accuracy when the val shards have .mask files)\n"
    " -A 1 train (and score val loss) on answer tokens only, from the shards' .mask files (synthetic tasks)\n"
    " -N skip up to N steps whose loss or gradient is not finite (no update: weights and AdamW moments stay), then stop [0]\n"
    " -K 1 with several ranks (mpirun): each rank keeps and updates only its 1/ranks share of the AdamW moments\n"
    "      (ZeRO stage 1), then the ranks gather the updated weights; same results as -K 0 [0]\n"
    " Lattice (-p lattice, lattice_enc, lattice_sim): -w keep the state every k tokens, the backward recomputes between [64]\n"
    "        -Y ablation bits: 1 no orthogonal term, 2 no renormalisation (3: DEC is the delta rule) [0]\n"
    "        -B 1 a learned forgetting gate mu (sigmoid, the a gate's weights), 0 mu = 1 [0]\n"
    " -J IN -O OUT: dump mode (logits, loss, gradients, AdamW steps of a fixture-layout file), to diff CPU and GPU\n";

// A flag's value must be a whole number (or a real): "-x abc" or "-l 1e-3x" is an error, not 0.
static long arg_long(const char* flag, const char* v, long lo, long hi) {
    char* end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno)
        DIE("flags take numbers, e.g. -x 100", "flag %s: '%s' is not a whole number", flag, v);
    if (x < lo || x > hi)
        DIE("see train_miras -h for what the flag takes", "flag %s: %s is out of range [%ld, %ld]", flag, v, lo, hi);
    return x;
}
// every integer flag is a count, a size or a switch: none is negative
static int arg_int(const char* flag, const char* v) { return (int)arg_long(flag, v, 0, INT_MAX); }
// the real flags (-l, -q, -c, -a, -X) are rates, fractions and bounds: finite and not negative
static double arg_real(const char* flag, const char* v) {
    char* end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x)) DIE("e.g. -l 3e-3", "flag %s: '%s' is not a finite number", flag, v);
    if (x < 0) DIE("see train_miras -h for what the flag takes", "flag %s: %s is negative", flag, v);
    return x;
}

// Parse the flags (pairs like -x 100). extra, if given, is asked first and returns 1 for a flag it takes
// (the GPU trainer's own flags); usage is printed for -h and for a bad flag.
static void args_parse(Args* a, int argc, char** argv, void (*usage)(void),
                       int (*extra)(const char* flag, const char* value)) {
    Args d = {"build/data/repo_train_*.bin",
              "build/data/repo_val_*.bin",
              "build/data/repo_tokenizer.bin",
              "build/run",
              NULL,
              "titans",
              NULL,
              NULL,
              NULL,
              8,
              128,
              256,
              128,
              4,
              4,
              2,
              0,
              0,
              -1,
              -1,
              50,
              8,
              0,
              128,
              100,
              0,
              0,
              0,
              300,
              -1,
              (real)3e-3,
              (real)0.1,
              (real)0.1,
              (real)1.0,
              1337,
              0,
              -1,
              0,
              0,
              512};
    *a = d;
    a->lat_k = a->lat_ablate = a->lat_mu = -1;
    a->npers = -1;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage();
            exit(0);
        }
        if (i + 1 >= argc) {
            usage();
            DIE("flags come in pairs like -x 100", "flag '%s' has no value", argv[i]);
        }
        const char* v = argv[i + 1];
        if (extra && extra(argv[i], v)) continue;
        if (argv[i][0] != '-' || strlen(argv[i]) != 2) {
            usage();
            DIE("flags come in pairs like -x 100", "bad argument '%s'", argv[i]);
        }
        switch (argv[i][1]) {
            // clang-format off
            case 'i': a->train_glob = v; break; case 'j': a->val_glob = v; break; case 'z': a->tok_path = v; break;
            case 'o': a->out_dir = v; break; case 'e': a->init_ckpt = v; break; case 'r': a->resume = (int)arg_long(argv[i], v, 0, 1); break;
            case 'p': a->preset = v; a->given |= G_P; break; case 'P': a->pattern = v; a->given |= G_PAT; break;
            case 'V': a->V = arg_int(argv[i], v); a->given |= G_V; break; case 'D': a->D = arg_int(argv[i], v); a->given |= G_D; break;
            case 'L': a->L = arg_int(argv[i], v); a->given |= G_L; break; case 'H': a->H = arg_int(argv[i], v); a->given |= G_H; break;
            case 'E': a->E = arg_int(argv[i], v); a->given |= G_E; break; case 'F': a->F = arg_int(argv[i], v); a->given |= G_F; break;
            case 'k': a->chunk = arg_int(argv[i], v); a->given |= G_K; break; case 'R': a->gate_rank = arg_int(argv[i], v); a->given |= G_R; break;
            case 'Z': a->anchor = arg_int(argv[i], v); a->given |= G_Z; break; case 'X': a->eta_max = arg_real(argv[i], v); a->given |= G_X; break;
            case 'N': a->max_skip = arg_int(argv[i], v); break; case 'W': a->window = arg_int(argv[i], v); a->given |= G_W; break;
            case 'K': a->zero = arg_int(argv[i], v); break;
            case 'w': a->lat_k = arg_int(argv[i], v); break; case 'Y': a->lat_ablate = arg_int(argv[i], v); break; case 'B': a->lat_mu = arg_int(argv[i], v); break;  // Lattice
            case 'M': a->npers = arg_int(argv[i], v); a->given |= G_M; break; case 'C': a->seg = arg_int(argv[i], v); a->given |= G_C; break;
            case 'Q': a->mem_preset = v; a->given |= G_Q; break;
            case 'G': a->omega = arg_int(argv[i], v); a->given |= G_G; break; case 'I': a->poly = arg_int(argv[i], v); a->given |= G_I; break;
            case 'U': a->algo = arg_int(argv[i], v); a->given |= G_U; break; case 'T': a->gated = arg_int(argv[i], v); a->given |= G_T; break;
            case 'J': a->dump_in = v; break; case 'O': a->dump_out = v; break; case 'A': a->answers_only = (int)arg_long(argv[i], v, 0, 1); break;
            case 'b': a->B = arg_int(argv[i], v); break; case 't': a->T = arg_int(argv[i], v); break; case 'd': a->tokens_per_step = arg_long(argv[i], v, 0, LONG_MAX); break;
            case 'l': a->lr = arg_real(argv[i], v); break; case 'u': a->warmup = arg_int(argv[i], v); break; case 'q': a->final_frac = arg_real(argv[i], v); break;
            case 'c': a->wd = arg_real(argv[i], v); break; case 'a': a->clip = arg_real(argv[i], v); break; case 'x': a->max_steps = arg_long(argv[i], v, 0, LONG_MAX); break;
            case 'S': a->stop_at = arg_long(argv[i], v, 0, LONG_MAX); break; case 'y': a->seed = (unsigned long long)arg_long(argv[i], v, 0, LONG_MAX); break;
            case 'v': a->val_every = arg_int(argv[i], v); break; case 'm': a->val_batches = arg_int(argv[i], v); break;
            case 's': a->sample_every = arg_int(argv[i], v); break; case 'g': a->gen_tokens = arg_int(argv[i], v); break; case 'n': a->ckpt_every = arg_int(argv[i], v); break;
            default: usage(); DIE("see the flags above", "unknown flag %s", argv[i]);
                // clang-format on
        }
    }
    if (a->final_frac > 1)
        DIE("-q is the final lr as a fraction of -l, in [0, 1]", "flag -q: %g is above 1", a->final_frac);
    if (a->dump_in || a->dump_out) {
        if (!a->dump_in || !a->dump_out)
            DIE("give both -J IN and -O OUT", "dump mode needs an input and an output file");
        return;
    }
    if (a->B < 1 || a->T < 1 || a->max_steps < 0)
        DIE("use positive -b, -t and -x", "bad batch %d, length %d or steps %ld", a->B, a->T, a->max_steps);
    if (a->zero != 0 && a->zero != 1)
        DIE("-K 0 (every rank keeps all AdamW moments) or -K 1 (sharded, ZeRO stage 1)", "bad -K %d", a->zero);
    if (a->tokens_per_step <= 0) a->tokens_per_step = (long)a->B * a->T * g_world;  // data parallel: B*T per rank
    if (a->tokens_per_step % ((long)a->B * a->T))
        DIE("make -d a multiple of B*T", "tokens per step %ld is not a multiple of B*T = %d", a->tokens_per_step,
            a->B * a->T);
}

// the model the flags describe (preset, then sizes)
static Config args_config(const Args* a) {
    Config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (!preset_config(&cfg, a->preset)) DIE(PRESETS, "unknown preset '%s'", a->preset);
    if (a->mem_preset) {  // -Q: the memory of mal / mag / mac (section 4b)
        int arch = cfg.arch;
        size_t n = strlen(a->mem_preset);
        if (!arch)
            DIE("-Q goes with -p mal, mag or mac", "-Q %s without a Titans arrangement (preset '%s')", a->mem_preset,
                a->preset);
        if (!strcmp(a->mem_preset, "transformer") || (n >= 2 && !strcmp(a->mem_preset + n - 2, "-H")) ||
            !strcmp(a->mem_preset, "mal") || !strcmp(a->mem_preset, "mag") || !strcmp(a->mem_preset, "mac") ||
            !preset_config(&cfg, a->mem_preset))
            DIE("name a memory preset: titans, moneta, yaad, memora, ttt_mlp, linear_attn, deltanet, gated_deltanet, "
                "omeganet, atlas, atlas_pp, atlas_chunk; mal, mag also lattice, lattice_enc, lattice_sim, "
                "deep_transformer, dot",
                "-Q %s is not a memory preset", a->mem_preset);
        cfg.arch = arch;
    }
    if (cfg.arch) {
        cfg.npers = (a->given & G_M) ? a->npers : 16;
        if (cfg.arch == ARCH_MAC) cfg.seg = a->seg;
    }
    if (cfg.arch != ARCH_MAC && (a->given & G_C))
        DIE("-C goes with -p mac", "a MAC segment length -C without MAC (preset '%s')", a->preset);
    if (!cfg.arch && (a->given & G_M))
        DIE("-M goes with -p mal, mag or mac", "persistent tokens -M without a Titans arrangement (preset '%s')",
            a->preset);
    cfg.V = a->V;
    cfg.Vp = (a->V + 63) / 64 * 64;
    cfg.D = a->D;
    cfg.L = a->L;
    cfg.H = a->H;
    cfg.E = a->E;
    cfg.K = 4;
    cfg.F = a->F ? a->F : ((8 * a->D / 3) + 63) / 64 * 64;
    if (a->chunk) cfg.b = a->chunk;
    if (a->gate_rank >= 0) cfg.gate_rank = a->gate_rank;
    if (a->given & G_Z) cfg.anchor = a->anchor;
    preset_size_defaults(&cfg);
    if (a->given & G_X) cfg.eta_max = a->eta_max;
    if (a->lat_mu > 1 || a->lat_mu < -1)
        DIE("-B is 0 (mu = 1) or 1 (a learned forgetting gate mu)", "bad -B %d", a->lat_mu);
    int lat_flags =
        a->lat_k >= 0 || a->lat_ablate >= 0 || a->lat_mu >= 0;  // (with a checkpoint to load: args_resolve checks them)
    if (lat_flags && !cfg.lattice && !a->resume && !a->init_ckpt)
        DIE("-w, -Y and -B are for the lattice presets", "Lattice flag given with preset '%s'", a->preset);
    if (cfg.lattice && a->lat_k >= 0) cfg.lat_k = a->lat_k;
    if (cfg.lattice && a->lat_ablate >= 0) cfg.lat_ablate = a->lat_ablate;
    if (cfg.lattice && a->lat_mu >= 0) cfg.gate_a = a->lat_mu;
    if (a->given & G_G) {
        if (a->omega < 1 || a->omega > 64) DIE("-G is the Omega window c in 1..64 (1: off)", "bad -G %d", a->omega);
        cfg.omega = a->omega;
    }
    if (a->given & G_I) {  // -I: the feature map on q, k: 0 none, 1 poly (SPEC 5.6), 2 phi*, 3 phi* with bounded steps
        if (a->poly > 3) DIE("-I is 0 (none), 1 (poly), 2 (phi*) or 3 (phi*, bounded W2 steps)", "bad -I %d", a->poly);
        cfg.poly = a->poly == 1;
        cfg.phistar = a->poly >= 2 ? a->poly - 1 : 0;
    }
    if (a->given & G_U) {
        if (a->algo > ALGO_MUON_CHUNK)
            DIE("-U is 0 (gd), 1 (momentum), 2 (muon) or 3 (chunk-level muon)", "bad -U %d", a->algo);
        cfg.algo = a->algo;
    }
    if (a->given & G_T) {
        if (a->gated > 1) DIE("-T is 0 or 1", "bad -T %d", a->gated);
        cfg.gated = a->gated;
    }
    int L = a->L < 128 ? (a->L > 0 ? a->L : 0) : 128;
    if (a->pattern)
        snprintf(cfg.pattern, sizeof cfg.pattern, "%s", a->pattern);
    else
        preset_pattern(cfg.pattern, a->preset, L);
    cfg.window = strchr(cfg.pattern, 'S') ? a->window : 0;  // the header's window is 0 without 'S' layers
    if (cfg.arch == ARCH_MAL || cfg.arch == ARCH_MAG) cfg.window = a->window;  // their sliding-window attention
    if (cfg.arch == ARCH_MAC && !a->seg) cfg.seg = 4 * cfg.b;  // SPEC §9.3: C = 4b by default
    return cfg;
}

// x for a message: whole if it is (the int fields: -W may be past float's 2^24), else in the fewest significant
// digits (6 to 9) that read back as the same float
static const char* float_str(char* buf, size_t cap, double x) {
    if (x == floor(x) && fabs(x) < 1e15) {
        snprintf(buf, cap, "%.0f", x);
        return buf;
    }
    for (int p = 6; p <= 9; p++) {
        snprintf(buf, cap, "%.*g", p, x);
        if ((float)strtod(buf, NULL) == (float)x) break;
    }
    return buf;
}
// The model of the run: from the flags, or from the checkpoint to load (-e, or <out>/ckpt.bin with -r 1),
// whose config must agree with every model flag that was given. Returns the checkpoint path or NULL.
static const char* args_resolve(const Args* a, Config* cfg, char* ckpt_path, size_t cap) {
    *cfg = args_config(a);
    snprintf(ckpt_path, cap, "%s/ckpt.bin", a->out_dir);
    const char* load_path = a->resume ? ckpt_path : a->init_ckpt;
    if (!load_path) return NULL;
    Config cc;
    int has_state = peek_checkpoint(load_path, &cc);
    if (a->resume && !has_state)
        DIE("it holds a model only; start from it with -e instead", "%s has no training state to resume", load_path);
// (each value in the fewest digits that give it back as a float: every int field whole, and eta_max as given,
// 0.03, not 0.029999999)
#define AGREE(flag, field, name)                                                                                     \
    if ((a->given & flag) && cc.field != cfg->field) {                                                               \
        char x1[32], x2[32];                                                                                         \
        DIE("drop the flag or make it match the checkpoint", "checkpoint %s has " name " = %s but the flags say %s", \
            load_path, float_str(x1, sizeof x1, cc.field), float_str(x2, sizeof x2, cfg->field));                    \
    }
    AGREE(G_V, V, "vocab -V");
    AGREE(G_D, D, "width -D");
    AGREE(G_L, L, "layers -L");
    AGREE(G_H, H, "heads -H");
    AGREE(G_E, E, "memory expansion -E");
    AGREE(G_F, F, "SwiGLU width -F");
    AGREE(G_K, b, "chunk size -k");
    AGREE(G_P, mem_depth, "memory depth (preset -p)");
    AGREE(G_P, bias, "attentional bias (preset -p)");
    AGREE(G_P, algo, "algorithm (preset -p)");
    AGREE(G_P, gate_a, "gate a (preset -p)");
    AGREE(G_P, gate_eta, "gate eta (preset -p)");
    AGREE(G_P, mem_ln, "memory LN (preset -p)");
    AGREE(G_P, retention, "retention (preset -p)");
    AGREE(G_R, gate_rank, "gate rank -R");
    AGREE(G_Z, anchor, "anchored retention -Z");
    AGREE(G_X, eta_max, "eta_max -X");
    if ((a->given & G_W) && cc.window != a->window) {  // a->window: the flags-side config has 0 without 'S' layers
        if (!cc.window)
            DIE("drop -W", "checkpoint %s has no sliding-window attention, but the flags give -W %d", load_path,
                a->window);
        DIE("drop the flag or make it match the checkpoint",
            "checkpoint %s has attention window -W = %d but the flags say %d", load_path, cc.window, a->window);
    }
    if ((a->lat_k >= 0 || a->lat_ablate >= 0 || a->lat_mu >= 0) && !cc.lattice)
        DIE("-w, -Y and -B are for the lattice presets", "Lattice flag given, but checkpoint %s is not a Lattice model",
            load_path);
    if (a->lat_ablate >= 0 && cc.lat_ablate != a->lat_ablate)
        DIE("drop the flag or make it match the checkpoint",
            "checkpoint %s has Lattice ablation -Y = %d but the flags say %d", load_path, cc.lat_ablate, a->lat_ablate);
    if (a->lat_mu >= 0 && cc.gate_a != a->lat_mu)
        DIE("drop the flag or make it match the checkpoint",
            "checkpoint %s has forgetting gate -B = %d but the flags say %d", load_path, cc.gate_a, a->lat_mu);
    AGREE(G_P, arch, "Titans arrangement (preset -p)");
    AGREE(G_M, npers, "persistent tokens -M");
    AGREE(G_C, seg, "MAC segment -C");
    AGREE(G_G, omega, "omega window -G");
    AGREE(G_I, poly, "poly features -I");
    AGREE(G_I, phistar, "phi* memory (-I 2 or 3)");
    AGREE(G_U, algo, "inner algorithm -U");
    AGREE(G_T, gated, "gated memory -T");
#undef AGREE
    if ((a->given & G_PAT) && strcmp(cc.pattern, cfg->pattern))
        DIE("drop -P or make it match", "checkpoint %s has layer pattern %s but the flags say %s", load_path,
            cc.pattern, cfg->pattern);
    *cfg = cc;
    if (a->lat_k >= 0 && cfg->lattice)
        cfg->lat_k = a->lat_k;  // the checkpoint interval changes no result: -w may differ
    return load_path;
}
// --make-input OUT: the model of the flags (or of -e CKPT, with its weights) into a dump input (make_input)
static void make_input_run(const Args* a, const char* out) {
    Config mc;
    char ckpt_path[4096];
    const char* load_path = args_resolve(a, &mc, ckpt_path, sizeof ckpt_path);
    config_check(&mc);
    make_input(out, &mc, load_path, a->B, a->T, a->seed);
}

// The run's data and files: the loaders (train resumed at st's position), the tokenizer, the log file.
// Returns the loss mask for -A 1 (NULL otherwise): mask[n+1] marks the target of position n.
typedef struct {
    DataLoader train, val;
    int have_val;
    Tokenizer tk;
    FILE* logf;
} Run;
static const uint8_t* run_open(Run* r, const Args* a, const Config* cfg, const TrainState* st) {
    memset(r, 0, sizeof *r);
    if (a->max_steps > 0) {
        dataloader_init(&r->train, a->train_glob, a->B, a->T);
        r->train.shard = st->shard;
        r->train.pos = st->pos;
        if (r->train.shard >= r->train.nfiles)
            DIE("resume with the same -i shards", "checkpoint data position (shard %d) is past the %d train shards",
                r->train.shard, r->train.nfiles);
    }
    glob_t vg;
    if (glob(a->val_glob, 0, NULL, &vg) == 0 && vg.gl_pathc > 0) {
        dataloader_init(&r->val, a->val_glob, a->B, a->T);
        r->have_val = 1;
    }
    globfree(&vg);
    if (a->max_steps == 0 && !r->have_val)
        DIE("give val shards with -j", "nothing to evaluate: no val shards match '%s'", a->val_glob);
    if (a->answers_only && ((a->max_steps > 0 && !r->train.has_mask) || (r->have_val && !r->val.has_mask)))
        DIE("-A 1 needs shards with .mask files beside them (data_prep/synth)", "no answer masks for the %s shards",
            a->max_steps > 0 && !r->train.has_mask ? "train" : "val");
    tokenizer_load(&r->tk, a->tok_path);
    if (r->tk.n && r->tk.n != cfg->V)
        fprintf(stderr, "warning: tokenizer has %d tokens, model vocab is %d\n", r->tk.n, cfg->V);
    mkdir(a->out_dir, 0755);
    char log_path[4096];
    snprintf(log_path, sizeof log_path, "%s/log.txt", a->out_dir);
    r->logf =
        a->max_steps > 0 && g_rank == 0 ? fopen(log_path, st->step ? "a" : "w") : NULL;  // rank 0 logs (section 6b)
    if (a->max_steps > 0 && g_rank == 0 && !r->logf)
        DIE("check that the output directory is writable", "cannot write %s", log_path);
    if (!a->answers_only) return NULL;
    return a->max_steps > 0 ? r->train.mask + 1 : r->val.mask + 1;
}
static void run_close(Run* r) {
    if (r->logf) fclose(r->logf);
    if (r->train.nfiles) dataloader_free(&r->train);
    if (r->have_val) dataloader_free(&r->val);
    tokenizer_free(&r->tk);
}
// one validation line on stdout and in the log (step < 0: a lone evaluation, no log)
static void report_val(const Run* r, long step, real vl, real acc) {
    if (step >= 0) printf("step %5ld | ", step);
    printf("val loss %.4f", vl);
    if (acc >= 0) printf(" | answer accuracy %.4f", acc);
    printf("\n");
    if (step >= 0 && r->logf) {
        fprintf(r->logf, "s:%ld vl:%.6f", step, vl);
        if (acc >= 0) fprintf(r->logf, " acc:%.6f", acc);
        fprintf(r->logf, "\n");
        fflush(r->logf);
    }
}
// A step with a non-finite loss or gradient norm: skipped (1) while fewer than max were, with a warning and a log
// line "s:STEP skipped:WHAT"; 0 when the run must stop. (MIRAS_PLANT_NAN_STEP=k plants a NaN in step k's gradient:
// the tests use it to check that a skipped step leaves the weights and the AdamW state untouched.)
static int skip_nonfinite_step(const Run* r, long step, int* skipped, int max, const char* what) {
    if (*skipped >= max) return 0;
    (*skipped)++;
    if (g_rank == 0)
        printf("warning: step %ld skipped: %s not finite (%d of %d allowed by -N)\n", step, what, *skipped, max);
    if (r->logf) {
        fprintf(r->logf, "s:%ld skipped:%s\n", step, what);
        fflush(r->logf);
    }
    return 1;
}
static long planted_nan_step(void) {
    const char* e = getenv("MIRAS_PLANT_NAN_STEP");
    return e ? atol(e) : -1;
}
static void report_step(const Run* r, long step, long max_steps, real loss, real lr, real norm, double dt, double tps) {
    printf("step %5ld/%ld | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %.0f tok/s\n", step, max_steps, loss, lr, norm,
           1e3 * dt, tps);
    fprintf(r->logf, "s:%ld trl:%.6f lr:%.6e norm:%.4f ms:%.1f tok/s:%.0f\n", step, loss, lr, norm, 1e3 * dt, tps);
    fflush(r->logf);
}

// ----------------------------------------------------------------------------
// 6b. data parallel training over MPI ranks (make USE_MPI=1; mpirun -np N or srun). Without USE_MPI these are
// no-ops for one process. The global batch of a step (-d tokens) is the single-process batch with gradient
// accumulation: its accum*N micro-batches, in stream order, go accum to a rank (rank r takes r*accum ..
// r*accum+accum-1), so N ranks see exactly the tokens one process sees, and no two ranks the same micro-batch.
// Each rank keeps its own position in the shards and skips the micro-batches of the others. The gradients are
// summed with one MPI_Allreduce (each rank's backward is scaled by 1/(accum*N), so the sum is the mean); every
// rank then has the same gradients, clips on the same global norm and takes the same AdamW step. Logging,
// validation (on rank 0 only: the single-process numbers), sampling and checkpoints are rank 0's.

static int dist_local_rank(void) {  // the GPU of this rank on its node (train_miras.cu)
    const char* e = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!e) e = getenv("SLURM_LOCALID");
    if (!e) e = getenv("MPI_LOCALRANKID");
    return e ? atoi(e) : 0;
}
// the tests' dying rank (dev/test_mpi.sh): MIRAS_KILL_RANK=r MIRAS_KILL_STEP=s makes rank r exit at the start of
// step s without a word to MPI
static void dist_test_kill(long step) {
    const char* r = getenv("MIRAS_KILL_RANK");
    if (r && getenv("MIRAS_KILL_STEP") && atoi(r) == g_rank && step == atol(getenv("MIRAS_KILL_STEP"))) {
        fprintf(stderr, "rank %d: exiting at step %ld (MIRAS_KILL_RANK test hook)\n", g_rank, step);
        _exit(3);
    }
}
// a rank stopped by the launcher (mpirun ends the job when another rank exits or aborts) says so, and exits 1;
// before training starts (collective errors) only rank 0 says it: a slower rank may be stopped before it reaches
// the error that rank 0 has already printed once for all
static void dist_on_term(int sig) {
    (void)sig;
    if (!g_dying && !(g_die_collective && g_rank != 0)) {
        char m[256];
        int n = snprintf(
            m, sizeof m,
            "error: rank %d: stopped by the launcher (another rank failed or the job was cancelled; its error is above) "
            "(hint: fix that rank's error and start again, or resume from the last checkpoint with -r 1)\n",
            g_rank);
        if (n > 0 && write(2, m, (size_t)n) < 0) {}
    }
    _exit(1);
}
#ifdef USE_MPI
static void dist_finalize(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
}
#define MPI_REAL_T (sizeof(real) == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT)
#endif
static void dist_init(int* argc, char*** argv) {
#ifdef USE_MPI
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    atexit(dist_finalize);
    if (g_world > 1) {
        signal(SIGTERM, dist_on_term);
        signal(SIGINT, dist_on_term);
    }
#else
    (void)argc;
    (void)argv;
#endif
}
// sum x over the ranks, in place (every rank gets the same sums: MPI's reduction order is fixed for a given
// number of ranks and message size; dist_check_same_weights verifies it at every checkpoint)
static void dist_allreduce(real* x, size_t n) {
#ifdef USE_MPI
    if (g_world <= 1) return;
    for (size_t i = 0; i < n; i += (size_t)1 << 30) {
        size_t k = n - i < ((size_t)1 << 30) ? n - i : ((size_t)1 << 30);
        if (MPI_Allreduce(MPI_IN_PLACE, x + i, (int)k, MPI_REAL_T, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
            DIE(NULL, "MPI_Allreduce failed");
    }
#else
    (void)x;
    (void)n;
#endif
}
static void dist_allreduce_f64(double* x, int n) {
#ifdef USE_MPI
    if (g_world > 1 && MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        DIE(NULL, "MPI_Allreduce failed");
#else
    (void)x;
    (void)n;
#endif
}
// The tokens per step: -d is the global batch (default B*T per rank); accum micro-batches per rank and step.
static int dist_accum(const Args* a) {
    long per = (long)a->B * a->T * g_world;
    if (a->tokens_per_step % per)
        DIE("make -d a multiple of B*T times the number of ranks",
            "tokens per step %ld is not a multiple of B*T*ranks = %d*%d*%d", a->tokens_per_step, a->B, a->T, g_world);
    return (int)(a->tokens_per_step / per);
}
// After loading st: a resumed run must have as many ranks as the run that wrote the checkpoint.
static void dist_check_resume(const Args* a, const char* path, const TrainState* st) {
    if (!a->resume) return;
    int w = st->world > 1 ? st->world : 1;
    if (w != g_world) {
        g_die_collective = 1;
        DIE(w > 1
                ? "resume with mpirun -np set to the checkpoint's number of ranks, or start from its weights with -e (fresh optimizer and data position)"
                : "resume it without mpirun (one process), or start from its weights with -e (fresh optimizer and data position)",
            "checkpoint %s was written by %d rank%s; this run has %d (data positions and the batch split differ)", path,
            w, w > 1 ? "s" : "", g_world);
    }
}
// Place this rank's train loader: a resumed run of several ranks at this rank's saved position; otherwise at the
// stream position (shard, pos of st) moved on by the micro-batches of the ranks before this one.
static void dist_place_loader(DataLoader* dl, const TrainState* st, int accum) {
    if (st->world > 1) {
        dl->shard = st->rank_shard[g_rank];
        dl->pos = st->rank_pos[g_rank];
        if (dl->shard >= dl->nfiles)
            DIE("resume with the same -i shards",
                "checkpoint data position of rank %d (shard %d) is past the %d train shards", g_rank, dl->shard,
                dl->nfiles);
    } else
        dataloader_skip(dl, (long)g_rank * accum);
}
// Before a checkpoint: every rank's data position into st (rank 0's arrays), and a check that the ranks' weights
// are still the same bits (a hash of the parameters, compared as max(h) == ~max(~h), in one reduction).
static void dist_checkpoint_state(TrainState* st, const DataLoader* dl, const real* params, size_t n) {
#ifdef USE_MPI
    if (g_world <= 1) return;
    long mine[2] = {dl->shard, dl->pos}, *all = (long*)xmalloc(2 * (size_t)g_world * sizeof(long));
    MPI_Gather(mine, 2, MPI_LONG, all, 2, MPI_LONG, 0, MPI_COMM_WORLD);
    st->world = g_world;
    if (!st->rank_shard) {
        st->rank_shard = (int*)xmalloc(g_world * sizeof(int));
        st->rank_pos = (long*)xmalloc(g_world * sizeof(long));
    }
    for (int r = 0; r < g_world; r++) {
        st->rank_shard[r] = (int)all[2 * r];
        st->rank_pos[r] = all[2 * r + 1];
    }
    free(all);
    uint64_t h = 1469598103934665603ULL;
    const unsigned char* b = (const unsigned char*)params;
    for (size_t i = 0; i < n * sizeof(real); i++) h = (h ^ b[i]) * 1099511628211ULL;
    uint64_t hh[2] = {h, ~h};
    MPI_Allreduce(MPI_IN_PLACE, hh, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (hh[0] != h || ~hh[1] != h) {
        g_die_collective = 1;
        DIE("a bug: the ranks' gradient sums differ; run with one process and report it",
            "the weights of the ranks differ at step %ld", st->step);
    }
#else
    (void)st;
    (void)dl;
    (void)params;
    (void)n;
#endif
}

// ZeRO stage 1 (-K 1): rank r keeps the AdamW moments of the parameters [lo_r, lo_r + n_r) only, the contiguous
// shares of dist_share; every rank still sums the whole gradient (one all-reduce, as without -K) and computes the
// same norm and clip, updates its share, and the ranks then gather the updated weights (one all-gather). Each weight
// is updated by the same arithmetic as without sharding, so the run is bit-identical to -K 0 (dev/test_mpi.sh checks).
static void dist_share(size_t n, int r, size_t* lo, size_t* cnt) {
    size_t per = (n + g_world - 1) / g_world;
    *lo = (size_t)r * per < n ? (size_t)r * per : n;
    *cnt = *lo + per < n ? per : n - *lo;
}
// keep only this rank's share of the moments (a resumed checkpoint loaded all of them)
static void dist_shard_optimizer(Model* M) {
    if (g_world <= 1) return;
    size_t lo, n;
    dist_share(M->num_params, g_rank, &lo, &n);
    if (M->num_params / g_world >= (size_t)1 << 31)
        DIE("use more ranks or -K 0", "a share of %zu parameters is too large for one MPI message",
            M->num_params / g_world);
    if (M->m_memory) {
        real* m = (real*)xmalloc((n ? n : 1) * sizeof(real));
        real* v = (real*)xmalloc((n ? n : 1) * sizeof(real));
        memcpy(m, M->m_memory + lo, n * sizeof(real));
        memcpy(v, M->v_memory + lo, n * sizeof(real));
        free(M->m_memory);
        free(M->v_memory);
        M->m_memory = m;
        M->v_memory = v;
    }
    M->opt_lo = lo;
    M->opt_n = n;
}
// after the update: every rank gets every share of the weights
static void dist_gather_params(Model* M) {
#ifdef USE_MPI
    if (g_world <= 1 || M->opt_n == M->num_params) return;
    int* cnt = (int*)xmalloc(g_world * sizeof(int));
    int* at = (int*)xmalloc(g_world * sizeof(int));
    for (int r = 0; r < g_world; r++) {
        size_t lo, n;
        dist_share(M->num_params, r, &lo, &n);
        cnt[r] = (int)n;
        at[r] = (int)lo;
    }
    if (M->num_params >= (size_t)1 << 31)
        DIE("use -K 0", "%zu parameters are too many for one MPI all-gather", M->num_params);
    if (MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, M->params_memory, cnt, at, MPI_REAL_T, MPI_COMM_WORLD) !=
        MPI_SUCCESS)
        DIE(NULL, "MPI_Allgatherv failed");
    free(cnt);
    free(at);
#else
    (void)M;
#endif
}
// for a checkpoint: all the moments, on rank 0 (*m, *v: NULL elsewhere, and when the moments are not sharded)
static void dist_gather_moments(const Model* M, real** m, real** v) {
    *m = *v = NULL;
#ifdef USE_MPI
    if (g_world <= 1 || M->opt_n == M->num_params || !M->m_memory) return;
    int* cnt = (int*)xmalloc(g_world * sizeof(int));
    int* at = (int*)xmalloc(g_world * sizeof(int));
    for (int r = 0; r < g_world; r++) {
        size_t lo, n;
        dist_share(M->num_params, r, &lo, &n);
        cnt[r] = (int)n;
        at[r] = (int)lo;
    }
    if (g_rank == 0) {
        *m = (real*)xmalloc(M->num_params * sizeof(real));
        *v = (real*)xmalloc(M->num_params * sizeof(real));
    }
    if (MPI_Gatherv(M->m_memory, (int)M->opt_n, MPI_REAL_T, *m, cnt, at, MPI_REAL_T, 0, MPI_COMM_WORLD) !=
            MPI_SUCCESS ||
        MPI_Gatherv(M->v_memory, (int)M->opt_n, MPI_REAL_T, *v, cnt, at, MPI_REAL_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        DIE(NULL, "MPI_Gatherv failed");
    free(cnt);
    free(at);
#else
    (void)M;
#endif
}
// rank 0 writes the checkpoint, with the whole AdamW state also when it is sharded
static void dist_save_checkpoint(Model* M, const char* path, const TrainState* st) {
    real *m, *v;
    dist_gather_moments(M, &m, &v);
    if (g_rank == 0) {
        Model whole = *M;
        if (m) {
            whole.m_memory = m;
            whole.v_memory = v;
            whole.opt_lo = 0;
            whole.opt_n = M->num_params;
        }
        save_checkpoint(&whole, path, st);
    }
    free(m);
    free(v);
}

#ifndef TESTING
static void usage(void) {
    printf("usage: train_miras [flags]   (defaults in brackets)\n");
    printf(USAGE, PRESETS);
    printf(
        " --make-input OUT: write a dump input (fixture layout) for the model of the flags, initialised with -y (or the "
        "weights of -e CKPT), B x T random tokens\n");
}

// the CPU trainer's own flag: --make-input OUT (make_input)
static const char* g_make_out = NULL;
static int cpu_flag(const char* f, const char* v) {
    if (!strcmp(f, "--make-input")) {
        g_make_out = v;
        return 1;
    }
    return 0;
}

int main(int argc, char** argv) {
    dist_init(&argc, &argv);
    g_die_collective = 1;  // until training starts, every rank meets the same errors
    Args a;
    args_parse(&a, argc, argv, usage, cpu_flag);
    if ((a.dump_in || g_make_out) && g_world > 1)
        DIE("run it as one process, without mpirun", "dump and make-input modes do not run on %d ranks", g_world);
    if (a.dump_in) {
        dump_run(a.dump_in, a.dump_out);
        return 0;
    }
    if (g_make_out) {
        make_input_run(&a, g_make_out);
        return 0;
    }
    Config cfg;
    char ckpt_path[4096];
    const char* load_path = args_resolve(&a, &cfg, ckpt_path, sizeof ckpt_path);
    if (a.warmup < 0) a.warmup = default_warmup(&cfg);  // -u not given
    Model model;
    model_build(&model, &cfg);
    TrainState st = {0, 0, 0, a.seed * 0x9E3779B97F4A7C15ULL + 1};
    if (load_path)
        load_checkpoint(&model, load_path, a.resume ? &st : NULL);
    else
        model_init(&model, a.seed);
    dist_check_resume(&a, load_path, &st);
    if (a.zero) dist_shard_optimizer(&model);
    Run run;
    model.loss_mask = run_open(&run, &a, &cfg, &st);
    int accum = dist_accum(&a), B = a.B, T = a.T;
    long max_steps = a.max_steps;  // accum: micro-batches per rank and step
    DataLoader* train = &run.train;
    if (max_steps > 0) dist_place_loader(train, &st, accum);
    if (g_world > 1 && g_rank == 0)
        printf("data parallel: %d ranks, each %d x %d tokens per step; validation and sampling on rank 0\n", g_world,
               accum, B * T);
    if (g_rank == 0)
        printf(
            "train_miras | preset %s | V %d D %d L %d H %d E %d F %d b %d | %zu params | B %d T %d accum %d | threads %d\n",
            load_path && !(a.given & G_P) ? "(from checkpoint)" : a.preset, cfg.V, cfg.D, cfg.L, cfg.H, cfg.E, cfg.F,
            cfg.b, model.num_params, B, T, accum, max_threads());
    if (g_rank == 0 && cfg.arch)
        printf("Titans %s: N_p %d persistent tokens per layer, %s %d\n",
               cfg.arch == ARCH_MAL   ? "MAL"
               : cfg.arch == ARCH_MAG ? "MAG"
                                      : "MAC",
               cfg.npers, cfg.arch == ARCH_MAC ? "segment C =" : "attention window W =",
               cfg.arch == ARCH_MAC ? cfg.seg : cfg.window);
    if (g_rank == 0 && (strchr(cfg.pattern, 'A') || strchr(cfg.pattern, 'S')))
        printf("layers %s (M memory, A attention, S sliding window W = %d)\n", cfg.pattern, cfg.window);
    if (max_steps == 0) {
        if (g_rank == 0) {
            real acc, vl = evaluate(&model, &run.val, a.val_batches, &acc);
            report_val(&run, -1, vl, acc);
        }
        return 0;
    }
    int skipped = 0;  // steps skipped for a non-finite loss or gradient (-N)
    g_die_collective = 0;
    for (long step = st.step; step < max_steps; step++) {
        dist_test_kill(step + 1);
        if (g_rank == 0 && run.have_val && a.val_every > 0 && step % a.val_every == 0) {
            real acc, vl = evaluate(&model, &run.val, a.val_batches, &acc);
            report_val(&run, step, vl, acc);
        }
        if (g_rank == 0 && a.sample_every > 0 && step > 0 && step % a.sample_every == 0) {
            int p0 = train->inputs[0];
            printf("sample: ");
            generate(&model, &run.tk, &p0, 1, a.gen_tokens, &st.rng);
        }
        double t0 = now_s();
        real loss = 0;
        int bad_loss = 0;
        model_zero_grad(&model);
        for (int k = 0; k < accum; k++) {
            dataloader_next(train);
            model_forward(&model, train->inputs, train->targets, B, T);
            if (!isfinite(model.mean_loss)) {  // skipped below if -N allows (the data still moves on)
                if (skipped >= a.max_skip)
                    DIE("lower the learning rate -l or raise warmup -u (or allow skipped steps with -N)",
                        "loss is not finite (%s) at step %ld", isnan(model.mean_loss) ? "nan" : "inf", step + 1);
                bad_loss = 1;
                continue;
            }
            model_backward(&model, (real)1 / (accum * g_world));
            loss += model.mean_loss / (accum * g_world);
        }
        if (g_world > 1) {  // the other ranks' micro-batches; the sums over the ranks (gradients: one reduction)
            dataloader_skip(train, (long)(g_world - 1) * accum);
            dist_allreduce(model.grads_memory, model.num_params);
            double ls[2] = {loss, (double)bad_loss};
            dist_allreduce_f64(ls, 2);
            loss = (real)ls[0];
            bad_loss = ls[1] > 0;
        }
        if (step + 1 == planted_nan_step()) model.grads_memory[0] = NAN;
        real norm = bad_loss ? NAN : grad_norm(&model);
        real lrs = lr_at(step, max_steps, a.lr, a.warmup, a.final_frac);
        if (!isfinite(norm)) {  // skip the update (weights and AdamW moments stay) while -N allows, else stop
            if (!skip_nonfinite_step(&run, step + 1, &skipped, a.max_skip, bad_loss ? "loss" : "gradient norm")) {
                g_die_collective = 1;
                const char* t = nonfinite_grad_tensor(&model);
                die_nonfinite_grad(norm, step + 1, t, model.nf_layer, model.nf_chunk, model.nf_what, cfg.b);
            }
        } else {
            grad_clip(&model, norm, a.clip);
            model_update(&model, lrs, 0.9, 0.95, 1e-8, a.wd);
            dist_gather_params(&model);
            double dt = now_s() - t0;
            if (g_rank == 0) report_step(&run, step + 1, max_steps, loss, lrs, norm, dt, a.tokens_per_step / dt);
        }
        st.step = step + 1;
        st.shard = train->shard;
        st.pos = train->pos;
        if ((a.ckpt_every > 0 && st.step % a.ckpt_every == 0) || st.step == max_steps || st.step == a.stop_at) {
            dist_checkpoint_state(&st, train, model.params_memory, model.num_params);
            dist_save_checkpoint(&model, ckpt_path, &st);
        }
        if (st.step == a.stop_at) {
            if (g_rank == 0) printf("stopped after step %ld (-S); continue with -r 1\n", st.step);
            return 0;
        }
    }
    if (g_rank == 0 && run.have_val) {
        real acc, vl = evaluate(&model, &run.val, a.val_batches, &acc);
        report_val(&run, max_steps, vl, acc);
    }
    if (g_rank == 0 && a.gen_tokens > 0 && st.step > 0) {
        int p0 = train->inputs[0];
        printf("sample: ");
        uint64_t r = st.rng;
        generate(&model, &run.tk, &p0, 1, a.gen_tokens, &r);
    }
    run_close(&run);
    model_free(&model);
    return 0;
}
#endif
