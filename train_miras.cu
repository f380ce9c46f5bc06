/*
train_miras.cu: the GPU trainer. Same model, flags and files as train_miras.c (README.md's model definition).

The host side is train_miras.c itself, included below with TESTING (which hides its main): the config, the
presets, the parameter layout, checkpoints, shards, the tokenizer, the dump format and the AdamW schedule are
the CPU trainer's own code. This file adds the device side, in fp32 except for the dense products with -f 2:
  1. CUDA basics: error checks, allocation, launch helpers, the precision of the dense products (-f)
  2. backbone kernels (embedding, RMSNorm, causal conv, SiLU, l2 norm, gates, SwiGLU, cross-entropy, AdamW)
     and their host wrappers; every matrix product goes through cuBLAS (fp32; TF32 with -f 1; bf16 with -f 2)
  3. the memory: the chunk functions of train_miras.c section 3 as block-cooperative device functions with
     the same names plus _gpu, arguments and comments, one thread block per (sequence, head), or a cluster of
     R blocks that split the memory's hidden width (MIRAS_MEM_SPLIT, default 2; README "The cluster split")
  4. the GPU model: parameters, activations (the CPU's layouts), forward, backward, AdamW
  5. token-by-token decoding on the GPU
  6. dump mode, the decode test, evaluation, sampling
  7. main: the training loop of train_miras.c, on the GPU
A function name_gpu mirrors the function name of train_miras.c (same arguments, same equations in the comment,
so the bodies read like the CPU's); every name means one function, and a plain name is always the CPU's. The
GPU's own types extend the CPU's where they need more: MemChunkGpu (a MemChunk plus the GPU's scratch rows),
ModelGpu, DecoderGpu.

Conventions for the memory's device functions (section 3): every one is called by all threads of the block
with the same arguments, and ends with __syncthreads(), so that its outputs are visible to all threads.
Inside, each output element is owned by one thread (or one warp for row reductions): no atomics, and the
summation order is fixed, so runs are deterministic (not bitwise equal to the CPU's: sums are ordered
differently; the tests compare norm-relative errors).
*/
#define TESTING
#include "train_miras.c"
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cuda_profiler_api.h>
#include <algorithm>
#include <vector>
#ifdef USE_MPI
#include <nccl.h>  // data parallel (make train_miras_cu USE_MPI=1): ncclAllReduce of the gradients, MPI launches
#endif

#ifdef MIRAS_DOUBLE
#error "train_miras.cu is float32 only (the CPU trainer has the fp64 build)"
#endif

// ----------------------------------------------------------------------------
// 1. CUDA basics

static int g_sync = 0;  // MIRAS_SYNC=1: synchronise after every kernel, so that an error names its launch
static void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
    if (e != cudaSuccess)
        DIE("is a GPU visible (nvidia-smi)? out of memory: use a smaller -b or -t; MIRAS_SYNC=1 locates a failing kernel",
            "CUDA error %s (%s) at %s:%d in %s", cudaGetErrorName(e), cudaGetErrorString(e), file, line, what);
}
#define cudaCheck(x) cuda_check((x), #x, __FILE__, __LINE__)
#define KCHECK(name)                                                               \
    do {                                                                           \
        cuda_check(cudaGetLastError(), name, __FILE__, __LINE__);                  \
        if (g_sync) cuda_check(cudaDeviceSynchronize(), name, __FILE__, __LINE__); \
    } while (0)
static void cublas_check(cublasStatus_t s, const char* file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS)
        DIE("is the CUDA toolkit's cuBLAS usable on this GPU?", "cuBLAS error %d at %s:%d", (int)s, file, line);
}
#define cublasCheck(x) cublas_check((x), __FILE__, __LINE__)
// A MIRAS_* switch of the GPU trainer: unset, def; set, a whole number in [lo, hi], else one error line with the
// hint, so that a typo (MIRAS_MEM_TC=abc, MIRAS_MEM_SPLIT=2x) stops the run instead of quietly choosing another kernel
static int env_int(const char* name, int def, int lo, int hi, const char* hint) {
    const char* s = getenv(name);
    if (!s) return def;
    char* e;
    errno = 0;
    long x = strtol(s, &e, 10);
    if (e == s || *e || errno || x < lo || x > hi) DIE(hint, "unknown %s=%s", name, s);
    return (int)x;
}

static cublasHandle_t g_blas;
// the stream every kernel, cuBLAS call and device-to-device copy goes to: the legacy default stream (0), except while
// a decoder with CUDA graphs runs its step (decoder_step_gpu: its own stream, which a graph capture needs)
static cudaStream_t g_stream = 0;

// Precision of the dense products (the q/k/v/gate/output projections, the gates, SwiGLU, the tied LM head, and
// their backward GEMMs), -f: 0 fp32 (the default, the CPU's math), 1 TF32 tensor cores (cuBLAS rounds the fp32
// operands to 10-bit mantissas inside the GEMM), 2 bf16 tensor cores, llm.c style:
//   - the GEMM operands are bf16 (8-bit mantissa, ~4e-3 relative rounding), the products accumulate in fp32
//     (CUBLAS_COMPUTE_32F) into fp32 outputs: activations, their gradients and the weight gradients stay fp32;
//   - the weights' master copy, the gradients and AdamW's moments are fp32; a bf16 copy of all parameters
//     (params_bf16, same layout) is written by the AdamW kernel itself as it updates each weight (and once at
//     build), so it is never stale and costs no extra pass;
//   - GEMM inputs that are activations get a bf16 copy written by the kernel that produces them (RMSNorm,
//     gate*SiLU, SwiGLU: u, z, ln2, hg, lnf; the Model's acts_bf16), kept for the backward's weight gradients.
//     The fp32 activations stay as they are (the CPU's layouts; every elementwise kernel, the memory and the
//     backward read fp32), so the bf16 copies are an addition, not a change of type;
//   - gradients flowing into a backward GEMM (dout) are rounded to bf16 into a scratch once per matmul_backward
//     (they are used by two GEMMs: dx and dW), except dlogits, which crossentropy_backward writes in bf16 directly;
//   - the memory (section 3) with its state, every reduction (norms, column sums, the gradient norm), the logits,
//     the softmax and the loss stay fp32.
enum { PREC_FP32 = 0, PREC_TF32 = 1, PREC_BF16 = 2 };
static int g_prec = PREC_FP32;
// the memory's chunk products (section 3, MemArgs.tc): 31 = 3xTF32 tensor cores (fp32-accurate) with -f 0, 29 = TF32
// tensor cores with -f 1 and -f 2, each with 16 x 16 warp tiles where they fit, k in quads and split K (v18, v17: the
// fastest on the H200 in run 7, dev/cuda/memlab_notes.md); MIRAS_MEM_TC=0 (the SIMT fp32 products), 1 or 3 (8 x 8
// warp tiles: v7, v8), 5 or 7 (16 x 16 tiles: v13, v14), 13 or 15 (and k in quads: v15, v16), 29 or 31 overrides
static int g_mem_tc = 31;
// the chunk products (mem_tc) of memlab's versions 1-20 (dev/cuda/memlab.cu; mem_tc_of); 0: not on the tensor cores
static const int MEM_VER_TC[21] = {0, 0, 0, 0, 0, 0, 0, 1, 3, 0, 3, 1, 1, 5, 7, 13, 15, 29, 31, 29, 31};
// the cluster split of the deep memories (section 3's "split"; MemArgs.R): 2 CTAs per (sequence, head) where
// mem_split_ok (the fastest on the H200 in run 7: titans' step 1.82 s -> 1.24 s at B 4, T 4096); MIRAS_MEM_SPLIT=1
// (none), 4 or 8 overrides
static int g_mem_split = 2;
static int g_mem_split_asked = 0;  // (MIRAS_MEM_SPLIT set: say when a model cannot take it)
static int g_mem_wy = 0;  // MIRAS_MEM_WY=1 / 2 / 3: the b = 1 delta rule in WY chunks (mem_wy_use; v9-v12)
// MIRAS_MEM_PAR=1: the generic memory kernels' reads apart from the chain (memory_reads_kernel: every chunk's reads,
// and their part of the backward, at once; mem_par_cfg). Off until timed on a GPU (dev/cuda/memlab_notes.md, "The
// reads apart from the chain")
static int g_mem_par = 0;
// MIRAS_MEM_PAR_CTAS=1, 2, 4: memory_reads_kernel's blocks per SM (MEM_THREADS / that many threads each)
static int g_mem_par_ctas = 2;
// MIRAS_MEM_STATE: the chains' copy of the chunk-start state in shared memory (MemChunkGpu.Ps, mem_smem_plan): 0 none
// (the state read from global memory); 1 in the chains with the reads apart, where room is left (the default); 2 in
// every chain, where room is left; 3 in every chain, ahead of the rows' (n, d_m) arrays (those then left out stay in
// global memory). The same values read from another place: the same bits. 2 and 3 untimed (memlab_notes, "The state
// copy in every chain")
static int g_mem_state = 1;
static int g_mem_par_fw = 1;  // MIRAS_MEM_PAR_FW=0: the backward chain recomputes each chunk's forward (mem_fw_ok)
typedef __nv_bfloat16 bf16;
static real* g_ones;
static size_t g_ones_n;  // a vector of ones: column sums as cuBLAS gemv
static real* g_scratch;
static size_t g_scratch_n;  // (N, D) products for parameter-gradient column sums
// bf16 mode: the bf16 copy of the parameters (of the one GPU model of the process: matmul finds a weight's copy
// by its offset from g_wbase), and two scratches for GEMM operands rounded on the fly (x without a kept copy; dout)
static const real* g_wbase;
static const bf16* g_wbf16;
static size_t g_wn;
static bf16 *g_xb, *g_db;
static size_t g_xb_n, g_db_n;
static double* g_partials;  // per-block partial sums of the gradient norm
#define NORM_BLOCKS 1024

static void* dmalloc(size_t bytes) {  // zeroed, like the CPU's calloc
    void* p = NULL;
    bytes = bytes ? bytes : 4;
    cudaCheck(cudaMalloc(&p, bytes));
    cudaCheck(cudaMemset(p, 0, bytes));
    return p;
}
static void dfree(void* p) {
    if (p) cudaCheck(cudaFree(p));
}
static void h2d(void* dst, const void* src, size_t bytes) {
    if (bytes) cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
static void d2h(void* dst, const void* src, size_t bytes) {
    if (bytes) cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
static void d2d(void* dst, const void* src, size_t bytes) {
    if (bytes) cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g_stream));
}

static int g_device = 0;
static void gpu_init(int prec) {
    int n = 0;
    cudaCheck(cudaGetDeviceCount(&n));
    if (n < 1) DIE("run train_miras (the CPU trainer) instead", "no CUDA device found");
    if (prec < PREC_FP32 || prec > PREC_BF16) DIE("-f 0 (fp32), 1 (TF32) or 2 (bf16)", "unknown precision -f %d", prec);
    g_prec = prec;
    g_device = dist_local_rank() % n;  // one GPU per rank on a node (0 without MPI)
    cudaCheck(cudaSetDevice(g_device));
    cublasCheck(cublasCreate(&g_blas));
    // TF32 only for -f 1; with -f 2 the GEMMs are cublasGemmEx on bf16 operands, the rest (gemv) stays fp32
    cublasCheck(cublasSetMathMode(g_blas, prec == PREC_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    g_partials = (double*)dmalloc(NORM_BLOCKS * sizeof(double));
    g_sync = env_int("MIRAS_SYNC", g_sync, 0, 1, "MIRAS_SYNC=1 synchronises after every kernel, 0 not");
    g_mem_wy = env_int("MIRAS_MEM_WY", g_mem_wy, 0, 3,
                       "MIRAS_MEM_WY=0 (v6), 1 (the split WY kernels), 2 (single) or 3 (split with T)");
    g_mem_par =
        env_int("MIRAS_MEM_PAR", g_mem_par, 0, 1, "MIRAS_MEM_PAR=1 (the memory's reads apart from the chain) or 0");
    g_mem_state = env_int("MIRAS_MEM_STATE", g_mem_state, 0, 3,
                          "MIRAS_MEM_STATE=0 (no state copy), 1 (with the reads apart), 2 (every chain) or 3 (every "
                          "chain, first)");
    g_mem_par_fw =
        env_int("MIRAS_MEM_PAR_FW", g_mem_par_fw, 0, 1, "MIRAS_MEM_PAR_FW=0 (the backward chain recomputes) or 1");
    const char* hint = "MIRAS_MEM_PAR_CTAS=1, 2 or 4 blocks per SM";
    g_mem_par_ctas = env_int("MIRAS_MEM_PAR_CTAS", g_mem_par_ctas, 1, 4, hint);
    if (g_mem_par_ctas == 3) DIE(hint, "unknown MIRAS_MEM_PAR_CTAS=3");
    hint =
        "MIRAS_MEM_TC=0 (SIMT fp32), 1 (TF32), 3 (3xTF32), + 4 (16 x 16 warp tiles), + 12 (and k in quads), + 28 (and "
        "split K)";
    g_mem_tc = env_int("MIRAS_MEM_TC", prec == PREC_FP32 ? 31 : 29, 0, INT_MAX, hint);  // (v18's, v17's products)
    int ok = g_mem_tc == 0;
    for (int v = 1; v < (int)(sizeof MEM_VER_TC / sizeof *MEM_VER_TC); v++) ok |= g_mem_tc == MEM_VER_TC[v];
    if (!ok) DIE(hint, "unknown MIRAS_MEM_TC=%d", g_mem_tc);
    hint = "MIRAS_MEM_SPLIT=1 (none), 2, 4 or 8 CTAs per (sequence, head)";
    g_mem_split_asked = getenv("MIRAS_MEM_SPLIT") != NULL;
    g_mem_split = env_int("MIRAS_MEM_SPLIT", g_mem_split, 1, 8, hint);
    if (g_mem_split & (g_mem_split - 1)) DIE(hint, "unknown MIRAS_MEM_SPLIT=%d", g_mem_split);
}
static const char* gpu_name(void) {
    static cudaDeviceProp p;
    cudaCheck(cudaGetDeviceProperties(&p, g_device));
    return p.name;
}
// the shared buffers, grown on demand
static void gpu_buffers(size_t N, size_t scratch) {
    if (N > g_ones_n) {
        dfree(g_ones);
        g_ones = (real*)dmalloc(N * sizeof(real));
        g_ones_n = N;
        real* h = (real*)xmalloc(N * sizeof(real));
        for (size_t i = 0; i < N; i++) h[i] = 1;
        h2d(g_ones, h, N * sizeof(real));
        free(h);
    }
    if (scratch > g_scratch_n) {
        dfree(g_scratch);
        g_scratch = (real*)dmalloc(scratch * sizeof(real));
        g_scratch_n = scratch;
    }
}

#define NT 256  // threads per block of the elementwise and row kernels
static unsigned nblocks(size_t n, int per = NT) {
    size_t b = (n + per - 1) / per;
    return (unsigned)(b < 1 ? 1 : (b > (1u << 20) ? (1u << 20) : b));
}
#define GRID_FOR(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n); i += (size_t)gridDim.x * blockDim.x)
// a warp per row: rows r = global warp index, grid-strided; lane j walks the row's columns
#define WARP_ROWS_FOR(r, n)                                                                \
    for (size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < (size_t)(n); \
         r += (size_t)gridDim.x * blockDim.x / 32)
#define LANE ((int)(threadIdx.x & 31))
static unsigned warp_blocks(size_t rows) { return nblocks(rows * 32); }
#ifdef MEM_PHASE_TIMING
// The kernel lab's barrier timing (a development build, make memlab_phase; memlab -P 1): at every __syncthreads of
// this file, thread 0 of block 0 records the source line and the SM clock, so that memlab can sum the cycles between
// consecutive barriers by the line of the barrier that ends them (which product or pass of a chunk takes the time).
#define PHASE_MAX (1 << 20)
__device__ unsigned long long g_phase_clk[PHASE_MAX];
__device__ unsigned g_phase_line[PHASE_MAX];
__device__ unsigned g_phase_n;
__device__ __forceinline__ void phase_sync(unsigned line) {
    __syncthreads();
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && g_phase_n < PHASE_MAX) {
        g_phase_clk[g_phase_n] = clock64();
        g_phase_line[g_phase_n] = line;
        g_phase_n++;
    }
}
#define __syncthreads() phase_sync(__LINE__)
#endif

// ---- device math, as in train_miras.c section 1 (float; no fast-math)
// 16-byte loads and stores where aligned
__device__ __forceinline__ bool al16(const void* p) { return ((uintptr_t)p & 15) == 0; }
#ifdef EMU_CUDA  // the emulator checks what a GPU faults on ("misaligned address")
__device__ inline float4 ld4(const real* p) {
    emu::check_align16(p);
    return *(const float4*)p;
}
__device__ inline void st4(real* p, float4 v) {
    emu::check_align16(p);
    *(float4*)p = v;
}
// and 8-byte ones (two adjacent outputs of a tensor-core fragment)
__device__ inline float2 ld2(const real* p) {
    emu::check_align8(p);
    return *(const float2*)p;
}
__device__ inline void st2(real* p, float2 v) {
    emu::check_align8(p);
    *(float2*)p = v;
}
#else
__device__ __forceinline__ float4 ld4(const real* p) { return *(const float4*)p; }
__device__ __forceinline__ void st4(real* p, float4 v) { *(float4*)p = v; }
__device__ __forceinline__ float2 ld2(const real* p) { return *(const float2*)p; }
__device__ __forceinline__ void st2(real* p, float2 v) { *(float2*)p = v; }
#endif
__device__ __forceinline__ real warp_sum(real v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ real warp_max(real v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// block-wide reductions (every thread gets the same value: the warp partials are combined in a fixed order)
struct AddOp {
    template <class T>
    __device__ T operator()(T a, T b) const {
        return a + b;
    }
};
struct MaxOp {
    template <class T>
    __device__ T operator()(T a, T b) const {
        return fmax(a, b);
    }
};
template <class T, class Op>
__device__ T block_reduce(T v, Op op) {
    __shared__ T sh[32];
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();  // a previous call may still be reading sh
    if (LANE == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    T s = sh[0];
    for (int i = 1; i < (int)(blockDim.x >> 5); i++) s = op(s, sh[i]);
    return s;
}
__device__ real block_sum(real v) { return block_reduce(v, AddOp()); }
__device__ double block_sumd(double v) { return block_reduce(v, AddOp()); }
__device__ real block_max(real v) { return block_reduce(v, MaxOp()); }
__device__ __forceinline__ real sigmoidr_gpu(real x) { return (real)1 / (1 + expf(-x)); }
__device__ __forceinline__ real silur_gpu(real x) { return x * sigmoidr_gpu(x); }
__device__ __forceinline__ real softplusr_gpu(real x) { return x > 20 ? x : log1pf(expf(x)); }
__device__ __forceinline__ real silu_grad_gpu(real x) {
    real s = sigmoidr_gpu(x);
    return s * (1 + x * (1 - s));
}
__device__ __forceinline__ real gelu_tanh_gpu(real x) { return tanhf(GELU_C * (x + GELU_A * x * x * x)); }
__device__ __forceinline__ real gelu_gpu(real x, real th) { return (real)0.5 * x * (1 + th); }
__device__ __forceinline__ real gelu_d1_gpu(real x, real th) {
    return (real)0.5 * (1 + th) + (real)0.5 * x * (1 - th * th) * GELU_C * (1 + 3 * GELU_A * x * x);
}
__device__ __forceinline__ real gelu_d2_gpu(real x, real th) {
    real du = GELU_C * (1 + 3 * GELU_A * x * x), ddu = GELU_C * 6 * GELU_A * x;
    return (1 - th * th) * (du - x * th * du * du + (real)0.5 * x * ddu);
}
__device__ __forceinline__ real psi_lp_gpu(real e) { return 3 * tanhf(10 * e) * (e * e + (real)1e-6); }
__device__ __forceinline__ real psi_lp_d_gpu(real e) {
    real th = tanhf(10 * e);
    return 3 * (10 * (1 - th * th) * (e * e + (real)1e-6) + 2 * e * th);
}

// ----------------------------------------------------------------------------
// 2. backbone kernels (train_miras.c section 2) and their host wrappers (same names and arguments)

__global__ void encoder_forward_kernel(real* out, const int* tok, const real* wte, int N, int C) {
    GRID_FOR(e, (size_t)N * C) {
        size_t n = e / C;
        int c = (int)(e % C);
        out[e] = wte[(size_t)tok[n] * C + c];
    }
}
static void encoder_forward_gpu(real* out, const int* tok, const real* wte, int N, int C) {
    encoder_forward_kernel<<<nblocks((size_t)N * C), NT, 0, g_stream>>>(out, tok, wte, N, C);
    KCHECK("encoder_forward");
}
// dwte[tok] += dout, deterministic: the rows of each distinct token are added in position order (as the CPU
// does) by the thread that owns that (token, channel); uniq/off/pos bucket the positions by token (host-built)
__global__ void encoder_backward_kernel(real* dwte, const real* dout, const int* uniq, const int* off, const int* pos,
                                        int nu, int C) {
    GRID_FOR(e, (size_t)nu * C) {
        int u = (int)(e / C), c = (int)(e % C);
        real* w = dwte + (size_t)uniq[u] * C + c;
        real acc = *w;
        for (int p = off[u]; p < off[u + 1]; p++) acc += dout[(size_t)pos[p] * C + c];
        *w = acc;
    }
}

// RMSNorm over groups of C channels; a warp per (row, group). rstd as the CPU computes it (in double, rounded).
// outb (bf16 mode, NULL otherwise): a bf16 copy of out, the operand of the GEMMs that read out
// add, res (or NULL): the residual add before it in the same pass, res = x + add, out = RMSNorm(res); bonly: with
// outb, only the bf16 copy (an output that only GEMMs read)
__global__ void rmsnorm_forward_kernel(real* out, bf16* outb, real* rstd, const real* x, const real* w, int N, int G,
                                       int C, const real* add, real* res, int bonly) {
    WARP_ROWS_FOR(r, (size_t)N * G) {
        int g = (int)(r % G);
        const real* xr = x + r * C;
        real* o = out + r * C;
        real ss = 0;
        if (add)
            for (int i = LANE; i < C; i += 32) {
                real v = xr[i] + add[r * C + i];  // (residual_forward's sum)
                res[r * C + i] = v;
                ss += v * v;
            }
        else
            for (int i = LANE; i < C; i += 32) ss += xr[i] * xr[i];
        if (add) xr = res + r * C;  // (this lane's own writes)
        ss = warp_sum(ss);
        real rs = (real)(1 / sqrt((double)(ss / C) + 1e-6));
        for (int i = LANE; i < C; i += 32) {
            real y = xr[i] * rs * w[g * C + i];
            if (!(outb && bonly)) o[i] = y;
            if (outb) outb[r * C + i] = __float2bfloat16(y);
        }
        if (LANE == 0) rstd[r] = rs;
    }
}
static void rmsnorm_forward_gpu(real* out, real* rstd, const real* x, const real* w, int N, int G, int C,
                                bf16* outb = NULL) {
    rmsnorm_forward_kernel<<<warp_blocks((size_t)N * G), NT, 0, g_stream>>>(out, outb, rstd, x, w, N, G, C, NULL, NULL,
                                                                            0);
    KCHECK("rmsnorm_forward");
}
// res = a + b (residual_forward), then out = RMSNorm(res) (rmsnorm_forward, one group of C): one pass, res not re-read;
// bonly: with outb, out only as its bf16 copy (ln2, lnf: read by their GEMMs alone)
static void residual_rmsnorm_forward_gpu(real* res, real* out, real* rstd, const real* a, const real* b, const real* w,
                                         int N, int C, bf16* outb, bool bonly) {
    rmsnorm_forward_kernel<<<warp_blocks((size_t)N), NT, 0, g_stream>>>(out, outb, rstd, a, w, N, 1, C, b, res, bonly);
    KCHECK("residual_rmsnorm_forward");
}
// dwp: each row's dy x r (N G, C), or, with blk (G = 1), each block's sum of its rows' (gridDim.x, C): its warps
// add their rows into shared memory (the dynamic (NT / 32, C) rms_dw), then the warps' sums in warp order
__global__ void rmsnorm_backward_kernel(real* dx, real* dwp, const real* dout, const real* x, const real* w,
                                        const real* rstd, const real* dres, bf16* dxb, int set, int N, int G, int C,
                                        int blk) {
    extern __shared__ real rms_dw[];
    real* acc = rms_dw + (threadIdx.x >> 5) * C;  // (blk: this warp's)
    if (blk)
        for (int i = LANE; i < C; i += 32) acc[i] = 0;
    WARP_ROWS_FOR(r, (size_t)N * G) {
        int g = (int)(r % G);
        const real* xr = x + r * C;
        const real* dy = dout + r * C;
        real* dxr = dx + r * C;
        const real* base = dres ? dres + r * C : set ? NULL : dxr;
        real rs = rstd[r], m = 0;
        for (int i = LANE; i < C; i += 32) m += xr[i] * w[g * C + i] * dy[i];
        m = warp_sum(m) / C;
        for (int i = LANE; i < C; i += 32) {
            real v = (base ? base[i] : 0) + (rs * w[g * C + i] * dy[i] - xr[i] * rs * rs * rs * m);
            dxr[i] = v;
            if (dxb) dxb[r * C + i] = __float2bfloat16(v);
            real dw = dy[i] * xr[i] * rs;  // summed over rows below
            if (blk)
                acc[i] += dw;  // (lane-owned entries)
            else
                dwp[r * C + i] = dw;
        }
    }
    if (blk) {
        __syncthreads();
        for (int i = threadIdx.x; i < C; i += blockDim.x) {
            real s = 0;
            for (int q = 0; q < (int)blockDim.x / 32; q++) s += rms_dw[q * C + i];
            dwp[(size_t)blockIdx.x * C + i] = s;
        }
    }
}
// out[c * incy] += sum_n X[n][c]   (X (N, C) row-major = column-major (C, N): y = X^T ones)
static void colsum_add(real* out, const real* X, int N, int C, int incy) {
    const real one = 1;
    cublasCheck(cublasSgemv(g_blas, CUBLAS_OP_N, C, N, &one, X, C, g_ones, 1, &one, out, incy));
}
// dx += r w dy - x r^3 mean(x w dy);  dw += dy x r.  dres (or NULL): dx = dres + that instead, the residual
// stream's gradient added in the same pass (model_backward_gpu: the CPU's dx = 0 + dres, then dx += that; the same
// sum, one pass over (N, C) fewer). dxb (or NULL): also dx's bf16 copy, the operand of the GEMM that reads it next.
// set (without dres): dx = 0 + that, dx's first writer (whose buffer then needs no zeroing)
static void rmsnorm_backward_gpu(real* dx, real* dw, const real* dout, const real* x, const real* w, const real* rstd,
                                 int N, int G, int C, const real* dres = NULL, bf16* dxb = NULL, bool set = false) {
    // one group (the model's norms): dw's rows summed per block first (the scratch 1 / 8 of (N, C)), where the warps'
    // sums fit in the default 48 KB of shared memory; per head (G > 1, the memory's output norm): a row each
    unsigned nb = warp_blocks((size_t)N * G);
    size_t sm = (size_t)(NT / 32) * C * sizeof(real);
    int blk = G == 1 && sm <= 48 * 1024;
    rmsnorm_backward_kernel<<<nb, NT, blk ? sm : 0, g_stream>>>(dx, g_scratch, dout, x, w, rstd, dres, dxb, set, N, G,
                                                                C, blk);
    KCHECK("rmsnorm_backward");
    colsum_add(dw, g_scratch, blk ? (int)nb : N, G * C, 1);
}

__global__ void add_bias_kernel(real* out, const real* bias, int N, int OC) {
    GRID_FOR(e, (size_t)N * OC) out[e] += bias[e % OC];
}
// out = bf16(in), rounded to nearest even (4 values per thread where both are aligned)
__global__ void to_bf16_kernel(bf16* out, const real* in, size_t n) {
    if (n % 4 == 0 && al16(in) && ((uintptr_t)out & 7) == 0) {
        GRID_FOR(i, n / 4) {
            float4 x = ld4(in + 4 * i);
            *(__nv_bfloat162*)(out + 4 * i) = __floats2bfloat162_rn(x.x, x.y);
            *(__nv_bfloat162*)(out + 4 * i + 2) = __floats2bfloat162_rn(x.z, x.w);
        }
    } else
        GRID_FOR(i, n) out[i] = __float2bfloat16(in[i]);
}
// x (n values) rounded to bf16 into the scratch *buf (grown on demand); returns *buf
static const bf16* to_bf16(bf16** buf, size_t* cap, const real* x, size_t n) {
    if (n > *cap) {
        dfree(*buf);
        *buf = (bf16*)dmalloc(n * sizeof(bf16));
        *cap = n;
    }
    to_bf16_kernel<<<nblocks(n / 4 + 1), NT, 0, g_stream>>>(*buf, x, n);
    KCHECK("to_bf16");
    return *buf;
}
// the bf16 copy of a weight: same offset in params_bf16 as W in params_memory
static const bf16* weight_bf16(const real* W) {
    if (!g_wbf16 || W < g_wbase || W >= g_wbase + g_wn)
        DIE(NULL, "internal: bf16 matmul on a weight outside the model's parameters");
    return g_wbf16 + (W - g_wbase);
}
// C (m, n) = op(A) op(B) + beta C, column-major (cuBLAS's view of our row-major tensors). fp32 (and TF32 with
// -f 1): cublasSgemm on A, B. bf16 (-f 2): cublasGemmEx on their bf16 copies Ab, Bb, fp32 accumulation and C.
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const real* A, const bf16* Ab,
                 int lda, const real* B, const bf16* Bb, int ldb, real beta, real* C, int ldc) {
    const real one = 1;
    if (g_prec == PREC_BF16)
        cublasCheck(cublasGemmEx(g_blas, ta, tb, m, n, k, &one, Ab, CUDA_R_16BF, lda, Bb, CUDA_R_16BF, ldb, &beta, C,
                                 CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
        cublasCheck(cublasSgemm(g_blas, ta, tb, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc));
}
// One row (N = 1: the decoder's products, a token at a time): out (OC) = W x + bias, a warp per output, its lanes
// over C 16 bytes at a time, the lanes' sums added by shuffles (warp_sum). cuBLAS's GEMM at N = 1 runs its usual
// tiles, OC / 128 or so blocks each reading 128 rows of W: a few SMs stream the whole matrix; here OC / 8 blocks do.
// bf16 mode: W's bf16 copy times x rounded to bf16 (the GEMM's operands: each product exact in fp32), fp32 sums;
// fp32 mode: fp32 products and sums. The same products as the GEMM's, summed in another order (decode_test's
// tolerance; the parallel forward keeps cuBLAS). A product may end in its gate's activation (GemvSet.act: the
// decoder's gates, gates_forward_gpu), the formula of gate_act_forward_kernel / softplus_forward_kernel on the same
// float, so the same bits as the separate launch.
#define GEMV_WARPS 8
#define GEMV_MAX 4  // products of one row in one launch (the decoder's q, k, v and gate; its gates; the MLP's branches)
enum { GEMV_LINEAR = 0, GEMV_SIGMOID, GEMV_SOFTPLUS };  // out = W x + bias; scale sigmoid(that); softplus(that)
typedef struct {
    real* out[GEMV_MAX];
    const real* W[GEMV_MAX];
    const bf16* Wb[GEMV_MAX];  // (bf16 mode: W's bf16 copy; NULL: the fp32 products)
    const real* bias[GEMV_MAX];
    real scale[GEMV_MAX];  // GEMV_SIGMOID's (eta_max for eta, else 1)
    const real* res[GEMV_MAX];  // out = res + (the above), residual_forward's add (the decoder's Wo, MLP down); or NULL
    int act[GEMV_MAX], OC[GEMV_MAX], blk[GEMV_MAX + 1], n;  // blk: the first block of each product (blk[n]: the grid)
} GemvSet;
__global__ void __launch_bounds__(32 * GEMV_WARPS) gemv_row_kernel(GemvSet G, const real* x, int C) {
    int p = 0;
    while (p + 1 < G.n && (int)blockIdx.x >= G.blk[p + 1]) p++;  // (the block's product)
    int o = ((int)blockIdx.x - G.blk[p]) * GEMV_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (o >= G.OC[p]) return;  // (whole warps)
    real s = 0;
    if (G.Wb[p]) {
        const bf16* w = G.Wb[p] + (size_t)o * C;
        if (C % 8 == 0 && al16(w) && al16(x))
            for (int c = 8 * lane; c < C; c += 8 * 32) {  // 8 weights (16 bytes) and their 8 inputs per step
                float4 wv = ld4((const real*)(w + c)), x0 = ld4(x + c), x1 = ld4(x + c + 4);
                const bf16* wp = (const bf16*)&wv;
                real xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
                for (int j = 0; j < 8; j++) s += __bfloat162float(wp[j]) * __bfloat162float(__float2bfloat16(xs[j]));
            }
        else
            for (int c = lane; c < C; c += 32) s += __bfloat162float(w[c]) * __bfloat162float(__float2bfloat16(x[c]));
    } else {
        const real* w = G.W[p] + (size_t)o * C;
        if (C % 4 == 0 && al16(w) && al16(x))
            for (int c = 4 * lane; c < C; c += 4 * 32) {
                float4 wv = ld4(w + c), xv = ld4(x + c);
                s += wv.x * xv.x;
                s += wv.y * xv.y;
                s += wv.z * xv.z;
                s += wv.w * xv.w;
            }
        else
            for (int c = lane; c < C; c += 32) s += w[c] * x[c];
    }
    s = warp_sum(s);
    if (lane == 0) {
        real y = G.bias[p] ? s + G.bias[p][o] : s;
        y = G.act[p] == GEMV_SIGMOID ? G.scale[p] * sigmoidr_gpu(y) : G.act[p] == GEMV_SOFTPLUS ? softplusr_gpu(y) : y;
        G.out[p][o] = G.res[p] ? G.res[p][o] + y : y;
    }
}
// out[i] (OC[i]) = W[i] x + bias[i] for i < n, W[i] (OC[i], C), x one row: one launch (fp32 or bf16 mode);
// act[i], scale[i] (act NULL: all linear): the activation applied to product i; res[i] (res NULL: none): added to it
static void matmul_rows_gpu(int n, real* const* out, const real* x, const real* const* W, const real* const* bias,
                            int C, const int* OC, const int* act = NULL, const real* scale = NULL,
                            const real* const* res = NULL) {
    GemvSet G;
    memset(&G, 0, sizeof G);
    G.n = n;
    for (int i = 0; i < n; i++) {
        G.out[i] = out[i];
        G.W[i] = W[i];
        G.Wb[i] = g_prec == PREC_BF16 ? weight_bf16(W[i]) : NULL;
        G.bias[i] = bias ? bias[i] : NULL;
        G.act[i] = act ? act[i] : GEMV_LINEAR;
        G.scale[i] = scale ? scale[i] : 1;
        G.res[i] = res ? res[i] : NULL;
        G.OC[i] = OC[i];
        G.blk[i + 1] = G.blk[i] + (OC[i] + GEMV_WARPS - 1) / GEMV_WARPS;
    }
    gemv_row_kernel<<<G.blk[n], 32 * GEMV_WARPS, 0, g_stream>>>(G, x, C);
    KCHECK("gemv_row");
}
// out (N, OC) = x (N, C) W^T + bias, W (OC, C). Row-major x is column-major x^T (C, N), so cuBLAS computes
// out^T (OC, N) = op(W) x^T with W read as the column-major (C, OC) matrix W^T, transposed.
// xb: x's bf16 copy where its producer wrote one (bf16 mode); NULL: x is rounded here, into a scratch.
// N = 1 (decoding) with fp32 or bf16 products: gemv_row_kernel, bias included (TF32 keeps cuBLAS: the parallel
// forward's products are TF32 there).
static void matmul_forward_gpu(real* out, const real* x, const real* W, const real* bias, int N, int C, int OC,
                               const bf16* xb = NULL) {
    if (N == 1 && g_prec != PREC_TF32 && !xb) {  // (with xb, the fp32 x may be unwritten: bf16-only producers)
        matmul_rows_gpu(1, &out, x, &W, &bias, C, &OC);
        return;
    }
    const bf16* Wb = NULL;
    if (g_prec == PREC_BF16) {
        Wb = weight_bf16(W);
        if (!xb) xb = to_bf16(&g_xb, &g_xb_n, x, (size_t)N * C);
    }
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, W, Wb, C, x, xb, C, 0, out, OC);
    if (bias) {
        add_bias_kernel<<<nblocks((size_t)N * OC), NT, 0, g_stream>>>(out, bias, N, OC);
        KCHECK("add_bias");
    }
}
// one row through several weights (the decoder: q, k, v, gate from u; the MLP's two branches): one launch where
// matmul_forward_gpu takes gemv_row_kernel (fp32, bf16), else one product after another
static void matmul_rows_forward_gpu(int n, real* const* out, const real* x, const real* const* W, int C,
                                    const int* OC) {
    if (g_prec != PREC_TF32)
        matmul_rows_gpu(n, out, x, W, NULL, C, OC);
    else
        for (int i = 0; i < n; i++) matmul_forward_gpu(out[i], x, W[i], NULL, 1, C, OC[i]);
}
// dx += dout W ; dW += dout^T x ; dbias += sum dout (fp32: the column sum reads the fp32 dout)
// bf16 mode: xb as in matmul_forward; doutb: dout's bf16 copy if the caller has one (dlogits), else dout is
// rounded here once for both GEMMs
// dx_add false: dx = dout W (beta 0: dx's first writer, whose buffer then needs no zeroing; the same sums as 0 + them)
static void matmul_backward_gpu(real* dx, real* dW, real* dbias, const real* dout, const real* x, const real* W, int N,
                                int C, int OC, const bf16* xb = NULL, const bf16* doutb = NULL, bool dx_add = true) {
    const bf16* Wb = NULL;
    if (g_prec == PREC_BF16) {
        Wb = weight_bf16(W);
        if (!doutb) doutb = to_bf16(&g_db, &g_db_n, dout, (size_t)N * OC);
        if (!xb) xb = to_bf16(&g_xb, &g_xb_n, x, (size_t)N * C);
    }
    // dx^T (C, N) += W^T (C, OC) dout^T (OC, N)
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, W, Wb, C, dout, doutb, OC, dx_add ? 1 : 0, dx, C);
    // dW^T (C, OC) += x^T (C, N) dout (N, OC)
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, x, xb, C, dout, doutb, OC, 1, dW, C);
    if (dbias) colsum_add(dbias, dout, N, OC, 1);
}

// causal depthwise conv: c_t[i] = sum_j w[i][j] x_{t-K+1+j}[i], zero before t = 0; and, where act is given,
// act = SiLU(c) in the same pass (the forward's q, k, v: one read of c less than a separate silu_forward)
// (grid: channels on x, rows (b, t) on y)
#define CONV_ROWS_FOR(bt, n) for (int bt = blockIdx.y; bt < (n); bt += gridDim.y)
static dim3 conv_grid(int B, int T, int C) { return dim3((C + NT - 1) / NT, B * T < 65535 ? B * T : 65535); }
__global__ void conv_forward_kernel(real* out, real* act, const real* x, const real* w, int B, int T, int C, int K) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < C) CONV_ROWS_FOR(bt, B * T) {
            int t = bt % T;
            size_t e = (size_t)bt * C + i;
            real s = 0;
            for (int j = 0; j < K; j++) {
                int tt = t - K + 1 + j;
                if (tt >= 0) s += w[i * K + j] * x[e + (size_t)(tt - t) * C];
            }
            out[e] = s;
            if (act) act[e] = silur_gpu(s);
        }
}
static void conv_forward_gpu(real* out, const real* x, const real* w, int B, int T, int C, int K, real* act = NULL) {
    conv_forward_kernel<<<conv_grid(B, T, C), NT, 0, g_stream>>>(out, act, x, w, B, T, C, K);
    KCHECK("conv_forward");
}
// the mixer's q and k: c = conv(x) (out), then y = SiLU(c) / sqrt(|SiLU(c)|^2 + 1e-6) per group of d channels (a
// head) and rn = that 1 / sqrt: conv_forward then l2norm_forward in one pass, a warp per (row, head), the SiLU (the
// CPU's qs) never stored; each value by conv_forward_kernel's and l2norm_forward_kernel's formulas (the same bits)
__global__ void conv_l2norm_forward_kernel(real* out, real* y, real* rn, const real* x, const real* w, int B, int T,
                                           int C, int K, int d) {
    int G = C / d;
    WARP_ROWS_FOR(r, (size_t)B * T * G) {
        size_t bt = r / G;
        int t = (int)(bt % T), h = (int)(r % G);
        real ss = 0;
        for (int c = LANE; c < d; c += 32) {
            int i = h * d + c;
            size_t e = bt * C + i;
            real s = 0;
            for (int j = 0; j < K; j++) {
                int tt = t - K + 1 + j;
                if (tt >= 0) s += w[i * K + j] * x[e + (size_t)(tt - t) * C];
            }
            out[e] = s;
            real a = silur_gpu(s);
            ss += a * a;
        }
        ss = warp_sum(ss);
        real sc = (real)(1 / sqrt((double)ss + 1e-6));
        for (int c = LANE; c < d; c += 32) {
            size_t e = bt * C + h * d + c;
            y[e] = silur_gpu(out[e]) * sc;  // (this lane's own write)
        }
        if (LANE == 0) rn[r] = sc;
    }
}
static void conv_l2norm_forward_gpu(real* out, real* y, real* rn, const real* x, const real* w, int B, int T, int C,
                                    int K, int d) {
    conv_l2norm_forward_kernel<<<warp_blocks((size_t)B * T * (C / d)), NT, 0, g_stream>>>(out, y, rn, x, w, B, T, C, K,
                                                                                          d);
    KCHECK("conv_l2norm_forward");
}
// dx_tt[i] += sum_j w[i][j] dout_{tt+K-1-j}[i]  (a gather: each dx element owned by one thread); set: dx = that
// (dx's first writer, the mixer's q, k, v projections), and dxb (bf16 mode, also set): only bf16(that), the GEMMs'
// operand
__global__ void conv_backward_dx_kernel(real* dx, bf16* dxb, const real* dout, const real* w, int B, int T, int C,
                                        int K, int set) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < C) CONV_ROWS_FOR(bt, B * T) {
            int tt = bt % T;
            size_t e = (size_t)bt * C + i;
            real s = 0;
            for (int j = 0; j < K; j++) {
                int t = tt + K - 1 - j;
                if (t < T) s += w[i * K + j] * dout[e + (size_t)(t - tt) * C];
            }
            if (dxb)
                dxb[e] = __float2bfloat16(s);
            else
                dx[e] = set ? s : dx[e] + s;
        }
}
// dw[i][j] += sum over the N = B T rows n (position t) of dout_n[i] x_{n-K+1+j}[i] (t-K+1+j >= 0), all K taps
// in one read of dout and x, deterministic in two passes (no atomics, fixed order):
// pass 1, a block of CONV_DW_WARPS warps per (segment s of the rows, group of 32 channels): lane = channel
// (coalesced rows), each warp sums a contiguous run of the segment's rows, the warps' sums are added in warp
// order into part[s][i][j]; pass 2, a thread per (i, j) adds the S segments in order into dw.
#define CONV_KMAX 8
#define CONV_DW_WARPS 8
__global__ void conv_dw_partial_kernel(real* part, const real* dout, const real* x, int N, int T, int C, int K, int S) {
    __shared__ real sh[CONV_DW_WARPS][32][CONV_KMAX];
    int ncg = (C + 31) / 32, s = blockIdx.x / ncg, i = (blockIdx.x % ncg) * 32 + LANE, w = threadIdx.x >> 5;
    size_t r0 = (size_t)N * s / S, len = (size_t)N * (s + 1) / S - r0;
    size_t a0 = r0 + len * w / CONV_DW_WARPS, a1 = r0 + len * (w + 1) / CONV_DW_WARPS;  // this warp's rows
    real acc[CONV_KMAX];
#pragma unroll
    for (int j = 0; j < CONV_KMAX; j++) acc[j] = 0;
    if (i < C)
        for (size_t n = a0; n < a1; n++) {
            int t = (int)(n % T);
            real g = dout[n * C + i];
#pragma unroll
            for (int j = 0; j < CONV_KMAX; j++)
                if (j < K && t - K + 1 + j >= 0) acc[j] += g * x[(n - K + 1 + j) * C + i];
        }
#pragma unroll
    for (int j = 0; j < CONV_KMAX; j++) sh[w][LANE][j] = acc[j];
    __syncthreads();
    if (w == 0 && i < C)
        for (int j = 0; j < K; j++) {
            real v = 0;
            for (int q = 0; q < CONV_DW_WARPS; q++) v += sh[q][LANE][j];
            part[((size_t)s * C + i) * K + j] = v;
        }
}
__global__ void conv_dw_sum_kernel(real* dw, const real* part, int S, int C, int K) {
    GRID_FOR(e, (size_t)C * K) {
        real v = 0;
        for (int s = 0; s < S; s++) v += part[(size_t)s * C * K + e];
        dw[e] += v;
    }
}
static void conv_backward_gpu(real* dx, real* dw, const real* dout, const real* x, const real* w, int B, int T, int C,
                              int K, bf16* dxb = NULL, bool set = false) {
    conv_backward_dx_kernel<<<conv_grid(B, T, C), NT, 0, g_stream>>>(dx, dxb, dout, w, B, T, C, K, set);
    KCHECK("conv_backward_dx");
    if (K > CONV_KMAX) DIE("the GPU trainer's causal conv has at most 8 taps", "conv width %d", K);
    // segments: ~1024 blocks in all, at least 64 rows each; S depends on the shapes only (deterministic)
    int N = B * T, ncg = (C + 31) / 32, S = (1024 + ncg - 1) / ncg;
    if (S > N / 64) S = N / 64 > 1 ? N / 64 : 1;
    gpu_buffers(0, (size_t)S * C * K);  // part: S C K <= N C / 8 except for tiny N
    conv_dw_partial_kernel<<<S * ncg, 32 * CONV_DW_WARPS, 0, g_stream>>>(g_scratch, dout, x, N, T, C, K, S);
    KCHECK("conv_dw_partial");
    conv_dw_sum_kernel<<<nblocks((size_t)C * K), NT, 0, g_stream>>>(dw, g_scratch, S, C, K);
    KCHECK("conv_dw_sum");
}

__global__ void silu_forward_kernel(real* out, const real* x, size_t n) { GRID_FOR(i, n) out[i] = silur_gpu(x[i]); }
__global__ void silu_backward_kernel(real* dx, const real* dout, const real* x, size_t n, int set) {
    GRID_FOR(i, n) {
        if (set)
            dx[i] = dout[i] * silu_grad_gpu(x[i]);
        else
            dx[i] += dout[i] * silu_grad_gpu(x[i]);
    }
}
static void silu_forward_gpu(real* out, const real* x, size_t n) {
    silu_forward_kernel<<<nblocks(n), NT, 0, g_stream>>>(out, x, n);
    KCHECK("silu_forward");
}
// set: dx = that (dx's first writer: 0 + that, without reading the zeros), else dx += that
static void silu_backward_gpu(real* dx, const real* dout, const real* x, size_t n, bool set = false) {
    silu_backward_kernel<<<nblocks(n), NT, 0, g_stream>>>(dx, dout, x, n, set);
    KCHECK("silu_backward");
}

// l2 norm per head: y = x / sqrt(|x|^2 + 1e-6); a warp per (row, head)
__global__ void l2norm_forward_kernel(real* out, real* rn, const real* x, int N, int G, int C) {
    WARP_ROWS_FOR(r, (size_t)N * G) {
        real ss = 0;
        for (int i = LANE; i < C; i += 32) ss += x[r * C + i] * x[r * C + i];
        ss = warp_sum(ss);
        real s = (real)(1 / sqrt((double)ss + 1e-6));
        for (int i = LANE; i < C; i += 32) out[r * C + i] = x[r * C + i] * s;
        if (LANE == 0) rn[r] = s;
    }
}
__global__ void l2norm_backward_kernel(real* dx, const real* dout, const real* y, const real* rn, int N, int G, int C) {
    WARP_ROWS_FOR(r, (size_t)N * G) {
        real p = 0;
        for (int i = LANE; i < C; i += 32) p += y[r * C + i] * dout[r * C + i];
        p = warp_sum(p);
        for (int i = LANE; i < C; i += 32) dx[r * C + i] += rn[r] * (dout[r * C + i] - y[r * C + i] * p);
    }
}
static void l2norm_forward_gpu(real* out, real* rn, const real* x, int N, int G, int C) {
    l2norm_forward_kernel<<<warp_blocks((size_t)N * G), NT, 0, g_stream>>>(out, rn, x, N, G, C);
    KCHECK("l2norm_forward");
}
static void l2norm_backward_gpu(real* dx, const real* dout, const real* y, const real* rn, int N, int G, int C) {
    l2norm_backward_kernel<<<warp_blocks((size_t)N * G), NT, 0, g_stream>>>(dx, dout, y, rn, N, G, C);
    KCHECK("l2norm_backward");
}
// q's and k's way from the l2 norm back to the conv, l2norm_backward then silu_backward in one pass (the mixer's: the
// only writer of dc, so written, and without the SiLU's gradient dqs in memory between): with y = SiLU(c) / |SiLU(c)|,
//   dc = rn (dout - y <y, dout>) SiLU'(c)   (the two kernels' formulas on the same floats: the same bits)
__global__ void l2norm_silu_backward_kernel(real* dc, const real* dout, const real* y, const real* rn, const real* c,
                                            int N, int G, int C) {
    WARP_ROWS_FOR(r, (size_t)N * G) {
        real p = 0;
        for (int i = LANE; i < C; i += 32) p += y[r * C + i] * dout[r * C + i];
        p = warp_sum(p);
        for (int i = LANE; i < C; i += 32) {
            real ds = rn[r] * (dout[r * C + i] - y[r * C + i] * p);
            dc[r * C + i] = ds * silu_grad_gpu(c[r * C + i]);
        }
    }
}
static void l2norm_silu_backward_gpu(real* dc, const real* dout, const real* y, const real* rn, const real* c, int N,
                                     int G, int C) {
    l2norm_silu_backward_kernel<<<warp_blocks((size_t)N * G), NT, 0, g_stream>>>(dc, dout, y, rn, c, N, G, C);
    KCHECK("l2norm_silu_backward");
}

// out = SiLU(h1) h3; outb (bf16 mode, else NULL): instead, only its bf16 copy, the W2 GEMMs' operand (the fp32 values
// are read by nothing else there)
__global__ void swiglu_forward_kernel(real* out, bf16* outb, const real* h1, const real* h3, size_t n) {
    GRID_FOR(i, n) {
        real y = silur_gpu(h1[i]) * h3[i];
        if (outb)
            outb[i] = __float2bfloat16(y);
        else
            out[i] = y;
    }
}
// dh1 = dout h3 SiLU'(h1), dh3 = dout SiLU(h1), written (not added: the CPU's +=, into the zeroed buffers it is the
// only writer of); bf16 mode (dh1b, dh3b given): only their bf16 copies, the W1 / W3 GEMMs' operands, which nothing
// else reads (the rounding to_bf16 would do after a write of the fp32 values: the same bits, 3 of 5 passes fewer)
__global__ void swiglu_backward_kernel(real* dh1, real* dh3, bf16* dh1b, bf16* dh3b, const real* dout, const real* h1,
                                       const real* h3, size_t n) {
    GRID_FOR(i, n) {
        real g1 = dout[i] * h3[i] * silu_grad_gpu(h1[i]), g3 = dout[i] * silur_gpu(h1[i]);
        if (dh1b) {
            dh1b[i] = __float2bfloat16(g1);
            dh3b[i] = __float2bfloat16(g3);
        } else {
            dh1[i] = g1;
            dh3[i] = g3;
        }
    }
}
static void swiglu_forward_gpu(real* out, const real* h1, const real* h3, size_t n, bf16* outb = NULL) {
    swiglu_forward_kernel<<<nblocks(n), NT, 0, g_stream>>>(out, outb, h1, h3, n);
    KCHECK("swiglu_forward");
}
static void swiglu_backward_gpu(real* dh1, real* dh3, const real* dout, const real* h1, const real* h3, size_t n,
                                bf16* dh1b = NULL, bf16* dh3b = NULL) {
    swiglu_backward_kernel<<<nblocks(n), NT, 0, g_stream>>>(dh1, dh3, dh1b, dh3b, dout, h1, h3, n);
    KCHECK("swiglu_backward");
}

// out = yn SiLU(gp); outb (bf16 mode, else NULL): instead, only its bf16 copy, the Wo GEMMs' operand
__global__ void gate_mul_forward_kernel(real* out, bf16* outb, const real* yn, const real* gp, size_t n) {
    GRID_FOR(i, n) {
        real y = yn[i] * silur_gpu(gp[i]);
        if (outb)
            outb[i] = __float2bfloat16(y);
        else
            out[i] = y;
    }
}
// dyn = dout SiLU(gp), dgp = dout yn SiLU'(gp), written (their only writer, as swiglu_backward); bf16 mode (dgpb
// given): dgp only as its bf16 copy, the Wg GEMMs' operand
__global__ void gate_mul_backward_kernel(real* dyn, real* dgp, bf16* dgpb, const real* dout, const real* yn,
                                         const real* gp, size_t n) {
    GRID_FOR(i, n) {
        dyn[i] = dout[i] * silur_gpu(gp[i]);
        real g = dout[i] * yn[i] * silu_grad_gpu(gp[i]);
        if (dgpb)
            dgpb[i] = __float2bfloat16(g);
        else
            dgp[i] = g;
    }
}
static void gate_mul_forward_gpu(real* out, const real* yn, const real* gp, size_t n, bf16* outb = NULL) {
    gate_mul_forward_kernel<<<nblocks(n), NT, 0, g_stream>>>(out, outb, yn, gp, n);
    KCHECK("gate_mul_forward");
}
static void gate_mul_backward_gpu(real* dyn, real* dgp, const real* dout, const real* yn, const real* gp, size_t n,
                                  bf16* dgpb = NULL) {
    gate_mul_backward_kernel<<<nblocks(n), NT, 0, g_stream>>>(dyn, dgp, dgpb, dout, yn, gp, n);
    KCHECK("gate_mul_backward");
}

__global__ void gate_act_forward_kernel(real* g, size_t n, real scale) {
    GRID_FOR(i, n) g[i] = scale * sigmoidr_gpu(g[i]);
}
__global__ void gate_act_backward_kernel(real* dpre, const real* dg, const real* g, size_t n, real scale) {
    GRID_FOR(i, n) dpre[i] = dg[i] * g[i] * (1 - g[i] / scale);
}
__global__ void softplus_forward_kernel(real* g, size_t n) { GRID_FOR(i, n) g[i] = softplusr_gpu(g[i]); }
__global__ void softplus_backward_kernel(real* dpre, const real* dg, const real* g, size_t n) {
    GRID_FOR(i, n) dpre[i] = dg[i] * (1 - expf(-g[i]));
}
__global__ void fill_const_kernel(real* p, size_t n, real v) { GRID_FOR(i, n) p[i] = v; }
__global__ void residual_forward_kernel(real* out, const real* a, const real* b, size_t n) {
    GRID_FOR(i, n) out[i] = a[i] + b[i];
}
__global__ void scale_kernel(real* p, size_t n, real s) { GRID_FOR(i, n) p[i] *= s; }
static void gate_act_forward_gpu(real* g, size_t n, real scale) {
    gate_act_forward_kernel<<<nblocks(n), NT, 0, g_stream>>>(g, n, scale);
    KCHECK("gate_act_forward");
}
static void gate_act_backward_gpu(real* dpre, const real* dg, const real* g, size_t n, real scale) {
    gate_act_backward_kernel<<<nblocks(n), NT, 0, g_stream>>>(dpre, dg, g, n, scale);
    KCHECK("gate_act_backward");
}
static void softplus_forward_gpu(real* g, size_t n) {
    softplus_forward_kernel<<<nblocks(n), NT, 0, g_stream>>>(g, n);
    KCHECK("softplus_forward");
}
static void softplus_backward_gpu(real* dpre, const real* dg, const real* g, size_t n) {
    softplus_backward_kernel<<<nblocks(n), NT, 0, g_stream>>>(dpre, dg, g, n);
    KCHECK("softplus_backward");
}
static void fill_const_gpu(real* p, size_t n, double v) {
    fill_const_kernel<<<nblocks(n), NT, 0, g_stream>>>(p, n, (real)v);
    KCHECK("fill_const");
}
static void residual_forward_gpu(real* out, const real* a, const real* b, size_t n) {
    residual_forward_kernel<<<nblocks(n), NT, 0, g_stream>>>(out, a, b, n);
    KCHECK("residual_forward");
}

// cross-entropy over the first V of Vp logits; a block per row. Instead of the CPU's (N, Vp) probs, the row's
// max and softmax denominator go to stats[2n], stats[2n + 1], and the backward recomputes each probability from
// the logit as expf(l - max) / sum: the (N, Vp) probs are neither written here nor read there (at V = 50257 that
// is two of the head's five (N, Vp) passes). One pass over the row (the online softmax): each thread keeps the
// max m of its logits and sum s of expf(l - m), rescaled when m grows; the block then takes the max M of the m
// and sums s expf(m - M) (the denominator differs from the CPU's two-pass sum by rounding only).
__device__ __forceinline__ void softmax_acc(real& m, real& s, real x) {
    if (x > m) {
        s = s * expf(m - x) + 1;
        m = x;
    } else
        s += expf(x - m);
}
__global__ void crossentropy_forward_kernel(real* losses, real* stats, const real* logits, const int* targets, int N,
                                            int V, int Vp) {
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const real* l = logits + (size_t)n * Vp;
        real m = -INFINITY, s = 0;
        int V4 = (Vp % 4 == 0 && al16(logits)) ? V / 4 * 4 : 0;  // 16-byte loads where the rows are aligned
        for (int i = 4 * threadIdx.x; i < V4; i += 4 * blockDim.x) {
            float4 x = ld4(l + i);
            softmax_acc(m, s, x.x);
            softmax_acc(m, s, x.y);
            softmax_acc(m, s, x.z);
            softmax_acc(m, s, x.w);
        }
        for (int i = V4 + threadIdx.x; i < V; i += blockDim.x) softmax_acc(m, s, l[i]);
        real mx = block_max(m);
        real sum = block_sum(s * expf(m - mx));
        if (threadIdx.x == 0) {
            losses[n] = -logf(expf(l[targets[n]] - mx) / sum);
            stats[2 * n] = mx;
            stats[2 * n + 1] = sum;
        }
    }
}
static void crossentropy_forward_gpu(real* losses, real* stats, const real* logits, const int* targets, int N, int V,
                                     int Vp) {
    crossentropy_forward_kernel<<<(N < 65536 ? N : 65536), 512, 0, g_stream>>>(losses, stats, logits, targets, N, V,
                                                                               Vp);
    KCHECK("crossentropy_forward");
}
// dlogits = (probs - onehot) * dloss for the positions in mask (NULL: all); 0 at the other positions and in the
// padded columns; probs = expf(logit - max) / sum from the forward's stats. Every element is written (not
// accumulated), so the backward need not zero dlogits first. A block per row (the row's values loaded once).
// dlogitsb (bf16 mode, else NULL): dlogits is written in bf16 there instead, the operand of the LM head's GEMMs
__device__ __forceinline__ real ce_grad(real l, int i, real mx, real sm, int tg, int on, int V, real dloss) {
    return i < V && on ? (expf(l - mx) / sm - (i == tg)) * dloss : 0;
}
__global__ void crossentropy_backward_kernel(real* dlogits, bf16* dlogitsb, const real* logits, const real* stats,
                                             const int* targets, const uint8_t* mask, real dloss, int N, int V,
                                             int Vp) {
    int vec = Vp % 4 == 0 && al16(logits) && (dlogitsb ? ((uintptr_t)dlogitsb & 7) == 0 : al16(dlogits));
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        size_t o = (size_t)n * Vp;
        real mx = stats[2 * n], sm = stats[2 * n + 1];
        int tg = targets[n], on = !mask || mask[n];
        if (vec)
            for (int i = 4 * threadIdx.x; i < Vp; i += 4 * blockDim.x) {
                float4 x = ld4(logits + o + i);
                real g0 = ce_grad(x.x, i, mx, sm, tg, on, V, dloss), g1 = ce_grad(x.y, i + 1, mx, sm, tg, on, V, dloss);
                real g2 = ce_grad(x.z, i + 2, mx, sm, tg, on, V, dloss),
                     g3 = ce_grad(x.w, i + 3, mx, sm, tg, on, V, dloss);
                if (dlogitsb) {
                    __nv_bfloat162 a = __floats2bfloat162_rn(g0, g1), b = __floats2bfloat162_rn(g2, g3);
                    *(__nv_bfloat162*)(dlogitsb + o + i) = a;
                    *(__nv_bfloat162*)(dlogitsb + o + i + 2) = b;
                } else
                    st4(dlogits + o + i, make_float4(g0, g1, g2, g3));
            }
        else
            for (int i = threadIdx.x; i < Vp; i += blockDim.x) {
                real g = ce_grad(logits[o + i], i, mx, sm, tg, on, V, dloss);
                if (dlogitsb)
                    dlogitsb[o + i] = __float2bfloat16(g);
                else
                    dlogits[o + i] = g;
            }
    }
}
static void crossentropy_backward_gpu(real* dlogits, bf16* dlogitsb, const real* logits, const real* stats,
                                      const int* targets, const uint8_t* mask, real dloss, int N, int V, int Vp) {
    crossentropy_backward_kernel<<<(N < 65536 ? N : 65536), 256, 0, g_stream>>>(dlogits, dlogitsb, logits, stats,
                                                                                targets, mask, dloss, N, V, Vp);
    KCHECK("crossentropy_backward");
}
// argmax over the first V logits of each row (answer accuracy); ties go to the lowest index, as on the CPU
__global__ void argmax_kernel(int* out, const real* logits, int N, int V, int Vp) {
    WARP_ROWS_FOR(n, N) {
        const real* l = logits + n * Vp;
        real bv = -INFINITY;
        int bi = V;
        for (int i = LANE; i < V; i += 32)
            if (l[i] > bv || (l[i] == bv && i < bi)) {
                bv = l[i];
                bi = i;
            }
        for (int o = 16; o > 0; o >>= 1) {
            real ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (LANE == 0) out[n] = bi < V ? bi : 0;
    }
}

// AdamW (torch.optim.AdamW): decoupled decay, bias-corrected moments; bc1, bc2 computed on the host as the CPU does.
// On the fp32 master weights w; wb (bf16 mode, else NULL): the bf16 copy the GEMMs read, refreshed here
__global__ void adamw_kernel(real* w, bf16* wb, const real* g, real* mm, real* vv, size_t n, real lr, real beta1,
                             real beta2, real eps, real decay, real bc1, real bc2) {
    GRID_FOR(i, n) {
        real gr = g[i], m = beta1 * mm[i] + (1 - beta1) * gr, v = beta2 * vv[i] + (1 - beta2) * gr * gr;
        mm[i] = m;
        vv[i] = v;
        real x = w[i];
        x -= lr * decay * x;
        x -= lr * (m / bc1) / (sqrtf(v / bc2) + eps);
        w[i] = x;
        if (wb) wb[i] = __float2bfloat16(x);
    }
}
// sum of squares in double, one partial per block (summed on the host in block order: deterministic)
__global__ void sumsq_kernel(double* partial, const real* g, size_t n) {
    double s = 0;
    GRID_FOR(i, n) s += (double)g[i] * g[i];
    s = block_sumd(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// ---- attention layers 'A' and 'S' (train_miras.c's attention_forward / attention_backward, SPEC §9.1): one warp per
// (row, head), lanes over the head's d channels (d <= 256: up to 8 per lane); no T x T matrix. Checked by make test_gpu
// on an H100 (2026-11-23); the np prefix (MAG's persistent tokens) on the CPU emulator of dev/cuda only, so far.
#define ATT_CPL 8  // channels per lane (d <= 256)
// the keys of query i (train_miras.c's attn_keys): [0, e1) the prefix, then [j0, i]
__device__ __forceinline__ void attn_keys_gpu(int i, int np, int W, int* e1, int* j0) {
    *e1 = np < i + 1 ? np : i + 1;
    int lo = W > 0 ? i - W + 1 : 0;
    *j0 = lo > np ? lo : np;
}
// RoPE, rotate-half pairing, row t of x (B, T, H*d) at position pos0 + t; dir 1 forward, -1 the backward (transpose)
__global__ void rope_kernel(real* out, const real* x, int B, int T, int H, int d, int dir, int pos0) {
    int half = d / 2;
    GRID_FOR(e, (size_t)B * T * H * half) {
        int i = (int)(e % half);
        size_t rh = e / half;
        int h = (int)(rh % H);
        size_t row = rh / H;
        int t = (int)(row % T);
        double th = (double)(pos0 + t) * pow(10000.0, -2.0 * i / (2.0 * half));
        real cs = (real)cos(th), sn = (real)(dir * sin(th));
        size_t o = row * H * d + (size_t)h * d;
        real a = x[o + i], b = x[o + half + i];
        out[o + i] = a * cs - b * sn;
        out[o + half + i] = b * cs + a * sn;
    }
}
static void rope_forward_gpu(real* out, const real* x, int B, int T, int H, int d, int dir, int pos0 = 0) {
    rope_kernel<<<nblocks((size_t)B * T * H * (d / 2)), NT, 0, g_stream>>>(out, x, B, T, H, d, dir, pos0);
    KCHECK("rope");
}
// forward, online softmax: for j in the window, s = q_i.k_j / sqrt(d); m' = max(m, s); l = l e^(m - m') + e^(s - m');
// acc = acc e^(m - m') + e^(s - m') v_j; then out_i = acc / l, lse_i = m + log l. Keys and values of row j of the
// (sequence, head) at kv + j * kvstride (the parallel forward: the (B, T, D) tensors; the decoder: its cache, where
// slot(j) = j mod W for 'S' (ring) or j); queries: nq rows from row q0 (the decoder: one row, q0 = its position).
// The keys of query i are attn_keys's (train_miras.c): the np prefix rows [0, min(np, i+1)) that every query sees
// (MAG's persistent tokens; a decoder's ring then holds row j >= np in slot np + (j - np) mod W), then the window.
__global__ void attention_forward_kernel(real* out, real* lse, const real* q, const real* k, const real* v, int B,
                                         int T, int H, int d, int window, int q0, int nq, int ring, int np) {
    real scale = 1 / sqrtf((real)d);
    int D = H * d;
    WARP_ROWS_FOR(r, (size_t)B * nq * H) {
        int h = (int)(r % H);
        size_t bi = r / H;
        int i = (int)(bi % nq) + q0, bb = (int)(bi / nq);
        const real* qi = q + (bi * D + (size_t)h * d);
        real qv[ATT_CPL], acc[ATT_CPL], m = -1e30f, l = 0;
        for (int u = 0; u < ATT_CPL; u++) {
            int c = LANE + 32 * u;
            qv[u] = c < d ? qi[c] : 0;
            acc[u] = 0;
        }
        int e1, j0;
        attn_keys_gpu(i, np, window, &e1, &j0);
        for (int j = 0; j <= i; j++) {
            if (j == e1) j = j0;
            if (j > i) break;
            size_t rj = ((size_t)bb * T + (ring && j >= np ? np + (j - np) % ring : j)) * D + (size_t)h * d;
            real s = 0;
            for (int u = 0; u < ATT_CPL; u++) {
                int c = LANE + 32 * u;
                if (c < d) s += qv[u] * k[rj + c];
            }
            s = warp_sum(s) * scale;
            real mn = fmaxf(m, s), corr = expf(m - mn), p = expf(s - mn);
            l = l * corr + p;
            for (int u = 0; u < ATT_CPL; u++) {
                int c = LANE + 32 * u;
                if (c < d) acc[u] = acc[u] * corr + p * v[rj + c];
            }
            m = mn;
        }
        real* oi = out + (bi * D + (size_t)h * d);
        for (int u = 0; u < ATT_CPL; u++) {
            int c = LANE + 32 * u;
            if (c < d) oi[c] = acc[u] / l;
        }
        if (LANE == 0 && lse) lse[bi * H + h] = m + logf(l);
    }
}
static void attention_forward_gpu(real* out, real* lse, const real* q, const real* k, const real* v, int B, int T,
                                  int H, int d, int window, int np = 0) {
    attention_forward_kernel<<<warp_blocks((size_t)B * T * H), NT, 0, g_stream>>>(out, lse, q, k, v, B, T, H, d, window,
                                                                                  0, T, 0, np);
    KCHECK("attention_forward");
}
// backward, with p_ij = exp(s_ij - lse_i) and Di = dout_i.out_i: dq_i = sum_j p_ij (dout_i.v_j - Di) k_j / sqrt(d)
// (a warp per query row, which also stores Di), then dk_j = sum_i p_ij (dout_i.v_j - Di) q_i / sqrt(d) and
// dv_j = sum_i p_ij dout_i (a warp per key row, over the queries that see it). Written, not accumulated; no atomics.
__global__ void attention_backward_dq_kernel(real* dq, real* Dout, const real* dout, const real* q, const real* k,
                                             const real* v, const real* out, const real* lse, int B, int T, int H,
                                             int d, int window, int np) {
    real scale = 1 / sqrtf((real)d);
    int D = H * d;
    WARP_ROWS_FOR(r, (size_t)B * T * H) {
        int h = (int)(r % H);
        size_t bi = r / H;
        int i = (int)(bi % T), bb = (int)(bi / T);
        size_t ri = bi * D + (size_t)h * d;
        real qv[ATT_CPL], dov[ATT_CPL], acc[ATT_CPL], Di = 0;
        for (int u = 0; u < ATT_CPL; u++) {
            int c = LANE + 32 * u;
            qv[u] = c < d ? q[ri + c] : 0;
            dov[u] = c < d ? dout[ri + c] : 0;
            acc[u] = 0;
            if (c < d) Di += dov[u] * out[ri + c];
        }
        Di = warp_sum(Di);
        real li = lse[bi * H + h];
        int e1, j0;
        attn_keys_gpu(i, np, window, &e1, &j0);
        for (int j = 0; j <= i; j++) {
            if (j == e1) j = j0;
            if (j > i) break;
            size_t rj = ((size_t)bb * T + j) * D + (size_t)h * d;
            real s = 0, dp = 0;
            for (int u = 0; u < ATT_CPL; u++) {
                int c = LANE + 32 * u;
                if (c < d) {
                    s += qv[u] * k[rj + c];
                    dp += dov[u] * v[rj + c];
                }
            }
            s = warp_sum(s);
            dp = warp_sum(dp);
            real p = expf(s * scale - li), ds = p * (dp - Di) * scale;
            for (int u = 0; u < ATT_CPL; u++) {
                int c = LANE + 32 * u;
                if (c < d) acc[u] += ds * k[rj + c];
            }
        }
        for (int u = 0; u < ATT_CPL; u++) {
            int c = LANE + 32 * u;
            if (c < d) dq[ri + c] = acc[u];
        }
        if (LANE == 0) Dout[bi * H + h] = Di;
    }
}
// one key row's gradient (a warp; lanes own channels) over the queries j in [j0, j1) of the sequences [b0, b1) of
// (B, T, H*d) q, dout (lse, D: (B, T, H)): dk = sum_j p (dout_j . v - D_j) q_j / sqrt(d), dv = sum_j p dout_j with
// p = exp(q_j . k / sqrt(d) - lse_j); written into dk, dv, or added (acc)
__device__ void attn_key_grad_gpu(real* dk, real* dv, const real* ke, const real* ve, const real* dout, const real* q,
                                  const real* lse, const real* Dsc, int b0, int b1, int j0, int j1, int T, int H, int h,
                                  int d, int acc) {
    real scale = 1 / sqrtf((real)d);
    int D = H * d;
    real kv[ATT_CPL], vv[ATT_CPL], ak[ATT_CPL], av[ATT_CPL];
    for (int u = 0; u < ATT_CPL; u++) {
        int c = LANE + 32 * u;
        kv[u] = c < d ? ke[c] : 0;
        vv[u] = c < d ? ve[c] : 0;
        ak[u] = av[u] = 0;
    }
    for (int bb = b0; bb < b1; bb++)
        for (int j = j0; j < j1; j++) {
            size_t bj = (size_t)bb * T + j, rj = bj * D + (size_t)h * d;
            real s = 0, dp = 0;
            for (int u = 0; u < ATT_CPL; u++) {
                int c = LANE + 32 * u;
                if (c < d) {
                    s += q[rj + c] * kv[u];
                    dp += dout[rj + c] * vv[u];
                }
            }
            s = warp_sum(s);
            dp = warp_sum(dp);
            real p = expf(s * scale - lse[bj * H + h]), ds = p * (dp - Dsc[bj * H + h]) * scale;
            for (int u = 0; u < ATT_CPL; u++) {
                int c = LANE + 32 * u;
                if (c < d) {
                    av[u] += p * dout[rj + c];
                    ak[u] += ds * q[rj + c];
                }
            }
        }
    for (int u = 0; u < ATT_CPL; u++) {
        int c = LANE + 32 * u;
        if (c < d) {
            dk[c] = acc ? dk[c] + ak[u] : ak[u];
            dv[c] = acc ? dv[c] + av[u] : av[u];
        }
    }
}
__global__ void attention_backward_dkv_kernel(real* dk, real* dv, const real* Din, const real* dout, const real* q,
                                              const real* k, const real* v, const real* lse, int B, int T, int H, int d,
                                              int window, int np) {
    int D = H * d;
    WARP_ROWS_FOR(r, (size_t)B * T * H) {
        int h = (int)(r % H);
        size_t bj = r / H;
        int j = (int)(bj % T), bb = (int)(bj / T);
        size_t rj = bj * D + (size_t)h * d;
        // the last query that sees key j (a prefix key: every later query)
        int i1 = window > 0 && j >= np && j + window - 1 < T - 1 ? j + window - 1 : T - 1;
        attn_key_grad_gpu(dk + rj, dv + rj, k + rj, v + rj, dout, q, lse, Din, bb, bb + 1, j, i1 + 1, T, H, h, d, 0);
    }
}
static void attention_backward_gpu(real* dq, real* dk, real* dv, real* Dscratch, const real* dout, const real* q,
                                   const real* k, const real* v, const real* out, const real* lse, int B, int T, int H,
                                   int d, int window, int np = 0) {
    attention_backward_dq_kernel<<<warp_blocks((size_t)B * T * H), NT, 0, g_stream>>>(dq, Dscratch, dout, q, k, v, out,
                                                                                      lse, B, T, H, d, window, np);
    KCHECK("attention_backward_dq");
    attention_backward_dkv_kernel<<<warp_blocks((size_t)B * T * H), NT, 0, g_stream>>>(dk, dv, Dscratch, dout, q, k, v,
                                                                                       lse, B, T, H, d, window, np);
    KCHECK("attention_backward_dkv");
}

// ----------------------------------------------------------------------------
// 3. the memory (train_miras.c section 3, SPEC §4, §5), one thread block per (sequence, head)
//
// The chunk scratch is the CPU's MemChunk (carved by memchunk_carve, in global memory, one per block) plus a
// few GPU-only buffers for the parallel reductions. Every function below has the CPU's name and arguments
// (mem_update_backward2_gpu takes the state's and the momentum's updates of a matrix as a pair, and the chunk for its
// scratch) and the CPU's comment; the
// loops are split so that each output element has one owner thread. MEM_THREADS must be a multiple of 32.
#ifndef MEM_THREADS
// threads per (sequence, head) block, a multiple of 32 (at most 128 registers either way); make NVCC="nvcc
// -DMEM_THREADS=256" to try fewer
#define MEM_THREADS 512
#endif
#define MEMFN __device__ __noinline__  // separate functions: inlining them all makes compile times of minutes
#define FOR(i, n) for (int i = threadIdx.x; i < (int)(n); i += blockDim.x)
#define WARP_FOR(t, n) for (int t = threadIdx.x >> 5; t < (int)(n); t += blockDim.x >> 5)

// A chunk's rows (the CPU's MemChunk, carved the same way) plus the GPU's own scratch rows after them.
struct MemChunkGpu : MemChunk {
    real *nn1, *nn2;  // (b, b) each: per-(t, i) terms of mem_coef_backward and mem_read_backward
    // 2 x (b, max(dm, d)): per-(i, j) terms of mem_update_backward2's two updates (m = d or dm; split, dm / R may be < d)
    real* nm1;
    real* keep;  // (2 + d): kl_gates' saved gates (the CPU keeps them on its stack)
    // (b): (1 - alpha_t) cs, the row scales of the anchored retention's products in mem_read_backward
    real* oma;
    real* mc;  // (5 b): chunk-level muon's scalar coefficients (muonc_coefs_gpu); the split's row sums (3 b)
    // The cluster split (MemArgs.R > 1, section 3's "split"): this CTA's slice of the anchor P_0 (nP of the local
    // MemCfg); the exchange buffer in dynamic shared memory (two halves of xn floats, used in turn: cl_reduce)
    real *p0s, *xch;
    real* rowv;  // (2 max(dm, d)): the split's per-row values (Memora's softmax over rows that span the slices)
    real* Ps;  // (nP): the chains' copy of the chunk-start state, in shared memory where it fits (MemSmem.ps)
    int R, xt, xn;  // CTAs per (sequence, head) (1: no split); the half in use; floats per half
    int noread;  // the chain with the reads apart (MemArgs.pG, pdP): the reads and their backward are skipped
};
// the rows of a chunk's scratch: b, plus omega's c-1 halo rows
__host__ __device__ static inline int mem_rows(const MemCfg* m, int b) { return b + (m->omega > 1 ? m->omega - 1 : 0); }
// does the algorithm carry S (momentum, both muons)? (train_miras.c's mem_carries_S, for the kernels)
__device__ static inline int mem_carries_S_gpu(const MemCfg* m) { return m->momentum || m->muon; }
// (din: the keys' and queries' width, D_phi with poly, else d)
static size_t memchunk_carve_in_gpu(MemChunkGpu* c, real* base, int b, int d, int din, int dm, int nP, int opt) {
    size_t n = memchunk_carve_in(c, base, b, d, din, dm, nP, opt);
    // (each array 16-byte aligned, as the carve's: carve_al)
    size_t nn = carve_al((size_t)b * b), nm = 2 * carve_al((size_t)b * (dm > d ? dm : d)), nk = carve_al(2 + (size_t)d),
           nb = carve_al(b);
    real* p = base ? base + n : NULL;
    c->nn1 = p;
    c->nn2 = p ? p + nn : NULL;
    c->nm1 = p ? p + 2 * nn : NULL;
    c->keep = p ? p + 2 * nn + nm : NULL;
    c->oma = p ? p + 2 * nn + nm + nk : NULL;
    c->mc = p ? p + 2 * nn + nm + nk + nb : NULL;
    size_t nc = carve_al(5 * (size_t)b);
    c->p0s = p ? p + 2 * nn + nm + nk + nb + nc : NULL;
    c->xch = NULL;
    c->rowv = p ? p + 2 * nn + nm + nk + nb + nc + carve_al(nP) : NULL;
    size_t nr = carve_al(2 * (size_t)(dm > d ? dm : d));
    c->Ps = p ? p + 2 * nn + nm + nk + nb + nc + carve_al(nP) + nr : NULL;
    c->R = 1;
    c->xt = c->xn = c->noread = 0;
    return n + 2 * nn + nm + nk + nb + nc + 2 * carve_al(nP) + nr;
}
// the trainer's chunk scratch for b-token chunks of the memory m: the rows with omega's halo, poly's width, and muon's
// per-row states and NS5 records after them (train_miras.c's muon_carve)
static size_t memchunk_carve_model_gpu(MemChunkGpu* c, real* base, const MemCfg* m, int b) {
    size_t n = memchunk_carve_in_gpu(c, base, mem_rows(m, b), m->d, m->din, m->dm, m->nP, mem_carve_opt(m));
    return n + muon_carve(c, base ? base + n : NULL, b, m);
}
// the chunk scratches of n blocks, one each, carved for the memory m (split: a CTA's slice, mem_split_cfg) from one
// allocation (*memory); returns their MemChunkGpu array on the device
static MemChunkGpu* mem_chunks_alloc(const MemCfg* m, int b, int n, real** memory) {
    MemChunkGpu tmp;
    size_t per = memchunk_carve_model_gpu(&tmp, NULL, m, b);
    *memory = (real*)dmalloc((size_t)n * per * sizeof(real));
    MemChunkGpu* hc = (MemChunkGpu*)xmalloc((size_t)n * sizeof(MemChunkGpu));
    for (int i = 0; i < n; i++) memchunk_carve_model_gpu(&hc[i], *memory + (size_t)i * per, m, b);
    MemChunkGpu* dc = (MemChunkGpu*)dmalloc((size_t)n * sizeof(MemChunkGpu));
    h2d(dc, hc, (size_t)n * sizeof(MemChunkGpu));
    free(hc);
    return dc;
}

MEMFN void block_zero(real* p, size_t n, int sync = 1) {  // (sync = 0: the caller's next zeroing or barrier follows)
    if (al16(p)) {
        size_t n4 = n / 4;
        for (size_t i = threadIdx.x; i < n4; i += blockDim.x) st4(p + 4 * i, make_float4(0, 0, 0, 0));
        for (size_t i = 4 * n4 + threadIdx.x; i < n; i += blockDim.x) p[i] = 0;
    } else
        for (size_t i = threadIdx.x; i < n; i += blockDim.x) p[i] = 0;
    if (sync) __syncthreads();
}
MEMFN void block_copy(real* dst, const real* src, size_t n, int sync = 1) {
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
    if (sync) __syncthreads();
}

// ---- The cluster split (MemArgs.R > 1): a (sequence, head) runs on a cluster of R CTAs, each holding a slice of the
// deep memory's hidden width, dm / R units: columns of W1 (d, dm), rows of W2 (and W3) (dm, din), of S, of P_0 and
// of every (n, dm) array. Each CTA runs the chunk functions above with a MemCfg whose dm and nP are its slice's; the
// (n, d), (n, n) and scalar values are computed alike by every CTA (the same inputs, the same code: the same bits).
// A product whose sum runs over dm (K = dm: o = W1 h, x W1^T, dl^T dWn, ...) makes a partial sum per CTA; cl_reduce
// adds the R partials through distributed shared memory, in rank order, on every CTA. Its callers write their
// partials into cl_buf(c) (this CTA's exchange buffer) and name where each sum goes.
namespace cg = cooperative_groups;
enum { SPLIT_NONE = 0, SPLIT_P = 1, SPLIT_M = 2 };  // which side of an (m, p) memory matrix is the split dm
__device__ __forceinline__ bool cl_on(const MemChunkGpu* c, int sp) { return sp != SPLIT_NONE && c->R > 1; }
__device__ __forceinline__ real* cl_buf(const MemChunkGpu* c) { return c->xch + (c->xt ? c->xn : 0); }
__host__ __device__ __forceinline__ int cl_al(size_t n) { return (int)((n + 3) & ~(size_t)3); }  // (carve_al's parts)
struct ClPart {
    real* out;  // the sums go to out[0..cnt): out = (acc ? out : 0) + sum_r x_r[off..off+cnt)
    int off, cnt, acc;
};
// Every CTA has written its partials into cl_buf(c) (and passed a barrier since); afterwards every CTA holds the
// sums. The two halves of the buffer alternate: a CTA that races ahead writes its next partials into the other
// half while slower ones still read this one, and cannot reach this half again before all have passed the next
// cluster.sync, i.e. finished reading it. (The kernel ends with a cluster.sync: no CTA exits while read.)
// The turn of the halves, right after the cluster barrier: every thread of this CTA took its pointer to this half
// (cl_buf) before it, so thread 0 may point the next reduction to the other half at once
__device__ __forceinline__ void cl_turn(MemChunkGpu* c) {
    if (threadIdx.x == 0) c->xt ^= 1;
}
// the end of a cluster reduction: its sums published to the CTA's threads (and the turn, cl_turn)
__device__ __forceinline__ void cl_done(MemChunkGpu*) { __syncthreads(); }
#ifdef EMU_CUDA  // the emulator checks that a reduction's partials lie in the half of the exchange buffer
#define CL_CHECK(c, end)                                                                                    \
    do {                                                                                                    \
        if ((size_t)(end) > (size_t)(c)->xn) {                                                              \
            fprintf(stderr, "emu: a cluster reduction reads %zu floats of an exchange buffer half of %d\n", \
                    (size_t)(end), (c)->xn);                                                                \
            abort();                                                                                        \
        }                                                                                                   \
    } while (0)
#else
#define CL_CHECK(c, end) ((void)0)
#endif
MEMFN void cl_reduce(MemChunkGpu* c, const ClPart* p, int k) {
    cg::cluster_group cl = cg::this_cluster();
    const real* x = cl_buf(c);
    for (int j = 0; j < k; j++) CL_CHECK(c, p[j].off + p[j].cnt);
    int R = c->R;
    cl.sync();
    cl_turn(c);
    for (int j = 0; j < k; j++) FOR(i, p[j].cnt) {
            real s = 0;
            for (int r = 0; r < R; r++) s += cl.map_shared_rank(x, r)[p[j].off + i];
            p[j].out[i] = (p[j].acc ? p[j].out[i] : 0) + s;
        }
    cl_done(c);
}
// the cluster's sum of a double that every thread of every CTA holds (its CTA's partial), in rank order
MEMFN double cl_sumd(MemChunkGpu* c, double v) {
    cg::cluster_group cl = cg::this_cluster();
    double* x = (double*)cl_buf(c);  // (16-byte aligned)
    CL_CHECK(c, 2);
    if (threadIdx.x == 0) *x = v;
    cl.sync();
    cl_turn(c);
    double s = 0;
    for (int r = 0; r < c->R; r++) s += *cl.map_shared_rank(x, r);
    cl_done(c);
    return s;
}
// v[0..k) = the cluster's max of the CTAs' cl_buf(c)[0..k) (each CTA's per-row maxima, k <= xn)
MEMFN void cl_max(MemChunkGpu* c, real* v, int k) {
    cg::cluster_group cl = cg::this_cluster();
    const real* x = cl_buf(c);
    CL_CHECK(c, k);
    cl.sync();
    cl_turn(c);
    FOR(i, k) {
        real s = -INFINITY;
        for (int r = 0; r < c->R; r++) s = fmaxf(s, cl.map_shared_rank(x, r)[i]);
        v[i] = s;
    }
    cl_done(c);
}
// this CTA's slice of a whole state (train_miras.c's layout: W1 (d, dm), W2 (dm, din), W3 (dm, din)): gather
// (to_slice) or scatter; m is the whole memory's MemCfg
// (to_slice: 1 whole -> slice, 2 slice += whole, 0 slice -> whole)
MEMFN void cl_slice(real* whole, real* slice, const MemCfg* m, int R, int r, int to_slice, int sync = 1) {
    int d = m->d, dm = m->dm, din = m->din, dr = dm / R, nw = 1 + (m->gated ? 2 : 1);
    FOR(e, (size_t)d * dr) {  // W1 (d, dm): columns r dr .. r dr + dr - 1
        size_t i = e / dr, j = e % dr, w = i * dm + (size_t)r * dr + j;
        if (to_slice)
            slice[e] = to_slice == 2 ? slice[e] + whole[w] : whole[w];
        else
            whole[w] = slice[e];
    }
    for (int k = 1; k < nw; k++) {  // W2, W3 (dm, din): rows r dr .. r dr + dr - 1 (contiguous)
        size_t ow = (size_t)d * dm + (size_t)(k - 1) * dm * din + (size_t)r * dr * din,
               os = (size_t)d * dr + (size_t)(k - 1) * dr * din;
        FOR(e, (size_t)dr * din) {
            if (to_slice)
                slice[os + e] = to_slice == 2 ? slice[os + e] + whole[ow + e] : whole[ow + e];
            else
                whole[ow + e] = slice[os + e];
        }
    }
    if (sync) __syncthreads();
}

// Small dense products used inside a memory chunk. out = (acc ? out : 0) + s * op. In every product of a chunk
// one side has the chunk's n <= b token rows and the other is state-sized (m x p, up to 256 x 64 or 64 x 256):
//   mm_nt  out (M, N) = A (M, K) B^T, B (N, K)    M = n rows: reads of the state, x W^T
//   mm_nn  out (M, N) = A (M, K) B,   B (K, N)    M = n rows: W^T g
//   mm_tn  out (M, N) = A^T B, A (K, M), B (K, N) K = n rows: outer-product sums into a state-sized matrix
// The _rs forms scale output row t (mm_nt, mm_nn) or term k (mm_tn) by rs[t] (NULL: 1); with sync = 0 they
// skip their closing barrier, for a caller whose next product neither reads this one's output nor writes its
// inputs (or writes the same output elements from the same threads: the same shape maps them alike).
// Register tiling: a thread keeps up to MM_TR = 16 rows of its output column in registers, so every element of
// the state-sized operand is loaded once per product (16-byte loads where aligned) and used for all rows. When
// the output has fewer columns than the block has threads, KS lanes of a warp split the K sum (a column each
// gets K/KS terms) and a fixed xor-shuffle tree adds the partials: no atomics, a fixed order (deterministic).
#define MM_TR 16
// lanes per output column: the largest power of 2 <= 32 with cols * KS <= threads
__device__ __forceinline__ int mm_split(int cols) {
    int ks = 1;
    while (ks < 32 && cols * ks * 2 <= (int)blockDim.x) ks *= 2;
    return ks;
}
// A dot product of two rows, by a whole warp: the lanes split the row (coalesced loads), then a fixed-order
// warp sum; every lane gets the result.
__device__ __forceinline__ real warp_dot(const real* a, const real* b, int n) {
    real v = 0;
    for (int k = LANE; k < n; k += 32) v += a[k] * b[k];
    return warp_sum(v);
}
// 4 adjacent values of a chunk array: one 16-byte load when aligned (AV), else 4 loads (the gradient arrays
// sit at odd offsets in the carve of train_miras.c)
template <bool AV>
__device__ __forceinline__ float4 ld4c(const real* p) {
    if (AV) return ld4(p);
    return make_float4(p[0], p[1], p[2], p[3]);
}
// ---- the same products on the tensor cores (v7: TF32; v8: 3xTF32), a warp per 16 x 8 output tile
// mma.sync m16n8k8 (row.col, TF32 in, fp32 accumulate), lane = 4 g + tg (PTX ISA, "Matrix fragments for
// mma.m16n8k8" with .tf32):   a0 A[g][tg]  a1 A[g+8][tg]  a2 A[g][tg+4]  a3 A[g+8][tg+4]   b0 B[tg][g]  b1 B[tg+4][g]
//                             c0 C[g][2tg]  c1 C[g][2tg+1]  c2 C[g+8][2tg]  c3 C[g+8][2tg+1]
// A TF32 operand is an fp32 register of which the tensor core reads the top 19 bits (10 mantissa bits), so v7 passes
// the fp32 values as they are (truncation, relative error < 2^-10 per operand; no conversion instructions: on sm_90
// cvt.rna.tf32 is several). v8 (3xTF32) splits each operand x = hi + lo, hi = x rounded to 10 mantissa bits (two
// integer operations; a NaN stays in lo = x - hi, which is exact), and adds lo*hi' + hi*lo' + hi*hi' (lo*lo' dropped):
// the products then carry ~2^-21 relative error, fp32's order, at three tensor-core instructions instead of one.
// mem_tc is the block's choice (0: the SIMT products below, 1: TF32, 3: 3xTF32; + 4: 16 x 16 warp tiles where they
// fit, + 8: k in quads, + 16: split K, TC_DISPATCH), set by thread 0 of every kernel
// that runs the chunk functions, before its first barrier (MemArgs.tc).
__shared__ int mem_tc;
#ifdef EMU_CUDA
__device__ inline void mma_tf32(float* c, const uint32_t* a, const uint32_t* b) { emu::mma_m16n8k8_tf32(c, a, b); }
#else
__device__ __forceinline__ void mma_tf32(float* c, const uint32_t* a, const uint32_t* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif
// round half away
__device__ __forceinline__ uint32_t tf32_hi(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }
// c += A B for one k-step of 8: P = 1 (TF32) or 3 (3xTF32) tensor-core instructions
template <int P>
__device__ __forceinline__ void mma_step(float* c, const float* af, const float* bf) {
    uint32_t ah[4], bh[2];
    if (P == 1) {
#pragma unroll
        for (int i = 0; i < 4; i++) ah[i] = __float_as_uint(af[i]);
#pragma unroll
        for (int i = 0; i < 2; i++) bh[i] = __float_as_uint(bf[i]);
    } else {
        uint32_t al[4], bl[2];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            ah[i] = tf32_hi(af[i]);
            al[i] = __float_as_uint(af[i] - __uint_as_float(ah[i]));
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            bh[i] = tf32_hi(bf[i]);
            bl[i] = __float_as_uint(bf[i] - __uint_as_float(bh[i]));
        }
        mma_tf32(c, al, bh);
        mma_tf32(c, ah, bl);
    }
    mma_tf32(c, ah, bh);
}
// out (M, N) = sum_k fa(i, k) fb(k, j) over k < K, warp tiles of 16 x 8 WN dealt to the warps in turn (WN = 2, v13
// and v14: the A fragment, loaded once per k-step, serves both 8-column halves); fc(i, j, c_ij, c_ij+1, add, pre)
// stores two adjacent outputs of a row (i < M checked here, j + 1 < N by fc), or with add = 1 (SK's second half) adds
// them to what is there. fa, fb return 0 out of range; fa4, fb4 (KQ) 4 consecutive k at once. fp(i, j) is what the
// store adds the sums to, loaded before the tile's k-loop (i < M): the old outputs of an `acc` product, the update's
// retention terms; without it the store phase waited on those loads after the last mma, one round trip per tile
// (run 6's and run 7's hottest FFMAs of the backward). The same sums in the same order as loading them in fc.
// Each output has one owner lane and a fixed k order: deterministic (and the same sums for WN = 1 and 2).
// The k-loop loads its operands in batches: every load of TC_BATCH k-steps (of 16 k with the quads, of 8 without)
// is issued before the batch's first mma. A warp issues in order and stops at the first instruction whose operand
// is still in flight, so a load placed after an mma waits for that mma's loads before it even starts. The SASS of
// the old loop (nvcc 13.0, sm_90; dev/cuda/sass_local.py's notes, 2026-12-02) had ptxas's unroll of 2 interleaving
// them (5 loads, an mma, 3 loads, 7 mma: about one L2 round trip per k-step), and so had an unroll of 4, which is why
// TC_UNROLL = 8 had measured no faster (run 4). Batched, a batch costs one round trip. The same mma in the same
// order as one k-step at a time: the same sums, bit for bit.
// TC_BATCH k-steps of 16 with the quads, twice as many steps of 8 without (mm_tn and the updates, whose K is the
// chunk's n: 16 at the presets, one batch): the same registers as the old unroll of 2 (8 16-byte loads per lane at
// WN = 2). At 4 (sm_90, nvcc 13.0) mm_nn and tc_update spilled inside the loop, and the products' larger register
// footprint made their callers keep ~35% more values on the stack across each call (dev/cuda/emu_calls.sh's count:
// ~2,800 -> ~3,770 LDL / STL per chunk and thread in the backward), so 2 until a GPU says otherwise.
#ifndef TC_BATCH
#define TC_BATCH 2
#endif
static constexpr int tc_bq = TC_BATCH, tc_bk = 2 * TC_BATCH;
// wg (a pair of independent products run at once, TC_DISPATCH's WG): 0 every warp, 1 the first half of the block's
// warps, 2 the second half (each product's tiles dealt to its half; never split K)
template <int P, int WN, int KQ, int SK, class FA, class FB, class FA4, class FB4, class FP, class FC>
__device__ __forceinline__ void tc_product(int M, int N, int K, FA fa, FB fb, FA4 fa4, FB4 fb4, FP fp, FC fc,
                                           int wg = 0) {
    int g = LANE >> 2, tg = LANE & 3, tn = (N + 8 * WN - 1) / (8 * WN), tiles = (M + 15) / 16 * tn;
    // the sums of the tile at (i0, j0) over k in [kb, ke), into c
    auto sums = [&](int i0, int j0, int kb, int ke, float(&c)[WN][4]) {
        if (KQ) {
            // k in quads (v15-v18; K % 16 == 0): lane (g, tg) loads A[i][k0 + 4 tg .. + 3] as one 16-byte access
            // (fa4) and the two k-steps of 8 take k = k0 + 4 tg + {0, 1} and k0 + 4 tg + {2, 3} in the fragment slots
            // tg and tg + 4. A permutation of k, the same in A and B, so the same product; a quarter of the loads.
            // KQ = 2: B's k is contiguous too (mm_nt's B[j][k]: fb4, 16 bytes); KQ = 1: B by scalar loads (fb).
            constexpr int BQ = tc_bq;
            for (int kq = kb; kq < ke; kq += 16 * BQ) {
                float4 a0[BQ], a1[BQ], b[BQ][WN];
#pragma unroll
                for (int u = 0; u < BQ; u++) {  // the batch's loads (a step past ke: zeros, not used)
                    int k0 = kq + 16 * u, k = k0 + 4 * tg;
                    bool in = k0 < ke;
                    float4 z = make_float4(0, 0, 0, 0);
                    a0[u] = in ? fa4(i0 + g, k) : z;
                    a1[u] = in ? fa4(i0 + g + 8, k) : z;
#pragma unroll
                    for (int h = 0; h < WN; h++) {
                        int j = j0 + 8 * h + g;
                        b[u][h] = !in       ? z
                                  : KQ == 2 ? fb4(k, j)
                                            : make_float4(fb(k, j), fb(k + 1, j), fb(k + 2, j), fb(k + 3, j));
                    }
                }
#pragma unroll
                for (int u = 0; u < BQ; u++) {  // then its mma, k-step by k-step
                    if (kq + 16 * u >= ke) break;
                    float af0[4] = {a0[u].x, a1[u].x, a0[u].y, a1[u].y}, af1[4] = {a0[u].z, a1[u].z, a0[u].w, a1[u].w};
#pragma unroll
                    for (int h = 0; h < WN; h++) {
                        float bf0[2] = {b[u][h].x, b[u][h].y}, bf1[2] = {b[u][h].z, b[u][h].w};
                        mma_step<P>(c[h], af0, bf0);
                        mma_step<P>(c[h], af1, bf1);
                    }
                }
            }
        } else {
            for (int kq = kb; kq < ke; kq += 8 * tc_bk) {
                float af[tc_bk][4], bf[tc_bk][WN][2];
#pragma unroll
                for (int u = 0; u < tc_bk; u++) {  // the batch's loads (fa, fb give 0 past K; a step past ke: zeros)
                    int k0 = kq + 8 * u;
                    bool in = k0 < ke;
                    af[u][0] = in ? fa(i0 + g, k0 + tg) : 0.f;
                    af[u][1] = in ? fa(i0 + g + 8, k0 + tg) : 0.f;
                    af[u][2] = in ? fa(i0 + g, k0 + tg + 4) : 0.f;
                    af[u][3] = in ? fa(i0 + g + 8, k0 + tg + 4) : 0.f;
#pragma unroll
                    for (int h = 0; h < WN; h++) {
                        bf[u][h][0] = in ? fb(k0 + tg, j0 + 8 * h + g) : 0.f;
                        bf[u][h][1] = in ? fb(k0 + tg + 4, j0 + 8 * h + g) : 0.f;
                    }
                }
#pragma unroll
                for (int u = 0; u < tc_bk; u++) {
                    if (kq + 8 * u >= ke) break;
#pragma unroll
                    for (int h = 0; h < WN; h++) mma_step<P>(c[h], af[u], bf[u][h]);
                }
            }
        }
    };
    // what the tile's outputs add to (fp), loaded before its k-loop; then the outputs: stored (add = 0), or added to
    // what is there (add = 1: the second half of a split K)
    auto pref = [&](int i0, int j0, float2(&pre)[WN][2]) {
#pragma unroll
        for (int h = 0; h < WN; h++) {
            pre[h][0] = i0 + g < M ? fp(i0 + g, j0 + 8 * h + 2 * tg) : make_float2(0, 0);
            pre[h][1] = i0 + g + 8 < M ? fp(i0 + g + 8, j0 + 8 * h + 2 * tg) : make_float2(0, 0);
        }
    };
    auto store = [&](int i0, int j0, float(&c)[WN][4], int add, float2(&pre)[WN][2]) {
#pragma unroll
        for (int h = 0; h < WN; h++) {
            if (i0 + g < M) fc(i0 + g, j0 + 8 * h + 2 * tg, c[h][0], c[h][1], add, pre[h][0]);
            if (i0 + g + 8 < M) fc(i0 + g + 8, j0 + 8 * h + 2 * tg, c[h][2], c[h][3], add, pre[h][1]);
        }
    };
    if (SK) {
        // K split in halves over two warps per tile (v17, v18; at most half as many tiles as warps, TC_DISPATCH): the
        // narrow products (16 x 64 outputs over K = 256) leave half the warps idle and the rest walking K alone. The
        // first half's warp stores its sums, and after a barrier the second half's adds its own: a fixed order,
        // deterministic; a closing barrier, since the next product may touch these outputs (even with sync = 0).
        int w = threadIdx.x >> 5, tile = w % tiles, half = w / tiles, i0 = tile / tn * 16, j0 = tile % tn * 8 * WN;
        float c[WN][4] = {};
        float2 pre[WN][2] = {};
        if (half == 0) pref(i0, j0, pre);
        if (half < 2) sums(i0, j0, half * (K / 2), (half + 1) * (K / 2), c);
        if (half == 0) store(i0, j0, c, 0, pre);
        __syncthreads();
        if (half == 1) store(i0, j0, c, 1, pre);
        __syncthreads();
    } else {
        int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
        if (wg) {  // (the group's warps: w in [0, nw / 2) of its half; an odd last warp idles)
            nw /= 2;
            w -= (wg - 1) * nw;
            if (w >= nw) w = -1;
        }
        for (int tile = w < 0 ? tiles : w; tile < tiles; tile += nw) {  // (the same trip count in a warp)
            int i0 = tile / tn * 16, j0 = tile % tn * 8 * WN;
            float c[WN][4] = {};
            float2 pre[WN][2];
            pref(i0, j0, pre);
            sums(i0, j0, 0, K, c);
            store(i0, j0, c, 0, pre);
        }
    }
}
// (the quad accessors of a product without them)
#define TC_NO4 [](int, int) { return make_float4(0, 0, 0, 0); }
// out = (acc ? out : 0) + s rs[i] (fa fb)_ij  (rs: NULL for 1), the store of the three mm_*_rs; WN = 2 (whole tiles,
// N even, out 8-byte aligned: TC_DISPATCH) reads and writes the two adjacent outputs as one 8-byte access
template <int P, int WN, int KQ, int SK, class FA, class FB, class FA4, class FB4>
__device__ __forceinline__ void tc_mm(real* out, int M, int N, int K, FA fa, FB fb, FA4 fa4, FB4 fb4, const real* rs,
                                      real s, int acc, int wg = 0) {
    tc_product<P, WN, KQ, SK>(
        M, N, K, fa, fb, fa4, fb4,
        [&](int i, int j) { return WN == 2 && acc ? ld2(out + i * N + j) : make_float2(0, 0); },  // (the old outputs)
        [&](int i, int j, float v0, float v1, int add, float2 o) {
            real f = s * (rs ? rs[i] : 1);
            int e = i * N + j;
            if (SK && add) {  // (whole tiles)
                out[e] += f * v0;
                out[e + 1] += f * v1;
                return;
            }
            if (WN == 2) {
                st2(out + e, make_float2(o.x + f * v0, o.y + f * v1));
                return;
            }
            if (j < N) out[e] = acc ? out[e] + f * v0 : f * v0;
            if (j + 1 < N) out[e + 1] = acc ? out[e + 1] + f * v1 : f * v1;
        },
        wg);
}
// the three shapes: out = A B^T (B (N, K)), A B (B (K, N)), A^T B (A (K, M)); mm_tn's rs scales term k.
// WT (whole tiles: M % 16 == N % 8 == K % 8 == 0, as at every full chunk of the presets) skips the range checks.
// Q (v15-v18, where TC_DISPATCH allows it): k in quads from A (mm_nt, mm_nn) and B (mm_nt), whose k is contiguous.
// (int indices: the operands have at most 256 x 256 elements)
#define TC_IN(WT, i, k, I, KK, v) ((WT) || ((i) < (I) && (k) < (KK)) ? (v) : 0.f)
template <int P, bool WT, int WN, bool Q, bool SK>
__device__ __noinline__ void tc_nt(real* out, const real* A, const real* Bm, const real* rs, int M, int N, int K,
                                   real s, int acc, int wg) {
    tc_mm<P, WN, Q ? 2 : 0, SK>(
        out, M, N, K, [&](int i, int k) { return TC_IN(WT, i, k, M, K, A[i * K + k]); },
        [&](int k, int j) { return TC_IN(WT, k, j, K, N, Bm[j * K + k]); },
        [&](int i, int k) { return ld4(A + i * K + k); }, [&](int k, int j) { return ld4(Bm + j * K + k); }, rs, s, acc,
        wg);
}
template <int P, bool WT, int WN, bool Q, bool SK>
__device__ __noinline__ void tc_nn(real* out, const real* A, const real* Bm, const real* rs, int M, int N, int K,
                                   real s, int acc, int wg) {
    tc_mm<P, WN, Q ? 1 : 0, SK>(
        out, M, N, K, [&](int i, int k) { return TC_IN(WT, i, k, M, K, A[i * K + k]); },
        [&](int k, int j) { return TC_IN(WT, k, j, K, N, Bm[k * N + j]); },
        [&](int i, int k) { return ld4(A + i * K + k); }, TC_NO4, rs, s, acc, wg);
}
template <int P, bool WT, int WN, bool Q, bool SK>
__device__ __noinline__ void tc_tn(real* out, const real* A, const real* Bm, const real* rs, int M, int N, int K,
                                   real s, int acc, int wg) {
    tc_mm<P, WN, 0, 0>(
        out, M, N, K, [&](int i, int k) { return TC_IN(WT, i, k, M, K, A[k * M + i] * (rs ? rs[k] : 1)); },
        [&](int k, int j) { return TC_IN(WT, k, j, K, N, Bm[k * N + j]); }, TC_NO4, TC_NO4, NULL, s, acc, wg);
}
#ifdef EMU_CUDA  // the emulator counts the wide, quad and split products (memlab prints them: v13-v18 take them)
#include <atomic>
static std::atomic<long> emu_tc_wide{0}, emu_tc_quad{0}, emu_tc_split{0};
#define TC_WIDE_COUNT() (threadIdx.x == 0 ? (void)emu_tc_wide++ : (void)0)
#define TC_QUAD_COUNT() (threadIdx.x == 0 ? (void)emu_tc_quad++ : (void)0)
#define TC_SPLIT_COUNT() (threadIdx.x == 0 ? (void)emu_tc_split++ : (void)0)
#else
#define TC_WIDE_COUNT() ((void)0)
#define TC_QUAD_COUNT() ((void)0)
#define TC_SPLIT_COUNT() ((void)0)
#endif
// one of the instantiations of f: 3xTF32 or TF32 (mem_tc & 3), whole tiles or not (M, N, K: the product's shape),
// with mem_tc & 4 (v13-v18) 16 x 16 warp tiles where the shape has whole ones, at least one per warp, and the
// 8-byte accesses of the output (the pointer o, 8-byte aligned) are allowed; with mem_tc & 8 (v15-v18) k in quads
// where f takes them (QF, a constant), K % 16 == 0 and the pointer q (the quad operands' addresses or'ed, row strides
// included) is 16-byte aligned; with mem_tc & 16 (v17, v18) K split over two warps per 16 x 8 tile where f takes it
// (SF, a constant: the products of rows and a state, mm_nt and mm_nn), the tiles are at most half the warps and the
// halves whole k-steps
template <int P, bool Q, bool S, class F>
__device__ __forceinline__ void tc_pick(F f, bool x, bool sk, bool w) {  // (f: a generic lambda taking the constants)
    using one = std::integral_constant<int, 1>;
    using two = std::integral_constant<int, 2>;
    using p = std::integral_constant<int, P>;
    using q = std::integral_constant<bool, Q>;
    if (x)
        f(p(), std::true_type(), two(), q(), std::false_type());
    else if (S && sk)
        f(p(), std::true_type(), one(), q(), std::integral_constant<bool, S>());
    else if (w)
        f(p(), std::true_type(), one(), q(), std::false_type());
    else
        f(p(), std::false_type(), one(), std::false_type(), std::false_type());
}
#define TC_DISPATCH(f, QF, SF, q, o, M, N, K, WG, ...)                                                            \
    do {                                                                                                          \
        bool w_ = (M) % 16 == 0 && (N) % 8 == 0 && (K) % 8 == 0;                                                  \
        int nw_ = (int)(blockDim.x >> 5) / ((WG) ? 2 : 1);                                                        \
        bool x_ = (mem_tc & 4) && w_ && (N) % 16 == 0 && (M) / 16 * ((N) / 16) >= nw_ && ((uintptr_t)(o)&7) == 0; \
        bool q_ = (QF) && (mem_tc & 8) && w_ && (K) % 16 == 0 && ((uintptr_t)(q)&15) == 0;                        \
        bool s_ = (SF) && !(WG) && (mem_tc & 16) && w_ && !x_ && 2 * ((M) / 16) * ((N) / 8) <= nw_ &&             \
                  (K) % (q_ ? 32 : 16) == 0;                                                                      \
        if (x_) TC_WIDE_COUNT();                                                                                  \
        if (q_) TC_QUAD_COUNT();                                                                                  \
        if (s_) TC_SPLIT_COUNT();                                                                                 \
        auto f_ = [&](auto p_, auto wt_, auto wn_, auto qq_, auto sk_) {                                          \
            f<decltype(p_)::value, decltype(wt_)::value, decltype(wn_)::value, decltype(qq_)::value,              \
              decltype(sk_)::value>(__VA_ARGS__);                                                                 \
        };                                                                                                        \
        auto p_ = [&](auto pp_) { /* (q_ only where QF) */                                                        \
                                  if (q_)                                                                         \
                                      tc_pick<decltype(pp_)::value, (QF), (SF)>(f_, x_, s_, w_);                  \
                                  else                                                                            \
                                      tc_pick<decltype(pp_)::value, false, (SF)>(f_, x_, s_, w_);                 \
        };                                                                                                        \
        if ((mem_tc & 3) == 3)                                                                                    \
            p_(std::integral_constant<int, 3>());                                                                 \
        else                                                                                                      \
            p_(std::integral_constant<int, 1>());                                                                 \
    } while (0)
// mm_nt, one pass of output columns [j0, j0 + per): the state rows are read 16 bytes at a time (K % 4 == 0)
// The state loops below load MM_U (8) state values before using any of them: a thread's loads are then in
// flight together, and a pass waits for the L2 (or DRAM) once or twice instead of once per loaded value (with
// 16 warps per SM there is little else to hide that latency; at the titans shape a thread has 8 values per
// pass). The sums keep their order.
#define MM_U 8
#define MM_UN 4  // mm_nn's loads are scalar: 4 x 4 of them (8 would spill)
template <bool AV>
__device__ __forceinline__ void mm_nt_cols(real* r, const real* A, const real* Bm, int j, bool ok, int sl, int ks,
                                           int tn, int K) {
    if (!ok) return;
    const real* w = Bm + (size_t)j * K;
    int q = 4 * sl, st = 4 * ks;
    for (; q + (MM_U - 1) * st < K; q += MM_U * st) {  // MM_U state vectors at a time
        float4 wv[MM_U];
#pragma unroll
        for (int v = 0; v < MM_U; v++) wv[v] = ld4(w + q + v * st);
#pragma unroll
        for (int v = 0; v < MM_U; v++) {
#pragma unroll
            for (int u = 0; u < MM_TR; u++)
                if (u < tn) {
                    float4 xv = ld4c<AV>(A + (size_t)u * K + q + v * st);
                    r[u] += xv.x * wv[v].x;
                    r[u] += xv.y * wv[v].y;
                    r[u] += xv.z * wv[v].z;
                    r[u] += xv.w * wv[v].w;
                }
        }
    }
    for (; q < K; q += st) {
        float4 wv = ld4(w + q);
#pragma unroll
        for (int u = 0; u < MM_TR; u++)
            if (u < tn) {
                float4 xv = ld4c<AV>(A + (size_t)u * K + q);
                r[u] += xv.x * wv.x;
                r[u] += xv.y * wv.y;
                r[u] += xv.z * wv.z;
                r[u] += xv.w * wv.w;
            }
    }
}
// (wg: 1 or 2, one of a pair of independent products that write apart, run at once on the two halves of the warps
// with the tensor cores: TC_DISPATCH; the SIMT products run it on every thread, as wg = 0)
MEMFN void mm_nt_rs(real* out, const real* A, const real* Bm, const real* rs, int M, int N, int K, real s, int acc,
                    int sync = 1, int wg = 0) {
    if (mem_tc) {
        TC_DISPATCH(tc_nt, true, true, (uintptr_t)A | (uintptr_t)Bm | (K * 4), out, M, N, K, wg, out, A, Bm, rs, M, N,
                    K, s, acc, wg);
        if (sync) __syncthreads();
        return;
    }
    int ks = mm_split(N), per = blockDim.x / ks, sl = threadIdx.x % ks;  // the ks lanes of a column are adjacent
    bool vec = K % 4 == 0 && al16(Bm), av = al16(A);
    for (int t0 = 0; t0 < M; t0 += MM_TR) {
        int tn = M - t0 < MM_TR ? M - t0 : MM_TR;
        const real* a = A + (size_t)t0 * K;
        for (int j0 = 0; j0 < N; j0 += per) {  // the same trip count in every lane
            int j = j0 + threadIdx.x / ks;
            bool ok = j < N;
            real r[MM_TR];
#pragma unroll
            for (int u = 0; u < MM_TR; u++) r[u] = 0;
            if (vec) {
                if (av)
                    mm_nt_cols<true>(r, a, Bm, j, ok, sl, ks, tn, K);
                else
                    mm_nt_cols<false>(r, a, Bm, j, ok, sl, ks, tn, K);
            } else if (ok)
                for (int q = sl; q < K; q += ks) {
                    real wv = Bm[(size_t)j * K + q];
#pragma unroll
                    for (int u = 0; u < MM_TR; u++)
                        if (u < tn) r[u] += a[(size_t)u * K + q] * wv;
                }
            for (int o = ks >> 1; o > 0; o >>= 1) {
#pragma unroll
                // (tn: the same in every lane)
                for (int u = 0; u < MM_TR; u++)
                    if (u < tn) r[u] += __shfl_xor_sync(0xffffffffu, r[u], o);
            }
            if (ok && sl == 0) {
#pragma unroll
                for (int u = 0; u < MM_TR; u++)
                    if (u < tn) {
                        size_t e = (size_t)(t0 + u) * N + j;
                        real v = s * (rs ? rs[t0 + u] : 1) * r[u];
                        out[e] = acc ? out[e] + v : v;
                    }
            }
        }
    }
    if (sync) __syncthreads();
}
template <bool AV>
__device__ __forceinline__ void mm_nn_cols(real* r, const real* A, const real* Bm, int j, bool ok, int sl, int ks,
                                           int tn, int N, int K) {
    if (!ok) return;
    int q = 4 * sl, st = 4 * ks;
    for (; q + (MM_UN - 1) * st < K; q += MM_UN * st) {
        real bv[MM_UN][4];
#pragma unroll
        for (int v = 0; v < MM_UN; v++) {
#pragma unroll
            for (int z = 0; z < 4; z++) bv[v][z] = Bm[(size_t)(q + v * st + z) * N + j];
        }
#pragma unroll
        for (int v = 0; v < MM_UN; v++) {
#pragma unroll
            for (int u = 0; u < MM_TR; u++)
                if (u < tn) {
                    float4 xv = ld4c<AV>(A + (size_t)u * K + q + v * st);
                    r[u] += xv.x * bv[v][0];
                    r[u] += xv.y * bv[v][1];
                    r[u] += xv.z * bv[v][2];
                    r[u] += xv.w * bv[v][3];
                }
        }
    }
    for (; q < K; q += st) {
        real b0 = Bm[(size_t)q * N + j], b1 = Bm[(size_t)(q + 1) * N + j], b2 = Bm[(size_t)(q + 2) * N + j],
             b3 = Bm[(size_t)(q + 3) * N + j];
#pragma unroll
        for (int u = 0; u < MM_TR; u++)
            if (u < tn) {
                float4 xv = ld4c<AV>(A + (size_t)u * K + q);
                r[u] += xv.x * b0;
                r[u] += xv.y * b1;
                r[u] += xv.z * b2;
                r[u] += xv.w * b3;
            }
    }
}
MEMFN void mm_nn_rs(real* out, const real* A, const real* Bm, const real* rs, int M, int N, int K, real s, int acc,
                    int sync = 1, int wg = 0) {  // (wg: mm_nt_rs's)
    if (mem_tc) {
        TC_DISPATCH(tc_nn, true, true, (uintptr_t)A | (K * 4), out, M, N, K, wg, out, A, Bm, rs, M, N, K, s, acc, wg);
        if (sync) __syncthreads();
        return;
    }
    int ks = mm_split(N), cpw = 32 / ks, per = (blockDim.x >> 5) * cpw;  // a warp: cpw adjacent columns x ks slices
    int sl = LANE / cpw, jw = (threadIdx.x >> 5) * cpw + LANE % cpw;
    bool vec = K % 4 == 0, av = al16(A);
    for (int t0 = 0; t0 < M; t0 += MM_TR) {
        int tn = M - t0 < MM_TR ? M - t0 : MM_TR;
        const real* a = A + (size_t)t0 * K;
        for (int j0 = 0; j0 < N; j0 += per) {
            int j = j0 + jw;
            bool ok = j < N;
            real r[MM_TR];
#pragma unroll
            for (int u = 0; u < MM_TR; u++) r[u] = 0;
            if (vec) {
                if (av)
                    mm_nn_cols<true>(r, a, Bm, j, ok, sl, ks, tn, N, K);
                else
                    mm_nn_cols<false>(r, a, Bm, j, ok, sl, ks, tn, N, K);
            } else if (ok)
                for (int q = sl; q < K; q += ks) {
                    real bv = Bm[(size_t)q * N + j];
#pragma unroll
                    for (int u = 0; u < MM_TR; u++)
                        if (u < tn) r[u] += a[(size_t)u * K + q] * bv;
                }
            for (int o = 16; o >= cpw; o >>= 1) {
#pragma unroll
                for (int u = 0; u < MM_TR; u++)
                    if (u < tn) r[u] += __shfl_xor_sync(0xffffffffu, r[u], o);
            }
            if (ok && sl == 0) {
#pragma unroll
                for (int u = 0; u < MM_TR; u++)
                    if (u < tn) {
                        size_t e = (size_t)(t0 + u) * N + j;
                        real v = s * (rs ? rs[t0 + u] : 1) * r[u];
                        out[e] = acc ? out[e] + v : v;
                    }
            }
        }
    }
    if (sync) __syncthreads();
}
template <bool BV>
__device__ __forceinline__ void mm_tn_vec(real* out, const real* A, const real* Bm, const real* rs, int M, int N, int K,
                                          real s, int acc) {
    int N4 = N / 4, tot = M * N4, nt = blockDim.x;
    // a thread per 4 adjacent outputs, MM_U at a time
    for (int e0 = threadIdx.x; e0 < tot; e0 += MM_U * nt) {
        float4 v[MM_U];
#pragma unroll
        for (int w = 0; w < MM_U; w++) {
            int e4 = e0 + w * nt;
            v[w] = (acc && e4 < tot) ? ld4(out + (size_t)(e4 / N4) * N + 4 * (e4 % N4)) : make_float4(0, 0, 0, 0);
        }
#pragma unroll
        for (int w = 0; w < MM_U; w++) {
            int e4 = e0 + w * nt;
            if (e4 >= tot) break;
            int i = e4 / N4, j = 4 * (e4 % N4);
            for (int k = 0; k < K; k++) {
                real a = s * A[(size_t)k * M + i] * (rs ? rs[k] : 1);
                float4 b = ld4c<BV>(Bm + (size_t)k * N + j);
                v[w].x += a * b.x;
                v[w].y += a * b.y;
                v[w].z += a * b.z;
                v[w].w += a * b.w;
            }
            st4(out + (size_t)i * N + j, v[w]);
        }
    }
}
MEMFN void mm_tn_rs(real* out, const real* A, const real* Bm, const real* rs, int M, int N, int K, real s, int acc,
                    int sync = 1, int wg = 0) {  // (wg: mm_nt_rs's)
    if (mem_tc) {
        TC_DISPATCH(tc_tn, false, false, 0, out, M, N, K, wg, out, A, Bm, rs, M, N, K, s, acc, wg);
        if (sync) __syncthreads();
        return;
    }
    if (N % 4 == 0 && al16(out)) {
        if (al16(Bm))
            mm_tn_vec<true>(out, A, Bm, rs, M, N, K, s, acc);
        else
            mm_tn_vec<false>(out, A, Bm, rs, M, N, K, s, acc);
    } else
        FOR(e, M * N) {
            int i = e / N, j = e % N;
            real o = acc ? out[e] : 0;
            for (int k = 0; k < K; k++) o += s * A[(size_t)k * M + i] * (rs ? rs[k] : 1) * Bm[(size_t)k * N + j];
            out[e] = o;
        }
    if (sync) __syncthreads();
}
MEMFN void mm_nt_gpu(real* out, const real* A, const real* Bm, int M, int N, int K, real s, int acc) {
    mm_nt_rs(out, A, Bm, NULL, M, N, K, s, acc);
}
MEMFN void mm_nn_gpu(real* out, const real* A, const real* Bm, int M, int N, int K, real s, int acc) {
    mm_nn_rs(out, A, Bm, NULL, M, N, K, s, acc);
}
MEMFN void mm_tn_gpu(real* out, const real* A, const real* Bm, int M, int N, int K, real s, int acc) {
    mm_tn_rs(out, A, Bm, NULL, M, N, K, s, acc);
}
// would mm_nt_rs / mm_nn_rs split an (M, N, K) product's K on the tensor cores (v17, v18: TC_DISPATCH's s_, with K in
// whole steps of the quads' 32, so that a yes holds whatever the operands' alignment)? Such a product and an
// independent one beside it (a pair that writes apart) then run at once on the two halves of the warps (wg 1, 2):
// one barrier for the pair, not the split's two plus the pair's closing one
MEMFN bool tc_splits_k(int M, int N, int K) {
    int nw = (int)(blockDim.x >> 5);
    return (mem_tc & 16) && nw >= 2 && M % 16 == 0 && N % 8 == 0 && K % 32 == 0 && 2 * (M / 16) * (N / 8) <= nw;
}

// ---- omega (SPEC §5.5): the sliding-window coefficient mask (train_miras.c's omega_coef_forward, whose comment
// derives it). The chunk holds nh halo rows (the c-1 tokens before it) ahead of its own; every step uses
// G_j = sum_{o<c} gamma_j[o] g_{j-o}, so the reads and the carry keep their dual form with the mixed coefficients
//     C'[t][i] = sum_{j = max(i, nh)}^{min(t, i+c-1)} C[t][j] gamma_j[j - i]      (s' = s Gamma alike)
// C, s before the mix are kept in C0, s0. A thread per (t, i).
MEMFN void omega_coef_forward_gpu(MemChunkGpu* c, int n) {
    int w = c->wc, nh = c->nh;
    size_t nn = (size_t)n * n;
    FOR(e, nn) {
        c->C0[e] = c->C[e];
        c->s0[e] = c->s[e];
    }
    __syncthreads();
    FOR(e, nn) {
        int t = (int)(e / n), i = (int)(e % n);
        real sc = 0, ss = 0;
        for (int j = i > nh ? i : nh; j <= t && j < i + w; j++) {
            real gm = c->gam[(size_t)j * w + j - i];
            sc += c->C0[(size_t)t * n + j] * gm;
            ss += c->s0[(size_t)t * n + j] * gm;
        }
        c->C[e] = i <= t ? sc : 0;
        c->s[e] = i <= t ? ss : 0;
    }
    __syncthreads();
}
// From dC' (all rows) and ds' (last row, c->ds) to dgamma (c->dgam) and dC, ds of the unmixed coefficients, in place;
// C, s get their unmixed values back for the recurrences' backward:
//     dgamma_j[o] = sum_{t >= j} dC'[t][j-o] C[t][j] + ds'[j-o] s[n-1][j]        (own rows j >= nh, o <= j)
//     dC[t][j] = sum_o dC'[t][j-o] gamma_j[o]     ds[j] = sum_o ds'[j-o] gamma_j[o]   (own rows; halo columns 0)
// A thread per (j, o) for dgamma, per (t, j) for dC (into dC0), per j for ds (after dC0: n more floats).
MEMFN void omega_coef_backward_gpu(MemChunkGpu* c, int n) {
    int w = c->wc, nh = c->nh;
    size_t nn = (size_t)n * n;
    real* ds0 = c->dC0 + nn;
    FOR(e, (size_t)n * w) {
        int j = (int)(e / w), o = (int)(e % w);
        real g = 0;
        if (j >= nh && o <= j) {
            for (int t = j; t < n; t++) g += c->dC[(size_t)t * n + j - o] * c->C0[(size_t)t * n + j];
            g += c->ds[j - o] * c->s0[(size_t)(n - 1) * n + j];
        }
        c->dgam[e] = g;
    }
    FOR(e, nn) {
        int t = (int)(e / n), j = (int)(e % n);
        real g = 0;
        if (j >= nh && j <= t)
            for (int o = 0; o < w && o <= j; o++) g += c->dC[(size_t)t * n + j - o] * c->gam[(size_t)j * w + o];
        c->dC0[e] = g;
    }
    FOR(j, n) {
        real g = 0;
        if (j >= nh)
            for (int o = 0; o < w && o <= j; o++) g += c->ds[j - o] * c->gam[(size_t)j * w + o];
        ds0[j] = g;
    }
    __syncthreads();
    FOR(e, nn) {
        c->dC[e] = c->dC0[e];
        c->C[e] = c->C0[e];
        c->s[e] = c->s0[e];
    }
    FOR(j, n) c->ds[j] = ds0[j];
    __syncthreads();
}

// Chunk coefficients by the recurrences (t, i local, 0-based; sigma_{-1} = alpha_{-1} = 1):
//   alpha_t = a_t alpha_{t-1}          sigma_t = theta_t sigma_{t-1}      beta_t = a_t beta_{t-1} + sigma_t
//   s[t][i] = eta_i (t = i), theta_t s[t-1][i] (t > i)       C[t][i] = a_t C[t-1][i] + s[t][i]
// Column i of s and C depends on column i only: a thread per column; thread 0 runs the scalar chains.
// (omega: beta stays 0 over the halo rows, which take no step; then the window mix)
MEMFN void mem_coef_forward_gpu(MemChunkGpu* c, int n, int momentum) {
    if (threadIdx.x == 0)
        for (int t = 0; t < n; t++) {
            real th = momentum ? c->theta[t] : 0;
            c->alpha[t] = c->a[t] * (t ? c->alpha[t - 1] : 1);
            c->sigma[t] = th * (t ? c->sigma[t - 1] : 1);
            c->beta[t] = t < c->nh ? 0 : c->a[t] * (t ? c->beta[t - 1] : 0) + c->sigma[t];
        }
    FOR(i, n) for (int t = 0; t < n; t++) {
        real th = momentum ? c->theta[t] : 0;
        real s = i == t ? c->eta[i] : (i < t ? th * c->s[(t - 1) * n + i] : 0);
        c->s[t * n + i] = s;
        c->C[t * n + i] = i <= t ? c->a[t] * (i < t ? c->C[(t - 1) * n + i] : 0) + s : 0;
    }
    __syncthreads();
    if (c->wc > 1) omega_coef_forward_gpu(c, n);
}
// Reverse mode through the recurrences: from dalpha, dbeta, dC (all rows) and dsigma, ds (last row)
// to da, deta, dtheta. Thread 0: the scalar chains (ga, gb, gs); thread i: column i (the CPU's gC[i], gS[i]),
// whose terms for da[t] and dtheta[t] go to nn1, nn2 and are summed per row after a barrier.
MEMFN void mem_coef_backward_gpu(MemChunkGpu* c, int n, int momentum) {
    if (c->wc > 1) omega_coef_backward_gpu(c, n);
    real *tA = c->nn1, *tT = c->nn2;
    if (threadIdx.x == 0) {
        real ga = 0, gb = 0, gs = 0;  // adjoints of alpha_{t+1}, beta_{t+1}, sigma_{t+1}
        for (int t = n - 1; t >= 0; t--) {
            real an = t + 1 < n ? c->a[t + 1] : 0, thn = (momentum && t + 1 < n) ? c->theta[t + 1] : 0;
            ga = c->dalpha[t] + an * ga;
            c->da[t] += ga * (t ? c->alpha[t - 1] : 1);
            gb = c->dbeta[t] + an * gb;
            c->da[t] += gb * (t ? c->beta[t - 1] : 0);
            gs = (t == n - 1 ? c->dsig[0] : 0) + gb + thn * gs;
            if (momentum) c->dtheta[t] += gs * (t ? c->sigma[t - 1] : 1);
        }
    }
    FOR(i, n) {
        real gC = 0, gS = 0;  // adjoints of C[t+1][i], s[t+1][i]
        for (int t = n - 1; t >= i; t--) {
            real an = t + 1 < n ? c->a[t + 1] : 0, thn = (momentum && t + 1 < n) ? c->theta[t + 1] : 0;
            real g = c->dC[t * n + i] + an * gC;
            tA[t * n + i] = g * (i < t ? c->C[(t - 1) * n + i] : 0);
            real h = (t == n - 1 ? c->ds[i] : 0) + g + thn * gS;
            if (i == t) {
                c->deta[i] += h;
                tT[t * n + i] = 0;
            } else
                tT[t * n + i] = momentum ? h * c->s[(t - 1) * n + i] : 0;
            gC = g;
            gS = h;
        }
    }
    __syncthreads();
    FOR(t, n) {
        real sa = 0, st = 0;
        for (int i = 0; i <= t; i++) {
            sa += tA[t * n + i];
            st += tT[t * n + i];
        }
        c->da[t] += sa;
        if (momentum) c->dtheta[t] += st;
    }
    __syncthreads();
}

// A read through one memory matrix W (m, p) as it evolves inside the chunk (dual form):
//   out_t = alpha_t W x_t + beta_t S x_t - cs sum_{i<=t} C[t][i] (x_t . xk_i) dl_i
// (cs = 1, except 1/s for Moneta's lq retention, whose reads are A_t / s)
// x (n, p) the read inputs, xk (n, p) the write inputs, dl (n, m) the error rows of the writes.
// Keeps xw = x W^T, xs = x S^T, xx = x xk^T for the backward. xk NULL: xx already holds x xk^T (the gated memory's
// W3 read has W2's inputs). Split (sp = SPLIT_P: p is the slice of dm, W1's read): the four products are partial sums
// over this CTA's p, added over the cluster before they are used.
MEMFN void mem_read_forward_gpu(real* out, real* xw, real* xs, real* xx, real* xa, const real* x, const real* xk,
                                const real* dl, const real* W, const real* S, const real* W0, real cs, MemChunkGpu* c,
                                int n, int m, int p, int sp = SPLIT_NONE) {
    bool cl = cl_on(c, sp) && sp == SPLIT_P;
    int nm4 = cl_al((size_t)n * m);
    real* xb = cl ? cl_buf(c) : NULL;  // the partials: xw, xs, xa, xx at nm4 apart
    mm_nt_rs(cl ? xb : xw, x, W, NULL, n, m, p, 1, 0, 0);  // (the independent products: one barrier)
    if (S) mm_nt_rs(cl ? xb + nm4 : xs, x, S, NULL, n, m, p, 1, 0, 0);
    if (W0) mm_nt_rs(cl ? xb + 2 * nm4 : xa, x, W0, NULL, n, m, p, 1, 0, 0);
    if (xk)
        mm_nt_gpu(cl ? xb + 3 * nm4 : xx, x, xk, n, n, p, 1, 0);  // (its barrier publishes the products above)
    else
        __syncthreads();
    if (cl) {
        ClPart pt[4] = {{xw, 0, n * m, 0}, {xx, 3 * nm4, n * n, 0}};  // (xk is never NULL here: W1's read)
        int k = 2;
        if (S) pt[k++] = {xs, nm4, n * m, 0};
        if (W0) pt[k++] = {xa, 2 * nm4, n * m, 0};
        cl_reduce(c, pt, k);
    }
    FOR(e, n * m) {
        int t = e / m, j = e % m;
        real o = c->alpha[t] * xw[e] + (S ? c->beta[t] * xs[e] : 0) + (W0 ? (1 - c->alpha[t]) * cs * xa[e] : 0);
        for (int i = 0; i <= t; i++) {
            real w = cs * c->C[t * n + i] * xx[t * n + i];
            o -= w * dl[(size_t)i * m + j];
        }
        out[e] = o;
    }
    __syncthreads();
}
// Its backward. With dA[t][i] = -(dout_t . dl_i), gx = cs C dA and w = cs C xx (both (n, n), lower):
//   dalpha_t += dout_t . xw_t   dbeta_t += dout_t . xs_t   dC += cs dA xx   dcs += sum dA C xx
//   dx_t += alpha_t W^T dout_t + beta_t S^T dout_t + sum_{i<=t} gx[t][i] xk_i
//   dW += sum_t alpha_t dout_t x_t^T   dS += sum_t beta_t dout_t x_t^T
//   dxk_i += sum_{t>=i} gx[t][i] x_t   ddl_i -= sum_{t>=i} w[t][i] dout_t
// With the anchored retention (W0: (1 - alpha_t) cs W0 x_t in the read), also
//   dalpha_t -= cs dout_t . xa_t   dcs += sum_t (1 - alpha_t) dout_t . xa_t
//   dx_t += (1 - alpha_t) cs W0^T dout_t   dW0 += sum_t (1 - alpha_t) cs dout_t x_t^T
// Split (sp = SPLIT_M: m is the slice of dm, W2's and W3's reads): the row dots over m, dA's sum over m and the
// products into dx (sums over m) are partial sums, added over the cluster; the rest is per CTA.
MEMFN void mem_read_backward_gpu(real* dx, real* dxk, real* ddl, real* dW, real* dS, real* dW0, real* dcs,
                                 MemChunkGpu* c, const real* dout, const real* x, const real* xk, const real* dl,
                                 const real* W, const real* S, const real* W0, real cs, const real* xw, const real* xs,
                                 const real* xx, const real* xa, int n, int m, int p, int sp = SPLIT_NONE) {
    real *gx = c->nn1, *wx = c->nn2, sca = 0;  // sca: this thread's part of dcs through the anchor
    bool cl = cl_on(c, sp) && sp == SPLIT_M;
    int n4 = cl_al(n);
    real* xb = cl ? cl_buf(c) : NULL;  // the partials: the row dots (3 n4), then dA (n, n)
    auto dots = [&](int t, real sa, real sb, real s0) {
        c->dalpha[t] += sa;
        if (S) c->dbeta[t] += sb;
        if (W0) {
            c->dalpha[t] -= cs * s0;
            sca += (1 - c->alpha[t]) * s0;
            c->oma[t] = (1 - c->alpha[t]) * cs;
        }
    };
    WARP_FOR(t, n) {
        const real* g = dout + (size_t)t * m;
        real sa = 0, sb = 0, s0 = 0;
        for (int j = LANE; j < m; j += 32) {
            sa += g[j] * xw[(size_t)t * m + j];
            if (S) sb += g[j] * xs[(size_t)t * m + j];
            if (W0) s0 += g[j] * xa[(size_t)t * m + j];
        }
        sa = warp_sum(sa);
        sb = warp_sum(sb);
        if (W0) s0 = warp_sum(s0);
        if (LANE == 0) {
            if (cl) {
                xb[t] = sa;
                xb[n4 + t] = sb;
                xb[2 * n4 + t] = s0;
            } else
                dots(t, sa, sb, s0);
        }
    }
    mm_nt_gpu(cl ? xb + 3 * n4 : gx, dout, dl, n, n, m, -1, 0);  // dA = -dout dl^T, then gx and wx in place
    if (cl) {
        ClPart pt[2] = {{c->mc, 0, 3 * n4, 0}, {gx, 3 * n4, n * n, 0}};
        cl_reduce(c, pt, 2);
        FOR(t, n) dots(t, c->mc[t], c->mc[n4 + t], c->mc[2 * n4 + t]);
        __syncthreads();
    }
    real scs = 0;
    FOR(e, n * n) {
        int t = e / n, i = e % n;
        real gxe = 0, wxe = 0;
        if (i <= t) {
            real cti = c->C[e], dA = gx[e];
            c->dC[e] += cs * dA * xx[e];
            scs += dA * cti * xx[e];
            gxe = cs * dA * cti;
            wxe = cs * cti * xx[e];
        }
        gx[e] = gxe;
        wx[e] = wxe;
    }
    scs = block_sum(scs + sca);  // (its barriers also publish gx, wx and oma)
    if (threadIdx.x == 0) *dcs += scs;
    real* xd = cl ? cl_buf(c) : dx;  // (split: dx's partial sums over m)
    mm_nn_rs(xd, dout, W, c->alpha, n, p, m, 1, !cl, 0);  // dx_t += alpha_t W^T dout_t   (the products: one barrier)
    if (S) mm_nn_rs(xd, dout, S, c->beta, n, p, m, 1, 1, 0);
    if (W0) mm_nn_rs(xd, dout, W0, c->oma, n, p, m, 1, 1, 0);
    mm_tn_rs(dW, dout, x, c->alpha, m, p, n, 1, 1, 0);  // dW += sum_t alpha_t dout_t x_t^T
    if (S) mm_tn_rs(dS, dout, x, c->beta, m, p, n, 1, 1, 0);
    if (W0) mm_tn_rs(dW0, dout, x, c->oma, m, p, n, 1, 1, 0);
    __syncthreads();
    if (cl) {
        ClPart pt[1] = {{dx, 0, n * p, 1}};
        cl_reduce(c, pt, 1);
    }
    FOR(e, n * p) {  // the write terms
        int t = e / p, q = e % p;
        real v = 0;
        for (int i = 0; i <= t; i++) v += gx[t * n + i] * xk[(size_t)i * p + q];
        dx[e] += v;
    }
    FOR(e, n * p) {
        int i = e / p, q = e % p;
        real v = 0;
        for (int t = i; t < n; t++) v += gx[t * n + i] * x[(size_t)t * p + q];
        dxk[e] += v;
    }
    FOR(e, n * m) {
        int i = e / m, j = e % m;
        real v = 0;
        for (int t = i; t < n; t++) v += wx[t * n + i] * dout[(size_t)t * m + j];
        ddl[e] -= v;
    }
    __syncthreads();
}

// The chunk-end state of one memory matrix: Wn = ca W + (1 - ca) W0 + cb S - sum_i c_i dl_i xk_i^T   (m, p)
// (the W0 term only with the anchored retention; a thread per 4 adjacent elements of a row where aligned)
template <int P, bool WT, int WN, bool Q, bool SK>
__device__ __noinline__ void tc_update(real* Wn, const real* W, real ca, const real* W0, const real* S, real cb,
                                       const real* dl, const real* xk, const real* cv, int n, int m, int p) {
    tc_product<P, WN, 0, 0>(
        m, p, n, [&](int j, int i) { return TC_IN(WT, j, i, m, n, -cv[i] * dl[i * m + j]); },
        [&](int i, int q) { return TC_IN(WT, i, q, n, p, xk[i * p + q]); }, TC_NO4, TC_NO4,
        [&](int j, int q) {  // the retention terms (8-byte accesses: TC_DISPATCH checked the four pointers)
            if (WN != 2) return make_float2(0, 0);
            int e = j * p + q;
            float2 w = ld2(W + e), a = W0 ? ld2(W0 + e) : make_float2(0, 0), t = S ? ld2(S + e) : make_float2(0, 0);
            return make_float2(ca * w.x + (W0 ? (1 - ca) * a.x : 0) + (S ? cb * t.x : 0),
                               ca * w.y + (W0 ? (1 - ca) * a.y : 0) + (S ? cb * t.y : 0));
        },
        [&](int j, int q, float v0, float v1, int, float2 r) {  // the retention terms r, then the rank-n sum
            int e = j * p + q;
            if (WN == 2)
                st2(Wn + e, make_float2(r.x + v0, r.y + v1));
            else
                for (int u = 0; u < 2 && q + u < p; u++)
                    Wn[e + u] =
                        ca * W[e + u] + (W0 ? (1 - ca) * W0[e + u] : 0) + (S ? cb * S[e + u] : 0) + (u ? v1 : v0);
        });
}
MEMFN void mem_update_forward_gpu(real* Wn, const real* W, real ca, const real* W0, const real* S, real cb,
                                  const real* dl, const real* xk, const real* cv, int n, int m, int p, int sync = 1) {
    if (mem_tc) {
        TC_DISPATCH(tc_update, false, false, 0, (uintptr_t)Wn | (uintptr_t)W | (uintptr_t)W0 | (uintptr_t)S, m, p, n, 0,
                    Wn, W, ca, W0, S, cb, dl, xk, cv, n, m, p);
        if (sync) __syncthreads();
        return;
    }
    if (p % 4 == 0 && al16(Wn) && al16(W) && (!S || al16(S)) && (!W0 || al16(W0))) {
        int p4 = p / 4, tot = m * p4, nt = blockDim.x;
        bool xv4 = al16(xk);
        for (int e0 = threadIdx.x; e0 < tot; e0 += MM_U * nt) {  // MM_U groups of 4 at a time (loads first)
            float4 v[MM_U];
#pragma unroll
            for (int w = 0; w < MM_U; w++) {
                int e4 = e0 + w * nt;
                if (e4 >= tot) {
                    v[w] = make_float4(0, 0, 0, 0);
                    continue;
                }
                size_t e = (size_t)(e4 / p4) * p + 4 * (e4 % p4);
                float4 wv = ld4(W + e);
                v[w] = make_float4(ca * wv.x, ca * wv.y, ca * wv.z, ca * wv.w);
                if (S) {
                    float4 sv = ld4(S + e);
                    v[w].x += cb * sv.x;
                    v[w].y += cb * sv.y;
                    v[w].z += cb * sv.z;
                    v[w].w += cb * sv.w;
                }
                if (W0) {
                    float4 av = ld4(W0 + e);
                    real ka = 1 - ca;
                    v[w].x += ka * av.x;
                    v[w].y += ka * av.y;
                    v[w].z += ka * av.z;
                    v[w].w += ka * av.w;
                }
            }
#pragma unroll
            for (int w = 0; w < MM_U; w++) {
                int e4 = e0 + w * nt;
                if (e4 >= tot) break;
                int j = e4 / p4, q = 4 * (e4 % p4);
                for (int i = 0; i < n; i++) {
                    real wi = cv[i] * dl[(size_t)i * m + j];
                    float4 xv = xv4 ? ld4(xk + (size_t)i * p + q) : ld4c<false>(xk + (size_t)i * p + q);
                    v[w].x -= wi * xv.x;
                    v[w].y -= wi * xv.y;
                    v[w].z -= wi * xv.z;
                    v[w].w -= wi * xv.w;
                }
                st4(Wn + (size_t)j * p + q, v[w]);
            }
        }
    } else
        FOR(e, m * p) {
            int j = e / p, q = e % p;
            real v = ca * W[e] + (W0 ? (1 - ca) * W0[e] : 0) + (S ? cb * S[e] : 0);
            for (int i = 0; i < n; i++) {
                real w = cv[i] * dl[(size_t)i * m + j];
                v -= w * xk[(size_t)i * p + q];
            }
            Wn[e] = v;
        }
    if (sync) __syncthreads();  // (sync = 0: the caller's next update is independent)
}
// the elementwise part of mem_update_backward: dW += ca dWn; dS += cb dWn; this thread's terms of <dWn, W>, <dWn, S>
// (v4: the 16-byte path, mem_update_backward_v4; two calls that write the same array take the same path, so that
// each element has the same owner thread in both)
__device__ __forceinline__ bool mem_update_backward_v4(const real* dW, const real* dS, const real* dWn, const real* W,
                                                       const real* S, int mp) {
    return mp % 4 == 0 && al16(dW) && al16(dWn) && al16(W) && (!S || (al16(dS) && al16(S)));
}
MEMFN void mem_update_backward_ew(real* __restrict__ dW, real* __restrict__ dS, real* psa, real* psb,
                                  const real* __restrict__ dWn, const real* __restrict__ W, real ca,
                                  const real* __restrict__ S, real cb, int mp, bool v4) {
    // (restrict: the unrolled iterations' loads may go before the stores)
    real sa = 0, sb = 0;
    if (v4) {
#pragma unroll 4
        FOR(e4, mp / 4) {
            size_t e = 4 * (size_t)e4;
            float4 g = ld4(dWn + e), w = ld4(W + e), o = ld4(dW + e);
            o.x += ca * g.x;
            o.y += ca * g.y;
            o.z += ca * g.z;
            o.w += ca * g.w;
            sa += g.x * w.x;
            sa += g.y * w.y;
            sa += g.z * w.z;
            sa += g.w * w.w;
            st4(dW + e, o);
            if (S) {
                float4 sv = ld4(S + e), os = ld4(dS + e);
                os.x += cb * g.x;
                os.y += cb * g.y;
                os.z += cb * g.z;
                os.w += cb * g.w;
                sb += g.x * sv.x;
                sb += g.y * sv.y;
                sb += g.z * sv.z;
                sb += g.w * sv.w;
                st4(dS + e, os);
            }
        }
    } else
        FOR(e, mp) {
            dW[e] += ca * dWn[e];
            sa += dWn[e] * W[e];
            if (S) {
                dS[e] += cb * dWn[e];
                sb += dWn[e] * S[e];
            }
        }
    *psa = sa;
    *psb = sb;
}
// One update's backward: dW += ca dWn; dS += cb dWn; dca += <dWn, W>; dcb += <dWn, S>; with the anchor W0:
// dW0 += (1 - ca) dWn, dca -= <dWn, W0>; with gx[i][j] = dWn_j . xk_i:  ddl[i][j] -= c_i gx[i][j];
// dc_i -= sum_j dl[i][j] gx[i][j];  dxk_i -= c_i dl_i^T dWn   (ddl, dxk, dl, xk: mem_update_backward2_gpu's arguments)
struct UpdBwd {
    real *dW, *dS, *dW0, *dca, *dcb, *dcv;
    const real *dWn, *W, *W0, *S, *cv;
    real ca, cb;
};
// The backward of nu = 1 or 2 updates of one matrix from the same rows (dl, xk; the state's and the momentum's:
// Pn = ca P + cb S - sum_i c_i dl_i xk_i^T and Sn = sigma S - sum_i s_i dl_i xk_i^T), phase by phase: the two share
// each phase's barrier and cluster reduction, and every output both add to (dS, ddl, dxk) gets u[0]'s terms, then
// u[1]'s, as from two calls one after the other.
// Split: sp = SPLIT_P (W1's update, p the slice of dm): the dots and gx are partial sums over p; sp = SPLIT_M (W2's,
// W3's, m the slice): the dots, dxk's products and dcv's sums over j < m are. Each is added over the cluster.
// Inlined into mem_chunk_backward_gpu, its loops over the pair bounded by 2 (PAIR_FOR): each unrolls into straight
// code, so u[k] and gl[k] are registers. As a call, every u[k].x was a load from the caller's stack (local memory,
// L2 at this kernel's frame size: dev/cuda/memlab_notes.md, "Local memory") after each of its own calls.
#define PAIR_FOR(k) _Pragma("unroll") for (int k = 0; k < 2 && k < nu; k++)
__device__ __forceinline__ void mem_update_backward2_gpu(const UpdBwd* u, int nu, real* ddl, real* dxk, const real* dl,
                                                         const real* xk, int n, int m, int p, MemChunkGpu* c, int sp) {
    bool cl = cl_on(c, sp), cp = cl && sp == SPLIT_P, cm = cl && sp == SPLIT_M;
    // the exchange buffer's partials: the dots (xb[2 k], xb[2 k + 1]); P: gx (n, m) of update k at 4 + k ng;
    // M: at 4 + k (n4 + nx) dcv's sums (n4), then dxk (n, p)
    int n4 = cl_al(n), ng = cl_al((size_t)n * m), nx = cl_al((size_t)n * p);
    real* xb = cl ? cl_buf(c) : NULL;
    real* gl[2] = {c->nm1, c->nm1 + ng};  // gx, then dl[i][j] gx[i][j] (summed over j below); nm1 holds two
    bool v4 = true;
    PAIR_FOR(k) v4 = v4 && mem_update_backward_v4(u[k].dW, u[k].dS, u[k].dWn, u[k].W, u[k].S, m * p);
    // the dots' block sums (block_sum's, bit for bit) without barriers of their own: each warp's sums into ws, which
    // thread 0 adds in warp order after the products' closing barrier below
    __shared__ real ws[2][2][MEM_THREADS / 32];  // (static shared memory is scarce: the blocks' at most MEM_THREADS)
    PAIR_FOR(k) {
        real sa, sb, s0 = 0, unused;
        mem_update_backward_ew(u[k].dW, u[k].dS, &sa, &sb, u[k].dWn, u[k].W, u[k].ca, u[k].S, u[k].cb, m * p, v4);
        if (u[k].W0)
            mem_update_backward_ew(u[k].dW0, NULL, &s0, &unused, u[k].dWn, u[k].W0, 1 - u[k].ca, NULL, 0, m * p,
                                   mem_update_backward_v4(u[k].dW0, NULL, u[k].dWn, u[k].W0, NULL, m * p));
        sa = warp_sum(sa - s0);
        sb = warp_sum(sb);
        if (LANE == 0) {
            ws[k][0][threadIdx.x >> 5] = sa;
            ws[k][1][threadIdx.x >> 5] = sb;
        }
    }
    // a pair on the tensor cores with split K (v17, v18) runs at once, each on half the warps (mm_nt_rs's wg), not
    // K-split one after the other: 1 barrier instead of 5 (each split product takes 2 of its own). Taken for every
    // pair there, also where tc_splits_k says no (the fixtures' partial tiles, W2's gx at titans' shape): no barrier
    // saved then, the tiles only dealt to the halves
    int pair = nu == 2 && (mem_tc & 16) && blockDim.x >= 64;
    PAIR_FOR(k) {  // (one closing barrier: the products write apart)
        mm_nt_rs(cp ? xb + 4 + k * ng : gl[k], xk, u[k].dWn, NULL, n, m, p, 1, 0, k == nu - 1, pair ? k + 1 : 0);
    }
    if (threadIdx.x == 0)  // (read before the next barrier; the next call writes ws after two more)
        PAIR_FOR(k) {
            real sa = ws[k][0][0], sb = ws[k][1][0];
            for (int w = 1; w < (int)(blockDim.x >> 5); w++) {
                sa += ws[k][0][w];
                sb += ws[k][1][w];
            }
            if (cl) {  // (before cl_reduce's cluster barrier)
                xb[2 * k] = sa;
                xb[2 * k + 1] = sb;
            } else {
                *u[k].dca += sa;
                if (u[k].S) *u[k].dcb += sb;
            }
        }
    ClPart pt[8];
    int np = 0;
    if (cp) {
        PAIR_FOR(k) pt[np++] = {gl[k], 4 + k * ng, n * m, 0};
        PAIR_FOR(k) {
            pt[np++] = {u[k].dca, 2 * k, 1, 1};
            if (u[k].S) pt[np++] = {u[k].dcb, 2 * k + 1, 1, 1};
        }
        cl_reduce(c, pt, np);
    }
    FOR(e, n * m) {
        int i = e / m;
        PAIR_FOR(k) {
            real gx = gl[k][e];
            ddl[e] -= u[k].cv[i] * gx;
            gl[k][e] = dl[e] * gx;
        }
    }
    // (u[1]'s adds to dxk's elements from the threads of u[0]'s: the same shape; split over M, each its own partials,
    // so a pair there runs at once as above)
    PAIR_FOR(k) {
        mm_nn_rs(cm ? xb + 4 + k * (n4 + nx) + n4 : dxk, dl, u[k].dWn, u[k].cv, n, p, m, -1, !cm, k == nu - 1,
                 pair && cm ? k + 1 : 0);  // (its barrier publishes gl)
    }
    WARP_FOR(i, n) {
        PAIR_FOR(k) {
            real s = 0;
            for (int j = LANE; j < m; j += 32) s += gl[k][(size_t)i * m + j];
            s = warp_sum(s);
            if (LANE == 0) {
                if (cm)
                    xb[4 + k * (n4 + nx) + i] = -s;
                else
                    u[k].dcv[i] -= s;
            }
        }
    }
    __syncthreads();
    if (cm) {
        PAIR_FOR(k) pt[np++] = {dxk, 4 + k * (n4 + nx) + n4, n * p, 1};
        PAIR_FOR(k) pt[np++] = {u[k].dcv, 4 + k * (n4 + nx), n, 1};
        PAIR_FOR(k) {
            pt[np++] = {u[k].dca, 2 * k, 1, 1};
            if (u[k].S) pt[np++] = {u[k].dcb, 2 * k + 1, 1, 1};
        }
        cl_reduce(c, pt, np);
    }
}

// LayerNorm of the deep memory, without its affine (applied by the caller), rows of d:
// x^ = (o - mean) * rstd, rstd = 1/sqrt(var + 1e-5), biased variance; in place. A warp per row.
// one row x (d) normalised in place by a warp, lane i taking elements i, i + 32, ...; returns rstd
__device__ __forceinline__ real ln_row_gpu(real* x, int d) {
    real mu = 0, var = 0;
    for (int i = LANE; i < d; i += 32) mu += x[i];
    mu = warp_sum(mu) / d;
    for (int i = LANE; i < d; i += 32) var += (x[i] - mu) * (x[i] - mu);
    var = warp_sum(var);
    real r = (real)(1 / sqrt((double)(var / d) + 1e-5));
    for (int i = LANE; i < d; i += 32) x[i] = (x[i] - mu) * r;
    return r;
}
MEMFN void ln_forward_gpu(real* o, real* rstd, int n, int d) {
    WARP_FOR(t, n) {
        real r = ln_row_gpu(o + (size_t)t * d, d);
        if (LANE == 0) rstd[t] = r;
    }
    __syncthreads();
}
// do += rstd (dx^ - mean(dx^) - x^ mean(dx^ x^)) - drstd rstd^2 x^ / d   (drstd may be NULL)
// (set: do = instead of +=; then dox may be dxh itself: a row's sums are taken before any of its elements is written,
// each element by the lane that reads it)
MEMFN void ln_backward_gpu(real* dox, const real* dxh, const real* drstd, const real* xh, const real* rstd, int n,
                           int d, int set = 0, int sync = 1) {
    WARP_FOR(t, n) {
        const real* g = dxh + (size_t)t * d;
        const real* x = xh + (size_t)t * d;
        real m1 = 0, m2 = 0, r = rstd[t];
        for (int i = LANE; i < d; i += 32) {
            m1 += g[i];
            m2 += g[i] * x[i];
        }
        m1 = warp_sum(m1) / d;
        m2 = warp_sum(m2) / d;
        for (int i = LANE; i < d; i += 32) {
            real v = r * (g[i] - m1 - x[i] * m2) - (drstd ? drstd[t] * r * r * x[i] / d : 0);
            dox[(size_t)t * d + i] = set ? v : dox[(size_t)t * d + i] + v;
        }
    }
    if (sync) __syncthreads();
}
// The memory's inner gradient passes r back through the LN: g1 = rstd (u - mean(u) - x^ mean(u x^)),
// u = r * g (done with ln_backward). Training through g1 needs its backward (the LN double-backward):
//   du = rstd (G - mean(G) - x^ mean(G x^)),  dx^ += -rstd (G mean(u x^) + u mean(G x^)),  drstd += <G, g1>/rstd
MEMFN void ln_backward_backward_gpu(real* du, real* dxh, real* drstd, const real* G, const real* u, const real* xh,
                                    const real* rstd, const real* g1, int n, int d) {
    ln_backward_gpu(du, G, NULL, xh, rstd, n, d, 0, 0);  // (the rows below do not read du: no barrier between)
    WARP_FOR(t, n) {
        const real *g = G + (size_t)t * d, *uu = u + (size_t)t * d, *x = xh + (size_t)t * d;
        real r = rstd[t];
        real mux = 0, mgx = 0, gd = 0;
        for (int i = LANE; i < d; i += 32) {
            mux += uu[i] * x[i];
            mgx += g[i] * x[i];
            gd += g[i] * g1[(size_t)t * d + i];
        }
        mux = warp_sum(mux) / d;
        mgx = warp_sum(mgx) / d;
        gd = warp_sum(gd);
        for (int i = LANE; i < d; i += 32) dxh[(size_t)t * d + i] -= r * (g[i] * mux + uu[i] * mgx);
        if (LANE == 0) drstd[t] += gd / r;
    }
    __syncthreads();
}

// out = (resid ? x : 0) + (ln ? x^ g + beta : o)   -- the deep memory's output from its normalised MLP output
__device__ __forceinline__ real mem_out_el(const MemCfg* m, const real* x, const real* nx, const real* g,
                                           const real* bt, size_t e, int i) {
    return (m->resid ? x[e] : 0) + (m->ln ? nx[e] * g[i] + bt[i] : nx[e]);
}
MEMFN void mem_out_forward_gpu(real* out, const real* x, const real* nx, const real* g, const real* bt, const MemCfg* m,
                               int n, int sync = 1) {
    FOR(e, n * m->d) out[e] = mem_out_el(m, x, nx, g, bt, e, e % m->d);
    if (sync) __syncthreads();
}
// The read's output from o (n rows): with the LN, ln_forward_gpu of o and then mem_out_forward_gpu, a row by one warp
// (each element by the lane that normalised it: no barrier between them, one after); without, mem_out_forward_gpu
MEMFN void ln_out_forward_gpu(real* out, const real* x, real* o, real* rstd, const real* g, const real* bt,
                              const MemCfg* m, int n) {
    if (!m->ln) {
        mem_out_forward_gpu(out, x, o, g, bt, m, n);
        return;
    }
    int d = m->d;
    WARP_FOR(t, n) {
        real r = ln_row_gpu(o + (size_t)t * d, d);
        if (LANE == 0) rstd[t] = r;
        for (int i = LANE; i < d; i += 32) out[(size_t)t * d + i] = mem_out_el(m, x, o, g, bt, (size_t)t * d + i, i);
    }
    __syncthreads();
}
// from dout to dx (resid), dg, dbeta and d(nx) (the normalised output, or o without LN); a thread per channel
MEMFN void mem_out_backward_gpu(real* dx, real* dnx, real* dg, real* dbt, const real* dout, const real* nx,
                                const real* g, const MemCfg* m, int n) {
    FOR(i, m->d) for (int t = 0; t < n; t++) {
        size_t e = (size_t)t * m->d + i;
        if (m->resid) dx[e] += dout[e];
        if (m->ln) {
            dg[i] += dout[e] * nx[e];
            dbt[i] += dout[e];
            dnx[e] += dout[e] * g[i];
        } else
            dnx[e] += dout[e];
    }
    __syncthreads();
}

// The attentional bias (SPEC §4): from e = M(k) - v to r = dloss/dM(k). Moneta's lp (p = 3) is smoothed as
// 3 tanh(10 e)(e^2 + 1e-6); Yaad's Huber gives clamp(e, -delta, delta). With channel-wise gates the error is
// then scaled per output channel by eta (and the scalar eta of the recurrences is 1). In: c->r holds M(k).
__device__ __forceinline__ void mem_bias_el(const MemCfg* m, MemChunkGpu* c, int j) {  // element j (c->r: M(k))
    real e = c->r[j] - c->v[j], ps;
    switch (m->bias) {
        case BIAS_L2: ps = e; break;
        case BIAS_DOT: ps = -c->v[j]; break;
        case BIAS_LP: ps = psi_lp_gpu(e); break;
        default: /* BIAS_HUBER */ ps = e < -c->delta[j] ? -c->delta[j] : (e > c->delta[j] ? c->delta[j] : e);
    }
    c->e[j] = e;
    c->psi[j] = ps;
    c->r[j] = m->cw ? c->etac[j] * ps : ps;
}
MEMFN void mem_bias_forward_gpu(const MemCfg* m, MemChunkGpu* c, int n, int sync = 1) {
    FOR(j, n * m->d) mem_bias_el(m, c, j);
    if (sync) __syncthreads();
}
// from dr to dmk = dloss/dM(k) (overwritten), and dv, detac, ddelta (accumulated)
// (a thread per channel, as mem_out_backward_gpu and the LN backward's dr loop: with sync = 0 those need no barrier
// between them)
MEMFN void mem_bias_backward_gpu(const MemCfg* m, MemChunkGpu* c, int n, int sync = 1) {
    FOR(i, m->d) for (int t = 0; t < n; t++) {
        size_t j = (size_t)t * m->d + i;
        real dps = m->cw ? c->dr[j] * c->etac[j] : c->dr[j], de = 0, e = c->e[j];
        if (m->cw) c->detac[j] += c->dr[j] * c->psi[j];
        switch (m->bias) {
            case BIAS_L2: de = dps; break;
            case BIAS_DOT: c->dv[j] -= dps; break;
            case BIAS_LP: de = dps * psi_lp_d_gpu(e); break;
            default: /* BIAS_HUBER */
                if (fabsf(e) <= c->delta[j])
                    de = dps;
                else
                    c->ddelta[j] += e > 0 ? dps : -dps;
        }
        c->dmk[j] = de;
        c->dv[j] -= de;
    }
    if (sync) __syncthreads();
}

// The deep memory's inner gradient past o = W1 h, with the LN: per row, x^ = LN(o) (ln_forward_gpu), M(k) = k + x^ g
// + beta (mem_out_forward_gpu), r = dloss/dM(k) (mem_bias_forward_gpu), u = r g and g1 = the LN's backward of u
// (ln_backward_gpu): a row by one warp, each element by the lane that wrote it, the row's sums by warp_sum, so no
// barrier between them (as four functions: three). The same formulas in the same order (g1 = v, not 0 + v).
MEMFN void mem_grad_ln_rows_gpu(const MemCfg* m, MemChunkGpu* c, int n, const real* lng, const real* lnb) {
    int d = m->d;
    WARP_FOR(t, n) {
        real* x = c->nk + (size_t)t * d;
        real r = ln_row_gpu(x, d), m1 = 0, m2 = 0;
        if (LANE == 0) c->rk[t] = r;
        for (int i = LANE; i < d; i += 32) {
            size_t e = (size_t)t * d + i;
            c->r[e] = mem_out_el(m, c->kr, c->nk, lng, lnb, e, i);
            mem_bias_el(m, c, (int)e);
            real u = c->r[e] * lng[i];
            c->u[e] = u;
            m1 += u;
            m2 += u * x[i];
        }
        m1 = warp_sum(m1) / d;
        m2 = warp_sum(m2) / d;
        for (int i = LANE; i < d; i += 32) c->g1[(size_t)t * d + i] = r * (c->u[(size_t)t * d + i] - m1 - x[i] * m2);
    }
    __syncthreads();
}

// The inner gradients at the state P (SPEC §4) of the chunk's n key rows, g_i = dloss(M(k_i; P), v_i)/dP by backprop
// (train_miras.c's mem_grad_forward): linear g_i = r_i k_i^T; deep g_i = (g1_i hk_i^T, g2_i k_i^T) with zk = W2 k,
// hk = GELU(zk) (gated: GELU(zk) * W3 k), o = W1 hk, M(k) = k + LN(o) g + beta, r = dloss/dM(k), g1 = dloss/do (r
// back through the LN), g2 = (W1^T g1) * GELU'(zk). Fills c->r (and zk, tk, hk, nk, rk, u, g1, gk, g2 when deep).
MEMFN void mem_grad_forward_gpu(const MemCfg* m, MemChunkGpu* c, int n, const real* P, const real* lng,
                                const real* lnb) {
    int d = m->d, dm = m->dm, din = m->din;
    size_t nd = (size_t)n * d;
    if (m->depth == 1) {
        mm_nt_gpu(c->r, c->k, P, n, d, din, 1, 0);  // M(k_i) = W_s k_i
        mem_bias_forward_gpu(m, c, n);
        return;
    }
    const real *W1 = P, *W2 = P + (size_t)d * dm, *W3 = W2 + (size_t)dm * din;
    mm_nt_gpu(c->zk, c->k, W2, n, dm, din, 1, 0);  // z = W2 k
    FOR(e, n * dm) {
        c->tk[e] = gelu_tanh_gpu(c->zk[e]);
        c->hk[e] = gelu_gpu(c->zk[e], c->tk[e]);
    }
    __syncthreads();
    if (m->gated) {  // h = GELU(W2 k) * z3, z3 = W3 k
        mm_nt_gpu(c->zk3, c->k, W3, n, dm, din, 1, 0);
        FOR(e, n * dm) {
            c->hk2[e] = c->hk[e];
            c->hk[e] = c->hk2[e] * c->zk3[e];
        }
        __syncthreads();
    }
    bool cl = cl_on(c, SPLIT_P);  // (split: o's sum over dm spans the cluster)
    mm_nt_gpu(cl ? cl_buf(c) : c->nk, c->hk, W1, n, d, dm, 1, 0);  // o = W1 h
    if (cl) {
        ClPart pt[1] = {{c->nk, 0, n * d, 0}};
        cl_reduce(c, pt, 1);
    }
    if (m->ln)  // x^ = LN(o), M(k), r = dloss/dM(k), g1 = dloss/do (r back through the LN affine and norm)
        mem_grad_ln_rows_gpu(m, c, n, lng, lnb);
    else {  // M(k) (the residual adds the raw k), r = dloss/dM(k) = g1: element e by the same thread in each
        mem_out_forward_gpu(c->r, c->kr, c->nk, lng, lnb, m, n, 0);
        mem_bias_forward_gpu(m, c, n, 0);
        FOR(e, nd) c->g1[e] = c->r[e];
        __syncthreads();
    }
    mm_nn_gpu(c->gk, c->g1, W1, n, dm, d, 1, 0);  // dloss/dh = W1^T g1
    FOR(e, n * dm) {
        c->g2[e] = c->gk[e] * gelu_d1_gpu(c->zk[e], c->tk[e]);  // g2 = dloss/dz
        if (m->gated) {  // g2 = dloss/dz2 = gk z3 GELU'(z2), g3 = dloss/dz3 = gk GELU(z2)
            c->g2[e] *= c->zk3[e];
            c->g3[e] = c->gk[e] * c->hk2[e];
        }
    }
    __syncthreads();
}

// Its backward (second order; train_miras.c's mem_grad_backward): from the adjoints of the gradient rows (c->dg1, dhk,
// dg2, dk; linear: c->dr, dk) to dk, dv, ddelta, detac, dlng, dlnb (accumulated) and dP += the gradient of P through
// the g_i.
MEMFN void mem_grad_backward_gpu(const MemCfg* m, MemChunkGpu* c, int n, const real* P, real* dP, const real* lng) {
    int d = m->d, dm = m->dm, din = m->din;
    size_t nd = (size_t)n * d, nm = (size_t)n * dm;
    if (m->depth == 1) {
        mem_bias_backward_gpu(m, c, n);  // r -> M(k_i) = W k_i
        mm_nn_rs(c->dk, c->dmk, P, NULL, n, din, d, 1, 1, 0);  // (writes apart from what the next reads)
        mm_tn_gpu(dP, c->dmk, c->k, d, din, n, 1, 1);
        return;
    }
    const real *W1 = P, *W2 = P + (size_t)d * dm, *W3 = W2 + (size_t)dm * din;
    real *dW1 = dP, *dW2 = dP + (size_t)d * dm, *dW3 = dW2 + (size_t)dm * din;
    // second order: back through the inner gradient g2 = (W1^T g1) * GELU'(zk), g1 = LN-back(r g), r = bias(M(k), v)
    FOR(e, nm) {
        real g1d = gelu_d1_gpu(c->zk[e], c->tk[e]), z3 = m->gated ? c->zk3[e] : 1;
        c->dgk[e] = c->dg2[e] * z3 * g1d;
        c->dzk[e] += c->dg2[e] * c->gk[e] * z3 * gelu_d2_gpu(c->zk[e], c->tk[e]);
        if (m->gated) {  // g2 = gk z3 GELU'(z2), g3 = gk GELU(z2)
            c->dgk[e] += c->dg3[e] * c->hk2[e];
            c->dzk3[e] += c->dg2[e] * c->gk[e] * g1d;
            c->dhk2[e] += c->dg3[e] * c->gk[e];
        }
    }
    __syncthreads();
    bool cl = cl_on(c, SPLIT_P);  // (split: dg1's and dk's sums over dm span the cluster)
    // (each product pair below writes apart from what the other reads: one closing barrier)
    int pg = tc_splits_k(n, d, dm);  // (the pair at once: tc_splits_k)
    mm_nt_rs(cl ? cl_buf(c) : c->dg1, c->dgk, W1, NULL, n, d, dm, 1, !cl, 0, pg);
    mm_tn_rs(dW1, c->g1, c->dgk, NULL, d, dm, n, 1, 1, 1, 2 * pg);
    if (cl) {
        ClPart pt[1] = {{c->dg1, 0, n * d, 1}};
        cl_reduce(c, pt, 1);
    }
    if (m->ln) {
        ln_backward_backward_gpu(c->du, c->dnk, c->drk, c->dg1, c->u, c->nk, c->rk, c->g1, n, d);
        FOR(i, d) for (int t = 0; t < n; t++) {  // a thread per channel: it owns dlng[i]
            size_t e = (size_t)t * d + i;
            c->dr[e] += c->du[e] * lng[i];
            c->dlng[i] += c->du[e] * c->r[e];
        }
    } else
        FOR(i, d) for (int t = 0; t < n; t++) c->dr[(size_t)t * d + i] += c->dg1[(size_t)t * d + i];
    // (this loop, the bias's and the output's backward: a thread per channel each, so no barrier until the last's)
    mem_bias_backward_gpu(m, c, n, 0);  // r -> M(k)
    mem_out_backward_gpu(c->dkr, c->dnk, c->dlng, c->dlnb, c->dmk, c->nk, lng, m, n);
    if (m->ln)
        ln_backward_gpu(c->dok, c->dnk, c->drk, c->nk, c->rk, n, d);
    else
        block_copy(c->dok, c->dnk, nd);
    mm_nn_rs(c->dhk, c->dok, W1, NULL, n, dm, d, 1, 1, 0);  // o = W1 hk
    mm_tn_gpu(dW1, c->dok, c->hk, d, dm, n, 1, 1);
    FOR(e, nm) {
        if (m->gated) {  // h = h2 z3
            c->dhk2[e] += c->dhk[e] * c->zk3[e];
            c->dzk3[e] += c->dhk[e] * c->hk2[e];
        }
        c->dzk[e] += (m->gated ? c->dhk2 : c->dhk)[e] * gelu_d1_gpu(c->zk[e], c->tk[e]);  // dL/dGELU(z2)
    }
    __syncthreads();
    real* xk = cl ? cl_buf(c) : c->dk;
    int pz = tc_splits_k(n, din, dm);  // (each pair at once: tc_splits_k; W3's adds to xk after W2's pair)
    mm_nn_rs(xk, c->dzk, W2, NULL, n, din, dm, 1, !cl, 0, pz);  // zk = W2 k
    mm_tn_rs(dW2, c->dzk, c->k, NULL, dm, din, n, 1, 1, 1, 2 * pz);
    if (m->gated) {  // z3 = W3 k
        mm_nn_rs(xk, c->dzk3, W3, NULL, n, din, dm, 1, 1, 0, pz);
        mm_tn_rs(dW3, c->dzk3, c->k, NULL, dm, din, n, 1, 1, 1, 2 * pz);
    }
    if (cl) {
        ClPart pt[1] = {{c->dk, 0, n * din, 1}};
        cl_reduce(c, pt, 1);
    }
}

// One chunk of n tokens (SPEC §5.1, §5.2) from state (P, S); writes y and, if Pn, the chunk-end state.
// The chunk-end state is base's (P when base is NULL): Pn = alpha_n base + beta_n S - sum_i c_i g_i. The reads of
// W1 and W2 (or W) scale their write terms by cs[0], cs[1] (NULL: 1). Both are for the retentions below.
MEMFN void mem_chunk_forward_gpu(const MemCfg* m, MemChunkGpu* c, int n, const real* P, const real* S, real* Pn,
                                 real* Sn, const real* lng, const real* lnb, const real* base, const real* cs) {
    int d = m->d, dm = m->dm, din = m->din;  // din: the input width (D_phi with poly, else d)
    const real* Sx = m->momentum ? S : NULL;
    const real* B0 = base ? base : P;
    real cs0 = cs ? cs[0] : 1, cs1 = cs ? cs[1] : 1;
    mem_coef_forward_gpu(c, n, m->momentum);
    const real* crow = c->C + (size_t)(n - 1) * n;
    const real* srow = c->s + (size_t)(n - 1) * n;
    mem_grad_forward_gpu(m, c, n, P, lng, lnb);
    if (m->depth == 1) {  // linear memory M(x) = W x, g_i = r_i k_i^T
        if (!c->noread)
            mem_read_forward_gpu(c->y, c->xw1, c->xs1, c->xx1, c->xa2, c->q, c->k, c->r, P, Sx, c->p0, cs0, c, n, d,
                                 din);
        if (Pn) mem_update_forward_gpu(Pn, B0, c->alpha[n - 1], c->p0, Sx, c->beta[n - 1], c->r, c->k, crow, n, d, din);
        if (Pn && Sx) mem_update_forward_gpu(Sn, Sx, c->sigma[n - 1], NULL, NULL, 0, c->r, c->k, srow, n, d, din);
        return;
    }
    // deep memory: W1 (d, dm), W2 (dm, din); g_i = (g1_i hk_i^T, g2_i k_i^T); gated also W3 (dm, din), g3_i k_i^T
    size_t o2 = (size_t)d * dm, o3 = o2 + (size_t)dm * din;  // W2's and W3's offsets in the state
    const real *W1 = P, *W2 = P + o2, *W3 = P + o3, *S1 = Sx, *S2 = Sx ? Sx + o2 : NULL, *S3 = Sx ? Sx + o3 : NULL;
    const real *A1 = c->p0, *A2 = c->p0 ? c->p0 + o2 : NULL, *A3 = c->p0 ? c->p0 + o3 : NULL;  // the anchor (or NULL)
    // reads, after the write: y_t = q_t + LN(W1_t GELU(W2_t q_t))   (gated: LN(W1_t (GELU(W2_t q_t) * W3_t q_t)))
    if (!c->noread) {  // (MIRAS_MEM_PAR: memory_reads_kernel reads, apart from the chain)
        mem_read_forward_gpu(c->zq, c->xw1, c->xs1, c->xx1, c->xa1, c->q, c->k, c->g2, W2, S2, A2, cs1, c, n, dm, din,
                             SPLIT_M);
        FOR(e, n * dm) {
            c->tq[e] = gelu_tanh_gpu(c->zq[e]);
            c->hq[e] = gelu_gpu(c->zq[e], c->tq[e]);
        }
        __syncthreads();
        if (m->gated) {  // zq3 = W3_t q_t (W2's q.k products, xx1), hq = GELU(zq) * zq3 (GELU(zq) kept in hq2)
            mem_read_forward_gpu(c->zq3, c->xw3, c->xs3, c->xx1, c->xa3, c->q, NULL, c->g3, W3, S3, A3, cs1, c, n, dm,
                                 din, SPLIT_M);
            FOR(e, n * dm) {
                c->hq2[e] = c->hq[e];
                c->hq[e] = c->hq2[e] * c->zq3[e];
            }
            __syncthreads();
        }
        mem_read_forward_gpu(c->nq, c->xw2, c->xs2, c->xx2, c->xa2, c->hq, c->hk, c->g1, W1, S1, A1, cs0, c, n, d, dm,
                             SPLIT_P);
        ln_out_forward_gpu(c->y, c->qr, c->nq, c->rq, lng, lnb, m, n);
    }
    if (Pn) {  // (the updates are independent: one barrier)
        mem_update_forward_gpu(Pn, B0, c->alpha[n - 1], A1, S1, c->beta[n - 1], c->g1, c->hk, crow, n, d, dm, 0);
        mem_update_forward_gpu(Pn + o2, B0 + o2, c->alpha[n - 1], A2, S2, c->beta[n - 1], c->g2, c->k, crow, n, dm, din,
                               !Sx && !m->gated);
        if (m->gated)
            mem_update_forward_gpu(Pn + o3, B0 + o3, c->alpha[n - 1], A3, S3, c->beta[n - 1], c->g3, c->k, crow, n, dm,
                                   din, !Sx);
    }
    if (Pn && Sx) {
        mem_update_forward_gpu(Sn, S1, c->sigma[n - 1], NULL, NULL, 0, c->g1, c->hk, srow, n, d, dm, 0);
        mem_update_forward_gpu(Sn + o2, S2, c->sigma[n - 1], NULL, NULL, 0, c->g2, c->k, srow, n, dm, din, !m->gated);
        if (m->gated)
            mem_update_forward_gpu(Sn + o3, S3, c->sigma[n - 1], NULL, NULL, 0, c->g3, c->k, srow, n, dm, din);
    }
}

// Backward of one chunk. Needs the forward's intermediates in c (run mem_chunk_forward first).
// In: dy (n, d); dPn, dSn, the gradients of the chunk-end state (NULL for the last chunk).
// Out: c->dq, dk, dv, da, deta, dtheta, detac, ddelta, dcs (this chunk), c->dlng, dlnb (accumulated);
// dPs, dSs, dBase: the gradients of P, S and base (overwritten; dBase may be dPs when base is P).
MEMFN void mem_chunk_backward_gpu(const MemCfg* m, MemChunkGpu* c, int n, const real* dy, const real* P, const real* S,
                                  const real* dPn, const real* dSn, real* dPs, real* dSs, const real* lng,
                                  const real* base, real* dBase, const real* cs) {
    int d = m->d, dm = m->dm, din = m->din;
    size_t nm = (size_t)n * dm;
    const real* Sx = m->momentum ? S : NULL;
    const real* B0 = base ? base : P;
    real cs0 = cs ? cs[0] : 1, cs1 = cs ? cs[1] : 1;
    const real* crow = c->C + (size_t)(n - 1) * n;
    const real* srow = c->s + (size_t)(n - 1) * n;
    real* dcrow = c->dC + (size_t)(n - 1) * n;
    block_zero(c->grad0, c->ngrad, 0);  // (apart: one barrier)
    block_zero(dPs, m->nP, 0);
    if (dBase != dPs) block_zero(dBase, m->nP, 0);
    if (Sx) block_zero(dSs, m->nP, 0);
    __syncthreads();
    real* dSx = Sx ? dSs : NULL;
    if (m->depth == 1) {
        if (dPn) {  // (Pn's update and (momentum) Sn's, as a pair)
            UpdBwd u[2] = {{dBase, dSx, c->dp0, &c->dalpha[n - 1], &c->dbeta[n - 1], dcrow, dPn, B0, c->p0, Sx, crow,
                            c->alpha[n - 1], c->beta[n - 1]},
                           {dSs, NULL, NULL, c->dsig, NULL, c->ds, dSn, Sx, NULL, NULL, srow, c->sigma[n - 1], 0}};
            mem_update_backward2_gpu(u, Sx ? 2 : 1, c->dr, c->dk, c->r, c->k, n, d, din, c, SPLIT_NONE);
        }
        if (!c->noread)
            mem_read_backward_gpu(c->dq, c->dk, c->dr, dPs, dSx, c->dp0, &c->dcs[0], c, dy, c->q, c->k, c->r, P, Sx,
                                  c->p0, cs0, c->xw1, c->xs1, c->xx1, c->xa2, n, d, din);
        mem_grad_backward_gpu(m, c, n, P, dPs, lng);
        mem_coef_backward_gpu(c, n, m->momentum);
        return;
    }
    size_t o2 = (size_t)d * dm, o3 = o2 + (size_t)dm * din;  // W2's and W3's offsets (W3: gated)
    const real *W1 = P, *W2 = P + o2, *W3 = P + o3, *S1 = Sx, *S2 = Sx ? Sx + o2 : NULL, *S3 = Sx ? Sx + o3 : NULL;
    real *dW1 = dPs, *dW2 = dPs + o2, *dW3 = dPs + o3, *dS1 = dSx, *dS2 = dSx ? dSx + o2 : NULL,
         *dS3 = dSx ? dSx + o3 : NULL;
    const real *A1 = c->p0, *A2 = c->p0 ? c->p0 + o2 : NULL, *A3 = c->p0 ? c->p0 + o3 : NULL;  // the anchor (or NULL)
    real *dA1 = c->dp0, *dA2 = c->dp0 + o2, *dA3 = c->dp0 + o3;  // and its gradient
    // chunk-end state: per matrix, the backward of Pn's update and (momentum) of Sn's, as a pair (their phases
    // together: mem_update_backward2_gpu)
    if (dPn) {
        for (int j = 0; j < (m->gated ? 3 : 2); j++) {
            // matrix j's operands (selected, not indexed: an array indexed by j would live in the stack frame)
            auto of = [j](auto x1, auto x2, auto x3) { return j == 0 ? x1 : j == 1 ? x2 : x3; };
            size_t o = of((size_t)0, o2, o3);
            real* dS = of(dS1, dS2, dS3);
            const real* Sm = of(S1, S2, S3);
            UpdBwd u[2] = {
                {dBase + o, dS, of(dA1, dA2, dA3), &c->dalpha[n - 1], &c->dbeta[n - 1], dcrow, dPn + o, B0 + o,
                 of(A1, A2, A3), Sm, crow, c->alpha[n - 1], c->beta[n - 1]},
                {dS, NULL, NULL, c->dsig, NULL, c->ds, Sx ? dSn + o : NULL, Sm, NULL, NULL, srow, c->sigma[n - 1], 0}};
            mem_update_backward2_gpu(u, Sx ? 2 : 1, of(c->dg1, c->dg2, c->dg3), of(c->dhk, c->dk, c->dk),
                                     of(c->g1, c->g2, c->g3), of(c->hk, c->k, c->k), n, j ? dm : d, j ? din : dm, c,
                                     j ? SPLIT_M : SPLIT_P);
        }
    }
    // reads: y = q + LN(o_q) g + beta, o_q = read(W1, hq), hq = GELU(zq) (gated: * zq3, zq3 = read(W3, q)), zq = read(W2, q)
    if (!c->noread) {
        mem_out_backward_gpu(c->dqr, c->doq, c->dlng, c->dlnb, dy, c->nq, lng, m, n);  // (dqr is dq without poly)
        if (m->ln)  // doq through the LN, in place (the CPU goes through dnk, which it zeroes again: 3 barriers here)
            ln_backward_gpu(c->doq, c->doq, NULL, c->nq, c->rq, n, d, 1);
        mem_read_backward_gpu(c->dhq, c->dhk, c->dg1, dW1, dS1, dA1, &c->dcs[0], c, c->doq, c->hq, c->hk, c->g1, W1, S1,
                              A1, cs0, c->xw2, c->xs2, c->xx2, c->xa2, n, d, dm, SPLIT_P);
        if (m->gated) {  // hq = hq2 zq3: dzq3 = dhq hq2, and dL/dGELU(zq) = dhq zq3 (in place)
            FOR(e, nm) {
                c->dzq3[e] = c->dhq[e] * c->hq2[e];
                c->dhq[e] *= c->zq3[e];
            }
            __syncthreads();
            mem_read_backward_gpu(c->dq, c->dk, c->dg3, dW3, dS3, dA3, &c->dcs[1], c, c->dzq3, c->q, c->k, c->g3, W3,
                                  S3, A3, cs1, c->xw3, c->xs3, c->xx1, c->xa3, n, dm, din, SPLIT_M);
        }
        FOR(e, nm) c->dzq[e] = c->dhq[e] * gelu_d1_gpu(c->zq[e], c->tq[e]);
        __syncthreads();
        mem_read_backward_gpu(c->dq, c->dk, c->dg2, dW2, dS2, dA2, &c->dcs[1], c, c->dzq, c->q, c->k, c->g2, W2, S2, A2,
                              cs1, c->xw1, c->xs1, c->xx1, c->xa1, n, dm, din, SPLIT_M);
    }
    mem_grad_backward_gpu(m, c, n, P, dPs, lng);
    mem_coef_backward_gpu(c, n, m->momentum);
}

// ---- retentions (SPEC §5.3, §5.4) around the chunk. The carried state is P itself (none), A (lq) or Z (kl).

// the state's matrices: deep W1 (d, dm) then W2 (dm, din) (then W3 (dm, din), gated); linear W (d, din)
MEMFN int mem_matrices_gpu(const MemCfg* m, size_t* off, int* rows, int* cols) {
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
// (every thread gets the same cs: block_sumd adds the partials in a fixed order; split, cl_sumd then adds the CTAs')
MEMFN void lq_scales_gpu(const MemCfg* m, MemChunkGpu* c, const real* A, real* P, real* cs) {
    size_t off[2];
    int rows[2], cols[2], nm = mem_matrices_gpu(m, off, rows, cols);
    cs[0] = cs[1] = 1;
    for (int k = 0; k < nm; k++) {
        int n = rows[k] * cols[k];
        double q4 = 0;
        FOR(i, n) {
            double x = A[off[k] + i];
            q4 += x * x * x * x;
        }
        q4 = block_sumd(q4);
        if (c->R > 1) q4 = cl_sumd(c, q4);
        real s = (real)((pow(q4, 0.25) + 1e-6) * (pow(q4, 0.25) + 1e-6));
        FOR(i, n) P[off[k] + i] = A[off[k] + i] / s;
        cs[k] = 1 / s;
        __syncthreads();
    }
}
// dA += dP / s + ds ds/dA with ds = -(<dP, A> + dcs) / s^2 and ds/dA = 2 (|A|_4 + 1e-6) A^3 / |A|_4^3
MEMFN void lq_scales_backward_gpu(const MemCfg* m, MemChunkGpu* c, const real* A, const real* dP, const real* dcs,
                                  real* dA) {
    size_t off[2];
    int rows[2], cols[2], nm = mem_matrices_gpu(m, off, rows, cols);
    for (int k = 0; k < nm; k++) {
        int n = rows[k] * cols[k];
        double q4 = 0, pa = 0;
        FOR(i, n) {
            double x = A[off[k] + i];
            q4 += x * x * x * x;
            pa += (double)dP[off[k] + i] * x;
        }
        q4 = block_sumd(q4);
        pa = block_sumd(pa);
        if (c->R > 1) {
            q4 = cl_sumd(c, q4);
            pa = cl_sumd(c, pa);
        }
        double nrm = pow(q4, 0.25), s = (nrm + 1e-6) * (nrm + 1e-6), ds = -(pa + dcs[k]) / (s * s);
        double f = nrm > 0 ? ds * 2 * (nrm + 1e-6) / (nrm * nrm * nrm) : 0;
        FOR(i, n) {
            double x = A[off[k] + i];
            dA[off[k] + i] += (real)(dP[off[k] + i] / s + f * x * x * x);
        }
        __syncthreads();
    }
}
// Memora: W = softmax over each row of each matrix (a warp per row); backward dZ = W (dW - <dW, W>) per row
// (accumulated). Split: W1's rows (d, dm) span the CTAs' slices, so their max (cl_max), sum and <dW, W> (cl_reduce)
// are the cluster's, kept in c->rowv; W2's and W3's rows (dm, din) are each in one CTA.
MEMFN void softmax_rows_gpu(const MemCfg* m, MemChunkGpu* c, const real* Z, real* W) {
    size_t off[3];
    int rows[3], cols[3], nm = mem_matrices_gpu(m, off, rows, cols);
    for (int k = 0; k < nm; k++) {
        bool cl = k == 0 && nm > 1 && c->R > 1;  // (W1 of a deep memory, split)
        real *vm = c->rowv, *vs = c->rowv + rows[k];
        if (cl) {
            WARP_FOR(r, rows[k]) {  // the rows' max over the cluster
                const real* z = Z + off[k] + (size_t)r * cols[k];
                real mx = -INFINITY;
                for (int j = LANE; j < cols[k]; j += 32) mx = fmaxf(mx, z[j]);
                mx = warp_max(mx);
                if (LANE == 0) cl_buf(c)[r] = mx;
            }
            cl_max(c, vm, rows[k]);
        }
        WARP_FOR(r, rows[k]) {
            const real* z = Z + off[k] + (size_t)r * cols[k];
            real* w = W + off[k] + (size_t)r * cols[k];
            real mx = -INFINITY, sum = 0;
            if (cl)
                mx = vm[r];
            else {
                for (int j = LANE; j < cols[k]; j += 32) mx = fmaxf(mx, z[j]);
                mx = warp_max(mx);
            }
            for (int j = LANE; j < cols[k]; j += 32) {
                w[j] = expf(z[j] - mx);
                sum += w[j];
            }
            sum = warp_sum(sum);
            if (cl) {
                if (LANE == 0) cl_buf(c)[r] = sum;
            } else
                for (int j = LANE; j < cols[k]; j += 32) w[j] /= sum;
        }
        if (cl) {
            ClPart pt[1] = {{vs, 0, rows[k], 0}};
            cl_reduce(c, pt, 1);
            WARP_FOR(r, rows[k]) {
                real* w = W + off[k] + (size_t)r * cols[k];
                for (int j = LANE; j < cols[k]; j += 32) w[j] /= vs[r];
            }
        }
    }
    __syncthreads();
}
MEMFN void softmax_rows_backward_gpu(const MemCfg* m, MemChunkGpu* c, const real* W, const real* dW, real* dZ) {
    size_t off[3];
    int rows[3], cols[3], nm = mem_matrices_gpu(m, off, rows, cols);
    for (int k = 0; k < nm; k++) {
        bool cl = k == 0 && nm > 1 && c->R > 1;  // (W1 of a deep memory, split: <dW, W> per row over the cluster)
        real* vp = c->rowv;
        WARP_FOR(r, rows[k]) {
            size_t o = off[k] + (size_t)r * cols[k];
            real p = 0;
            for (int j = LANE; j < cols[k]; j += 32) p += dW[o + j] * W[o + j];
            p = warp_sum(p);
            if (cl) {
                if (LANE == 0) cl_buf(c)[r] = p;
            } else
                for (int j = LANE; j < cols[k]; j += 32) dZ[o + j] += W[o + j] * (dW[o + j] - p);
        }
        if (cl) {
            ClPart pt[1] = {{vp, 0, rows[k], 0}};
            cl_reduce(c, pt, 1);
            WARP_FOR(r, rows[k]) {
                size_t o = off[k] + (size_t)r * cols[k];
                for (int j = LANE; j < cols[k]; j += 32) dZ[o + j] += W[o + j] * (dW[o + j] - vp[r]);
            }
        }
    }
    __syncthreads();
}
// Memora's chunk: token 0 is the lag token, exact in logit space: Z_1 = a_0 Z_s - eta_0 g_0(W_s), W_1 = softmax(Z_1).
// The rest is the linear chunk from W_1 whose carry is applied to Z_1; token 0 joins it with a = 1, eta = 0
// (no write), so that it is read at W_1 like the others are read at W_t. (keep: the chunk's GPU scratch)
MEMFN void kl_gates_gpu(const MemCfg* m, MemChunkGpu* c, int lag, real* keep) {
    if (lag) {
        if (threadIdx.x == 0) {
            keep[0] = c->a[0];
            keep[1] = c->eta[0];
            c->a[0] = 1;
            c->eta[0] = 0;
        }
        if (m->cw) FOR(i, m->d) {
                keep[2 + i] = c->etac[i];
                c->etac[i] = 0;
            }
    } else {
        if (threadIdx.x == 0) {
            c->a[0] = keep[0];
            c->eta[0] = keep[1];
        }
        if (m->cw) FOR(i, m->d) c->etac[i] = keep[2 + i];
    }
    __syncthreads();
}

// ---- muon's Newton-Schulz (SPEC §5.7; train_miras.c's ns5_forward, ns5_backward), per memory matrix, by the block.
// NS5(S): X = S / (|S|_F + 1e-7), transposed so that rows <= cols (m x n), then 5 times
//     A = X X^T ;  X = 3.4445 X + (-4.7750 A + 2.0315 A A) X
// and transposed back; NS5(0) = 0 with zero derivative. sv keeps X_0..X_5 (6 m n), A_0..A_4 (5 m m) and |S|
// (ns5_saved); tmp: 2 m m + m n scratch (the backward's: 3 m m + 2 m n).
static constexpr real ns5_a = 3.4445, ns5_b = -4.7750, ns5_c = 2.0315;  // (train_miras.c's NS5_A, NS5_B, NS5_C)
// element e of the r x cc matrix S in the m x n orientation (transposed when r > cc)
__device__ __forceinline__ size_t ns5_at(int e, int r, int cc, int n) {
    int i = e / cc, j = e % cc;
    return r > cc ? (size_t)j * n + i : (size_t)i * n + j;
}
MEMFN void ns5_forward_gpu(real* out, real* sv, real* tmp, const real* S, int r, int cc) {
    int m = r > cc ? cc : r, n = r > cc ? r : cc;
    size_t mn = (size_t)m * n, mm = (size_t)m * m;
    real *X = sv, *A = sv + 6 * mn, *B = tmp;
    double s2 = 0;
    FOR(e, mn) s2 += (double)S[e] * S[e];
    real nrm = (real)sqrt(block_sumd(s2));  // (the same in every thread)
    if (threadIdx.x == 0) A[5 * mm] = nrm;
    if (nrm == 0) {
        FOR(e, mn) out[e] = 0;
        __syncthreads();
        return;
    }
    real f = 1 / (nrm + (real)1e-7);
    FOR(e, mn) X[ns5_at(e, r, cc, n)] = f * S[e];
    __syncthreads();
    for (int k = 0; k < 5; k++) {
        real *Xk = X + k * mn, *Xn = Xk + mn, *Ak = A + k * mm;
        mm_nt_gpu(Ak, Xk, Xk, m, m, n, 1, 0);  // A = X X^T
        mm_nn_gpu(B, Ak, Ak, m, m, m, ns5_c, 0);  // B = b A + c A A
        FOR(e, mm) B[e] += ns5_b * Ak[e];
        __syncthreads();
        mm_nn_gpu(Xn, B, Xk, m, n, m, 1, 0);  // X' = a X + B X
        FOR(e, mn) Xn[e] += ns5_a * Xk[e];
        __syncthreads();
    }
    const real* X5 = X + 5 * mn;
    FOR(e, mn) out[e] = X5[ns5_at(e, r, cc, n)];
    __syncthreads();
}
// dS += dNS5/dS^T dout, from the forward's sv. Per iteration, with B = b A + c A^2 (symmetric):
//   dX = a G + B G + (dA + dA^T) X,  dA = b dB + c (dB A + A dB),  dB = G X^T;  then through X_0 = S / (|S| + eps):
//   dS = G_0 / (|S| + eps) - S <S, G_0> / ((|S| + eps)^2 |S|)
MEMFN void ns5_backward_gpu(real* dS, const real* dout, const real* sv, real* tmp, const real* S, int r, int cc) {
    int m = r > cc ? cc : r, n = r > cc ? r : cc;
    size_t mn = (size_t)m * n, mm = (size_t)m * m;
    const real *X = sv, *A = sv + 6 * mn;
    real nrm = A[5 * mm];
    if (nrm == 0) return;
    real *G = tmp, *Gn = G + mn, *B = Gn + mn, *dB = B + mm, *dA = dB + mm;
    FOR(e, mn) G[ns5_at(e, r, cc, n)] = dout[e];
    __syncthreads();
    for (int k = 4; k >= 0; k--) {
        const real *Xk = X + k * mn, *Ak = A + k * mm;
        mm_nn_gpu(B, Ak, Ak, m, m, m, ns5_c, 0);
        FOR(e, mm) B[e] += ns5_b * Ak[e];
        __syncthreads();
        mm_nn_gpu(Gn, B, G, m, n, m, 1, 0);  // B^T G = B G
        FOR(e, mn) Gn[e] += ns5_a * G[e];
        __syncthreads();
        mm_nt_gpu(dB, G, Xk, m, m, n, 1, 0);  // dB = G X^T
        mm_nn_gpu(dA, dB, Ak, m, m, m, ns5_c, 0);
        mm_nn_gpu(dA, Ak, dB, m, m, m, ns5_c, 1);
        FOR(e, mm) dA[e] += ns5_b * dB[e];
        __syncthreads();
        FOR(e, mm) dB[e] = dA[e] + dA[(e % m) * m + e / m];
        __syncthreads();
        mm_nn_gpu(Gn, dB, Xk, m, n, m, 1, 1);  // + (dA + dA^T) X
        block_copy(G, Gn, mn);
    }
    real f = 1 / (nrm + (real)1e-7);
    double sg = 0;
    FOR(e, mn) sg += (double)S[e] * G[ns5_at(e, r, cc, n)];
    real w = (real)(block_sumd(sg) * f * f / nrm);
    FOR(e, mn) dS[e] += f * G[ns5_at(e, r, cc, n)] - w * S[e];
    __syncthreads();
}
// <a, b> over n, the same in every thread (double partials in a fixed order)
MEMFN real block_dot(const real* a, const real* b, size_t n) {
    double s = 0;
    FOR(e, n) s += (double)a[e] * b[e];
    return (real)block_sumd(s);
}

// ---- muon (SPEC §5.7), token-level (train_miras.c's muon_chunk_forward, whose comment gives the equations). Per own
// row j of the chunk (omega's halo rows take no step), with every g_i taken at the chunk-start state P_s:
//     G_j = sum_{o<c} gamma_j[o] g_{j-o}       S_j = theta_j S_{j-1} + G_j       X_j = NS5(S_j) per memory matrix
//     P_j = a_j P_{j-1} [+ (1 - a_j) P_0] - eta_j X_j                               y_j = M(q_j; P_j)
// The chunk keeps P_j, S_j, X_j of every own row (mP, mS, mX) and NS5's iterates (msv) for the backward.
// G += w x y^T (m x p), a thread per element
MEMFN void outer_add_gpu(real* G, real w, const real* x, const real* y, int m, int p) {
    FOR(e, (size_t)m * p) G[e] += w * x[e / p] * y[e % p];
    __syncthreads();
}
// its backward for the adjoint dG: dx += w dG y (a warp per row), dy += w dG^T x (a thread per column); returns
// dw = x^T dG y (the same in every thread)
MEMFN real outer_add_backward_gpu(real* dx, real* dy, const real* dG, real w, const real* x, const real* y, int m,
                                  int p) {
    real dw = 0;
    WARP_FOR(i, m) {
        real gy = warp_dot(dG + (size_t)i * p, y, p);
        if (LANE == 0) {
            dx[i] += w * gy;
            dw += x[i] * gy;
        }
    }
    FOR(j, p) {
        real v = 0;
        for (int i = 0; i < m; i++) v += x[i] * dG[(size_t)i * p + j];
        dy[j] += w * v;
    }
    return block_sum(dw);  // (its barriers publish dx, dy)
}
// G += w g_i: linear g_i = r_i k_i^T (d, din); deep (g1_i hk_i^T (d, dm), g2_i k_i^T (dm, din)) (gated: g3_i k_i^T)
MEMFN void muon_add_grad_gpu(const MemCfg* m, const MemChunkGpu* c, real* G, int i, real w) {
    int d = m->d, dm = m->dm, din = m->din;
    if (m->depth == 1) {
        outer_add_gpu(G, w, c->r + (size_t)i * d, c->k + (size_t)i * din, d, din);
        return;
    }
    outer_add_gpu(G, w, c->g1 + (size_t)i * d, c->hk + (size_t)i * dm, d, dm);
    outer_add_gpu(G + (size_t)d * dm, w, c->g2 + (size_t)i * dm, c->k + (size_t)i * din, dm, din);
    if (m->gated)
        outer_add_gpu(G + (size_t)d * dm + (size_t)dm * din, w, c->g3 + (size_t)i * dm, c->k + (size_t)i * din, dm,
                      din);
}
MEMFN real muon_add_grad_backward_gpu(const MemCfg* m, MemChunkGpu* c, const real* dG, int i, real w) {
    int d = m->d, dm = m->dm, din = m->din;
    size_t id = (size_t)i * d, im = (size_t)i * dm, ik = (size_t)i * din;
    if (m->depth == 1) return outer_add_backward_gpu(c->dr + id, c->dk + ik, dG, w, c->r + id, c->k + ik, d, din);
    real dw = outer_add_backward_gpu(c->dg1 + id, c->dhk + im, dG, w, c->g1 + id, c->hk + im, d, dm);
    dw += outer_add_backward_gpu(c->dg2 + im, c->dk + ik, dG + (size_t)d * dm, w, c->g2 + im, c->k + ik, dm, din);
    if (m->gated)
        dw += outer_add_backward_gpu(c->dg3 + im, c->dk + ik, dG + (size_t)d * dm + (size_t)dm * din, w, c->g3 + im,
                                     c->k + ik, dm, din);
    return dw;
}
// the read of row j through the full state Pj: linear y = W q; deep y = q + LN(W1 GELU(W2 q)) g + beta (gated:
// W1 (GELU(W2 q) * W3 q))
MEMFN void muon_read_forward_gpu(const MemCfg* m, MemChunkGpu* c, int j, const real* Pj, const real* lng,
                                 const real* lnb) {
    int d = m->d, dm = m->dm, din = m->din;
    if (m->depth == 1) {
        mm_nt_gpu(c->y + (size_t)j * d, c->q + (size_t)j * din, Pj, 1, d, din, 1, 0);
        return;
    }
    real *zq = c->zq + (size_t)j * dm, *tq = c->tq + (size_t)j * dm, *hq = c->hq + (size_t)j * dm;
    mm_nt_gpu(zq, c->q + (size_t)j * din, Pj + (size_t)d * dm, 1, dm, din, 1, 0);  // z = W2 q
    FOR(e, dm) {
        tq[e] = gelu_tanh_gpu(zq[e]);
        hq[e] = gelu_gpu(zq[e], tq[e]);
    }
    __syncthreads();
    if (m->gated) {  // h = GELU(W2 q) * z3, z3 = W3 q
        real *zq3 = c->zq3 + (size_t)j * dm, *hq2 = c->hq2 + (size_t)j * dm;
        mm_nt_gpu(zq3, c->q + (size_t)j * din, Pj + (size_t)d * dm + (size_t)dm * din, 1, dm, din, 1, 0);
        FOR(e, dm) {
            hq2[e] = hq[e];
            hq[e] = hq2[e] * zq3[e];
        }
        __syncthreads();
    }
    mm_nt_gpu(c->nq + (size_t)j * d, hq, Pj, 1, d, dm, 1, 0);  // o = W1 h
    ln_out_forward_gpu(c->y + (size_t)j * d, c->qr + (size_t)j * d, c->nq + (size_t)j * d, c->rq + j, lng, lnb, m, 1);
}
// its backward from dy_j: dq_j (the features; the residual's raw row into dqr), dlng, dlnb and dPj += dL/dPj
MEMFN void muon_read_backward_gpu(const MemCfg* m, MemChunkGpu* c, int j, const real* dyj, const real* Pj, real* dPj,
                                  const real* lng) {
    int d = m->d, dm = m->dm, din = m->din;
    const real* q = c->q + (size_t)j * din;
    real* dq = c->dq + (size_t)j * din;
    if (m->depth == 1) {
        mm_nn_gpu(dq, dyj, Pj, 1, din, d, 1, 1);  // dq += W^T dy
        outer_add_gpu(dPj, 1, dyj, q, d, din);  // dW += dy q^T
        return;
    }
    real *doq = c->doq + (size_t)j * d, *dnq = c->dnk + (size_t)j * d, *dhq = c->dhq + (size_t)j * dm;
    real* dzq = c->dzq + (size_t)j * dm;
    mem_out_backward_gpu(c->dqr + (size_t)j * d, doq, c->dlng, c->dlnb, dyj, c->nq + (size_t)j * d, lng, m, 1);
    if (m->ln) {  // through the LN (dnk's row is a temporary: mem_grad_backward_gpu needs it zero)
        block_copy(dnq, doq, d);
        block_zero(doq, d);
        ln_backward_gpu(doq, dnq, NULL, c->nq + (size_t)j * d, c->rq + j, 1, d);
        block_zero(dnq, d);
    }
    mm_nn_gpu(dhq, doq, Pj, 1, dm, d, 1, 0);  // o = W1 h: dh = W1^T do, dW1 += do h^T
    outer_add_gpu(dPj, 1, doq, c->hq + (size_t)j * dm, d, dm);
    if (m->gated) {  // h = h2 z3: dz3 = dh h2, dh2 = dh z3 (kept in dhq), z3 = W3 q: dq += W3^T dz3, dW3 += dz3 q^T
        real* dzq3 = c->dzq3 + (size_t)j * dm;
        const real* W3 = Pj + (size_t)d * dm + (size_t)dm * din;
        FOR(e, dm) {
            dzq3[e] = dhq[e] * c->hq2[(size_t)j * dm + e];
            dhq[e] *= c->zq3[(size_t)j * dm + e];
        }
        __syncthreads();
        mm_nn_gpu(dq, dzq3, W3, 1, din, dm, 1, 1);
        outer_add_gpu(dPj + (size_t)d * dm + (size_t)dm * din, 1, dzq3, q, dm, din);
    }
    FOR(e, dm) dzq[e] = dhq[e] * gelu_d1_gpu(c->zq[(size_t)j * dm + e], c->tq[(size_t)j * dm + e]);
    __syncthreads();
    mm_nn_gpu(dq, dzq, Pj + (size_t)d * dm, 1, din, dm, 1, 1);  // z = W2 q: dq += W2^T dz, dW2 += dz q^T
    outer_add_gpu(dPj + (size_t)d * dm, 1, dzq, q, dm, din);
}
// NS5's saved floats of an r x cc matrix (train_miras.c's ns5_saved)
__device__ __forceinline__ size_t ns5_saved_gpu(int r, int cc) {
    size_t m = r < cc ? r : cc, n = r < cc ? cc : r;
    return 6 * m * n + 5 * m * m + 1;
}
// the offsets of each matrix's NS5 records in a row's msv
MEMFN int muon_layout_gpu(const MemCfg* m, size_t* off, int* rows, int* cols, size_t* svo) {
    int nm = mem_matrices_gpu(m, off, rows, cols);
    svo[0] = 0;
    for (int k = 1; k < nm; k++) svo[k] = svo[k - 1] + ns5_saved_gpu(rows[k - 1], cols[k - 1]);
    return nm;
}
// One chunk of n rows (nh = c->nh halo rows first) from (P, S) = (P_s, S_s); y of the own rows (the halo rows' y is
// neither written nor read); the chunk-end (P, S) into Pn, Sn if Pn.
MEMFN void muon_chunk_forward_gpu(const MemCfg* m, MemChunkGpu* c, int n, const real* P, const real* S, real* Pn,
                                  real* Sn, const real* lng, const real* lnb) {
    int nh = c->nh, w = c->wc, rows[3], cols[3];
    size_t nP = m->nP, off[3], svo[3];
    int nm = muon_layout_gpu(m, off, rows, cols, svo);
    mem_grad_forward_gpu(m, c, n, P, lng, lnb);  // every g_i at P_s, the halo rows' too
    for (int j = nh; j < n; j++) {
        size_t t = j - nh;
        real *Pj = c->mP + t * nP, *Sj = c->mS + t * nP, *Xj = c->mX + t * nP;
        const real *Pp = t ? Pj - nP : P, *Sp = t ? Sj - nP : S;
        // S_j = theta_j S_{j-1} + G_j (no barrier between: the first outer_add_gpu of G_j adds to Sj[e] in the
        // thread that wrote it, from offset 0, and its barrier publishes Sj before the next product's offset)
        FOR(e, nP) Sj[e] = c->theta[j] * Sp[e];
        for (int o = 0; o < w && o <= j; o++) muon_add_grad_gpu(m, c, Sj, j - o, w > 1 ? c->gam[(size_t)j * w + o] : 1);
        for (int k = 0; k < nm; k++)  // X_j = NS5(S_j), per matrix
            ns5_forward_gpu(Xj + off[k], c->msv + t * c->nsv + svo[k], c->mtmp, Sj + off[k], rows[k], cols[k]);
        FOR(e, nP)  // P_j = a_j P_{j-1} [+ (1 - a_j) P_0] - eta_j X_j
        Pj[e] = c->a[j] * Pp[e] + (c->p0 ? (1 - c->a[j]) * c->p0[e] : 0) - c->eta[j] * Xj[e];
        __syncthreads();
        muon_read_forward_gpu(m, c, j, Pj, lng, lnb);
    }
    if (Pn) {
        block_copy(Pn, c->mP + (size_t)(n - 1 - nh) * nP, nP);
        block_copy(Sn, c->mS + (size_t)(n - 1 - nh) * nP, nP);
    }
}
// Its backward (run muon_chunk_forward_gpu first): from dy and dPn, dSn (NULL for the last chunk) to the chunk's input
// gradients, c->dlng, dlnb, c->dp0 (accumulated) and dPs, dSs (overwritten), token by token in reverse:
//     dP_j += read_j^T dy_j;  da_j = <dP_j, P_{j-1} [- P_0]>;  deta_j = -<dP_j, X_j>;  dS_j += NS5'(S_j)^T (-eta_j dP_j)
//     dtheta_j = <dS_j, S_{j-1}>;  dgamma_j[o] = <dS_j, g_{j-o}>;  dg_{j-o} += gamma_j[o] dS_j
//     dP_{j-1} = a_j dP_j;  dS_{j-1} = theta_j dS_j
// then the g_i's adjoints through the inner gradients at P_s (mem_grad_backward_gpu) into dPs.
MEMFN void muon_chunk_backward_gpu(const MemCfg* m, MemChunkGpu* c, int n, const real* dy, const real* P, const real* S,
                                   const real* dPn, const real* dSn, real* dPs, real* dSs, const real* lng) {
    int nh = c->nh, w = c->wc, d = m->d, rows[3], cols[3];
    size_t nP = m->nP, off[3], svo[3];
    int nm = muon_layout_gpu(m, off, rows, cols, svo);
    real *gP = dPs, *gS = dSs, *gX = c->Wc;  // dL/dP_j, dL/dS_j as j goes back; dL/dX_j
    block_zero(c->grad0, c->ngrad);
    block_zero(c->dgam, (size_t)n * w);
    if (dPn) {
        block_copy(gP, dPn, nP);
        block_copy(gS, dSn, nP);
    } else {
        block_zero(gP, nP);
        block_zero(gS, nP);
    }
    for (int j = n - 1; j >= nh; j--) {
        size_t t = j - nh;
        const real *Pj = c->mP + t * nP, *Sj = c->mS + t * nP, *Xj = c->mX + t * nP;
        const real *Pp = t ? Pj - nP : P, *Sp = t ? Sj - nP : S;
        muon_read_backward_gpu(m, c, j, dy + (size_t)j * d, Pj, gP, lng);
        real da = block_dot(gP, Pp, nP), deta = -block_dot(gP, Xj, nP);
        if (c->p0) {
            da -= block_dot(gP, c->p0, nP);
            FOR(e, nP) c->dp0[e] += (1 - c->a[j]) * gP[e];
        }
        FOR(e, nP) gX[e] = -c->eta[j] * gP[e];
        if (threadIdx.x == 0) {
            c->da[j] += da;
            c->deta[j] += deta;
        }
        __syncthreads();
        for (int k = 0; k < nm; k++)
            ns5_backward_gpu(gS + off[k], gX + off[k], c->msv + t * c->nsv + svo[k], c->mtmp, Sj + off[k], rows[k],
                             cols[k]);
        real dth = block_dot(gS, Sp, nP);
        for (int o = 0; o < w && o <= j; o++) {
            real dw = muon_add_grad_backward_gpu(m, c, gS, j - o, w > 1 ? c->gam[(size_t)j * w + o] : 1);
            if (w > 1 && threadIdx.x == 0) c->dgam[(size_t)j * w + o] += dw;
        }
        if (threadIdx.x == 0) c->dtheta[j] += dth;
        // (no barrier before gS changes: the loop above runs at least once, o = 0, and its last read of gS is in
        // outer_add_backward_gpu, before that function's block_sum)
        FOR(e, nP) {
            gP[e] *= c->a[j];
            gS[e] *= c->theta[j];
        }
        __syncthreads();
    }
    mem_grad_backward_gpu(m, c, n, P, dPs, lng);
}

// ---- muon, chunk-level (SPEC §5.7's approximation, preset atlas_chunk; train_miras.c's muonc_*, whose comment
// derives it). The reads are the omega+gd form from P_s (mem_chunk_forward_gpu), the momentum is scanned per token
// and only the carry takes a Newton-Schulz step:
//     P_end = A P_s [+ (1 - A) P_0] - eta_last NS5(S_end),  A = prod_j a_j  (own rows j; halo rows take no step)
//     S_end = Theta S_s + sum_i w_i g_i, Theta = prod_j theta_j, w_i = sum_j Pth_j gamma_j[j - i], Pth_j = prod_{l>j}
// theta_l. Thread 0 computes the scalar coefficients into c->mc (Pth, w, then the backward's pre, dw, dPth: 5 n).
MEMFN void muonc_coefs_gpu(const MemChunkGpu* c, int n, real* Pth, real* w) {
    int nh = c->nh, wc = c->wc;
    if (threadIdx.x == 0) {
        for (int j = n - 1; j >= nh; j--) Pth[j] = j == n - 1 ? 1 : c->theta[j + 1] * Pth[j + 1];
        for (int i = 0; i < n; i++) {
            w[i] = 0;
            for (int j = i > nh ? i : nh; j < n && j < i + wc; j++)
                w[i] += Pth[j] * (wc > 1 ? c->gam[(size_t)j * wc + j - i] : 1);
        }
    }
    __syncthreads();
}
// the carry: S_end into Sn, X = NS5(S_end) into c->mX (NS5's iterates in c->msv), P_end into Pn
MEMFN void muonc_carry_forward_gpu(const MemCfg* m, MemChunkGpu* c, int n, const real* P, const real* S, real* Pn,
                                   real* Sn) {
    int rows[3], cols[3];
    size_t nP = m->nP, off[3], svo[3];
    int nm = muon_layout_gpu(m, off, rows, cols, svo);
    real *Pth = c->mc, *w = c->mc + n, A = 1;
    muonc_coefs_gpu(c, n, Pth, w);
    for (int j = c->nh; j < n; j++) A *= c->a[j];
    real Th = c->theta[c->nh] * Pth[c->nh];
    FOR(e, nP) Sn[e] = Th * S[e];  // S_end = Theta S_s + sum_i w_i g_i
    __syncthreads();
    for (int i = 0; i < n; i++) muon_add_grad_gpu(m, c, Sn, i, w[i]);
    for (int k = 0; k < nm; k++)
        ns5_forward_gpu(c->mX + off[k], c->msv + svo[k], c->mtmp, Sn + off[k], rows[k], cols[k]);
    FOR(e, nP)  // P_end = A P_s [+ (1 - A) P_0] - eta_last X
    Pn[e] = A * P[e] + (c->p0 ? (1 - A) * c->p0[e] : 0) - c->eta[n - 1] * c->mX[e];
    __syncthreads();
}
MEMFN void muonc_chunk_forward_gpu(const MemCfg* m, MemChunkGpu* c, int n, const real* P, const real* S, real* Pn,
                                   real* Sn, const real* lng, const real* lnb) {
    mem_chunk_forward_gpu(m, c, n, P, NULL, NULL, NULL, lng, lnb, NULL, NULL);  // the reads (m is gd: momentum 0)
    if (Pn) muonc_carry_forward_gpu(m, c, n, P, S, Pn, Sn);
}
// Its backward (run muonc_chunk_forward_gpu first): the reads' (mem_chunk_backward_gpu), then the carry's from dPn,
// dSn:
//     dP_s += A dP_end;  dA = <dP_end, P_s [- P_0]>;  deta_last = -<dP_end, X>;  dS_end = dSn + NS5'^T (-eta_last dP_end)
//     dS_s = Theta dS_end;  dw_i = <dS_end, g_i>;  dg_i += w_i dS_end;  then dw, dTheta, dA to theta, gamma, a
// and the g_i's adjoints through the inner gradients at P_s (a second mem_grad_backward_gpu, the reads' kept aside).
MEMFN void muonc_chunk_backward_gpu(const MemCfg* m, MemChunkGpu* c, int n, const real* dy, const real* P,
                                    const real* S, const real* dPn, const real* dSn, real* dPs, real* dSs,
                                    const real* lng) {
    int rows[3], cols[3], nh = c->nh, wc = c->wc;
    size_t nP = m->nP, off[3], svo[3];
    int nm = muon_layout_gpu(m, off, rows, cols, svo);
    mem_chunk_backward_gpu(m, c, n, dy, P, NULL, NULL, NULL, dPs, NULL, lng, NULL, dPs, NULL);
    if (!dPn) {  // the last chunk: no carry
        block_zero(dSs, nP);
        return;
    }
    real *Se = c->mS, *gS = dSs, *gX = c->Wc;
    muonc_carry_forward_gpu(m, c, n, P, S, c->mP, Se);  // (recomputed: S_end, X and NS5's iterates)
    block_copy(c->save, c->grad0, c->ngrad);
    block_zero(c->grad0, c->ngrad);
    real *Pth = c->mc, *w = Pth + n, *pre = w + n, *dw = pre + n, *dPth = dw + n, A = 1;
    for (int j = nh; j < n; j++) A *= c->a[j];
    real Th = c->theta[nh] * Pth[nh], dA = block_dot(dPn, P, nP);
    if (c->p0) {
        dA -= block_dot(dPn, c->p0, nP);
        FOR(e, nP) c->dp0[e] += (1 - A) * dPn[e];
    }
    FOR(e, nP) {
        dPs[e] += A * dPn[e];
        gX[e] = -c->eta[n - 1] * dPn[e];
    }
    real dX = block_dot(dPn, c->mX, nP);
    if (threadIdx.x == 0) c->deta[n - 1] -= dX;
    block_copy(gS, dSn, nP);
    for (int k = 0; k < nm; k++)
        ns5_backward_gpu(gS + off[k], gX + off[k], c->msv + svo[k], c->mtmp, Se + off[k], rows[k], cols[k]);
    real dTh = block_dot(gS, S, nP);
    for (int i = 0; i < n; i++) {
        real v = muon_add_grad_backward_gpu(m, c, gS, i, w[i]);
        if (threadIdx.x == 0) dw[i] = v;
    }
    FOR(e, nP) gS[e] *= Th;  // dS_s = Theta dS_end
    if (threadIdx.x == 0) {  // the scalar chains, as on the CPU
        real acc = 1;
        for (int j = nh; j < n; j++) {
            pre[j] = acc;  // prod_{l<j} a_l
            acc *= c->a[j];
        }
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
    }
    __syncthreads();
    mem_grad_backward_gpu(m, c, n, P, dPs, lng);
    FOR(i, c->ngrad) c->grad0[i] += c->save[i];
    __syncthreads();
}

// Memora's lag token (SPEC §5.4) runs the chunk functions over one row at W_s, for Z_1 only: the chunk's n-row pass
// reads token 0 again, at W_1 (its gates made a = 1, eta = 0 by kl_gates), and the backward's one-row pass has
// dy = 0. So those one-row passes skip the reads and their backward (MemChunkGpu.noread; the reads' terms were
// overwritten, or zeros added: the same sums). At the 100M's head shape (d 64, d_m 256, b 16, split over 2; the
// emulator's count per chunk and CTA) this took memora's forward from 63.5 barriers to 54.5, its backward from 197.5
// to 157.5 (dev/cuda/memlab_notes.md, "Memora's lag token, the LN rows"). Thread 0 sets the flag before the first
// softmax, whose barriers publish it, and puts the caller's value (returned here, thread 0's) back before the n-row
// pass.
__device__ __forceinline__ int mem_lag_noread(MemChunkGpu* c) {
    int nr = c->noread;
    if (threadIdx.x == 0) c->noread = 1;  // (the other threads read it only after the softmax's barriers)
    return nr;
}
// The chunk as the model runs it: carried state St (and momentum S) in; y; the next carried state if Stn.
MEMFN void mem_step_forward_gpu(const MemCfg* m, MemChunkGpu* c, int n, const real* St, const real* S, real* Stn,
                                real* Sn, const real* lng, const real* lnb) {
    if (m->muon == 1) {
        muon_chunk_forward_gpu(m, c, n, St, S, Stn, Sn, lng, lnb);
        return;
    }
    if (m->muon == 2) {
        muonc_chunk_forward_gpu(m, c, n, St, S, Stn, Sn, lng, lnb);
        return;
    }
    if (m->retention == RET_NONE) {
        mem_chunk_forward_gpu(m, c, n, St, S, Stn, Sn, lng, lnb, NULL, NULL);
        return;
    }
    if (m->retention == RET_LQ) {
        real cs[2];
        lq_scales_gpu(m, c, St, c->Wa, cs);
        mem_chunk_forward_gpu(m, c, n, c->Wa, NULL, Stn, NULL, lng, lnb, St, cs);
        return;
    }
    real* keep = c->keep;
    int nr = mem_lag_noread(c);  // (the lag token's one-row pass without reads)
    softmax_rows_gpu(m, c, St, c->Wa);  // W_s
    mem_chunk_forward_gpu(m, c, 1, c->Wa, NULL, c->Wb, NULL, lng, lnb, St, NULL);  // Z_1
    if (threadIdx.x == 0) c->noread = nr;  // (published by the softmax's barriers)
    softmax_rows_gpu(m, c, c->Wb, c->Wc);  // W_1
    kl_gates_gpu(m, c, 1, keep);
    mem_chunk_forward_gpu(m, c, n, c->Wc, NULL, Stn, NULL, lng, lnb, c->Wb, NULL);
    kl_gates_gpu(m, c, 0, keep);
}
// Its backward (recomputes the forward). dSt, dSs: gradients of the carried state(s) at the chunk start.
MEMFN void mem_step_backward_gpu(const MemCfg* m, MemChunkGpu* c, int n, const real* dy, const real* St, const real* S,
                                 const real* dStn, const real* dSn, real* dSt, real* dSs, const real* lng,
                                 const real* lnb) {
    if (m->muon == 1) {
        muon_chunk_forward_gpu(m, c, n, St, S, NULL, NULL, lng, lnb);
        muon_chunk_backward_gpu(m, c, n, dy, St, S, dStn, dSn, dSt, dSs, lng);
        return;
    }
    if (m->muon == 2) {
        muonc_chunk_forward_gpu(m, c, n, St, S, NULL, NULL, lng, lnb);
        muonc_chunk_backward_gpu(m, c, n, dy, St, S, dStn, dSn, dSt, dSs, lng);
        return;
    }
    if (m->retention == RET_NONE) {
        if (c->noread != 2)  // (2: the chunk's forward values are loaded, mem_fw_io)
            mem_chunk_forward_gpu(m, c, n, St, S, NULL, NULL, lng, lnb, NULL, NULL);
        mem_chunk_backward_gpu(m, c, n, dy, St, S, dStn, dSn, dSt, dSs, lng, NULL, dSt, NULL);
        return;
    }
    if (m->retention == RET_LQ) {
        real cs[2];
        lq_scales_gpu(m, c, St, c->Wa, cs);
        mem_chunk_forward_gpu(m, c, n, c->Wa, NULL, NULL, NULL, lng, lnb, St, cs);
        mem_chunk_backward_gpu(m, c, n, dy, c->Wa, NULL, dStn, NULL, c->dWa, NULL, lng, St, dSt, cs);
        lq_scales_backward_gpu(m, c, St, c->dWa, c->dcs, dSt);
        return;
    }
    real* keep = c->keep;
    int nr = mem_lag_noread(c);  // (the lag token's one-row passes without reads)
    softmax_rows_gpu(m, c, St, c->Wa);
    mem_chunk_forward_gpu(m, c, 1, c->Wa, NULL, c->Wb, NULL, lng, lnb, St, NULL);
    if (threadIdx.x == 0) c->noread = nr;  // (published by the softmax's barriers)
    softmax_rows_gpu(m, c, c->Wb, c->Wc);
    kl_gates_gpu(m, c, 1, keep);
    mem_chunk_forward_gpu(m, c, n, c->Wc, NULL, NULL, NULL, lng, lnb, c->Wb, NULL);
    mem_chunk_backward_gpu(m, c, n, dy, c->Wc, NULL, dStn, NULL, c->dWa, NULL, lng, c->Wb, c->dWb, NULL);  // dW_1, dZ_1
    kl_gates_gpu(m, c, 0, keep);
    if (threadIdx.x == 0) {
        c->da[0] = c->deta[0] = 0;  // token 0's gates were constants here
        c->noread = 1;  // (the one-row pass below: dy = 0)
    }
    if (m->cw) FOR(i, m->d) c->detac[i] = 0;
    __syncthreads();
    block_copy(c->save, c->grad0, c->ngrad);
    softmax_rows_backward_gpu(m, c, c->Wc, c->dWa, c->dWb);  // dZ_1 += through W_1 = softmax(Z_1)
    // (the one-row pass again for its rows' values, which the n-row pass overwrote; Z_1 is still in Wb, so not its
    // update: two state-sized writes fewer)
    mem_chunk_forward_gpu(m, c, 1, c->Wa, NULL, NULL, NULL, lng, lnb, St, NULL);
    mem_chunk_backward_gpu(m, c, 1, c->zero, c->Wa, NULL, c->dWb, NULL, c->dWa, NULL, lng, St, dSt,
                           NULL);  // dW_s, dZ_s
    softmax_rows_backward_gpu(m, c, c->Wa, c->dWa, dSt);
    for (size_t i = threadIdx.x; i < c->ngrad; i += blockDim.x) c->grad0[i] += c->save[i];
    if (threadIdx.x == 0) c->noread = nr;
    __syncthreads();
}

// ---- the layer's memory over all sequences and heads: a kernel with one block per (sequence, head)

// The chunk scratch in shared memory (v3). A block works on one chunk at a time, and every chunk function reads
// and writes the MemChunk's arrays many times, so the block keeps as many of them as fit (H100: 227 KB) in its
// dynamic shared memory: the MemChunk's pointers are simply re-pointed there (they are generic pointers; the
// functions do not change). A plan lists the moved pointer slots (MemChunk seen as an array of pointers) and their
// offsets; it is made on the host by mem_smem_plan, per kernel (the forward needs no gradient arrays). Arrays
// that do not fit, and the state-sized ones, stay in the chunk's global scratch. (Room for every slot: until
// 2026-12-02 a plan held at most 72, and at titans' shape the arrays past that stayed in global memory, however much
// shared memory was left: xs1, xa1 and nm1 at a split of 4.)
#define MEM_SMEM_SLOTS (int)(sizeof(MemChunkGpu) / sizeof(real*))
struct MemSmem {
    int n, floats;
    int ps;  // the plan holds MemChunkGpu.Ps (the chains copy their chunk-start state there: g_mem_state)
    short slot[MEM_SMEM_SLOTS];
    int off[MEM_SMEM_SLOTS];
};
#ifdef EMU_CUDA
__device__ inline real* mem_dyn_smem() { return (real*)emu::dyn_smem(); }
#else
__device__ __forceinline__ real* mem_dyn_smem() {
    extern __shared__ float4 mem_dyn[];
    return (real*)mem_dyn;
}
#endif
__device__ void mem_smem_apply(MemChunkGpu* c, const MemSmem* sm) {  // thread 0, before the kernel's first barrier
    real** slot = (real**)c;
    real* base = mem_dyn_smem();
    for (int i = 0; i < sm->n; i++) slot[sm->slot[i]] = base + sm->off[i];
}

typedef struct {
    MemCfg m;
    int B, T, H, D, b, nch;
    const real *q, *k, *v, *ga, *gth, *geta, *gdel;  // this layer's memory inputs, rows (B*T, .)
    real* y;  // this layer's memory output (B*T, D)
    // this layer's chunk-start states (B, H, nch, nP); S: momentum only. The generic kernels keep every ck-th one
    // (B, H, ceil(nch / ck), nP) when ck > 1 (0 or 1: all): the others go to the block's Pw, Sw (ck - 1 states
    // each), and the backward recomputes them a segment of ck chunks at a time (mem_state_gpu)
    real *P, *S;
    int ck;
    real *Pw, *Sw;
    const real *p0, *lng, *lnb;  // this layer's P_0 (H, nP) and memory LN (H, d)
    MemChunkGpu* chunks;  // chunk scratch, one per block
    const real* dy;  // backward: dL/dy, and the gradients of the inputs (written)
    real *dq, *dk, *dv, *dga, *dgth, *dgeta, *dgdel;
    real* dbh;  // (B, H, nP + 2d): per-sequence dL/dP_0 and LN affine
    // b = 1 token kernels (v6): (B, H, T, TOK_AUX) forward values kept for the backward
    real* aux;
    // v6: (B, H, T, TOK_R, TOK_GP) the row blocks' sums, added by mem_token_reduce_v6
    real* gpart;
    // kernel version (dev/cuda/memlab.cu): 0 the best, see MEM_VERSIONS
    int ver;
    // the chunk products: 0 SIMT fp32, 1 TF32 tensor cores, 3 3xTF32 (set by the launches from ver)
    int tc;
    MemSmem sm;  // the chunk arrays this launch keeps in shared memory
    // the cluster split (section 3's "split", mem_split_ok): R CTAs per (sequence, head), each with dm / R of the
    // memory's hidden units (1: none); chunks then holds R scratches per (sequence, head), carved for the slice;
    // xn: the floats of each half of a CTA's exchange buffer (after the sm plan's floats in dynamic shared memory)
    int R, xn;
    real* lat;  // Lattice: per block, a segment's k + 1 states and the carry
    const real* ggam;  // omega: the window gates (B*T, H*c), and their gradients (accumulated)
    real* dggam;
    const real *qf, *kf;  // poly: the features of q, k (B*T, H*D_phi), and their gradients (accumulated)
    real *dqf, *dkf;
    // the phi* memory (section 3c): per block the CPU's PhiScr; this layer's entries (B, H, phne): signals (d_m each),
    // offsets, tokens; the chunk-start LA (B, H, nch)
    PhiScr* phs;
    real *phav, *phlo, *phLA;
    int* phetok;
    int phne;
    // the reads apart from the chain (MIRAS_MEM_PAR=1, mem_par_cfg; pG = 0: not). The forward kernel makes the
    // states only, memory_reads_kernel the reads of every chunk at once. Each chunk's backward is linear in
    // (dy, dL/dP_{s+1}), so it is the sum of two: memory_reads_kernel takes dy with dL/dP_{s+1} = 0, for all chunks at
    // once (pG work units per (sequence, head), ranges of chunks, each block on its own chunk scratch of pchunks):
    // dL/dP_s through the reads into pdP (pdS: momentum) (B, H, nch, nP), the rows' gradients into dq, ..., and per
    // unit the anchor's and LN affine's sums into pparts (B, H, pG, nP + 2d); memory_backward_kernel then runs the
    // chain with dy = 0 and without the reads (MemChunkGpu.noread), adds pdP's chunk to each dL/dP_s and its rows'
    // gradients to those stored, and memory_dbh_reduce_kernel adds pparts.
    real *pdP, *pdS, *pparts;
    MemChunkGpu* pchunks;
    int pG, pblocks, pR;  // pR: the forward's split (its stored states are in the slices' layout, cl_slice)
    int pcps;  // memory_reads_kernel's blocks per SM (MIRAS_MEM_PAR_CTAS)
    // and, where mem_fw_ok, every chunk's forward values for the backward chain (mem_fw_io), pfwn floats per chunk
    // (B, H, nch, pfwn); else NULL
    real* pfw;
    size_t pfwn;
} MemArgs;
static_assert(sizeof(MemArgs) <= 4096, "MemArgs: a kernel's parameters, at most 4 KB");

// copy rows [t0, t0+n) of head h of sequence bb from a (B, T, G*w) tensor into dst (n, w), and back
__device__ void gather_rows_gpu(real* dst, const real* src, int bb, int h, int t0, int n, int T, int G, int w) {
    FOR(e, n * w) {
        int t = e / w, i = e % w;
        dst[e] = src[(((size_t)bb * T + t0 + t) * G + h) * w + i];
    }
    __syncthreads();
}
__device__ void scatter_rows_gpu(real* dst, const real* src, int bb, int h, int t0, int n, int T, int G, int w) {
    FOR(e, n * w) {
        int t = e / w, i = e % w;
        dst[(((size_t)bb * T + t0 + t) * G + h) * w + i] = src[e];
    }
    __syncthreads();
}
// rows [t0, t0+n) of sequence bb, head h into the chunk (chunk_set_row of every row: q, k, v, a, theta, and eta,
// delta, per channel when channel-wise; channel-wise eta scales the error, so the recurrences' scalar eta is 1)
__device__ void load_chunk_inputs_gpu(MemChunkGpu* c, const MemArgs* A, int bb, int h, int t0, int n) {
    const MemCfg* m = &A->m;
    int d = m->d, H = A->H, D = A->D, ew = m->cw ? d : 1, Ge = m->cw ? D : H;
    FOR(e, n * d) {
        int t = e / d, i = e % d;
        size_t r = (size_t)bb * A->T + t0 + t;
        c->q[e] = A->q[r * D + h * d + i];
        c->k[e] = A->k[r * D + h * d + i];
        c->v[e] = A->v[r * D + h * d + i];
        if (m->cw) c->etac[e] = A->geta[r * Ge + h * ew + i];
        if (m->bias == BIAS_HUBER) c->delta[e] = A->gdel[r * Ge + h * ew + (m->cw ? i : 0)];
    }
    FOR(t, n) {
        size_t r = (size_t)bb * A->T + t0 + t;
        c->a[t] = A->ga[r * H + h];
        c->theta[t] = A->gth[r * H + h];
        c->eta[t] = m->cw ? 1 : A->geta[r * Ge + h * ew];
    }
    __syncthreads();
}
// and the gradients of those rows back (chunk_get_row_grads; a per-head delta gets the sum over the head's channels)
// (acc: added to what is there, the chain after memory_reads_kernel's part; else written)
__device__ void store_chunk_grads_gpu(const MemChunkGpu* c, const MemArgs* A, int bb, int h, int t0, int n,
                                      int acc = 0) {
    const MemCfg* m = &A->m;
    int d = m->d, H = A->H, D = A->D, ew = m->cw ? d : 1, Ge = m->cw ? D : H;
    auto put = [acc](real* p, real x) { *p = acc ? *p + x : x; };
    FOR(e, n * d) {
        int t = e / d, i = e % d;
        size_t r = (size_t)bb * A->T + t0 + t;
        put(&A->dq[r * D + h * d + i], c->dq[e]);
        put(&A->dk[r * D + h * d + i], c->dk[e]);
        put(&A->dv[r * D + h * d + i], c->dv[e]);
        if (m->cw) put(&A->dgeta[r * Ge + h * ew + i], c->detac[e]);
        if (m->bias == BIAS_HUBER && m->cw) put(&A->dgdel[r * Ge + h * ew + i], c->ddelta[e]);
    }
    FOR(t, n) {
        size_t r = (size_t)bb * A->T + t0 + t;
        put(&A->dga[r * H + h], c->da[t]);
        put(&A->dgth[r * H + h], c->dtheta[t]);
        if (!m->cw) put(&A->dgeta[r * Ge + h * ew], c->deta[t]);
        if (m->bias == BIAS_HUBER && !m->cw) {
            real s = 0;
            for (int i = 0; i < d; i++) s += c->ddelta[(size_t)t * d + i];
            put(&A->dgdel[r * Ge + h * ew], s);
        }
    }
    __syncthreads();
}

// the chunk's rows for the ATLAS family (omega and/or poly; train_miras.c's omega_load_chunk). Omega (SPEC §5.5): rows
// [t0-nh, t0+n) with the halo first (nh = min(c-1, t0)), whose own steps are nothing (a = 1, eta = 0, theta = 1; beta
// is held at 0 by mem_coef_forward_gpu), and the gates gamma of the chunk's own rows. Poly (SPEC §5.6): q, k become
// the features (n, D_phi); the raw rows go to qr, kr for the residual. Returns nh (0 without omega).
__device__ int omega_load_chunk_gpu(MemChunkGpu* c, const MemArgs* A, int bb, int h, int t0, int n) {
    int w = A->m.omega, nh = t0 < w - 1 ? t0 : w - 1, d = A->m.d, din = A->m.din;
    load_chunk_inputs_gpu(c, A, bb, h, t0 - nh, nh + n);
    if (A->m.poly) {  // (load_chunk_inputs_gpu wrote the raw rows into q, k at stride d)
        FOR(e, (nh + n) * d) {
            c->qr[e] = c->q[e];
            c->kr[e] = c->k[e];
        }
        __syncthreads();
        FOR(e, (size_t)(nh + n) * din) {
            size_t t = e / din, i = e % din, r = ((size_t)bb * A->T + t0 - nh + t) * A->H * din + (size_t)h * din + i;
            c->q[e] = A->qf[r];
            c->k[e] = A->kf[r];
        }
        __syncthreads();
    }
    if (w == 1) return 0;
    FOR(e, n * w) {
        int t = e / w, o = e % w;
        c->gam[(size_t)(nh + t) * w + o] = A->ggam[((size_t)bb * A->T + t0 + t) * A->H * w + (size_t)h * w + o];
    }
    FOR(t, nh) {
        c->a[t] = 1;
        c->eta[t] = 0;
        c->theta[t] = 1;
    }
    if (threadIdx.x == 0) {
        c->nh = nh;
        c->wc = w;
    }
    __syncthreads();
    return nh;
}
// and the gradients back (omega_store_chunk_grads): the own rows all of them, the halo rows dk, dv (and delta) only;
// accumulated into the zeroed gradients (the next chunk's halo, stored before this chunk by the same block, has
// already added to the own rows, and this chunk's halo adds to the previous chunk's). Poly: dq, dk are the features'
// gradients, into dqf, dkf; the residual's raw ones dqr, dkr into dq, dk (without poly dqr, dkr are dq, dk).
__device__ void omega_store_chunk_grads_gpu(const MemChunkGpu* c, const MemArgs* A, int bb, int h, int t0, int n) {
    const MemCfg* m = &A->m;
    int d = m->d, H = A->H, D = A->D, w = m->omega, nh = c->nh, din = m->din;
    FOR(e, (nh + n) * d) {
        int t = e / d, i = e % d;
        size_t r = (size_t)bb * A->T + t0 - nh + t;
        if (t >= nh) A->dq[r * D + h * d + i] += c->dqr[e];
        A->dk[r * D + h * d + i] += c->dkr[e];
        A->dv[r * D + h * d + i] += c->dv[e];
    }
    if (m->poly) FOR(e, (size_t)(nh + n) * din) {
            size_t t = e / din, i = e % din, r = ((size_t)bb * A->T + t0 - nh + t) * H * din + (size_t)h * din + i;
            if ((int)t >= nh) A->dqf[r] += c->dq[e];
            A->dkf[r] += c->dk[e];
        }
    FOR(t, nh + n) {
        size_t r = (size_t)bb * A->T + t0 - nh + t;
        if (m->bias == BIAS_HUBER) {
            real s = 0;
            for (int i = 0; i < d; i++) s += c->ddelta[(size_t)t * d + i];
            A->dgdel[r * H + h] += s;
        }
        if (t < nh) continue;
        A->dga[r * H + h] += c->da[t];
        A->dgth[r * H + h] += c->dtheta[t];
        A->dgeta[r * H + h] += c->deta[t];
        if (w > 1)
            for (int o = 0; o < w; o++) A->dggam[r * H * w + (size_t)h * w + o] += c->dgam[(size_t)t * w + o];
    }
    __syncthreads();
}

// n values from p into L2 (no wait): the backward's next chunk-start state, written long before (in DRAM by now)
__device__ __forceinline__ void prefetch_l2(const real* p, size_t n) {
#ifndef EMU_CUDA
    for (size_t i = (size_t)threadIdx.x * 32; i < n; i += (size_t)blockDim.x * 32)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p + i));
#endif
}
// chunk ch's start state (or momentum): a stored slot when ch is a multiple of ck, else the block's segment
// buffer w (the states between two slots; forward and backward place them alike, so they never overlap the
// state the same step reads)
__device__ __forceinline__ real* mem_state_gpu(real* P, real* w, int ch, int ck, int nP) {
    if (!P) return NULL;
    return ch % ck == 0 ? P + (size_t)(ch / ck) * nP : w + (size_t)(ch % ck - 1) * nP;
}
// chunk ch's inputs into the block's scratch; returns omega's halo rows (0 without omega and poly)
__device__ int mem_load_chunk_gpu(MemChunkGpu* c, const MemArgs* A, int bb, int h, int t0, int n) {
    if (A->m.omega > 1 || A->m.poly) return omega_load_chunk_gpu(c, A, bb, h, t0, n);
    load_chunk_inputs_gpu(c, A, bb, h, t0, n);
    return 0;
}
// The memory read of one layer (SPEC §5): each (sequence, head) runs its chunks in order; the chunk-start states
// are kept for the backward (every ck-th one with A.ck > 1, see MemArgs).
// A block's setup (thread 0, before the first barrier): its chunk scratch, the MemCfg it runs, the products' mode.
// Split (A.R > 1): CTA r of a (sequence, head)'s cluster runs the memory of its dm / R hidden units (m.dm, m.nP
// its slice's), with its slice of the anchor P_0 (gathered by the kernel into c.p0s) and its exchange buffer.
// where the split's exchange buffer starts in dynamic shared memory (floats), after a plan of smf floats; and the
// dynamic shared memory of a launch: the plan, and split, the buffer's two halves of xn floats
__host__ __device__ static inline int mem_xch_at(int smf) { return (smf + 3) & ~3; }
__host__ __device__ static inline size_t mem_dyn_bytes(int smf, int R, int xn) {
    return (R > 1 ? (size_t)mem_xch_at(smf) + 2 * (size_t)xn : (size_t)smf) * sizeof(real);
}
__device__ void mem_split_setup(MemChunkGpu* c, MemCfg* m, int R, int xn, int smf) {  // (R > 1; thread 0)
    m->dm /= R;
    m->nP /= R;
    c->R = R;
    c->xt = 0;
    c->xn = xn;
    c->xch = mem_dyn_smem() + mem_xch_at(smf);  // (after the plan's smf floats, 16-byte aligned: cl_sumd's doubles)
    if (m->anchor) c->p0 = c->p0s;  // (gathered by the kernel: cl_slice)
}
__device__ void mem_block_setup(MemChunkGpu* c, MemCfg* m, const MemArgs* A, int h) {
    *c = A->chunks[blockIdx.x];
    *m = A->m;
    mem_smem_apply(c, &A->sm);
    c->p0 = m->anchor ? A->p0 + (size_t)h * m->nP : NULL;
    if (A->R > 1) mem_split_setup(c, m, A->R, A->xn, A->sm.floats);
    mem_tc = A->tc;
}
// Every memory kernel takes its MemArgs (DecArgs) as `const __grid_constant__`: the functions above take its address,
// and a plain parameter whose address is taken is copied into each thread's stack frame at launch (1,288 bytes: most
// of memory_backward_kernel's 2.5 KB frame until 2026-12-03), every read of it then a local-memory load; a grid
// constant is read where the launch put it (dev/cuda/memlab_notes.md, "The kernels' parameters in place").
// The chunk-start states of a (sequence, head) are (slots, nP) with the whole nP; split, CTA r keeps its slice's
// nP / R floats at r nP / R in each slot (its own layout: W1 (d, dm / R), W2 (dm / R, din)), so the slots' stride
// stays the whole nP (mem_state_gpu's nP argument) while the chunk functions see the slice's.
__global__ void __launch_bounds__(MEM_THREADS) memory_forward_kernel(const __grid_constant__ MemArgs A) {
    __shared__ MemChunkGpu c;
    __shared__ MemCfg m;
    int R = A.R > 1 ? A.R : 1, r = blockIdx.x % R, bh = blockIdx.x / R;  // r: the CTA's rank in its cluster
    int bb = bh / A.H, h = bh % A.H, nch = A.nch, nP = A.m.nP, b = A.b, T = A.T;
    int par = A.pG > 0;  // the states only (the reads: memory_reads_kernel after this one)
    if (threadIdx.x == 0) {
        mem_block_setup(&c, &m, &A, h);
        c.noread = par;
    }
    __syncthreads();
    int ck = A.ck > 1 ? A.ck : 1, ns = (nch + ck - 1) / ck, nPr = m.nP;
    size_t base = ((size_t)bh * ns) * nP + (size_t)r * nPr, wbase = (size_t)bh * (ck - 1) * nP + (size_t)r * nPr;
    real* P = A.P + base;
    real* S = mem_carries_S_gpu(&m) ? A.S + base : NULL;
    real *Pw = ck > 1 ? A.Pw + wbase : NULL, *Sw = ck > 1 && S ? A.Sw + wbase : NULL;
    if (R > 1) {  // this CTA's slice of P_0 (restored every sequence), and of the anchor
        cl_slice((real*)A.p0 + (size_t)h * nP, P, &A.m, R, r, 1);
        if (m.anchor) cl_slice((real*)A.p0 + (size_t)h * nP, c.p0s, &A.m, R, r, 1);
    } else
        block_copy(P, A.p0 + (size_t)h * nP, nP);  // P_0, restored every sequence
    if (S) block_zero(S, nPr);
    const real* lng = m.ln ? A.lng + (size_t)h * m.d : NULL;
    const real* lnb = m.ln ? A.lnb + (size_t)h * m.d : NULL;
    for (int ch = 0; ch < nch - par; ch++) {  // (without its reads the last chunk has nothing to do)
        int t0 = ch * b, n = T - t0 < b ? T - t0 : b, last = ch == nch - 1;
        real* Pc = mem_state_gpu(P, Pw, ch, ck, nP);
        if (A.sm.ps) {  // (the state's copy in shared memory, for the chunk's products, g_mem_state; the load's
            block_copy(c.Ps, Pc, nPr, 0);  // barrier publishes it)
            Pc = c.Ps;
        }
        int nh = mem_load_chunk_gpu(&c, &A, bb, h, t0, n);  // omega's halo rows
        mem_step_forward_gpu(&m, &c, nh + n, Pc, mem_state_gpu(S, Sw, ch, ck, nP),
                             last ? NULL : mem_state_gpu(P, Pw, ch + 1, ck, nP),
                             last ? NULL : mem_state_gpu(S, Sw, ch + 1, ck, nP), lng, lnb);
        if (r == 0 && !par)
            scatter_rows_gpu(A.y, c.y + (size_t)nh * m.d, bb, h, t0, n, T, A.H, m.d);  // (every CTA has y)
    }
    if (R > 1) cg::this_cluster().sync();  // no CTA exits while another may still read its exchange buffer
}
// The chunk's forward values that the chain's backward reads, with the reads apart (MemArgs.pfw; mem_fw_ok: no
// retention, no Muon): the coefficients (alpha, beta, sigma, s, C) and the inner gradients' forward at P_s (r, e, psi;
// deep: nk, g1 (u, rk with the LN), zk, tk, hk, gk, g2 (gated: zk3, hk2, g3)), which memory_reads_kernel(A, 1)
// computes for every chunk at once anyway. It saves them (save = 1: unsplit, m the whole memory) and the chain
// loads them (m its slice's MemCfg, r its rank) in place of recomputing them (MemChunkGpu.noread = 2), ~a fifth of
// its barriers per chunk. Each array at a fixed offset of the chunk's pfwn floats (mem_fw_floats); an (n, dm) one
// as R blocks of (b, dm / R), CTA r's slice in block r. Counts per kind: n, n n, n d, n dm (the whole dm).
__host__ __device__ static inline void mem_fw_kinds(const MemCfg* m, int* k) {
    k[0] = 3 + (m->depth > 1 && m->ln);  // alpha, beta, sigma (rk)
    k[1] = 2;  // s, C
    k[2] = 3 + (m->depth > 1 ? 2 + m->ln : 0);  // r, e, psi (nk, g1 (u))
    k[3] = m->depth > 1 ? 5 + 3 * m->gated : 0;  // zk, tk, hk, gk, g2 (zk3, hk2, g3)
}
static size_t mem_fw_floats(const MemCfg* m, int b) {  // (m: the whole memory)
    int k[4];
    mem_fw_kinds(m, k);
    return k[0] * cl_al(b) + k[1] * cl_al((size_t)b * b) + k[2] * cl_al((size_t)b * m->d) +
           k[3] * cl_al((size_t)b * m->dm);
}
// (the memories whose chain can take them: mem_step_backward_gpu's RET_NONE path; mem_fw_ok: unless MIRAS_MEM_PAR_FW=0)
static int mem_fw_cfg(const MemCfg* m) { return m->retention == RET_NONE && !m->muon; }
static int mem_fw_ok(const MemCfg* m) { return g_mem_par_fw && mem_fw_cfg(m); }
MEMFN void mem_fw_io(const MemCfg* m, MemChunkGpu* c, int n, int b, real* buf, int R, int r, int save, int sync = 1) {
    int d = m->d, dmf = save ? m->dm : m->dm * R, dr = dmf / R, k[4];
    mem_fw_kinds(m, k);
    real* a0[] = {c->alpha, c->beta, c->sigma, c->rk};
    real* a1[] = {c->s, c->C};
    real* a2[] = {c->r, c->e, c->psi, c->nk, c->g1, c->u};
    real* a3[] = {c->zk, c->tk, c->hk, c->gk, c->g2, c->zk3, c->hk2, c->g3};
    real** arr[4] = {a0, a1, a2, a3};
    size_t rows[3] = {1, (size_t)n, (size_t)n}, cols[3] = {(size_t)n, (size_t)n, (size_t)d};
    int stride[4] = {cl_al(b), cl_al((size_t)b * b), cl_al((size_t)b * d), cl_al((size_t)b * dmf)};
    size_t off = 0;
    for (int kind = 0; kind < 4; kind++)
        for (int j = 0; j < k[kind]; j++, off += stride[kind]) {
            real *x = arr[kind][j], *y = buf + off;
            if (kind < 3) FOR(e, rows[kind] * cols[kind]) {
                    if (save)
                        y[e] = x[e];
                    else
                        x[e] = y[e];
                }
            else if (save)  // the whole (n, dm) row-major array into R blocks of (b, dr)
                FOR(e, (size_t)n * dmf) {
                    size_t i = e / dmf, jj = e % dmf, q = jj / dr;
                    y[q * b * dr + i * dr + jj % dr] = x[e];
                }
            else  // CTA r's (n, dr) from block r
                FOR(e, (size_t)n * dr) x[e] = y[(size_t)r * b * dr + e];
        }
    if (sync) __syncthreads();
}
// Backward through all chunks in reverse, carrying dL/dP and dL/dS across chunk boundaries
// (each chunk's intermediates are recomputed from its start state; with A.ck > 1, entering a segment of ck chunks
// from its end first recomputes the segment's start states from its stored one, bit for bit the forward's: the
// same step on the same inputs).
__global__ void __launch_bounds__(MEM_THREADS) memory_backward_kernel(const __grid_constant__ MemArgs A) {
    __shared__ MemChunkGpu c;
    __shared__ MemCfg m;
    int R = A.R > 1 ? A.R : 1, r = blockIdx.x % R, bh = blockIdx.x / R;  // r: the CTA's rank in its cluster
    int bb = bh / A.H, h = bh % A.H, nch = A.nch, nP = A.m.nP, b = A.b, T = A.T, d = A.m.d;
    int par = A.pdP != NULL;  // the chain without the reads (MemArgs.pdP: their part is done, memory_reads_kernel)
    if (threadIdx.x == 0) {
        mem_block_setup(&c, &m, &A, h);
        c.noread = par ? (A.pfw ? 2 : 1) : 0;  // (2: with the chunks' forward values, mem_fw_io)
    }
    __syncthreads();
    int ck = A.ck > 1 ? A.ck : 1, ns = (nch + ck - 1) / ck, nPr = m.nP;
    size_t base = ((size_t)bh * ns) * nP + (size_t)r * nPr, wbase = (size_t)bh * (ck - 1) * nP + (size_t)r * nPr;
    real* P = A.P + base;
    real* S = mem_carries_S_gpu(&m) ? A.S + base : NULL;
    real *Pw = ck > 1 ? A.Pw + wbase : NULL, *Sw = ck > 1 && S ? A.Sw + wbase : NULL;
    const real* lng = m.ln ? A.lng + (size_t)h * d : NULL;
    const real* lnb = m.ln ? A.lnb + (size_t)h * d : NULL;
    if (R > 1 && m.anchor) cl_slice((real*)A.p0 + (size_t)h * nP, c.p0s, &A.m, R, r, 1);
    block_zero(c.dlng, d);
    block_zero(c.dlnb, d);
    if (m.anchor) block_zero(c.dp0, nPr);
    real *dPn = NULL, *dSn = NULL, *dPs = c.Pa, *dSs = c.Sa;
    for (int ch = nch - 1; ch >= 0; ch--) {
        if (ck > 1 && (ch == nch - 1 || ch % ck == ck - 1))  // a segment's last chunk: its start states again
            for (int j = ch - ch % ck; j < ch; j++) {
                int t0 = j * b, n = T - t0 < b ? T - t0 : b, nh = mem_load_chunk_gpu(&c, &A, bb, h, t0, n);
                mem_step_forward_gpu(&m, &c, nh + n, mem_state_gpu(P, Pw, j, ck, nP), mem_state_gpu(S, Sw, j, ck, nP),
                                     mem_state_gpu(P, Pw, j + 1, ck, nP), mem_state_gpu(S, Sw, j + 1, ck, nP), lng,
                                     lnb);
            }
        int t0 = ch * b, n = T - t0 < b ? T - t0 : b;
        real* Pc = mem_state_gpu(P, Pw, ch, ck, nP);
        real* Sc = mem_state_gpu(S, Sw, ch, ck, nP);
        if (ch > 0 && ch % ck == 0) {  // the stored start state of the segment before (written long before)
            prefetch_l2(mem_state_gpu(P, Pw, ch - ck, ck, nP), nPr);
            if (Sc) prefetch_l2(mem_state_gpu(S, Sw, ch - ck, ck, nP), nPr);
        }
        if (A.sm.ps) {  // (the state's copy in shared memory, for the chunk's products: g_mem_state)
            block_copy(c.Ps, Pc, nPr, 0);
            Pc = c.Ps;
        }
        if (par && A.pfw)  // (and the chunk's forward values, saved by memory_reads_kernel; no omega: no halo rows)
            mem_fw_io(&m, &c, n, b, A.pfw + ((size_t)bh * nch + ch) * A.pfwn, R, r, 0, 0);
        int nh = mem_load_chunk_gpu(&c, &A, bb, h, t0, n);  // omega's halo rows (their dy is 0); its barrier
        if (par) {  // publishes the copies above too
            if (ch == nch - 1)
                block_zero(c.dy, (size_t)mem_rows(&m, b) * d);  // (dy = 0 for all chunks: none writes it)
        } else {
            if (m.omega > 1 || m.poly) block_zero(c.dy, (size_t)nh * d);
            gather_rows_gpu(c.dy + (size_t)nh * d, A.dy, bb, h, t0, n, T, A.H, d);
        }
        mem_step_backward_gpu(&m, &c, nh + n, c.dy, Pc, Sc, dPn, dSn, dPs, dSs, lng, lnb);
        if (par) {  // dL/dP_s (dL/dS_s) += the reads' part, memory_reads_kernel's (this CTA's slice)
            size_t slot = ((size_t)bh * nch + ch) * nP;
            for (int k = 0; k < 1 + (S != NULL); k++) {  // (P's and S's apart: one barrier)
                const real* add = (k ? A.pdS : A.pdP) + slot;
                real* to = k ? dSs : dPs;
                if (R > 1)
                    cl_slice((real*)add, to, &A.m, R, r, 2, 0);
                else
                    FOR(i, nP) to[i] += add[i];
            }
            __syncthreads();
        }
        if (r == 0 && (m.omega > 1 || m.poly))  // (split: every CTA has the rows' gradients; the first stores them)
            omega_store_chunk_grads_gpu(&c, &A, bb, h, t0, n);
        else if (r == 0)
            store_chunk_grads_gpu(&c, &A, bb, h, t0, n, par);
        dPn = dPs;
        dSn = dSs;  // this chunk's start is the previous chunk's end
        dPs = dPs == c.Pa ? c.Pb : c.Pa;
        dSs = dSs == c.Sa ? c.Sb : c.Sa;
    }
    real* out = A.dbh + (size_t)bh * (nP + 2 * d);  // dL/dP_0 and the LN affine of this sequence
    if (R > 1) {  // split: each CTA its slice of dL/dP_0 (+ through the anchor); the first the LN affine's
        if (m.anchor) {
            FOR(i, nPr) dPn[i] += c.dp0[i];
            __syncthreads();
        }
        cl_slice(out, dPn, &A.m, R, r, 0);
    } else if (m.anchor) {
        FOR(i, nP) out[i] = dPn[i] + c.dp0[i];
        __syncthreads();
    }  // (+ through the anchor)
    else
        block_copy(out, dPn, nP);
    if (r == 0) {
        block_copy(out + nP, c.dlng, d);
        block_copy(out + nP + d, c.dlnb, d);
    }
    if (R > 1) cg::this_cluster().sync();  // no CTA exits while another may still read its exchange buffer
}
// The reads of every chunk at once (MIRAS_MEM_PAR=1, mem_par_cfg; MemArgs.pG > 0): once the chunk-start states are
// known (all kept: ck = 1), each chunk's reads depend on nothing else, so after the sequential kernels that leave
// them out (MemChunkGpu.noread) these kernels do them for all chunks: work unit (sequence, head, range j of pG
// chunks) on a persistent grid of pblocks, each block with its own unsplit chunk scratch (A.chunks = pchunks).
// Forward (bwd = 0): y. Backward (bwd = 1): each chunk's backward is linear in (dy, dL/dP_{s+1}), so it is the sum
// of the part with dL/dP_{s+1} = 0 (here: the recomputed forward, the reads' backward, the inner gradients' backward
// of their dg) and the part with dy = 0 (memory_backward_kernel's chain): dL/dP_s (dL/dS_s) into pdP (pdS), the rows'
// gradients (written; poly: added), and the unit's sums of dL/dP_0 through the anchor and of the LN affine into pparts.
__global__ void __launch_bounds__(MEM_THREADS) memory_reads_kernel(const __grid_constant__ MemArgs A, int bwd) {
    __shared__ MemChunkGpu c;
    __shared__ MemCfg m;
    int nch = A.nch, nP = A.m.nP, b = A.b, T = A.T, d = A.m.d, G = A.pG, nu = A.B * A.H * G;
    if (threadIdx.x == 0) mem_block_setup(&c, &m, &A, 0);
    for (int w = blockIdx.x; w < nu; w += gridDim.x) {
        int bh = w / G, j = w % G, bb = bh / A.H, h = bh % A.H;
        int c0 = (int)((long long)nch * j / G), c1 = (int)((long long)nch * (j + 1) / G);
        __syncthreads();  // (every thread is done with the last unit's anchor)
        if (threadIdx.x == 0) c.p0 = m.anchor ? A.p0 + (size_t)h * nP : NULL;
        __syncthreads();
        if (bwd) {
            block_zero(c.dlng, d);
            block_zero(c.dlnb, d);
            if (m.anchor) block_zero(c.dp0, nP);
        }
        real* P = A.P + (size_t)bh * nch * nP;  // (ck = 1: every chunk's start state)
        real* S = mem_carries_S_gpu(&m) ? A.S + (size_t)bh * nch * nP : NULL;
        int R = A.pR > 1 ? A.pR : 1;  // (a split forward stored each state as its R slices: whole again in Pa, Sa)
        const real* lng = m.ln ? A.lng + (size_t)h * d : NULL;
        const real* lnb = m.ln ? A.lnb + (size_t)h * d : NULL;
        for (int ch = c1 - 1; ch >= c0; ch--) {
            int t0 = ch * b, n = T - t0 < b ? T - t0 : b;
            int nh = mem_load_chunk_gpu(&c, &A, bb, h, t0, n);  // (no omega here: nh = 0)
            real *Pc = P + (size_t)ch * nP, *Sc = S ? S + (size_t)ch * nP : NULL;
            if (R > 1) {
                for (int k = 0; k < 1 + (S != NULL); k++)
                    for (int q = 0; q < R; q++)
                        cl_slice(k ? c.Sa : c.Pa, (k ? Sc : Pc) + (size_t)q * (nP / R), &m, R, q, 0);
                Pc = c.Pa;
                Sc = S ? c.Sa : NULL;
            }
            if (!bwd) {
                mem_step_forward_gpu(&m, &c, nh + n, Pc, Sc, NULL, NULL, lng, lnb);
                scatter_rows_gpu(A.y, c.y + (size_t)nh * d, bb, h, t0, n, T, A.H, d);
                continue;
            }
            gather_rows_gpu(c.dy + (size_t)nh * d, A.dy, bb, h, t0, n, T, A.H, d);
            size_t slot = ((size_t)bh * nch + ch) * nP;
            mem_step_backward_gpu(&m, &c, nh + n, c.dy, Pc, Sc, NULL, NULL, A.pdP + slot, S ? A.pdS + slot : c.Sb, lng,
                                  lnb);
            if (A.pfw)  // (the chunk's forward values, for the chain: in the chain's slices)
                mem_fw_io(&m, &c, nh + n, b, A.pfw + ((size_t)bh * nch + ch) * A.pfwn, R, 0, 1);
            if (m.poly)
                omega_store_chunk_grads_gpu(&c, &A, bb, h, t0, n);
            else
                store_chunk_grads_gpu(&c, &A, bb, h, t0, n);
        }
        if (!bwd) continue;
        real* out = A.pparts + (size_t)w * (nP + 2 * d);
        if (m.anchor)
            block_copy(out, c.dp0, nP);
        else
            block_zero(out, nP);
        block_copy(out + nP, c.dlng, d);
        block_copy(out + nP + d, c.dlnb, d);
    }
}
// ---- b = 1 linear memories (deltanet, gated_deltanet): one token per chunk, so the chunk functions above reduce
// to a few row-local operations and the generic kernels spend their time in barriers. These kernels run the same
// math, token by token, with the d x d state (d = 64) in registers: thread (i, g) of the block's 512 holds row i,
// columns 8g..8g+7; a row's 8 threads are adjacent lanes and add their partial sums by shuffles. The chunk of one
// token t (train_miras.c mem_chunk_forward, depth 1, n = 1, no momentum, no retention; alpha = a_t, C = eta_t, or
// C = 1 and r scaled by eta per channel):
//   r0 = W k, e = r0 - v, r = psi(e) (* eta_c)      y = a W q - C (q . k) r      W' = a W - C r k^T
// The state at every token's start is stored (the backward reads it, as the generic kernels' chunk states).
#define TOK_D 64
#define TOK_THREADS 512
__device__ __forceinline__ real row8_sum(real v) {  // the sum over a row's 8 lanes (fixed order), in all of them
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    return v;
}
struct TokIn {
    real k[8], q[8], v, a, eta, etac;
};  // one token's inputs as thread (i, g) needs them
__device__ __forceinline__ void tok_load(TokIn* x, const MemArgs& A, int bb, int h, int t, int i, int g) {
    const MemCfg& m = A.m;
    size_t r = (size_t)bb * A.T + t;
    const real* kp = A.k + r * A.D + h * TOK_D + 8 * g;
    const real* qp = A.q + r * A.D + h * TOK_D + 8 * g;
    // (the activations' offsets are multiples of 4 floats only for some shapes: 16-byte loads where aligned)
    bool ka = al16(kp), qa = al16(qp);
    float4 k0 = ka ? ld4(kp) : ld4c<false>(kp), k1 = ka ? ld4(kp + 4) : ld4c<false>(kp + 4);
    float4 q0 = qa ? ld4(qp) : ld4c<false>(qp), q1 = qa ? ld4(qp + 4) : ld4c<false>(qp + 4);
    x->k[0] = k0.x;
    x->k[1] = k0.y;
    x->k[2] = k0.z;
    x->k[3] = k0.w;
    x->k[4] = k1.x;
    x->k[5] = k1.y;
    x->k[6] = k1.z;
    x->k[7] = k1.w;
    x->q[0] = q0.x;
    x->q[1] = q0.y;
    x->q[2] = q0.z;
    x->q[3] = q0.w;
    x->q[4] = q1.x;
    x->q[5] = q1.y;
    x->q[6] = q1.z;
    x->q[7] = q1.w;
    x->v = A.v[r * A.D + h * TOK_D + i];
    x->a = A.ga[r * A.H + h];
    int Ge = m.cw ? A.D : A.H;
    x->eta = m.cw ? 1 : A.geta[r * Ge + h];
    x->etac = m.cw ? A.geta[r * Ge + h * TOK_D + i] : 1;
}
// the forward quantities of one token from the state row w: r0 = (W k)_i, xw = (W q)_i, xx = q . k; e, psi, r
struct TokFwd {
    real xw, xx, e, psi, r;
};
__device__ __forceinline__ TokFwd tok_forward(const real* w, const TokIn& x, int cw) {
    real r0 = 0, xw = 0, xx = 0;
#pragma unroll
    for (int c = 0; c < 8; c++) {
        r0 += w[c] * x.k[c];
        xw += w[c] * x.q[c];
        xx += x.q[c] * x.k[c];
    }
    r0 = row8_sum(r0);
    xw = row8_sum(xw);
    xx = row8_sum(xx);
    TokFwd f;
    f.xw = xw;
    f.xx = xx;
    f.e = r0 - x.v;
    f.psi = f.e;  // l2 bias: psi = e
    f.r = cw ? x.etac * f.psi : f.psi;
    return f;
}
__global__ void __launch_bounds__(TOK_THREADS) mem_token_forward_kernel(const __grid_constant__ MemArgs A) {
    int bb = blockIdx.x / A.H, h = blockIdx.x % A.H, T = A.T, nP = A.m.nP, i = threadIdx.x >> 3, g = threadIdx.x & 7,
        cw = A.m.cw;
    // this thread's 8 values of every token's state
    real* P = A.P + ((size_t)bb * A.H + h) * T * nP + i * TOK_D + 8 * g;
    real w[8];
    {
        const real* p0 = A.p0 + (size_t)h * nP + i * TOK_D + 8 * g;  // (P_0 sits in the parameters at any offset)
        float4 a0 = al16(p0) ? ld4(p0) : ld4c<false>(p0), a1 = al16(p0) ? ld4(p0 + 4) : ld4c<false>(p0 + 4);
        w[0] = a0.x;
        w[1] = a0.y;
        w[2] = a0.z;
        w[3] = a0.w;
        w[4] = a1.x;
        w[5] = a1.y;
        w[6] = a1.z;
        w[7] = a1.w;
    }
    TokIn x, xn;
    tok_load(&xn, A, bb, h, 0, i, g);
    for (int t = 0; t < T; t++) {
        x = xn;
        if (t + 1 < T) tok_load(&xn, A, bb, h, t + 1, i, g);  // the next token's inputs in flight
        st4(P + (size_t)t * nP, make_float4(w[0], w[1], w[2], w[3]));
        st4(P + (size_t)t * nP + 4, make_float4(w[4], w[5], w[6], w[7]));
        TokFwd f = tok_forward(w, x, cw);
        real C = x.eta, alpha = x.a;
        // mem_read_forward
        if (g == 0) A.y[((size_t)bb * T + t) * A.D + h * TOK_D + i] = alpha * f.xw - (C * f.xx) * f.r;
        real cr = C * f.r;
#pragma unroll
        // mem_update_forward
        for (int c = 0; c < 8; c++) {
            w[c] = alpha * w[c];
            w[c] -= cr * x.k[c];
        }
    }
}
// Its backward, token by token in reverse with dL/dW' (dw) in registers (mem_chunk_backward at n = 1; the same
// terms in the same order):
//   update:  dW = a dW'; da += <dW', W>; gx = dW' k; dr = -C gx; dC = -r . gx; dk = -C dW'^T r
//   read:    da += dy . (W q); dA = -(dy . r); dC += dA xx; gs = dA C;  dq = a W^T dy + gs k; dk += gs q;
//            dW += a dy q^T; dr -= C xx dy
//   bias:    (eta_c: detac = dr psi, dr *= eta_c) dmk = dr, dv = -dr; dk += W^T dmk; dW += dmk k^T
//   gates:   da, deta = dC (per head), or detac (per channel)
// The sums over rows (W^T x and the scalars) go warp by warp through shared memory: one barrier per token.
__global__ void __launch_bounds__(TOK_THREADS) mem_token_backward_kernel(const __grid_constant__ MemArgs A) {
    __shared__ real red[2][TOK_THREADS / 32][3 * TOK_D + 4];
    int bb = blockIdx.x / A.H, h = blockIdx.x % A.H, T = A.T, D = A.D, H = A.H, nP = A.m.nP, cw = A.m.cw;
    int i = threadIdx.x >> 3, g = threadIdx.x & 7, lane = LANE, wp = threadIdx.x >> 5, Ge = cw ? D : H;
    const real* P = A.P + ((size_t)bb * A.H + h) * T * nP + i * TOK_D + 8 * g;
    real dw[8], w[8], wn[8];
#pragma unroll
    for (int c = 0; c < 8; c++) dw[c] = 0;
    // (states: aligned allocations, nP = 4096)
    auto load_w = [&](real* dst, int t) {
        float4 a0 = ld4(P + (size_t)t * nP), a1 = ld4(P + (size_t)t * nP + 4);
        dst[0] = a0.x;
        dst[1] = a0.y;
        dst[2] = a0.z;
        dst[3] = a0.w;
        dst[4] = a1.x;
        dst[5] = a1.y;
        dst[6] = a1.z;
        dst[7] = a1.w;
    };
    TokIn x, xn;
    real dy, dyn;
    load_w(wn, T - 1);
    tok_load(&xn, A, bb, h, T - 1, i, g);
    dyn = A.dy[((size_t)bb * T + T - 1) * D + h * TOK_D + i];
    for (int t = T - 1; t >= 0; t--) {
        x = xn;
        dy = dyn;
#pragma unroll
        for (int c = 0; c < 8; c++) w[c] = wn[c];
        if (t > 0) {
            load_w(wn, t - 1);
            tok_load(&xn, A, bb, h, t - 1, i, g);
            dyn = A.dy[((size_t)bb * T + t - 1) * D + h * TOK_D + i];
        }
        TokFwd f = tok_forward(w, x, cw);
        real C = x.eta, alpha = x.a, has = t < T - 1;  // has: dW' exists (not the last token)
        real pww = 0, gx = 0;  // mem_update_backward
#pragma unroll
        for (int c = 0; c < 8; c++) {
            pww += dw[c] * w[c];
            gx += dw[c] * x.k[c];
        }
        gx = row8_sum(gx);
        real dr = has ? 0 - C * gx : 0, dcu = has ? -(f.r * gx) : 0;  // this row's ddl and its term of dc
        real colA[8], colB[8], colC[8];
#pragma unroll
        for (int c = 0; c < 8; c++) colA[c] = f.r * dw[c];
        real wx = C * f.xx;  // mem_read_backward (cs = 1)
        dr -= wx * dy;
        real dps = cw ? dr * x.etac : dr, detac = dr * f.psi;  // mem_bias_backward (l2: de = dps)
        real dmk = dps;
#pragma unroll
        for (int c = 0; c < 8; c++) {
            colB[c] = w[c] * dy;
            colC[c] = w[c] * dmk;
            real nw = alpha * dw[c];
            nw += (dy * alpha) * x.q[c];
            nw += dmk * x.k[c];
            dw[c] = nw;
        }
        // the sums over rows: the warp's 4 rows by shuffles, then the 16 warps through shared memory
#pragma unroll
        for (int c = 0; c < 8; c++) {
            colA[c] += __shfl_xor_sync(0xffffffffu, colA[c], 8);
            colA[c] += __shfl_xor_sync(0xffffffffu, colA[c], 16);
            colB[c] += __shfl_xor_sync(0xffffffffu, colB[c], 8);
            colB[c] += __shfl_xor_sync(0xffffffffu, colB[c], 16);
            colC[c] += __shfl_xor_sync(0xffffffffu, colC[c], 8);
            colC[c] += __shfl_xor_sync(0xffffffffu, colC[c], 16);
        }
        real s1 = warp_sum(pww), s2 = warp_sum(g == 0 ? dy * f.xw : 0), s3 = warp_sum(g == 0 ? dcu : 0),
             s4 = warp_sum(g == 0 ? dy * f.r : 0);
        real* rb = red[t & 1][wp];
        if (lane < 8) {
#pragma unroll
            for (int c = 0; c < 8; c++) {
                rb[8 * lane + c] = colA[c];
                rb[TOK_D + 8 * lane + c] = colB[c];
                rb[2 * TOK_D + 8 * lane + c] = colC[c];
            }
        }
        if (lane == 0) {
            rb[3 * TOK_D] = s1;
            rb[3 * TOK_D + 1] = s2;
            rb[3 * TOK_D + 2] = s3;
            rb[3 * TOK_D + 3] = s4;
        }
        size_t row = (size_t)bb * T + t;
        if (g == 0) {  // row outputs: dv, and detac per channel
            A.dv[row * D + h * TOK_D + i] = 0 - dps;
            if (cw) A.dgeta[row * Ge + h * TOK_D + i] = 0 + detac;
        }
        __syncthreads();
        if (threadIdx.x < TOK_D) {  // column outputs dq, dk and the gates
            int c = threadIdx.x;
            real sA = 0, sB = 0, sC = 0, S1 = 0, S2 = 0, S3 = 0, S4 = 0;
            for (int u = 0; u < TOK_THREADS / 32; u++) {
                const real* ru = red[t & 1][u];
                sA += ru[c];
                sB += ru[TOK_D + c];
                sC += ru[2 * TOK_D + c];
                S1 += ru[3 * TOK_D];
                S2 += ru[3 * TOK_D + 1];
                S3 += ru[3 * TOK_D + 2];
                S4 += ru[3 * TOK_D + 3];
            }
            real dA = -S4, gs = dA * C, xc = A.q[row * D + h * TOK_D + c], kc = A.k[row * D + h * TOK_D + c];
            real dk = 0 + (-1 * C) * sA;
            dk += gs * xc;
            dk += sC;
            real dq = 0 + alpha * sB;
            dq += gs * kc;
            A.dq[row * D + h * TOK_D + c] = dq;
            A.dk[row * D + h * TOK_D + c] = dk;
            if (c == 0) {
                real da = 0;
                if (has) da += S1;
                da += S2;
                real dC = has ? S3 : 0;
                dC += dA * f.xx;
                A.dga[row * H + h] = 0 + da;
                A.dgth[row * H + h] = 0;
                if (!cw) A.dgeta[row * Ge + h] = 0 + dC;
            }
        }
    }
    real* out = A.dbh + ((size_t)bb * A.H + h) * (nP + 2 * TOK_D) + i * TOK_D + 8 * g;  // dL/dP_0 (no LN)
    st4(out, make_float4(dw[0], dw[1], dw[2], dw[3]));
    st4(out + 4, make_float4(dw[4], dw[5], dw[6], dw[7]));
    if (threadIdx.x < 2 * TOK_D) A.dbh[((size_t)bb * A.H + h) * (nP + 2 * TOK_D) + nP + threadIdx.x] = 0;
}
// ---- the pieces of the v6 token kernels below. Segments: the inputs of TOK_SEG tokens are staged in shared memory
// (the next segment's loads in flight while this one runs: one barrier per segment, none per token); e (= psi) and
// W q per row and q . k per token are kept in aux for the backward. The sums over rows (the column outputs dq, dk and
// the gates' scalars) are outputs only (the recurrence of dL/dW' is row-local): each warp reduces its 4 rows with a
// reduce-scatter (6 shuffles per 8-column array instead of 16) into shared memory, added once per segment. (Lab
// version 5 was these with one block per head: dev/cuda/memlab_notes.md, run 3.)
#define TOK_SEG 8  // tokens per segment
#define TOK_AUX (2 * TOK_D + 4)  // aux per token: psi (d), W q (d), q . k, 3 pad
#define TOK_PART (3 * TOK_D + 32)  // a warp's part of one token: 3 column arrays (64 each) and 4 scalars x 8 lanes
struct TokStageF {
    real k[TOK_SEG][TOK_D], q[TOK_SEG][TOK_D], v[TOK_SEG][TOK_D], etac[TOK_SEG][TOK_D], a[TOK_SEG], eta[TOK_SEG];
};
struct TokStageB {
    real k[TOK_SEG][TOK_D], q[TOK_SEG][TOK_D], dy[TOK_SEG][TOK_D], psi[TOK_SEG][TOK_D], xw[TOK_SEG][TOK_D],
        etac[TOK_SEG][TOK_D], a[TOK_SEG], eta[TOK_SEG], xx[TOK_SEG];
};
// this thread's 8 columns of a staged (TOK_SEG, d) row
__device__ __forceinline__ void tok_cols8(real* dst, const real* row, int g) {
    float4 a = *(const float4*)(row + 8 * g), b = *(const float4*)(row + 8 * g + 4);
    dst[0] = a.x;
    dst[1] = a.y;
    dst[2] = a.z;
    dst[3] = a.w;
    dst[4] = b.x;
    dst[5] = b.y;
    dst[6] = b.z;
    dst[7] = b.w;
}
// the sum of a warp's 4 rows of 8-column arrays (lane = 8 * row + g): a reduce-scatter, each lane ends with 2 of
// its 8 columns summed over the rows (columns 8g + 4 b4 + 2 b3 + {0, 1}, b4 and b3 the lane's bits 4 and 3)
__device__ __forceinline__ void tok_rs_cols(const real* x, real* dst) {
    int lane = LANE, b4 = (lane >> 4) & 1, b3 = (lane >> 3) & 1, g = lane & 7;
    real kp[4], f[2];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        real snd = b4 ? x[j] : x[j + 4];
        kp[j] = (b4 ? x[j + 4] : x[j]) + __shfl_xor_sync(0xffffffffu, snd, 16);
    }
#pragma unroll
    for (int j = 0; j < 2; j++) {
        real snd = b3 ? kp[j] : kp[j + 2];
        f[j] = (b3 ? kp[j + 2] : kp[j]) + __shfl_xor_sync(0xffffffffu, snd, 8);
    }
    *(float2*)(dst + 8 * g + 4 * b4 + 2 * b3) = make_float2(f[0], f[1]);
}
// 4 scalars summed over the warp's 4 rows the same way: lane ends with scalar 2 b4 + b3 of its g, at dst[8 s + g]
__device__ __forceinline__ void tok_rs_scalars(real v0, real v1, real v2, real v3, real* dst) {
    int lane = LANE, b4 = (lane >> 4) & 1, b3 = (lane >> 3) & 1, g = lane & 7;
    real s0 = b4 ? v0 : v2, s1 = b4 ? v1 : v3;
    real k0 = (b4 ? v2 : v0) + __shfl_xor_sync(0xffffffffu, s0, 16),
         k1 = (b4 ? v3 : v1) + __shfl_xor_sync(0xffffffffu, s1, 16);
    real snd = b3 ? k0 : k1, f = (b3 ? k1 : k0) + __shfl_xor_sync(0xffffffffu, snd, 8);
    dst[8 * (2 * b4 + b3) + g] = f;
}
__device__ __forceinline__ void tok_load_w(real* dst, const real* p) {
    float4 a0 = ld4(p), a1 = ld4(p + 4);  // (states: aligned allocations, nP = 4096)
    dst[0] = a0.x;
    dst[1] = a0.y;
    dst[2] = a0.z;
    dst[3] = a0.w;
    dst[4] = a1.x;
    dst[5] = a1.y;
    dst[6] = a1.z;
    dst[7] = a1.w;
}
// ---- v6 of the b = 1 kernels: the pieces above with the rows of a head split over TOK_R blocks (the rows of the delta
// rule
// are independent: W_i' = a W_i - C r_i k^T, r_i = psi((W k)_i - v_i)), so that 96 of the 132 SMs work instead of 48,
// and with the state stored only at segment starts (one slot per TOK_SEG tokens: the per-token states were 3.2 GB
// per layer at B=4, T=4096, and the forward wrote them at the memory's write bandwidth). The backward recomputes a
// segment's states from its start, row-locally (r = psi (* eta_c) is kept in aux: no sums over columns), into
// registers, then runs mem_token_backward_kernel's per-token math; the block's sums over its rows go to TokGrad
// partials in global
// memory, and mem_token_reduce_v6_kernel adds the TOK_R parts of every token in a fixed order (dq, dk, gates).
#ifndef TOK_R
#define TOK_R 2  // (make memlab NVCC="nvcc -DTOK_R=4" to try 4)
#endif
#define TOK6_ROWS (TOK_D / TOK_R)
#define TOK6_THREADS (TOK6_ROWS * 8)
#define TOK6_WARPS (TOK6_THREADS / 32)
#define TOK6_NPER (TOK_SEG * TOK_D / TOK6_THREADS)  // staged values per thread and array
#define TOK_GP (3 * TOK_D + 4)  // a block's part of one token: 3 column sums (64 each), 4 scalars
struct TokRegs6 {
    real k[TOK6_NPER], q[TOK6_NPER], v[TOK6_NPER], etac[TOK6_NPER], dy[TOK6_NPER], psi[TOK6_NPER], xw[TOK6_NPER], a,
        eta, xx;
};
__device__ __forceinline__ void tok6_seg_load(TokRegs6* s, const MemArgs& A, int bb, int h, int t0, int bwd) {
    const MemCfg& m = A.m;
    int Ge = m.cw ? A.D : A.H;
    const real* aux = A.aux + ((size_t)bb * A.H + h) * A.T * TOK_AUX;
#pragma unroll
    for (int u = 0; u < TOK6_NPER; u++) {
        int e = threadIdx.x + u * TOK6_THREADS, t = t0 + e / TOK_D, c = e % TOK_D;
        if (t < A.T) {
            size_t r = (size_t)bb * A.T + t, o = r * A.D + h * TOK_D + c;
            s->k[u] = A.k[o];
            s->q[u] = A.q[o];
            s->etac[u] = m.cw ? A.geta[r * Ge + h * TOK_D + c] : 1;
            if (bwd) {
                s->dy[u] = A.dy[o];
                s->psi[u] = aux[(size_t)t * TOK_AUX + c];
                s->xw[u] = aux[(size_t)t * TOK_AUX + TOK_D + c];
            } else
                s->v[u] = A.v[o];
        }
    }
    int e = threadIdx.x, t = t0 + e;
    if (e < TOK_SEG && t < A.T) {
        size_t r = (size_t)bb * A.T + t;
        s->a = A.ga[r * A.H + h];
        s->eta = m.cw ? 1 : A.geta[r * Ge + h];
        if (bwd) s->xx = aux[(size_t)t * TOK_AUX + 2 * TOK_D];
    }
}
__device__ __forceinline__ void tok6_seg_store(TokStageF* x, const TokRegs6& s) {
#pragma unroll
    for (int u = 0; u < TOK6_NPER; u++) {
        int e = threadIdx.x + u * TOK6_THREADS, j = e / TOK_D, c = e % TOK_D;
        x->k[j][c] = s.k[u];
        x->q[j][c] = s.q[u];
        x->v[j][c] = s.v[u];
        x->etac[j][c] = s.etac[u];
    }
    if (threadIdx.x < TOK_SEG) {
        x->a[threadIdx.x] = s.a;
        x->eta[threadIdx.x] = s.eta;
    }
}
__device__ __forceinline__ void tok6_seg_store(TokStageB* x, const TokRegs6& s) {
#pragma unroll
    for (int u = 0; u < TOK6_NPER; u++) {
        int e = threadIdx.x + u * TOK6_THREADS, j = e / TOK_D, c = e % TOK_D;
        x->k[j][c] = s.k[u];
        x->q[j][c] = s.q[u];
        x->dy[j][c] = s.dy[u];
        x->psi[j][c] = s.psi[u];
        x->xw[j][c] = s.xw[u];
        x->etac[j][c] = s.etac[u];
    }
    if (threadIdx.x < TOK_SEG) {
        x->a[threadIdx.x] = s.a;
        x->eta[threadIdx.x] = s.eta;
        x->xx[threadIdx.x] = s.xx;
    }
}
__device__ __forceinline__ void tok_store_w(real* p, const real* w) {
    st4(p, make_float4(w[0], w[1], w[2], w[3]));
    st4(p + 4, make_float4(w[4], w[5], w[6], w[7]));
}
// block (sequence bb, head h, row part rs); thread (row i of the part's TOK6_ROWS, column group g)
#define TOK6_IDS                                                                                              \
    int bh = blockIdx.x / TOK_R, rs = blockIdx.x % TOK_R, bb = bh / A.H, h = bh % A.H, il = threadIdx.x >> 3, \
        i = rs * TOK6_ROWS + il, g = threadIdx.x & 7, T = A.T, nP = A.m.nP, cw = A.m.cw,                      \
        nseg = (T + TOK_SEG - 1) / TOK_SEG, dot = A.m.bias == BIAS_DOT
__global__ void __launch_bounds__(TOK6_THREADS) mem_token_forward_v6_kernel(const __grid_constant__ MemArgs A) {
    __shared__ TokStageF st[2];
    TOK6_IDS;
    // this thread's 8 values of every segment's start state
    real* P = A.P + (size_t)bh * nseg * nP + i * TOK_D + 8 * g;
    real* aux = A.aux + (size_t)bh * T * TOK_AUX;
    real w[8];
    {
        const real* p0 = A.p0 + (size_t)h * nP + i * TOK_D + 8 * g;
        float4 a0 = al16(p0) ? ld4(p0) : ld4c<false>(p0), a1 = al16(p0) ? ld4(p0 + 4) : ld4c<false>(p0 + 4);
        w[0] = a0.x;
        w[1] = a0.y;
        w[2] = a0.z;
        w[3] = a0.w;
        w[4] = a1.x;
        w[5] = a1.y;
        w[6] = a1.z;
        w[7] = a1.w;
    }
    TokRegs6 s;
    tok6_seg_load(&s, A, bb, h, 0, 0);
    tok6_seg_store(&st[0], s);
    __syncthreads();
    for (int sg = 0; sg < nseg; sg++) {
        int t0 = sg * TOK_SEG, n = T - t0 < TOK_SEG ? T - t0 : TOK_SEG;
        const TokStageF& x = st[sg & 1];
        if (sg + 1 < nseg) tok6_seg_load(&s, A, bb, h, t0 + TOK_SEG, 0);
        tok_store_w(P + (size_t)sg * nP, w);
        for (int j = 0; j < n; j++) {
            int t = t0 + j;
            real k[8], q[8];
            tok_cols8(k, x.k[j], g);
            tok_cols8(q, x.q[j], g);
            real r0 = 0, xw = 0, xx = 0;  // r0 = (W k)_i, xw = (W q)_i, xx = q . k
#pragma unroll
            for (int c = 0; c < 8; c++) {
                r0 += w[c] * k[c];
                xw += w[c] * q[c];
                xx += q[c] * k[c];
            }
            r0 = row8_sum(r0);
            xw = row8_sum(xw);
            xx = row8_sum(xx);
            real psi = dot ? -x.v[j][i] : r0 - x.v[j][i], r = cw ? x.etac[j][i] * psi : psi, C = x.eta[j],
                 alpha = x.a[j];  // psi: l2 e, dot -v
            if (g == 0) {
                // mem_read_forward
                A.y[((size_t)bb * T + t) * A.D + h * TOK_D + i] = alpha * xw - (C * xx) * r;
                aux[(size_t)t * TOK_AUX + i] = psi;
                aux[(size_t)t * TOK_AUX + TOK_D + i] = xw;
                if (i == 0) aux[(size_t)t * TOK_AUX + 2 * TOK_D] = xx;
            }
            real cr = C * r;
#pragma unroll
            // mem_update_forward
            for (int c = 0; c < 8; c++) {
                w[c] = alpha * w[c];
                w[c] -= cr * k[c];
            }
        }
        if (sg + 1 < nseg) tok6_seg_store(&st[(sg + 1) & 1], s);
        __syncthreads();
    }
}
// Dynamic shared memory: the warps' parts (TOK_SEG, TOK6_WARPS, TOK_PART).
static const size_t TOK6_SMEM_BYTES = (size_t)TOK_SEG * TOK6_WARPS * TOK_PART * sizeof(real);
__global__ void __launch_bounds__(TOK6_THREADS) mem_token_backward_v6_kernel(const __grid_constant__ MemArgs A) {
    __shared__ TokStageB st[2];
    __shared__ real sc[TOK_SEG][4];
    TOK6_IDS;
    real* part = mem_dyn_smem();
    int lane = LANE, wp = threadIdx.x >> 5, D = A.D, Ge = cw ? D : A.H;
    const real* P = A.P + (size_t)bh * nseg * nP + i * TOK_D + 8 * g;
    real* gp = A.gpart + (size_t)bh * T * TOK_R * TOK_GP;
    // wck: the next segment's start state, in flight
    real dw[8], w[8], wck[8];
#pragma unroll
    for (int c = 0; c < 8; c++) dw[c] = 0;
    tok_load_w(wck, P + (size_t)(nseg - 1) * nP);
    TokRegs6 s;
    tok6_seg_load(&s, A, bb, h, (nseg - 1) * TOK_SEG, 1);
    tok6_seg_store(&st[(nseg - 1) & 1], s);
    __syncthreads();
    for (int sg = nseg - 1; sg >= 0; sg--) {
        int t0 = sg * TOK_SEG, n = T - t0 < TOK_SEG ? T - t0 : TOK_SEG;
        const TokStageB& x = st[sg & 1];
#pragma unroll
        for (int c = 0; c < 8; c++) w[c] = wck[c];
        if (sg > 0) {
            tok6_seg_load(&s, A, bb, h, t0 - TOK_SEG, 1);
            tok_load_w(wck, P + (size_t)(sg - 1) * nP);
        }
        // the segment's states, as the forward made them
        real ws[TOK_SEG][8];
#pragma unroll  // (unrolled: ws stays in registers)
        for (int j = 0; j < TOK_SEG; j++)
            if (j < n) {
#pragma unroll
                for (int c = 0; c < 8; c++) ws[j][c] = w[c];
                real k[8];
                tok_cols8(k, x.k[j], g);
                real psi = x.psi[j][i], r = cw ? x.etac[j][i] * psi : psi, C = x.eta[j], alpha = x.a[j], cr = C * r;
#pragma unroll
                for (int c = 0; c < 8; c++) {
                    w[c] = alpha * w[c];
                    w[c] -= cr * k[c];
                }
            }
#pragma unroll
        for (int j = TOK_SEG - 1; j >= 0; j--)
            if (j < n) {
                int t = t0 + j;
#pragma unroll
                for (int c = 0; c < 8; c++) w[c] = ws[j][c];
                real k[8], q[8];
                tok_cols8(k, x.k[j], g);
                tok_cols8(q, x.q[j], g);
                real dy = x.dy[j][i], psi = x.psi[j][i], xw = x.xw[j][i], etac = x.etac[j][i], C = x.eta[j],
                     alpha = x.a[j], xx = x.xx[j];
                real r = cw ? etac * psi : psi, has = t < T - 1;
                real pww = 0, gx = 0;  // mem_update_backward
#pragma unroll
                for (int c = 0; c < 8; c++) {
                    pww += dw[c] * w[c];
                    gx += dw[c] * k[c];
                }
                gx = row8_sum(gx);
                real dr = has ? 0 - C * gx : 0, dcu = has ? -(r * gx) : 0;
                real colA[8], colB[8], colC[8];
#pragma unroll
                for (int c = 0; c < 8; c++) colA[c] = r * dw[c];
                real wx = C * xx;  // mem_read_backward (cs = 1)
                dr -= wx * dy;
                real dps = cw ? dr * etac : dr, detac = dr * psi;  // mem_bias_backward (l2: de = dps; dot: de = 0)
                real dmk = dot ? 0 : dps;
#pragma unroll
                for (int c = 0; c < 8; c++) {
                    colB[c] = w[c] * dy;
                    colC[c] = w[c] * dmk;
                    real nw = alpha * dw[c];
                    nw += (dy * alpha) * q[c];
                    nw += dmk * k[c];
                    dw[c] = nw;
                }
                real* pw = part + ((size_t)j * TOK6_WARPS + wp) * TOK_PART;
                tok_rs_cols(colA, pw);
                tok_rs_cols(colB, pw + TOK_D);
                tok_rs_cols(colC, pw + 2 * TOK_D);
                tok_rs_scalars(pww, g == 0 ? dy * xw : 0, g == 0 ? dcu : 0, g == 0 ? dy * r : 0, pw + 3 * TOK_D);
                if (g == 0) {  // row outputs: dv, and detac per channel
                    size_t row = (size_t)bb * T + t;
                    A.dv[row * D + h * TOK_D + i] = 0 - dps;
                    if (cw) A.dgeta[row * Ge + h * TOK_D + i] = 0 + detac;
                }
            }
        __syncthreads();
        // the segment's scalars (token jj, scalar sx): a warp each
        for (int idx = wp; idx < TOK_SEG * 4; idx += TOK6_WARPS) {
            int jj = idx >> 2, sx = idx & 3;
            real acc = 0;
            if (jj < n) {
#pragma unroll
                for (int q2 = 0; q2 < TOK6_WARPS * 8 / 32; q2++) {
                    int e = lane + 32 * q2;
                    acc += part[((size_t)jj * TOK6_WARPS + (e >> 3)) * TOK_PART + 3 * TOK_D + 8 * sx + (e & 7)];
                }
            }
            acc = warp_sum(acc);
            if (lane == 0) sc[jj][sx] = acc;
        }
        __syncthreads();
        // the block's sums over its rows, to the partials
        for (int e = threadIdx.x; e < n * TOK_D; e += TOK6_THREADS) {
            int jj = e / TOK_D, c = e % TOK_D;
            real sA = 0, sB = 0, sC = 0;
            for (int u = 0; u < TOK6_WARPS; u++) {
                const real* ru = part + ((size_t)jj * TOK6_WARPS + u) * TOK_PART;
                sA += ru[c];
                sB += ru[TOK_D + c];
                sC += ru[2 * TOK_D + c];
            }
            real* o = gp + ((size_t)(t0 + jj) * TOK_R + rs) * TOK_GP;
            o[c] = sA;
            o[TOK_D + c] = sB;
            o[2 * TOK_D + c] = sC;
            if (c < 4) o[3 * TOK_D + c] = sc[jj][c];
        }
        if (sg > 0) tok6_seg_store(&st[(sg - 1) & 1], s);
        __syncthreads();
    }
    real* out = A.dbh + (size_t)bh * (nP + 2 * TOK_D) + i * TOK_D + 8 * g;  // dL/dP_0 (no LN)
    tok_store_w(out, dw);
    if (rs == 0 && threadIdx.x < 2 * TOK_D) A.dbh[(size_t)bh * (nP + 2 * TOK_D) + nP + threadIdx.x] = 0;
}
// dq, dk and the gates of every token from the TOK_R partials: thread (row, head, column)
__global__ void mem_token_reduce_v6_kernel(const __grid_constant__ MemArgs A) {
    int T = A.T, H = A.H, D = A.D, cw = A.m.cw, Ge = cw ? D : H;
    GRID_FOR(e, (size_t)A.B * T * D) {
        int c = (int)(e % TOK_D), h = (int)(e / TOK_D % H);
        size_t row = e / D;
        int bb = (int)(row / T), t = (int)(row % T);
        const real* gp = A.gpart + (((size_t)bb * H + h) * T + t) * TOK_R * TOK_GP;
        real sA = 0, sB = 0, sC = 0, S[4] = {0, 0, 0, 0};
        for (int u = 0; u < TOK_R; u++) {
            const real* o = gp + (size_t)u * TOK_GP;
            sA += o[c];
            sB += o[TOK_D + c];
            sC += o[2 * TOK_D + c];
            if (c == 0) {
                S[0] += o[3 * TOK_D];
                S[1] += o[3 * TOK_D + 1];
                S[2] += o[3 * TOK_D + 2];
            }
            S[3] += o[3 * TOK_D + 3];
        }
        real C = cw ? 1 : A.geta[row * Ge + h], alpha = A.ga[row * H + h], has = t < T - 1;
        real dA = -S[3], gs = dA * C, xc = A.q[row * D + h * TOK_D + c], kc = A.k[row * D + h * TOK_D + c];
        real dk = 0 + (-1 * C) * sA;
        dk += gs * xc;
        dk += sC;
        real dq = 0 + alpha * sB;
        dq += gs * kc;
        A.dq[row * D + h * TOK_D + c] = dq;
        A.dk[row * D + h * TOK_D + c] = dk;
        if (c == 0) {
            real xx = A.aux[(((size_t)bb * H + h) * T + t) * TOK_AUX + 2 * TOK_D];
            real da = 0;
            if (has) da += S[0];
            da += S[1];
            real dC = has ? S[2] : 0;
            dC += dA * xx;
            A.dga[row * H + h] = 0 + da;
            A.dgth[row * H + h] = 0;
            if (!cw) A.dgeta[row * Ge + h] = 0 + dC;
        }
    }
}
// ---- v9-v12: the b = 1 delta rule in chunks of WY_C tokens (the WY / UT form; fla's chunked delta rule is the same
// algebra), exact: it equals the per-token rule of mem_token_forward_kernel (scalar eta, no channel-wise gates)
//     e_t = W_{t-1} k_t - v_t,   W_t = a_t W_{t-1} - C_t e_t k_t^T,   y_t = W_t q_t
// Over a chunk of n tokens from W_0, with the decay products rt(t, s) = a_{s+1} ... a_t (rt(t, t) = 1) and
// P_t = rt(t, -1) (P_{-1} = 1), unrolling the recurrence gives
//     E = (I + L)^{-1} R,   R = diag(P_{t-1}) K W_0^T - V,      L[t][s] = rt(t-1, s) C_s (k_t . k_s)   (s < t)
//     Y = diag(P_t) Q W_0^T - M E,                              M[t][s] = rt(t, s) C_s (q_t . k_s)     (s <= t)
//     W_n = P_{n-1} W_0 - E^T diag(u) K,                        u_s = rt(n-1, s) C_s
// (E, R, Y, K, Q, V: rows e_t, ... of the chunk; I + L is unit lower triangular: forward substitution). All but the
// substitution are products of the chunk's n rows with a d x d state or with each other, the shapes the tensor
// cores take, and the sequential chain is over T / WY_C chunks instead of T tokens. The backward, from dY and
// dW_n = dL/dW_n (the carry from the next chunk):
//     dE = -diag(u) K dW_n^T - M^T dY;  dR = (I + L)^{-T} dE (back substitution);  dV = -dR
//     dQ = diag(P_t) dY W_0 + dM K;  dK = -diag(u) E dW_n + diag(P_{t-1}) dR W_0 + dL K + dL^T K + dM^T Q
//     dW_0 = P_{n-1} dW_n + (diag(P_t) dY)^T Q + (diag(P_{t-1}) dR)^T K
//     dM[t][s] = -(dy_t . e_s) rt(t, s) C_s,  dL[t][s] = -(dr_t . e_s) rt(t-1, s) C_s  (then times q_t . k_s or k_t . k_s
//     for dC_s, and dL/drt(t, s) collects every term's factor); du_s = -e_s^T dW_n k_s
//     da_r = sum_{t >= r} rt(t, r) X_r[t],  X_0[t] = dL/drt(t, -1),  X_{r+1}[t] = a_r X_r[t] + dL/drt(t, r)
// (dL/da_r = sum over s < r <= t of dL/drt(t, s) rt(t, r) rt(r-1, s): no division by a). Derived and checked
// against central differences of the per-token rule (fp64) before this kernel; memlab checks it against the CPU.
// One block per (sequence, head) as v4, the chunk arrays in shared memory; the forward stores W at each chunk start
// in A.P's slots (slot c of v6's ceil(T / TOK_SEG)), the backward recomputes the chunk's E from it.
#define WY_C 64  // tokens per chunk
#define WY_N1 (WY_C + 1)  // the stride of rt: column s + 1 holds rt(t, s), s = -1 .. t
static size_t wy_smem_floats(int d, int fwd) {
    size_t nd = (size_t)WY_C * d, nn = (size_t)WY_C * WY_C, big = nd > nn ? nd : nn;
    return fwd ? (size_t)d * d + 4 * nd + 2 * nn + WY_C * WY_N1 + 5 * WY_C
               : (size_t)d * d + 7 * nd + 2 * nn + big + 2 * WY_C * WY_N1 + 7 * WY_C;
}
// rt(t, s) for -1 <= s <= t (0 above), P_{t-1} (Pp), P_t (Pt), u_s; a thread per row t
__device__ void wy_coefs(real* rt, real* Pp, real* Pt, real* u, const real* a, const real* C, int n) {
    FOR(t, n) {
        real r = 1;
        rt[t * WY_N1 + t + 1] = 1;
        for (int s = t - 1; s >= -1; s--) {
            r *= a[s + 1];
            rt[t * WY_N1 + s + 1] = r;
        }
        for (int s = t + 1; s < WY_C; s++) rt[t * WY_N1 + s + 1] = 0;
        Pt[t] = r;
    }
    __syncthreads();
    FOR(t, n) {
        Pp[t] = t ? Pt[t - 1] : 1;
        u[t] = rt[(n - 1) * WY_N1 + t + 1] * C[t];
    }
    __syncthreads();
}
// L[t][s] = rt(t-1, s) C_s Kd[t][s] for s < t, else 0 (Lm may be Kd: in place)
__device__ void wy_lmat(real* Lm, const real* Kd, const real* rt, const real* C, int n) {
    FOR(e, n * n) {
        int t = e / n, s = e % n;
        Lm[e] = s < t ? rt[(t - 1) * WY_N1 + s + 1] * C[s] * Kd[e] : 0;
    }
    __syncthreads();
}
// E (n x d) = (I + L)^{-1} E in place (forward substitution); with up, (I + L)^{-T} E (back substitution). Each warp
// takes 4 columns with 8 lanes per column, the lanes summing every 8th term (in a fixed order) and adding by
// shuffles: the columns are independent, so no barrier.
__device__ void wy_solve(real* E, const real* Lm, int n, int d, int up) {
    int ci = LANE >> 3, sl = LANE & 7;
    for (int i0 = (threadIdx.x >> 5) * 4; i0 < d; i0 += (blockDim.x >> 5) * 4) {  // (d % 4 == 0: the same trips)
        int i = i0 + ci;
        for (int x = 0; x < n; x++) {
            int t = up ? n - 1 - x : x;
            real s = 0;
            if (!up)
                for (int j = sl; j < t; j += 8) s += Lm[t * n + j] * E[j * d + i];
            else
                for (int j = t + 1 + sl; j < n; j += 8) s += Lm[j * n + t] * E[j * d + i];
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            s += __shfl_xor_sync(0xffffffffu, s, 2);
            s += __shfl_xor_sync(0xffffffffu, s, 4);
            if (sl == 0) E[t * d + i] -= s;
            __syncwarp();
        }
    }
    __syncthreads();
}
// the chunk's rows [t0, t0 + n) of head h: k, q into K, Q, -v into E; a, C (= eta) into a, C (Q, E, a: NULL skips)
__device__ void wy_load(const MemArgs& A, int bb, int h, int t0, int n, real* K, real* Q, real* E, real* a, real* C) {
    int d = A.m.d;
    FOR(e, n * d) {
        size_t r = (size_t)bb * A.T + t0 + e / d, o = r * A.D + h * d + e % d;
        K[e] = A.k[o];
        if (Q) Q[e] = A.q[o];
        if (E) E[e] = -A.v[o];
    }
    if (a) FOR(t, n) {
            size_t r = (size_t)bb * A.T + t0 + t;
            a[t] = A.ga[r * A.H + h];
            C[t] = A.geta[r * A.H + h];
        }
    __syncthreads();
}
// the chunk's E from W_0 (K, Q, E = -V, a, C loaded): rt and the rest of wy_coefs, Kd = K K^T, Qk = Q K^T, L (into
// Lm, which may be Kd), E = (I + L)^{-1} (diag(P_{t-1}) K W_0^T - V)
__device__ void wy_chunk_e(const real* W0, const real* K, const real* Q, real* E, real* Kd, real* Qk, real* Lm,
                           real* rt, real* Pp, real* Pt, real* u, const real* a, const real* C, int n, int d) {
    wy_coefs(rt, Pp, Pt, u, a, C, n);
    mm_nt_gpu(Kd, K, K, n, n, d, 1, 0);
    mm_nt_gpu(Qk, Q, K, n, n, d, 1, 0);
    mm_nt_rs(E, K, W0, Pp, n, d, d, 1, 1);
    wy_lmat(Lm, Kd, rt, C, n);
    wy_solve(E, Lm, n, d, 0);
}
__global__ void __launch_bounds__(MEM_THREADS) mem_wy_forward_kernel(const __grid_constant__ MemArgs A) {
    int bh = blockIdx.x, bb = bh / A.H, h = bh % A.H, T = A.T, d = A.m.d, nP = A.m.nP,
        nseg = (T + TOK_SEG - 1) / TOK_SEG;
    real* W = mem_dyn_smem();
    real *K = W + d * d, *Q = K + WY_C * d, *E = Q + WY_C * d, *Y = E + WY_C * d, *Kd = Y + WY_C * d,
         *Qk = Kd + WY_C * WY_C, *rt = Qk + WY_C * WY_C, *a = rt + WY_C * WY_N1, *C = a + WY_C, *Pp = C + WY_C,
         *Pt = Pp + WY_C, *u = Pt + WY_C;
    if (threadIdx.x == 0) mem_tc = A.tc;
    FOR(e, d * d) W[e] = A.p0[(size_t)h * nP + e];
    __syncthreads();
    for (int c = 0; c * WY_C < T; c++) {
        int t0 = c * WY_C, n = T - t0 < WY_C ? T - t0 : WY_C;
        real* Ps = A.P + ((size_t)bh * nseg + c) * nP;
        FOR(e, d * d) Ps[e] = W[e];  // the chunk-start state, for the backward
        wy_load(A, bb, h, t0, n, K, Q, E, a, C);
        wy_chunk_e(W, K, Q, E, Kd, Qk, Kd, rt, Pp, Pt, u, a, C, n, d);
        mm_nt_rs(Y, Q, W, Pt, n, d, d, 1, 0);  // Y = diag(P_t) Q W_0^T - M E
        FOR(e, n * n) {
            int t = e / n, s = e % n;
            Qk[e] = s <= t ? rt[t * WY_N1 + s + 1] * C[s] * Qk[e] : 0;
        }
        __syncthreads();
        mm_nn_gpu(Y, Qk, E, n, d, n, -1, 1);
        FOR(e, n * d) A.y[((size_t)bb * T + t0 + e / d) * A.D + h * d + e % d] = Y[e];
        FOR(e, d * d) W[e] *= Pt[n - 1];  // W_n = P_{n-1} W_0 - E^T diag(u) K
        __syncthreads();
        mm_tn_rs(W, E, K, u, d, d, n, -1, 1);
    }
}
// M (o = 0) or L (o = 1), X[t][s] = rt(t-o, s) C_s G[t][s] for t >= s + o (G = Qk or Kd), from T1 = dy_t . e_s or
// dr_t . e_s: dX[t][s] = -T1[t][s] into T1, and its factors' gradients dL/drt(t-o, s) (drt) and dC_s (a thread per s)
__device__ void wy_pair_grads(real* T1, const real* G, const real* rt, real* drt, const real* C, real* dC, int n,
                              int o) {
    FOR(s, n) {
        real dc = 0;
        for (int t = 0; t < n; t++) {
            if (t < s + o) {
                T1[t * n + s] = 0;
                continue;
            }
            real cf = -T1[t * n + s], r = rt[(t - o) * WY_N1 + s + 1];
            drt[(t - o) * WY_N1 + s + 1] += cf * C[s] * G[t * n + s];
            dc += cf * r * G[t * n + s];
            T1[t * n + s] = cf * r * C[s];
        }
        dC[s] += dc;
    }
    __syncthreads();
}
// a chunk's input gradients (dq, dk, dv, da, deta) from its W_0, dW_n, E, dR and du (the backward's terms less those
// of dE, dR and dW_0): K, Q, E, dY, X = dR, a, C, du loaded, rt, Pp, Pt, u (wy_coefs), Kd = K K^T, Qk = Q K^T made
struct WyGrad {
    real *K, *Q, *E, *dY, *X, *dQ, *dK, *Kd, *Qk, *T1, *rt, *drt, *a, *C, *Pp, *Pt, *u, *dC, *du;
};
__device__ void wy_chunk_grads(const MemArgs& A, int bb, int h, int t0, int n, const real* W0, const real* dWn,
                               const WyGrad& g) {
    int d = A.m.d, T = A.T, D = A.D, H = A.H;
    real *K = g.K, *Q = g.Q, *E = g.E, *dY = g.dY, *X = g.X, *dQ = g.dQ, *dK = g.dK, *Kd = g.Kd, *Qk = g.Qk, *T1 = g.T1,
         *rt = g.rt, *drt = g.drt, *a = g.a, *C = g.C, *Pp = g.Pp, *Pt = g.Pt, *u = g.u, *dC = g.dC, *du = g.du;
    FOR(e, WY_C * WY_N1) drt[e] = 0;
    __syncthreads();
    // (1) W_n = P_{n-1} W_0 - E^T diag(u) K: dL/dP_{n-1} += <dW_n, W_0>, u's du, dK = -diag(u) E dW_n
    real dwp = block_dot(dWn, W0, (size_t)d * d);
    FOR(s, n) {
        drt[(n - 1) * WY_N1 + s + 1] += du[s] * C[s];
        dC[s] = du[s] * rt[(n - 1) * WY_N1 + s + 1];
    }
    if (threadIdx.x == 0) drt[(n - 1) * WY_N1] += dwp;
    __syncthreads();
    mm_nn_rs(dK, E, dWn, u, n, d, d, -1, 0);
    // (2) Y = diag(P_t) Q W_0^T - M E: dQ = diag(P_t) dY W_0 (dL/dP_t += q_t . (dY W_0)_t), dM from dY E^T
    mm_nn_gpu(dQ, dY, W0, n, d, d, 1, 0);
    FOR(t, n) {
        real s = 0;
        for (int j = 0; j < d; j++) s += Q[t * d + j] * dQ[t * d + j];
        drt[t * WY_N1] += s;
    }
    __syncthreads();
    FOR(e, n * d) dQ[e] *= Pt[e / d];
    mm_nt_gpu(T1, dY, E, n, n, d, 1, 0);
    wy_pair_grads(T1, Qk, rt, drt, C, dC, n, 0);
    mm_nn_gpu(dQ, T1, K, n, d, n, 1, 1);
    mm_tn_gpu(dK, T1, Q, n, d, n, 1, 1);
    // (3) E = (I + L)^{-1} R: dL from dR E^T
    mm_nt_gpu(T1, X, E, n, n, d, 1, 0);
    wy_pair_grads(T1, Kd, rt, drt, C, dC, n, 1);
    mm_nn_gpu(dK, T1, K, n, d, n, 1, 1);
    mm_tn_gpu(dK, T1, K, n, d, n, 1, 1);
    // (4) R = diag(P_{t-1}) K W_0^T - V: dV = -dR, dK += diag(P_{t-1}) dR W_0 (dL/dP_{t-1} += k_t . (dR W_0)_t)
    mm_nn_gpu(T1, X, W0, n, d, d, 1, 0);
    FOR(t, n) {
        real s = 0;
        for (int j = 0; j < d; j++) s += K[t * d + j] * T1[t * d + j];
        if (t) drt[(t - 1) * WY_N1] += s;
    }
    __syncthreads();
    FOR(e, n * d) {
        size_t o = ((size_t)bb * T + t0 + e / d) * D + h * d + e % d;
        A.dv[o] = -X[e];
        A.dq[o] = dQ[e];
        A.dk[o] = dK[e] + Pp[e / d] * T1[e];
    }
    // (6) da_r = sum_{t >= r} rt(t, r) X_r[t]
    __syncthreads();
    FOR(t, n) {
        real x = drt[t * WY_N1];
        for (int r = 0; r <= t; r++) {
            T1[t * n + r] = rt[t * WY_N1 + r + 1] * x;
            x = a[r] * x + drt[t * WY_N1 + r + 1];
        }
    }
    __syncthreads();
    FOR(r, n) {
        real s = 0;
        for (int t = r; t < n; t++) s += T1[t * n + r];
        size_t row = (size_t)bb * T + t0 + r;
        A.dga[row * H + h] = s;
        A.dgeta[row * H + h] = dC[r];
        A.dgth[row * H + h] = 0;
    }
}
__global__ void __launch_bounds__(MEM_THREADS) mem_wy_backward_kernel(const __grid_constant__ MemArgs A) {
    int bh = blockIdx.x, bb = bh / A.H, h = bh % A.H, T = A.T, d = A.m.d, nP = A.m.nP, D = A.D,
        nseg = (T + TOK_SEG - 1) / TOK_SEG, nd = WY_C * d, nn = WY_C * WY_C, big = nd > nn ? nd : nn;
    real* dW = mem_dyn_smem();  // dL/dW at the end of the chunk being worked on (zero after the last)
    real *K = dW + d * d, *Q = K + nd, *E = Q + nd, *dY = E + nd, *X = dY + nd, *dQ = X + nd, *dK = dQ + nd,
         *Kd = dK + nd, *Qk = Kd + nn, *T1 = Qk + nn, *rt = T1 + big, *drt = rt + WY_C * WY_N1, *a = drt + WY_C * WY_N1,
         *C = a + WY_C, *Pp = C + WY_C, *Pt = Pp + WY_C, *u = Pt + WY_C, *dC = u + WY_C, *du = dC + WY_C;
    if (threadIdx.x == 0) mem_tc = A.tc;
    FOR(e, d * d) dW[e] = 0;
    __syncthreads();
    for (int c = (T - 1) / WY_C; c >= 0; c--) {
        int t0 = c * WY_C, n = T - t0 < WY_C ? T - t0 : WY_C;
        const real* W0 = A.P + ((size_t)bh * nseg + c) * nP;
        wy_load(A, bb, h, t0, n, K, Q, E, a, C);
        FOR(e, n * d) dY[e] = A.dy[((size_t)bb * T + t0 + e / d) * D + h * d + e % d];
        wy_chunk_e(W0, K, Q, E, Kd, Qk, T1, rt, Pp, Pt, u, a, C, n, d);
        // dE = -diag(u) K dW_n^T - M^T dY (X = K dW_n^T first: du_s = -e_s . X_s), dR = (I + L)^{-T} dE in X
        mm_nt_gpu(X, K, dW, n, d, d, 1, 0);
        FOR(s, n) {
            real v = 0;
            for (int i = 0; i < d; i++) v -= E[s * d + i] * X[s * d + i];
            du[s] = v;
        }
        __syncthreads();
        FOR(e, n * d) X[e] *= -u[e / d];
        FOR(e, n * n) {
            int t = e / n, s = e % n;
            T1[e] = s <= t ? rt[t * WY_N1 + s + 1] * C[s] * Qk[e] : 0;  // M
        }
        __syncthreads();
        mm_tn_gpu(X, T1, dY, n, d, n, -1, 1);
        wy_lmat(T1, Kd, rt, C, n);
        wy_solve(X, T1, n, d, 1);
        wy_chunk_grads(A, bb, h, t0, n, W0, dW, {K, Q, E, dY, X, dQ, dK, Kd, Qk, T1, rt, drt, a, C, Pp, Pt, u, dC, du});
        // dL/dW_0 = P_{n-1} dW_n + (diag(P_t) dY)^T Q + (diag(P_{t-1}) dR)^T K: the next (earlier) chunk's carry
        FOR(e, d * d) dW[e] *= Pt[n - 1];
        __syncthreads();
        mm_tn_rs(dW, dY, Q, Pt, d, d, n, 1, 1);
        mm_tn_rs(dW, X, K, Pp, d, d, n, 1, 1);
    }
    FOR(e, d * d) A.dbh[(size_t)bh * (nP + 2 * d) + e] = dW[e];  // dL/dP_0 (no LN part: none is read)
}
// ---- the same in five kernels (fla's split): only the state recurrences run one block per (sequence, head) over
// the chunks in order; everything that is local to a chunk runs one block per (sequence, head, chunk), all chunks at
// once. Scratch (the b = 1 kernels' buffers): per token of the layer's aux, e_t (d) then dr_t (d); per token of
// gpart (shared by the layers: written and read within one pass), row t of the chunk's L (WY_C) and of F = -M^T dY
// (d), then P_{t-1}, P_t, u_t, du_t. A.P's slots (nw = the chunk count; mem_wy_ok: 3 nw <= the slots): W at the start
// of chunk c in slot c, dL/dW at its end in slot nw + c, G = (diag(P_t) dY)^T Q in slot 2 nw + c.
//   forward:  wy_prep (L, P, u)  ->  wy_fwd_serial (W_0, E = (I + L)^-1 R, W_n)  ->  wy_fwd_out (Y)
//   backward: wy_bwd_prep (L, P, u, F, G)  ->  wy_bwd_serial (dR, du, dW_n, dW_0)  ->  wy_bwd_grads (dq, dk, dv, da, dC)
// The serial kernels do two products and one substitution per chunk (the single kernel: 8 and 15).
#define WY_GS (WY_C + TOK_D)  // gpart: offset of the scalars in a token's row
__device__ __forceinline__ real* wy_gp(const MemArgs& A, int bh, int t) {
    return A.gpart + ((size_t)bh * A.T + t) * (TOK_R * TOK_GP);
}
__device__ __forceinline__ real* wy_aux(const MemArgs& A, int bh, int t) {
    return A.aux + ((size_t)bh * A.T + t) * TOK_AUX;
}
static size_t wy_split_smem_floats(int d, int kind) {  // 0 prep, 1 fwd serial, 2 fwd out, 3 bwd serial, 4 bwd grads
    size_t nd = (size_t)WY_C * d, nn = (size_t)WY_C * WY_C, rt = (size_t)WY_C * WY_N1, v = 8 * WY_C;
    switch (kind) {
        case 0: return 3 * nd + 2 * nn + rt + v;  // K, Q, dY (bwd), Kd, Qk / M, rt
        case 1: return (size_t)d * d + 3 * nd + nn + v;  // W, K, R, L (or T), E (inv)
        case 2: return 3 * nd + nn + rt + v;  // Q, K, E -> Y, Qk / M, rt
        case 3: return (size_t)d * d + 3 * nd + nn + v;  // dW, K, E, X -> dR, L
        default: return 7 * nd + 3 * nn + 2 * rt + v;  // K, Q, E, dY, dR, dQ, dK, Kd, Qk, T1, rt, drt
    }
}
// the scalars of a chunk's tokens from gpart
__device__ void wy_get_scalars(const MemArgs& A, int bh, int t0, int n, real* Pp, real* Pt, real* u, real* du) {
    FOR(t, n) {
        const real* g = wy_gp(A, bh, t0 + t) + WY_GS;
        if (Pp) Pp[t] = g[0];
        if (Pt) Pt[t] = g[1];
        if (u) u[t] = g[2];
        if (du) du[t] = g[3];
    }
    __syncthreads();
}
// rows [t0, t0 + n) of a per-token array (w floats at offset o of each token's row in aux or gpart) to / from smem
__device__ void wy_rows_get(real* dst, const MemArgs& A, int bh, int t0, int n, int w, int o, int in_aux) {
    FOR(e, n * w) dst[e] = (in_aux ? wy_aux(A, bh, t0 + e / w) : wy_gp(A, bh, t0 + e / w))[o + e % w];
    __syncthreads();
}
__device__ void wy_rows_put(const real* src, const MemArgs& A, int bh, int t0, int n, int w, int o, int in_aux) {
    FOR(e, n * w)(in_aux ? wy_aux(A, bh, t0 + e / w) : wy_gp(A, bh, t0 + e / w))[o + e % w] = src[e];
    __syncthreads();
}
// a chunk's K (and Q), -V into E, a, C: wy_load; the block's chunk: blockIdx.x = (bh, c)
#define WY_CHUNK_IDS                                                                                          \
    int nw = (A.T + WY_C - 1) / WY_C, bh = blockIdx.x / nw, c = blockIdx.x % nw, bb = bh / A.H, h = bh % A.H, \
        d = A.m.d, t0 = c * WY_C, n = A.T - t0 < WY_C ? A.T - t0 : WY_C, nP = A.m.nP,                         \
        nseg = (A.T + TOK_SEG - 1) / TOK_SEG
// forward and backward: L, P_{t-1}, P_t, u of every chunk; with bwd also F = -M^T dY and G = (diag(P_t) dY)^T Q
// (inv: T = (I + L)^{-1} in L's place, for the serial kernels' products in place of their substitutions)
__global__ void __launch_bounds__(MEM_THREADS) wy_prep_kernel(const __grid_constant__ MemArgs A, int bwd, int inv) {
    WY_CHUNK_IDS;
    real* K = mem_dyn_smem();
    real *Q = K + WY_C * d, *dY = Q + WY_C * d, *Kd = dY + WY_C * d, *Qk = Kd + WY_C * WY_C, *rt = Qk + WY_C * WY_C,
         *a = rt + WY_C * WY_N1, *C = a + WY_C, *Pp = C + WY_C, *Pt = Pp + WY_C, *u = Pt + WY_C;
    if (threadIdx.x == 0) mem_tc = A.tc;
    wy_load(A, bb, h, t0, n, K, bwd ? Q : NULL, NULL, a, C);
    wy_coefs(rt, Pp, Pt, u, a, C, n);
    mm_nt_gpu(Kd, K, K, n, n, d, 1, 0);
    wy_lmat(Kd, Kd, rt, C, n);
    if (inv) {  // T: the substitution on the identity (n x WY_C: the columns past n stay 0), in Qk's place
        FOR(e, n * WY_C) Qk[e] = e / WY_C == e % WY_C;
        __syncthreads();
        wy_solve(Qk, Kd, n, WY_C, 0);
        FOR(e, n * n) wy_gp(A, bh, t0 + e / n)[e % n] = Qk[e / n * WY_C + e % n];
    } else
        FOR(e, n * n) wy_gp(A, bh, t0 + e / n)[e % n] = Kd[e];
    __syncthreads();  // (Qk is written next: every read of T above must be done)
    FOR(t, n) {
        real* g = wy_gp(A, bh, t0 + t) + WY_GS;
        g[0] = Pp[t];
        g[1] = Pt[t];
        g[2] = u[t];
    }
    if (!bwd) return;
    FOR(e, n * d) dY[e] = A.dy[((size_t)bb * A.T + t0 + e / d) * A.D + h * d + e % d];
    mm_nt_gpu(Qk, Q, K, n, n, d, 1, 0);
    FOR(e, n * n) {
        int t = e / n, s = e % n;
        Qk[e] = s <= t ? rt[t * WY_N1 + s + 1] * C[s] * Qk[e] : 0;  // M
    }
    __syncthreads();
    mm_tn_gpu(Kd, Qk, dY, n, d, n, -1, 0);  // F = -M^T dY (into Kd's place: n x d = n x n, d == WY_C)
    wy_rows_put(Kd, A, bh, t0, n, d, WY_C, 0);
    FOR(t, n) {  // dY rows scaled by P_t, then G = (diag(P_t) dY)^T Q
        for (int i = 0; i < d; i++) dY[t * d + i] *= Pt[t];
    }
    __syncthreads();
    mm_tn_gpu(A.P + ((size_t)bh * nseg + 2 * nw + c) * nP, dY, Q, d, d, n, 1, 0);
}
static_assert(TOK_D == WY_C, "the split WY kernels keep d-wide rows in WY_C-wide places");
// the W recurrence: per chunk, W_0 into its slot, E = (I + L)^{-1} (diag(P_{t-1}) K W_0^T - V) into aux, W_n
__global__ void __launch_bounds__(MEM_THREADS) wy_fwd_serial_kernel(const __grid_constant__ MemArgs A, int inv) {
    int bh = blockIdx.x, bb = bh / A.H, h = bh % A.H, T = A.T, d = A.m.d, nP = A.m.nP,
        nseg = (T + TOK_SEG - 1) / TOK_SEG, nw = (T + WY_C - 1) / WY_C;
    real* W = mem_dyn_smem();
    real *K = W + d * d, *R = K + WY_C * d, *Lm = R + WY_C * d, *Pp = Lm + WY_C * WY_C, *Pt = Pp + WY_C, *u = Pt + WY_C,
         *E = inv ? u + WY_C : R;  // (inv: E = T R beside R)
    if (threadIdx.x == 0) mem_tc = A.tc;
    FOR(e, d * d) W[e] = A.p0[(size_t)h * nP + e];
    __syncthreads();
    for (int c = 0; c < nw; c++) {
        int t0 = c * WY_C, n = T - t0 < WY_C ? T - t0 : WY_C;
        real* Ps = A.P + ((size_t)bh * nseg + c) * nP;
        FOR(e, d * d) Ps[e] = W[e];
        wy_load(A, bb, h, t0, n, K, NULL, R, NULL, NULL);
        wy_get_scalars(A, bh, t0, n, Pp, Pt, u, NULL);
        wy_rows_get(Lm, A, bh, t0, n, n, 0, 0);  // L, or T = (I + L)^{-1}
        mm_nt_rs(R, K, W, Pp, n, d, d, 1, 1);
        if (inv)
            mm_nn_gpu(E, Lm, R, n, d, n, 1, 0);
        else
            wy_solve(E, Lm, n, d, 0);
        wy_rows_put(E, A, bh, t0, n, d, 0, 1);
        FOR(e, d * d) W[e] *= Pt[n - 1];
        __syncthreads();
        mm_tn_rs(W, E, K, u, d, d, n, -1, 1);
    }
}
// Y = diag(P_t) Q W_0^T - M E, every chunk at once
__global__ void __launch_bounds__(MEM_THREADS) wy_fwd_out_kernel(const __grid_constant__ MemArgs A) {
    WY_CHUNK_IDS;
    real* Q = mem_dyn_smem();
    real *K = Q + WY_C * d, *E = K + WY_C * d, *Qk = E + WY_C * d, *rt = Qk + WY_C * WY_C, *a = rt + WY_C * WY_N1,
         *C = a + WY_C, *Pp = C + WY_C, *Pt = Pp + WY_C, *u = Pt + WY_C;
    if (threadIdx.x == 0) mem_tc = A.tc;
    wy_load(A, bb, h, t0, n, K, Q, NULL, a, C);
    wy_rows_get(E, A, bh, t0, n, d, 0, 1);
    wy_coefs(rt, Pp, Pt, u, a, C, n);
    mm_nt_gpu(Qk, Q, K, n, n, d, 1, 0);
    FOR(e, n * n) {
        int t = e / n, s = e % n;
        Qk[e] = s <= t ? rt[t * WY_N1 + s + 1] * C[s] * Qk[e] : 0;
    }
    __syncthreads();
    const real* W0 = A.P + ((size_t)bh * nseg + c) * nP;
    mm_nt_rs(K, Q, W0, Pt, n, d, d, 1, 0);  // (Y in K's place)
    mm_nn_gpu(K, Qk, E, n, d, n, -1, 1);
    FOR(e, n * d) A.y[((size_t)bb * A.T + t0 + e / d) * A.D + h * d + e % d] = K[e];
}
// the dW recurrence, chunks in reverse: dW_n into its slot, X = K dW_n^T, du_s = -e_s . X_s, dE = -diag(u) X + F,
// dR = (I + L)^{-T} dE into aux, dW_0 = P_{n-1} dW_n + G + (diag(P_{t-1}) dR)^T K
__global__ void __launch_bounds__(MEM_THREADS) wy_bwd_serial_kernel(const __grid_constant__ MemArgs A, int inv) {
    int bh = blockIdx.x, bb = bh / A.H, h = bh % A.H, T = A.T, d = A.m.d, nP = A.m.nP,
        nseg = (T + TOK_SEG - 1) / TOK_SEG, nw = (T + WY_C - 1) / WY_C;
    real* dW = mem_dyn_smem();
    real *K = dW + d * d, *E = K + WY_C * d, *X = E + WY_C * d, *Lm = X + WY_C * d, *Pp = Lm + WY_C * WY_C,
         *Pt = Pp + WY_C, *u = Pt + WY_C;
    if (threadIdx.x == 0) mem_tc = A.tc;
    FOR(e, d * d) dW[e] = 0;
    __syncthreads();
    for (int c = nw - 1; c >= 0; c--) {
        int t0 = c * WY_C, n = T - t0 < WY_C ? T - t0 : WY_C;
        real* base = A.P + (size_t)bh * nseg * nP;
        FOR(e, d * d) base[(size_t)(nw + c) * nP + e] = dW[e];
        wy_load(A, bb, h, t0, n, K, NULL, NULL, NULL, NULL);
        wy_rows_get(E, A, bh, t0, n, d, 0, 1);
        wy_rows_get(Lm, A, bh, t0, n, n, 0, 0);
        wy_get_scalars(A, bh, t0, n, Pp, Pt, u, NULL);
        mm_nt_gpu(X, K, dW, n, d, d, 1, 0);
        FOR(s, n) {
            real du = 0;
            for (int i = 0; i < d; i++) du -= E[s * d + i] * X[s * d + i];
            wy_gp(A, bh, t0 + s)[WY_GS + 3] = du;
        }
        __syncthreads();
        FOR(e, n * d) X[e] = -u[e / d] * X[e] + wy_gp(A, bh, t0 + e / d)[WY_C + e % d];
        __syncthreads();
        real* dR = X;
        if (inv) {  // dR = T^T dE into E's place (E is not needed after du)
            mm_tn_gpu(E, Lm, X, n, d, n, 1, 0);
            dR = E;
        } else
            wy_solve(X, Lm, n, d, 1);
        wy_rows_put(dR, A, bh, t0, n, d, d, 1);
        const real* G = base + (size_t)(2 * nw + c) * nP;
        FOR(e, d * d) dW[e] = Pt[n - 1] * dW[e] + G[e];
        __syncthreads();
        mm_tn_rs(dW, dR, K, Pp, d, d, n, 1, 1);
    }
    FOR(e, d * d) A.dbh[(size_t)bh * (nP + 2 * d) + e] = dW[e];  // dL/dP_0 (no LN part: none is read)
}
// every chunk's input gradients at once (wy_chunk_grads) from its W_0, dW_n, E, dR
__global__ void __launch_bounds__(MEM_THREADS) wy_bwd_grads_kernel(const __grid_constant__ MemArgs A) {
    WY_CHUNK_IDS;
    int T = A.T, D = A.D, nd = WY_C * d, nn = WY_C * WY_C;
    real* K = mem_dyn_smem();
    real *Q = K + nd, *E = Q + nd, *dY = E + nd, *X = dY + nd, *dQ = X + nd, *dK = dQ + nd, *Kd = dK + nd,
         *Qk = Kd + nn, *T1 = Qk + nn, *rt = T1 + nn, *drt = rt + WY_C * WY_N1, *a = drt + WY_C * WY_N1, *C = a + WY_C,
         *Pp = C + WY_C, *Pt = Pp + WY_C, *u = Pt + WY_C, *dC = u + WY_C, *du = dC + WY_C;
    if (threadIdx.x == 0) mem_tc = A.tc;
    const real *W0 = A.P + ((size_t)bh * nseg + c) * nP, *dWn = A.P + ((size_t)bh * nseg + nw + c) * nP;
    wy_load(A, bb, h, t0, n, K, Q, NULL, a, C);
    wy_rows_get(E, A, bh, t0, n, d, 0, 1);
    wy_rows_get(X, A, bh, t0, n, d, d, 1);  // dR
    FOR(e, n * d) dY[e] = A.dy[((size_t)bb * T + t0 + e / d) * D + h * d + e % d];
    wy_get_scalars(A, bh, t0, n, NULL, NULL, NULL, du);
    wy_coefs(rt, Pp, Pt, u, a, C, n);
    mm_nt_gpu(Kd, K, K, n, n, d, 1, 0);
    mm_nt_gpu(Qk, Q, K, n, n, d, 1, 0);
    wy_chunk_grads(A, bb, h, t0, n, W0, dWn, {K, Q, E, dY, X, dQ, dK, Kd, Qk, T1, rt, drt, a, C, Pp, Pt, u, dC, du});
}
// v6 runs these configurations at any chunk size b where the dot bias makes the writes independent of the state
// (linear attention: the chunked rule equals the per-token one); its segment start states need ceil(T / TOK_SEG)
// slots per (sequence, head) (mem_state_slots)
// ---- Lattice (train_miras.c section 3b, SPEC §5.8): one block per (sequence, head), fp32, token by token. Thread j
// owns slot (column) j of S in the column operations (g = S^T h, the update and renormalisation of column j, the
// column outputs dq, dk) and row j in the row operations (h = S k - v, y = S q, dh); a barrier between the two kinds.
// The state lives in global memory, slot-major like the CPU's (column i at S + i d). The forward keeps S at every
// lat_k-th token in A.P; the backward recomputes each segment's states into the block's scratch A.lat (k + 2 states:
// the segment's and the carry G = dL/dS) and steps back through them: the CPU's lattice_step_backward, term by term
// in the same order.
#define LAT_MAXD 256
struct LatSh {
    real k[LAT_MAXD], v[LAT_MAXD], q[LAT_MAXD], h[LAT_MAXD], g[LAT_MAXD], c[LAT_MAXD], A[LAT_MAXD], n[LAT_MAXD],
        dy[LAT_MAXD], dh[LAT_MAXD], dc[LAT_MAXD], dg[LAT_MAXD], pe[LAT_MAXD], pm[LAT_MAXD];
    real eta, mu;
};
static unsigned lat_threads(int d) { return (unsigned)((d + 31) / 32 * 32); }
__device__ real dotv_gpu(const real* a, const real* b, int n) {
    real s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
// this token's q, k, v (and dy), eta, mu into shared memory
__device__ void lat_load(LatSh* s, const MemArgs* A, int bb, int h, int t, int dy) {
    int j = threadIdx.x, d = A->m.d;
    size_t r = (size_t)bb * A->T + t;
    if (j < d) {
        s->q[j] = A->q[r * A->D + h * d + j];
        s->k[j] = A->k[r * A->D + h * d + j];
        s->v[j] = A->v[r * A->D + h * d + j];
        if (dy) s->dy[j] = A->dy[r * A->D + h * d + j];
    }
    if (j == 0) {
        s->eta = A->geta[r * A->H + h];
        s->mu = A->ga[r * A->H + h];
    }
    __syncthreads();
}
// h (row op), then g, c, A (column op) from S = S_{t-1}: lattice_step_coefs
__device__ void lat_coefs(const MemCfg& m, const real* S, LatSh* s) {
    int j = threadIdx.x, d = m.d;
    if (j < d) {
        real x;
        if (m.lattice == LAT_DEC) {
            x = -s->v[j];
            for (int i = 0; i < d; i++) x += S[(size_t)i * d + j] * s->k[i];
        } else
            x = m.lattice == LAT_ENC ? s->v[j] : -s->v[j];
        s->h[j] = x;
    }
    __syncthreads();
    if (j < d) {
        real g = dotv_gpu(S + (size_t)j * d, s->h, d);
        s->g[j] = g;
        real c = m.lattice == LAT_ENC ? g - s->k[j] : s->k[j];
        s->c[j] = c;
        s->A[j] = s->mu + (m.lat_ablate & LATA_NO_ORTHO ? 0 : s->eta * c * g);
    }
    __syncthreads();
}
// one step: Sn = S_t (Sn may be S: column j is read and written by thread j only, after the coefficients); y = S_t q if
// y
__device__ void lat_step(const MemCfg& m, const real* S, real* Sn, LatSh* s, real* y) {
    int j = threadIdx.x, d = m.d;
    lat_coefs(m, S, s);
    if (j < d) {
        const real* Sj = S + (size_t)j * d;
        real* Wj = Sn + (size_t)j * d;
        real ec = s->eta * s->c[j], nn = 0, A = s->A[j];
        for (int r = 0; r < d; r++) {
            real w = A * Sj[r] - ec * s->h[r];
            Wj[r] = w;
            nn += w * w;
        }
        if (!(m.lat_ablate & LATA_NO_RENORM)) {
            real n = sqrtf(nn);
            for (int r = 0; r < d; r++) Wj[r] /= n;
        }
    }
    __syncthreads();
    if (y && j < d) {
        real acc = 0;
        for (int i = 0; i < d; i++) acc += Sn[(size_t)i * d + j] * s->q[i];
        y[j] = acc;
    }
    __syncthreads();
}
// rows [t0, t1) of this block's (sequence, head) from the state in S (in place): the reads into A.y, the state before
// every lat_k-th token into A.P
__device__ void lat_rows_forward(const MemArgs* A, LatSh* s, int t0, int t1, real* S) {
    int bb = blockIdx.x / A->H, h = blockIdx.x % A->H, d = A->m.d, k = A->m.lat_k;
    size_t nP = A->m.nP;
    real* ck = A->P + (size_t)blockIdx.x * ((A->T + k - 1) / k) * nP;
    for (int t = t0; t < t1; t++) {
        if (t % k == 0) block_copy(ck + (size_t)(t / k) * nP, S, nP);
        lat_load(s, A, bb, h, t, 0);
        lat_step(A->m, S, S, s, A->y + ((size_t)bb * A->T + t) * A->D + h * d);
    }
}
__global__ void lattice_forward_kernel(const __grid_constant__ MemArgs A) {
    __shared__ LatSh s;
    int d = A.m.d;
    size_t nP = A.m.nP;
    real* S = A.lat + (size_t)blockIdx.x * (A.m.lat_k + 2) * nP;
    FOR(e, nP) S[e] = e / d == e % d ? 1 : 0;  // S_0 = I
    __syncthreads();
    lat_rows_forward(&A, &s, 0, A.T, S);
}
// the backward of one step (lattice_step_backward); G: dL/dS_t in, dL/dS_{t-1} out
__device__ void lat_step_backward(const MemCfg& m, const real* S, const real* Sn, real* G, LatSh* s, const MemArgs* A,
                                  size_t row, int h) {
    int j = threadIdx.x, d = m.d, ortho = !(m.lat_ablate & LATA_NO_ORTHO), renorm = !(m.lat_ablate & LATA_NO_RENORM);
    lat_coefs(m, S, s);
    if (j < d) {
        const real* Sj = S + (size_t)j * d;
        const real* Snj = Sn + (size_t)j * d;
        real* Gj = G + (size_t)j * d;
        real n = 1;
        if (renorm) {
            real ec = s->eta * s->c[j], nn = 0;
            for (int r = 0; r < d; r++) {
                real x = s->A[j] * Sj[r] - ec * s->h[r];
                nn += x * x;
            }
            n = sqrtf(nn);
        }
        A->dq[row * A->D + h * d + j] = dotv_gpu(Snj, s->dy, d);
        for (int r = 0; r < d; r++) Gj[r] += s->dy[r] * s->q[j];
        // G_j := dW_j
        if (renorm) {
            real p = dotv_gpu(Snj, Gj, d);
            for (int r = 0; r < d; r++) Gj[r] = (Gj[r] - Snj[r] * p) / n;
        }
        real dA = dotv_gpu(Sj, Gj, d), hdW = dotv_gpu(s->h, Gj, d);
        s->dc[j] = -s->eta * hdW + (ortho ? s->eta * dA * s->g[j] : 0);
        s->pe[j] = -s->c[j] * hdW + (ortho ? dA * s->c[j] * s->g[j] : 0);
        s->pm[j] = dA;
        real dg = ortho ? s->eta * dA * s->c[j] : 0;
        if (m.lattice == LAT_ENC) dg += s->dc[j];
        s->dg[j] = dg;
    }
    __syncthreads();
    if (j < d) {  // dh (row j)
        real x = 0;
        for (int i = 0; i < d; i++) x -= s->eta * s->c[i] * G[(size_t)i * d + j];
        for (int i = 0; i < d; i++) x += s->dg[i] * S[(size_t)i * d + j];
        s->dh[j] = x;
        A->dv[row * A->D + h * d + j] = m.lattice == LAT_ENC ? x : -x;
    }
    __syncthreads();
    if (j < d) {  // the carry dL/dS_{t-1}, column j; dk
        const real* Sj = S + (size_t)j * d;
        real* Gj = G + (size_t)j * d;
        real A_ = s->A[j], dg = s->dg[j], kj = s->k[j];
        for (int r = 0; r < d; r++) {
            real x = A_ * Gj[r];
            x += dg * s->h[r];
            if (m.lattice == LAT_DEC) x += kj * s->dh[r];
            Gj[r] = x;
        }
        A->dk[row * A->D + h * d + j] = m.lattice == LAT_DEC   ? dotv_gpu(Sj, s->dh, d) + s->dc[j]
                                        : m.lattice == LAT_ENC ? -s->dc[j]
                                                               : s->dc[j];
    }
    if (j == 0) {
        real de = 0, dm = 0;
        for (int i = 0; i < d; i++) {
            de += s->pe[i];
            dm += s->pm[i];
        }
        A->dgeta[row * A->H + h] = de;
        A->dga[row * A->H + h] = dm;
        A->dgth[row * A->H + h] = 0;
    }
    __syncthreads();
}
// the backward of rows [t0, t1) in reverse, G = dL/dS after row t1 - 1 in, before row t0 out: the lat_k blocks that
// meet the rows, each recomputed into St from its checkpoint (one that begins before t0 from S0, the state there)
__device__ void lat_rows_backward(const MemArgs* A, LatSh* s, int t0, int t1, const real* S0, real* St, real* G) {
    int bb = blockIdx.x / A->H, h = blockIdx.x % A->H, k = A->m.lat_k;
    size_t nP = A->m.nP;
    const real* ck = A->P + (size_t)blockIdx.x * ((A->T + k - 1) / k) * nP;
    for (int sg = (t1 - 1) / k; sg >= t0 / k; sg--) {
        int b0 = sg * k < t0 ? t0 : sg * k, b1 = sg * k + k < t1 ? sg * k + k : t1, n = b1 - b0;
        block_copy(St, sg * k < t0 ? S0 : ck + (size_t)sg * nP, nP);
        for (int j = 0; j < n; j++) {
            lat_load(s, A, bb, h, b0 + j, 0);
            lat_step(A->m, St + (size_t)j * nP, St + (size_t)(j + 1) * nP, s, NULL);
        }
        for (int j = n - 1; j >= 0; j--) {
            lat_load(s, A, bb, h, b0 + j, 1);
            lat_step_backward(A->m, St + (size_t)j * nP, St + (size_t)(j + 1) * nP, G, s, A, (size_t)bb * A->T + b0 + j,
                              h);
        }
    }
}
__global__ void lattice_backward_kernel(const __grid_constant__ MemArgs A) {
    __shared__ LatSh s;
    int k = A.m.lat_k;
    size_t nP = A.m.nP;
    real* St = A.lat + (size_t)blockIdx.x * (k + 2) * nP;
    real* G = St + (size_t)(k + 1) * nP;
    FOR(e, nP) G[e] = 0;  // dL/dS_T = 0
    __syncthreads();
    lat_rows_backward(&A, &s, 0, A.T, NULL, St, G);
}
// decoding: one block per head, one step of the state P (in place) and the read
__global__ void lattice_decode_kernel(MemCfg m, real* P, const real* q, const real* k, const real* v, const real* geta,
                                      const real* ga, real* y) {
    __shared__ LatSh s;
    int h = blockIdx.x, d = m.d, j = threadIdx.x;
    if (j < d) {
        s.q[j] = q[h * d + j];
        s.k[j] = k[h * d + j];
        s.v[j] = v[h * d + j];
    }
    if (j == 0) {
        s.eta = geta[h];
        s.mu = ga[h];
    }
    __syncthreads();
    real* S = P + (size_t)h * m.nP;
    lat_step(m, S, S, &s, y + h * d);
}

// ---- the phi* memory (train_miras.c section 3c, DeepTransformer and DOT; its comment gives the equations): one block
// per (sequence, head), the chunks in order as on the CPU, the scratch the CPU's PhiScr (phi_scr_carve, one per block,
// in global memory) and the entries (signals av, offsets lo, tokens etok) of every (layer, sequence, head) in A.phav,
// A.phlo, A.phetok. Every read is a softmax over all the entries (quadratic in T, like attention): a thread per entry
// for the logits and the entries' gradients, a thread per column for the weighted sums and for the keys' gradients
// (a token's key can be several entries: its own chunk's and later chunks' halo rows); W1's steps a thread per element.

// The normalised kernel read of one query x (phi_read): out = sum_e p_e av_e, p = softmax_e(off_e + s k_e.x) over the
// history's entries e < ne (off = lo_e) and the chunk's rows e = ne + j, j < na (off = lam_j). Keeps p in s->lg.
MEMFN void phi_read_gpu(const MemCfg* m, PhiScr* s, const PhiSeq* x, const real* xq, int ne, int na, const int* etok,
                        const real* av, const real* lo, const real* lam, real* out) {
    int w = m->dm, d = m->d, N = ne + na;
    real mx = -INFINITY, S = 0;
    FOR(e, N) {
        real l = (e < ne ? lo[e] : lam[e - ne]) + m->phis * dotv_gpu(x->k + (size_t)etok[e] * x->sx, xq, d);
        s->lg[e] = l;
        mx = fmaxf(mx, l);
    }
    mx = block_max(mx);
    FOR(e, N) {
        real p = expf(s->lg[e] - mx);
        s->lg[e] = p;
        S += p;
    }
    S = block_sum(S);
    FOR(e, N) s->lg[e] /= S;
    __syncthreads();
    FOR(j, w) {  // (no entry: 0)
        real o = 0;
        for (int e = 0; e < N; e++) o += s->lg[e] * av[(size_t)e * w + j];
        out[j] = o;
    }
    __syncthreads();
}
// its backward (phi_read_backward), from dout (p in s->lg, out the read's value): dlogit_e = p_e (av_e - out).dout;
// into dav, dlo (the history's entries) or dlam (the chunk's rows), dxq and the keys' gradients gx->k
MEMFN void phi_read_backward_gpu(const MemCfg* m, PhiScr* s, const PhiSeq* x, const PhiSeq* gx, const real* xq,
                                 real* dxq, int ne, int na, const int* etok, const real* av, const real* out,
                                 const real* dout, real* dav, real* dlo, real* dlam) {
    int w = m->dm, d = m->d, N = ne + na;
    real zd = block_dot(out, dout, w);
    FOR(e, N) {  // (s->lg[e] becomes dlogit_e)
        real p = s->lg[e], dl = p * (dotv_gpu(av + (size_t)e * w, dout, w) - zd);
        for (int j = 0; j < w; j++) dav[(size_t)e * w + j] += p * dout[j];
        if (e < ne)
            dlo[e] += dl;
        else
            dlam[e - ne] += dl;
        s->lg[e] = dl;
    }
    __syncthreads();
    FOR(i, d) {  // (a thread per column: two entries can share a key row)
        real acc = 0;
        for (int e = 0; e < N; e++) {
            size_t r = (size_t)etok[e];
            acc += s->lg[e] * x->k[r * x->sx + i];
            gx->k[r * gx->sx + i] += m->phis * s->lg[e] * xq[i];
        }
        dxq[i] += m->phis * acc;
    }
    __syncthreads();
}
// the log-weight term of own row nn (local, >= nh) for the entry row j: -LA_n + log eta_n + log gamma_n[n - j]
__device__ real phi_term_gpu(const PhiScr* s, const PhiSeq* x, int t0, int nh, int nn, int j) {
    size_t t = (size_t)(t0 + nn - nh);
    return -s->LA[nn - nh] + logf(x->eta[t * x->sg]) + (x->gam ? logf(x->gam[t * x->sc + nn - j]) : 0);
}
// the own rows nn whose steps take the entry row j's gradient, up to own row jt: [max(j, nh), min(jt, j + c - 1)]
__device__ void phi_span_gpu(const MemCfg* m, int nh, int j, int jt, int* n0, int* n1) {
    *n0 = j > nh ? j : nh;
    *n1 = jt < j + m->omega - 1 ? jt : j + m->omega - 1;
}

// One chunk (phi_chunk_forward): own tokens [t0, t0+n), halo rows nh = min(c-1, t0); ne history entries (etok, av,
// lo), chunk-start W1s (deep) and LAs = LA_{t0-1}. Appends the chunk's R = nh + n entries (etok, av at ne + j, lo =
// lambda_j at the last row), writes y (own rows, stride sy) and, if W1n, the chunk-end W1; returns LA at the chunk's
// last row (in every thread).
MEMFN real phi_chunk_forward_gpu(const MemCfg* m, PhiScr* s, const PhiSeq* x, int t0, int n, int nh, int ne, int* etok,
                                 real* av, real* lo, const real* W1s, real LAs, real* y, size_t sy, real* W1n) {
    int d = m->d, w = m->dm, c = m->omega, R = nh + n, deep = m->depth == 2;
    size_t nP = m->nP;
    if (threadIdx.x == 0)
        for (int i = 0; i < n; i++) s->LA[i] = (i ? s->LA[i - 1] : LAs) + logf(x->a[(size_t)(t0 + i) * x->sg]);
    FOR(j, R) etok[ne + j] = t0 - nh + j;
    __syncthreads();
    // the entry rows: key pass over the history, the inner gradient at the chunk-start state
    for (int j = 0; j < R; j++) {
        size_t tj = (size_t)(t0 - nh + j);
        const real *kj = x->k + tj * x->sx, *vj = x->v + tj * x->sx;
        real *z = s->z + (size_t)j * w, *avj = av + (size_t)(ne + j) * w, *r = s->r + (size_t)j * d;
        phi_read_gpu(m, s, x, kj, ne, 0, etok, av, lo, NULL, z);  // z_j = W2_s phi*(k_j)
        if (!deep) {  // M(k_j) = z_j; a_j = -r_j
            FOR(i, d) {
                r[i] = m->bias == BIAS_DOT ? -vj[i] : z[i] - vj[i];
                avj[i] = -r[i];
            }
            __syncthreads();
            continue;
        }
        real *tz = s->tz + (size_t)j * w, *h = s->h + (size_t)j * w, *mk = s->mk + (size_t)j * d,
             *g = s->g + (size_t)j * w;
        FOR(e, w) {
            tz[e] = gelu_tanh_gpu(z[e]);
            h[e] = gelu_gpu(z[e], tz[e]);
        }
        __syncthreads();
        mm_nt_gpu(mk, h, W1s, 1, d, w, 1, 0);  // M(k_j) = W1_s h_j
        FOR(i, d) r[i] = m->bias == BIAS_DOT ? -vj[i] : mk[i] - vj[i];
        __syncthreads();
        mm_nn_gpu(g, r, W1s, 1, w, d, 1, 0);  // g_j = W1_s^T r_j
        FOR(e, w) avj[e] = -g[e] * gelu_d1_gpu(z[e], tz[e]);  // a_j = -g_j * GELU'(z_j)
        __syncthreads();
        if (m->phistar == 2) {  // bounded steps: a_j <- a_j rho_j, rho_j = 1 / sqrt(1 + mean(a_j^2))
            real rho = 1 / sqrtf(1 + block_dot(avj, avj, w) / w);
            FOR(e, w) avj[e] *= rho;
            if (threadIdx.x == 0) s->ra[j] = rho;
            __syncthreads();
        }
    }
    FOR(e, n * R) {  // lambda_j(t) for own row jt = nh + i and the rows j <= jt (a thread per pair)
        int i = e / R, j = e % R, jt = nh + i, n0, n1;
        if (j > jt) continue;
        phi_span_gpu(m, nh, j, jt, &n0, &n1);
        real mx = -INFINITY, S = 0;
        for (int nn = n0; nn <= n1; nn++) mx = fmaxf(mx, phi_term_gpu(s, x, t0, nh, nn, j));
        for (int nn = n0; nn <= n1; nn++) S += expf(phi_term_gpu(s, x, t0, nh, nn, j) - mx);
        s->lam[e] = mx + logf(S);
    }
    __syncthreads();
    // the query pass and the reads, W1 stepped token by token (W holds W1_s, then W1 after each own row)
    if (deep) block_copy(s->W, W1s, nP);
    for (int i = 0; i < n; i++) {
        size_t t = (size_t)(t0 + i);
        int jt = nh + i;
        real *zq = s->zq + (size_t)i * w, *yt = y + (size_t)i * sy;
        phi_read_gpu(m, s, x, x->q + t * x->sx, ne, jt + 1, etok, av, lo, s->lam + (size_t)i * R, zq);
        if (!deep) {
            block_copy(yt, zq, d);
            continue;
        }
        real *tq = s->tq + (size_t)i * w, *hq = s->hq + (size_t)i * w;
        FOR(e, w) {
            tq[e] = gelu_tanh_gpu(zq[e]);
            hq[e] = gelu_gpu(zq[e], tq[e]);
        }
        const real* Wp = s->W + (size_t)i * nP;
        real* Wt = s->W + (size_t)(i + 1) * nP;
        real at = x->a[t * x->sg], et = x->eta[t * x->sg];
        FOR(e, nP) {  // W1_t = a_t W1_{t-1} - eta_t sum_{o<c} gamma_t[o] r_{t-o} h_{t-o}^T
            int p = (int)(e / w), col = (int)(e % w);
            real v = at * Wp[e];
            for (int o = 0; o < c && jt - o >= 0; o++) {
                real cf = et * (x->gam ? x->gam[t * x->sc + o] : 1);
                v -= cf * s->r[(size_t)(jt - o) * d + p] * s->h[(size_t)(jt - o) * w + col];
            }
            Wt[e] = v;
        }
        __syncthreads();
        mm_nt_gpu(yt, hq, Wt, 1, d, w, 1, 0);  // y_t = W1_t GELU(z^q_t)
    }
    if (W1n) block_copy(W1n, s->W + (size_t)n * nP, nP);
    FOR(j, R) lo[ne + j] = s->lam[(size_t)(n - 1) * R + j];
    __syncthreads();
    return s->LA[n - 1];
}

// Its backward (phi_chunk_backward; run phi_chunk_forward_gpu first: its intermediates are in s). In: dy (own rows,
// stride sdy); s->dW = dL/dW1 at the chunk end (0 for the last chunk), s->dav, s->dlo: the entries' gradients from the
// later chunks; gLA = dL/dLA at the chunk's last row from the later chunks. Out: s->dW = dL/dW1_s, the earlier
// entries' dav, dlo; dq, dk, dv, da, deta, dgamma accumulated into gx; returns dL/dLAs (in every thread).
MEMFN real phi_chunk_backward_gpu(const MemCfg* m, PhiScr* s, const PhiSeq* x, const PhiSeq* gx, int t0, int n, int nh,
                                  int ne, const int* etok, const real* av, const real* lo, const real* W1s,
                                  const real* dy, size_t sdy, real gLA) {
    __shared__ real gLAs;
    int d = m->d, w = m->dm, c = m->omega, R = nh + n, deep = m->depth == 2;
    size_t nP = m->nP;
    block_zero(s->dz, (size_t)R * w);
    block_zero(s->dh, (size_t)R * w);
    block_zero(s->dr, (size_t)R * d);
    block_zero(s->dlam, (size_t)n * R);
    block_zero(s->dLA, n);
    FOR(j, R) s->dlam[(size_t)(n - 1) * R + j] += s->dlo[ne + j];  // lo_j = lambda_j(last row)
    if (threadIdx.x == 0) s->dLA[n - 1] += gLA;
    __syncthreads();
    real* dW = s->dW;
    for (int i = n - 1; i >= 0; i--) {  // the reads and W1's steps, in reverse
        size_t t = (size_t)(t0 + i);
        int jt = nh + i;
        const real* dyt = dy + (size_t)i * sdy;
        real *zq = s->zq + (size_t)i * w, *dzq = s->dzq + (size_t)i * w;
        if (deep) {
            const real *hq = s->hq + (size_t)i * w, *tq = s->tq + (size_t)i * w, *Wt = s->W + (size_t)(i + 1) * nP,
                       *Wp = s->W + (size_t)i * nP;
            FOR(e, nP) dW[e] += dyt[e / w] * hq[e % w];  // y_t = W1_t hq_t
            mm_nn_gpu(s->dhq, dyt, Wt, 1, w, d, 1, 0);
            FOR(e, w) dzq[e] = s->dhq[e] * gelu_d1_gpu(zq[e], tq[e]);
            real at = x->a[t * x->sg], et = x->eta[t * x->sg], ga = block_dot(dW, Wp, nP);
            if (threadIdx.x == 0) gx->a[t * gx->sg] += ga;  // W1_t = a_t W1_{t-1} - eta_t sum_o gamma_t[o] r h^T
            for (int o = 0; o < c && jt - o >= 0; o++) {
                real gm = x->gam ? x->gam[t * x->sc + o] : 1, cf = et * gm, sv = 0;
                const real *r = s->r + (size_t)(jt - o) * d, *h = s->h + (size_t)(jt - o) * w;
                real *dr = s->dr + (size_t)(jt - o) * d, *dh = s->dh + (size_t)(jt - o) * w;
                FOR(p, d) {
                    real rs = 0;
                    for (int e = 0; e < w; e++) rs += dW[(size_t)p * w + e] * h[e];
                    dr[p] -= cf * rs;
                    sv += r[p] * rs;
                }
                FOR(e, w) {
                    real acc = 0;
                    for (int p = 0; p < d; p++) acc += dW[(size_t)p * w + e] * r[p];
                    dh[e] -= cf * acc;
                }
                sv = block_sum(sv);
                if (threadIdx.x == 0) {
                    gx->eta[t * gx->sg] -= gm * sv;
                    if (x->gam) gx->gam[t * gx->sc + o] -= et * sv;
                }
            }
            __syncthreads();
            FOR(e, nP) dW[e] *= at;
            __syncthreads();
        } else
            block_copy(dzq, dyt, d);
        // the query read (recomputed for its softmax)
        phi_read_gpu(m, s, x, x->q + t * x->sx, ne, jt + 1, etok, av, lo, s->lam + (size_t)i * R, zq);
        phi_read_backward_gpu(m, s, x, gx, x->q + t * x->sx, gx->q + t * gx->sx, ne, jt + 1, etok, av, zq, dzq, s->dav,
                              s->dlo, s->dlam + (size_t)i * R);
    }
    // lambda = log sum_n exp(term_n): dterm_n = softmax weight * dlambda. A thread per own row nn, over the pairs
    // (i, j) whose span holds it: i >= nn - nh (jt >= nn), nn - c < j <= nn
    FOR(i0, n) {
        int nn = nh + i0;
        size_t t = (size_t)(t0 + i0);
        real dla = 0, de = 0;
        for (int i = i0; i < n; i++)
            for (int j = nn - c + 1 > 0 ? nn - c + 1 : 0; j <= nn; j++) {
                real dl = s->dlam[(size_t)i * R + j];
                if (dl == 0) continue;
                real pd = expf(phi_term_gpu(s, x, t0, nh, nn, j) - s->lam[(size_t)i * R + j]) * dl;
                dla -= pd;
                de += pd / x->eta[t * x->sg];
                if (x->gam) gx->gam[t * gx->sc + nn - j] += pd / x->gam[t * x->sc + nn - j];
            }
        s->dLA[i0] += dla;
        gx->eta[t * gx->sg] += de;
    }
    __syncthreads();
    // the entry rows: back through the inner gradient, then the key pass
    for (int j = R - 1; j >= 0; j--) {
        size_t tj = (size_t)(t0 - nh + j);
        const real* davj = s->dav + (size_t)(ne + j) * w;
        real *z = s->z + (size_t)j * w, *dz = s->dz + (size_t)j * w, *dr = s->dr + (size_t)j * d;
        real* dv = gx->v + tj * gx->sx;
        if (!deep) {  // a_j = -r_j; l2: r_j = z_j - v_j; dot: r_j = -v_j
            FOR(i, d) {
                real g = dr[i] - davj[i];
                dv[i] -= g;
                if (m->bias != BIAS_DOT) dz[i] += g;
            }
            __syncthreads();
        } else {
            const real *tz = s->tz + (size_t)j * w, *g = s->g + (size_t)j * w, *r = s->r + (size_t)j * d,
                       *h = s->h + (size_t)j * w;
            real *dh = s->dh + (size_t)j * w, *dg = s->dhq;  // (dhq: scratch of w)
            if (m->phistar == 2) {  // the bound a^ = a rho: da = rho (da^ - a^ mean(da^ a^))
                const real* an = av + (size_t)(ne + j) * w;
                real m2 = block_dot(davj, an, w);
                FOR(e, w) s->da[e] = s->ra[j] * (davj[e] - an[e] * m2 / w);
                __syncthreads();
                davj = s->da;
            }
            FOR(e, w) {  // a_j = -g_j * GELU'(z_j)
                dg[e] = -davj[e] * gelu_d1_gpu(z[e], tz[e]);
                dz[e] -= davj[e] * g[e] * gelu_d2_gpu(z[e], tz[e]);
            }
            __syncthreads();
            FOR(e, nP) dW[e] += r[e / w] * dg[e % w];  // g_j = W1_s^T r_j
            FOR(p, d) {
                real acc = 0;
                for (int e = 0; e < w; e++) acc += W1s[(size_t)p * w + e] * dg[e];
                dr[p] += acc;
            }
            __syncthreads();
            FOR(p, d) dv[p] -= dr[p];  // r_j = bias(M(k_j), v_j), M(k_j) = W1_s h_j
            if (m->bias != BIAS_DOT) {
                FOR(e, nP) dW[e] += dr[e / w] * h[e % w];
                FOR(e, w) {
                    real acc = 0;
                    for (int p = 0; p < d; p++) acc += W1s[(size_t)p * w + e] * dr[p];
                    dh[e] += acc;
                }
            }
            __syncthreads();
            FOR(e, w) dz[e] += dh[e] * gelu_d1_gpu(z[e], tz[e]);
            __syncthreads();
        }
        const real* kj = x->k + tj * x->sx;
        phi_read_gpu(m, s, x, kj, ne, 0, etok, av, lo, NULL, z);
        phi_read_backward_gpu(m, s, x, gx, kj, gx->k + tj * gx->sx, ne, 0, etok, av, z, dz, s->dav, s->dlo, NULL);
    }
    if (threadIdx.x == 0) {  // LA_t = LA_{t-1} + log a_t
        real g = 0;
        for (int i = n - 1; i >= 0; i--) {
            size_t t = (size_t)(t0 + i);
            g += s->dLA[i];
            gx->a[t * gx->sg] += g / x->a[t * x->sg];
        }
        gLAs = g;
    }
    __syncthreads();
    return gLAs;
}

// one head's token rows of the layer's inputs (grad 0) or of their gradients (grad 1): phi_seq
__device__ PhiSeq phi_seq_gpu(const MemArgs* A, int bb, int h, int grad) {
    int c = A->m.omega, d = A->m.d;
    size_t r = (size_t)bb * A->T, oD = r * A->D + (size_t)h * d, oH = r * A->H + h;
    PhiSeq x = {(real*)(grad ? A->dq : A->q) + oD,
                (real*)(grad ? A->dk : A->k) + oD,
                (real*)(grad ? A->dv : A->v) + oD,
                (real*)(grad ? A->dga : A->ga) + oH,
                (real*)(grad ? A->dgeta : A->geta) + oH,
                c > 1 ? (real*)(grad ? A->dggam : A->ggam) + oH * c : NULL,
                (size_t)A->D,
                (size_t)A->H,
                (size_t)A->H * c};
    return x;
}
// phi_entries on the device: the entries of the chunks before token T
__device__ int phi_entries_gpu(int T, int b, int c) {
    int n = T;
    for (int t0 = b; t0 < T; t0 += b) n += t0 < c - 1 ? t0 : c - 1;
    return n;
}
// thread 0's setup of a phi* kernel: the block's PhiScr (scr[blockIdx.x]) and the config in shared memory
__device__ void phi_block_setup(PhiScr* s, MemCfg* m, const PhiScr* scr, const MemCfg* mc) {
    if (threadIdx.x == 0) {
        *s = scr[blockIdx.x];
        *m = *mc;
        mem_tc = 0;
    }
    __syncthreads();
}
// The phi* memory of a layer (phi_memory_forward, phi_chunks_forward): each (sequence, head) its chunks [ch0, ch1) in
// order (MAC: a segment's; the plain layer: all), each chunk-start W1 in A.P, the entries in A.phav, A.phlo, A.phetok
// and the chunk-start LA in A.phLA; chunk 0 starts from W1_0 and LA = 0
__global__ void __launch_bounds__(MEM_THREADS)
    phi_memory_forward_kernel(const __grid_constant__ MemArgs A, int ch0, int ch1) {
    __shared__ PhiScr s;
    __shared__ MemCfg m;
    phi_block_setup(&s, &m, A.phs, &A.m);
    int bb = blockIdx.x / A.H, h = blockIdx.x % A.H, T = A.T, b = A.b, c = m.omega, nch = A.nch;
    int ne = phi_entries_gpu(ch0 * b, b, c);  // (the entries before chunk ch0)
    size_t nP = m.nP, NE = A.phne, hx = blockIdx.x;
    PhiSeq x = phi_seq_gpu(&A, bb, h, 0);
    real *P = A.P + hx * nch * nP, *av = A.phav + hx * NE * m.dm, *lo = A.phlo + hx * NE, *LAs = A.phLA + hx * nch;
    int* etok = A.phetok + hx * NE;
    if (ch0 == 0) {
        block_copy(P, A.p0 + (size_t)h * nP, nP);  // W1_0
        if (threadIdx.x == 0) LAs[0] = 0;
        __syncthreads();
    }
    for (int ch = ch0; ch < ch1; ch++) {
        int t0 = ch * b, n = T - t0 < b ? T - t0 : b, nh = t0 < c - 1 ? t0 : c - 1, last = ch == nch - 1;
        real LA = phi_chunk_forward_gpu(&m, &s, &x, t0, n, nh, ne, etok, av, lo, P + (size_t)ch * nP, LAs[ch],
                                        A.y + ((size_t)bb * T + t0) * A.D + (size_t)h * m.d, A.D,
                                        last ? NULL : P + (size_t)(ch + 1) * nP);
        if (!last && threadIdx.x == 0) LAs[ch + 1] = LA;
        __syncthreads();
        ne += nh + n;
    }
}
// and its backward (phi_memory_backward, phi_chunks_backward): chunks ch1-1 down to ch0, each recomputed from its
// start, with the block's PhiScr accumulators (dav, dlo, dW) carried from launch to launch: they start at 0 at the
// sequence's end (ch1 = nch), and dL/dLA comes from and goes to gLAc[block] (MAC: tx g.phd; NULL: one launch for all
// chunks). dbh (the plain layer: A.dbh; MAC: NULL, its h reads add more): dL/dW1_0 of the sequence, once ch0 = 0
__global__ void __launch_bounds__(MEM_THREADS)
    phi_memory_backward_kernel(const __grid_constant__ MemArgs A, int ch0, int ch1, real* gLAc, real* dbh) {
    __shared__ PhiScr s;
    __shared__ MemCfg m;
    phi_block_setup(&s, &m, A.phs, &A.m);
    int bb = blockIdx.x / A.H, h = blockIdx.x % A.H, T = A.T, b = A.b, c = m.omega, nch = A.nch, d = m.d;
    int ne = phi_entries_gpu(ch1 * b < T ? ch1 * b : T, b, c);  // (the entries before chunk ch1)
    size_t nP = m.nP, NE = A.phne, hx = blockIdx.x;
    PhiSeq x = phi_seq_gpu(&A, bb, h, 0), gx = phi_seq_gpu(&A, bb, h, 1);
    real *P = A.P + hx * nch * nP, *av = A.phav + hx * NE * m.dm, *lo = A.phlo + hx * NE, *LAs = A.phLA + hx * nch;
    int* etok = A.phetok + hx * NE;
    if (ch1 == nch) {
        block_zero(s.dav, NE * m.dm);
        block_zero(s.dlo, NE);
        block_zero(s.dW, nP);
    }
    real gLA = ch1 == nch || !gLAc ? 0 : gLAc[hx];
    for (int ch = ch1 - 1; ch >= ch0; ch--) {
        int t0 = ch * b, n = T - t0 < b ? T - t0 : b, nh = t0 < c - 1 ? t0 : c - 1;
        ne -= nh + n;
        phi_chunk_forward_gpu(&m, &s, &x, t0, n, nh, ne, etok, av, lo, P + (size_t)ch * nP, LAs[ch], s.y, d, NULL);
        gLA = phi_chunk_backward_gpu(&m, &s, &x, &gx, t0, n, nh, ne, etok, av, lo, P + (size_t)ch * nP,
                                     A.dy + ((size_t)bb * T + t0) * A.D + (size_t)h * d, A.D, gLA);
    }
    if (gLAc && threadIdx.x == 0) gLAc[hx] = gLA;
    if (dbh && ch0 == 0) block_copy(dbh + hx * (nP + 2 * d), s.dW, nP);
}

// ---- MAC with the phi* memory (train_miras.c mac_phi_*): h is a read without update at the segment start (the
// entries committed before it, W1 at its start: phi_h_read); the chunks run a segment's at a time; the backward's
// accumulators (the block's PhiScr dav, dlo and dW, one block per (sequence, head) in every launch) and dL/dLA (tx g.phd,
// a float per (sequence, head)) are carried from launch to launch across the segments.
// phi_h_read: out = W1s GELU(W2 phi*(xq)) over the entries e < ne (linear: W phi*(xq)); zq, tq, hq in s's first row
MEMFN void phi_h_read_gpu(const MemCfg* m, PhiScr* s, const PhiSeq* x, const real* xq, int ne, const int* etok,
                          const real* av, const real* lo, const real* W1s, real* out) {
    int w = m->dm, d = m->d;
    phi_read_gpu(m, s, x, xq, ne, 0, etok, av, lo, NULL, s->zq);
    if (m->depth != 2) {
        block_copy(out, s->zq, d);
        return;
    }
    FOR(e, w) {
        s->tq[e] = gelu_tanh_gpu(s->zq[e]);
        s->hq[e] = gelu_gpu(s->zq[e], s->tq[e]);
    }
    __syncthreads();
    mm_nt_gpu(out, s->hq, W1s, 1, d, w, 1, 0);
}
// its backward (phi_h_read_backward): dxq accumulated, dW1 += dout hq^T, the entries' dav, dlo and keys (gx->k)
MEMFN void phi_h_read_backward_gpu(const MemCfg* m, PhiScr* s, const PhiSeq* x, const PhiSeq* gx, const real* xq,
                                   real* dxq, int ne, const int* etok, const real* av, const real* lo, const real* W1s,
                                   const real* dout, real* dW1, real* tmp) {
    int w = m->dm, d = m->d;
    phi_h_read_gpu(m, s, x, xq, ne, etok, av, lo, W1s, tmp);  // (recomputed: zq, hq and the softmax p in s)
    if (m->depth == 2) {
        FOR(e, (size_t)d * w) dW1[e] += dout[e / w] * s->hq[e % w];
        __syncthreads();
        mm_nn_gpu(s->dhq, dout, W1s, 1, w, d, 1, 0);  // dhq = W1s^T dout
        FOR(e, w) s->dzq[e] = s->dhq[e] * gelu_d1_gpu(s->zq[e], s->tq[e]);
    } else
        FOR(i, d) s->dzq[i] = dout[i];
    __syncthreads();
    phi_read_backward_gpu(m, s, x, gx, xq, dxq, ne, 0, etok, av, s->zq, s->dzq, s->dav, s->dlo, NULL);
}
// h rows [s0, s1) (mac_phi_h_forward): uq, h (B*T, D) at layer l's rows
__global__ void __launch_bounds__(MEM_THREADS)
    mac_phi_read_kernel(const __grid_constant__ MemArgs A, const real* uq, real* hout, int s0, int s1) {
    __shared__ PhiScr s;
    __shared__ MemCfg m;
    phi_block_setup(&s, &m, A.phs, &A.m);
    int bb = blockIdx.x / A.H, h = blockIdx.x % A.H, ne = phi_entries_gpu(s0, A.b, m.omega);
    size_t NE = A.phne, hx = blockIdx.x;
    PhiSeq x = phi_seq_gpu(&A, bb, h, 0);
    const real* W1s = A.P + (hx * A.nch + s0 / A.b) * m.nP;
    for (int t = s0; t < s1; t++) {
        size_t o = ((size_t)bb * A.T + t) * A.D + (size_t)h * m.d;
        phi_h_read_gpu(&m, &s, &x, uq + o, ne, A.phetok + hx * NE, A.phav + hx * NE * m.dm, A.phlo + hx * NE, W1s,
                       hout + o);
    }
}
// the h reads' backward of rows [s0, s1) (mac_phi_h_backward): duq written (accumulated into zeros), dL/dW1_(s) and the
// entries' gradients into the block's accumulators; at the first segment dL/dW1_0 into carry (for mac_carry_add)
__global__ void __launch_bounds__(MEM_THREADS)
    mac_phi_read_backward_kernel(const __grid_constant__ MemArgs A, const real* uq, const real* dh, real* duq, int s0,
                                 int s1, real* carry) {
    __shared__ PhiScr s;
    __shared__ MemCfg m;
    __shared__ real tmp[256];
    phi_block_setup(&s, &m, A.phs, &A.m);
    int bb = blockIdx.x / A.H, h = blockIdx.x % A.H, ne = phi_entries_gpu(s0, A.b, m.omega);
    size_t NE = A.phne, hx = blockIdx.x, nP = m.nP;
    PhiSeq x = phi_seq_gpu(&A, bb, h, 0), gx = phi_seq_gpu(&A, bb, h, 1);
    const real* W1s = A.P + (hx * A.nch + s0 / A.b) * nP;
    for (int t = s0; t < s1; t++) {
        size_t o = ((size_t)bb * A.T + t) * A.D + (size_t)h * m.d;
        phi_h_read_backward_gpu(&m, &s, &x, &gx, uq + o, duq + o, ne, A.phetok + hx * NE, A.phav + hx * NE * m.dm,
                                A.phlo + hx * NE, W1s, dh + o, s.dW, tmp);
    }
    if (s0 == 0) block_copy(carry + hx * nP, s.dW, nP);
}

static int mem_token6_cfg(const MemCfg* m, int b) {
    return !m->lattice && !m->phistar && m->depth == 1 && m->d == TOK_D && !m->momentum && m->retention == RET_NONE &&
           !m->anchor && m->omega == 1 && (m->bias == BIAS_DOT || (m->bias == BIAS_L2 && b == 1));
}
// (the trainer, whose launches take v6 for these: ns slots, an eighth of the per-token states at b = 1; the lab,
// which also runs the older versions: all, the larger of ns and the chunk count). The generic kernels' chunk-start
// states: one in ck (MemArgs.ck).
static int mem_state_slots(const MemCfg* m, int b, int T, int all = 0, int ck = 1) {
    if (m->lattice) return (T + m->lat_k - 1) / m->lat_k;  // Lattice: every lat_k-th token's state
    int nch = (T + b - 1) / b, ns = (T + TOK_SEG - 1) / TOK_SEG;
    if (!mem_token6_cfg(m, b)) return (nch + ck - 1) / ck;
    return all && nch > ns ? nch : ns;
}
// Chunks per stored chunk-start state in the generic memory kernels (MemArgs.ck): 1 (all stored, nothing
// recomputed) while the states fit in the device memory still free after the activations, less a reserve for what
// is allocated after them (2 GB and a tenth of the card: the chunk scratch, the bf16 rounding scratches, MAL/MAG's
// stream model), else the smallest power of two that makes them fit, at a cost of at most one more memory forward
// in the backward (it recomputes ck - 1 chunks per segment of ck). MIRAS_MEM_CKPT=k forces k. The results do not
// depend on it: the recomputed states are the forward's bit for bit (the same step on the same inputs; make test_gpu
// checks it).
static int mem_ckpt_choose(const MemCfg* m, const Config* c, int B, int T) {
    if (m->lattice || m->phistar || mem_token6_cfg(m, c->b) || c->arch == ARCH_MAC) return 1;  // their own layouts
    int nch = (T + c->b - 1) / c->b, ck = 1;
    if (getenv("MIRAS_MEM_CKPT")) {
        ck = env_int("MIRAS_MEM_CKPT", 1, 1, INT_MAX, "MIRAS_MEM_CKPT=k keeps every k-th chunk-start state, k >= 1");
        return ck < nch ? ck : nch;
    }
    size_t fr = 0, total = 0;
    cudaCheck(cudaMemGetInfo(&fr, &total));
    // bytes of the states (all layers) and of the blocks' segment buffers (one layer at a time) at ck
    double st = (double)m->nP * sizeof(real) * (1 + mem_carries_S(m)), bh = (double)B * c->H;
    double room = (double)fr - 2e9 - 0.1 * (double)total;
    if (g_mem_par) {  // (memory_reads_kernel's per-chunk dL/dP_s and forward values, one layer at a time)
        room -= st * bh * nch;
        if (mem_fw_ok(m)) room -= (double)mem_fw_floats(m, c->b) * sizeof(real) * bh * nch;
    }
    while (ck < nch && st * bh * ((double)c->L * ((nch + ck - 1) / ck) + (ck - 1)) > room) ck *= 2;
    return ck < nch ? ck : nch;
}
// the reads apart (MIRAS_MEM_PAR=1, MemArgs.pG, pdP) take the generic kernels' memories with every chunk-start state
// kept (ck = 1), no omega window (whose halo rows' gradients cross chunks) and no token-level Muon (whose reads are
// inside its per-token recurrence: nothing to take out); memory_reads_kernel runs
// (sequence, head) units of pG chunk ranges over a persistent grid (*blocks: the SMs, or fewer units), pG the
// count that balances the waves best
static int mem_par_cfg(const MemCfg* m, const Config* c, int ck, int B, int T, int* G, int* blocks) {
    if (!g_mem_par || ck != 1 || c->arch == ARCH_MAC || m->lattice || m->phistar || m->omega > 1 || m->muon == 1 ||
        mem_token6_cfg(m, c->b))
        return 0;
    int nsm = 0, nch = (T + c->b - 1) / c->b, nbh = B * c->H;
    cudaCheck(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, g_device));
    nsm *= g_mem_par_ctas;  // (the blocks that run at once)
    long long best = -1;
    for (int g = 1; g <= nch && g <= 64; g++) {
        long long u = (long long)nbh * g, waves = (u + nsm - 1) / nsm, t = waves * ((nch + g - 1) / g);
        if (best < 0 || t < best) {
            best = t;
            *G = g;
        }
    }
    long long u = (long long)nbh * *G;
    *blocks = (int)(u < nsm ? u : nsm);
    return 1;
}
static int mem_token6_ok(const MemArgs& A) {
    return mem_token6_cfg(&A.m, A.b) && A.H * TOK_D == A.D && A.aux && A.gpart;
}
// the b = 1 kernels run these configurations; the others take the generic kernels
static int mem_token_ok(const MemArgs& A) {
    const MemCfg& m = A.m;
    return !m.lattice && !m.phistar && A.b == 1 && m.depth == 1 && m.d == TOK_D && !m.momentum &&
           m.retention == RET_NONE && m.bias == BIAS_L2 && !m.anchor && m.omega == 1 && A.H * TOK_D == A.D;
}
// The plan of the chunk scratch in shared memory for a kernel (fwd: the forward; else the backward), at most
// `bytes`: the arrays in the order below while they fit; the gradient arrays as one block (they are zeroed and
// saved as one range, grad0..grad0+ngrad).
static_assert(offsetof(MemChunk, nh) % sizeof(real*) == 0 && offsetof(MemChunk, wc) < offsetof(MemChunk, nh) + 8,
              "mem_smem_plan: nh and wc share one pointer slot");
// (noread: the plan of a chain with the reads apart (MemChunkGpu.noread): without the arrays only the reads use.
// state: 1 with Ps, the copy of the chunk-start state, last, where it still fits; 2 with it ahead of the rows' (n, dm)
// arrays, the group from zk on)
static MemSmem mem_smem_plan(const MemCfg* m, int b, int fwd, size_t bytes, int noread = 0, int state = 0) {
    MemChunkGpu c;
    memset(&c, 0, sizeof c);  // (the slots the carve does not set, e.g. muon's, are NULL)
    real* base = (real*)(uintptr_t)4096;  // a stand-in base address: only offsets matter
    size_t total = memchunk_carve_model_gpu(&c, base, m, b);
    real** slot = (real**)&c;
    int ns = (int)(sizeof(MemChunkGpu) / sizeof(real*)), ig = (int)((real**)&c.ngrad - slot);
    // the slots that hold no array pointer: the sizes ngrad, nsv, the ints nh, wc (one slot) and R, xt, xn, noread (two)
    int in = (int)((real**)&c.nsv - slot), ih = (int)((real**)&c.nh - slot), ir = (int)((real**)&c.R - slot);
    if ((char*)&c.R != (char*)(slot + ns - 2))
        DIE("train_miras.cu: R, xt, xn, noread must fill MemChunkGpu's last two pointer slots", "mem_smem_plan");
    auto data = [&](int t) { return t != ig && t != in && t != ih && t != ir && t != ir + 1; };
    auto size_of = [&](real* p) {
        size_t o = p - base, nx = total;
        for (int t = 0; t < ns; t++)
            if (data(t)) {
                size_t ot = slot[t] - base;
                if (ot > o && ot < nx) nx = ot;
            }
        return nx - o;
    };
#define SL(f) (int)(&c.f - slot)
    std::vector<int> order = {SL(q),     SL(k),    SL(v),   SL(a),  SL(eta), SL(theta), SL(alpha), SL(beta),
                              SL(sigma), SL(C),    SL(s),   SL(rk), SL(rq),  SL(xx1),   SL(xx2),   SL(nn1),
                              SL(nn2),   SL(keep), SL(oma), SL(nk), SL(r),   SL(u),     SL(g1),    SL(e),
                              SL(psi),   SL(xw2),  SL(xs2), SL(nq), SL(y)};
    if (m->anchor) order.push_back(SL(xa2));
    if (m->cw) order.push_back(SL(etac));
    if (m->bias == BIAS_HUBER) order.push_back(SL(delta));
    if (!fwd) {
        order.push_back(SL(dy));
        order.push_back(-1);
    }  // -1: the gradient block
    for (int f : {SL(zk), SL(hk), SL(g2), SL(gk), SL(tk), SL(zq), SL(hq), SL(tq), SL(xw1), SL(xs1)}) order.push_back(f);
    if (m->anchor) order.push_back(SL(xa1));
    if (!fwd) order.push_back(SL(nm1));
    if (noread) {  // (an array left out stays in the chunk's global scratch: the same results, only slower)
        int rd[] = {SL(rq),  SL(xx1), SL(xx2), SL(xw2), SL(xs2), SL(nq),  SL(y),
                    SL(xa2), SL(zq),  SL(hq),  SL(tq),  SL(xw1), SL(xs1), SL(xa1)};
        std::vector<int> keep;
        for (int f : order)
            if (std::find(std::begin(rd), std::end(rd), f) == std::end(rd)) keep.push_back(f);
        order = keep;
    }
    if (state == 1) order.push_back(SL(Ps));
    if (state == 2) order.insert(std::find(order.begin(), order.end(), SL(zk)), SL(Ps));
    int ips = SL(Ps);
#undef SL
    MemSmem sm;
    memset(&sm, 0, sizeof sm);
    size_t cap = bytes / sizeof(real), used = 0;
    for (int f : order) {
        size_t need = f < 0 ? c.ngrad : size_of(slot[f]), at = (used + 3) & ~(size_t)3;  // 16-byte aligned
        if (at + need > cap) continue;
        if (f >= 0) {  // (with every alias of it: qr, kr are q, k without poly)
            int k0 = sm.n;
            for (int t = 0; t < ns && sm.n < MEM_SMEM_SLOTS; t++)
                if (data(t) && slot[t] == slot[f]) {
                    sm.slot[sm.n] = (short)t;
                    sm.off[sm.n++] = (int)at;
                }
            if (sm.n == MEM_SMEM_SLOTS) {
                sm.n = k0;
                break;
            }
        } else {  // every pointer into the gradient block moves with it
            int k0 = sm.n;
            for (int t = 0; t < ns && sm.n < MEM_SMEM_SLOTS; t++)
                if (data(t) && slot[t] >= c.grad0 && slot[t] < c.grad0 + c.ngrad) {
                    sm.slot[sm.n] = (short)t;
                    sm.off[sm.n++] = (int)(at + (slot[t] - c.grad0));
                }
            if (sm.n == MEM_SMEM_SLOTS) {
                sm.n = k0;
                continue;
            }
        }
        used = at + need;
    }
    sm.floats = (int)used;
    for (int i = 0; i < sm.n; i++) sm.ps |= sm.slot[i] == ips;
    return sm;
}
// The launches (the trainer's and the kernel lab's). Versions: 2 register-tiled products, chunk scratch in
// global memory; 3 as 2 with the chunk scratch in shared memory as far as it fits; 4 as 3, and the b = 1 linear
// memories token by token (mem_token_*_kernel); 5 is retired (folded into 6; run as 4); 6 (and 0, the default)
// with the v6 token kernels (MemArgs.aux and .gpart; without them, 4's); 7 as 6 with the chunk products on the
// tensor cores in TF32, 8 in 3xTF32 (mem_tc); 9-12 the WY chunk kernels (below); 13 and 14 as 7 and 8 with 16 x 16
// warp tiles and 8-byte output accesses in the products (mem_tc 5, 7: TC_DISPATCH); 15 and 16 as 13 and 14 with k
// in quads, 16-byte fragment loads, where an operand's k is contiguous (mem_tc 13, 15); 17 and 18 as 15 and 16 with K
// split over two warps in the narrow products (mem_tc 29, 31); 19 and 20 as 17 and 18 with the deep memory split
// over a cluster of 4 CTAs per (sequence, head) (MemArgs.R; memlab sets it, and carves the chunks for it). Version 0
// takes MemArgs.tc and .R as the trainer sets them (mem_args).
static const int MEM_VERSIONS __attribute__((unused)) = 20;  // (read by dev/cuda/memlab.cu)
static int mem_tc_of(const MemArgs& A) {  // (version 0: A.tc)
    return A.ver == 0 ? A.tc : A.ver > 0 && A.ver <= MEM_VERSIONS ? MEM_VER_TC[A.ver] : 0;
}
static_assert(sizeof MEM_VER_TC / sizeof *MEM_VER_TC == MEM_VERSIONS + 1, "MEM_VER_TC: one entry per version");
// The cluster split (MemArgs.R = R > 1): the deep memories whose chunk functions only contract over dm in the
// products that cl_reduce completes, or in the retentions' sums that cl_sumd (Moneta's 4-norms) and cl_max with cl_reduce (Memora's
// softmax over W1's rows) complete: no Muon (NS5 of whole matrices), no poly (its din would outgrow the exchange
// buffer), not the phi*, Lattice or b = 1 kernels; dm / R a multiple of 8 (whole 16-byte rows of the slices)
static int mem_split_ok(const MemCfg* m, int R) {
    return R > 1 && R <= 8 && m->depth == 2 && !m->muon && !m->poly && !m->phistar && !m->lattice &&
           m->dm % (8 * R) == 0;
}
static MemCfg mem_split_cfg(const MemCfg* m, int R) {  // the MemCfg a CTA of the split runs (R = 1: m itself)
    MemCfg s = *m;
    s.dm /= R;
    s.nP /= R;
    return s;
}
// floats in each half of the exchange buffer: the largest set of partials of one cl_reduce (mem_read_forward_gpu's
// three (n, d) products and x xk^T; n up to mem_rows). chain: a chain with the reads apart (MemChunkGpu.noread),
// which reduces no reads: its largest is mem_update_backward2_gpu's pair, W1's (the dots, two gx (n, d)) or W2's /
// W3's (the dots, two dcv (n) and dxk (n, din)); then mem_grad_forward's / _backward's (n, d), (n, din), Memora's
// d row values and cl_sumd's double (at titans' shape 2,092 floats against 3,336: 10 KB of shared memory per CTA
// more for the chain's plan)
static int mem_split_xn(const MemCfg* m, int b, int chain = 0) {
    size_t n = mem_rows(m, b);
    if (!chain) return (int)(3 * carve_al(n * m->d) + carve_al(n * n) + 8);
    size_t x = 4 + 2 * carve_al(n * m->d), w = 4 + 2 * (carve_al(n) + carve_al(n * m->din));
    for (size_t y : {w, carve_al(n * m->d), carve_al(n * m->din), carve_al(m->d), (size_t)4}) x = y > x ? y : x;
    return (int)(x + 8);
}
// The static shared memory the plans leave each generic memory kernel beside its dynamic part (the MemChunkGpu, the
// MemCfg and the chunk functions' __shared__ arrays; ptxas -v on sm_90: at most 2,128 bytes, decoder_recurrent_kernel's).
// (Until 2026-12-03 the plans left 3 KB, a guess nothing checked.) mem_static_check holds each kernel to it at its first
// launch: one that outgrows it stops with a hint instead of failing the launch.
#define MEM_STATIC_SMEM 2304
static void mem_static_check(const void* k, const char* name) {
    static const void* seen[16];
    static int ns = 0;
    for (int i = 0; i < ns; i++)
        if (seen[i] == k) return;
    cudaFuncAttributes fa;
    cudaCheck(cudaFuncGetAttributes(&fa, k));
    if (fa.sharedSizeBytes > MEM_STATIC_SMEM)
        DIE("raise MEM_STATIC_SMEM in train_miras.cu to at least this size",
            "%s has %zu bytes of static shared memory, the plans leave it %d", name, fa.sharedSizeBytes,
            MEM_STATIC_SMEM);
    if (ns < 16) seen[ns++] = k;
}
// The split's CTAs: each (sequence, head) runs through all its chunks in one go, so the grid must fit the GPU in one
// wave. With nbh R CTAs on nsm SMs that takes c = ceil(nbh R / nsm) CTAs per SM (1, 2 or 4), each of MEM_THREADS / c
// threads (at most 128 registers each: a CTA of 512 fills an SM's registers) and 1/c of the SM's shared memory
// (*bytes: the dynamic part). MIRAS_MEM_THREADS=N overrides the threads (for the emulator's checks of 128 and 256).
// The dynamic shared memory of each of c CTAs on one SM: its share, less the 1 KB reserved per CTA and its static
// shared memory (MEM_STATIC_SMEM)
static size_t mem_smem_per_cta(int c) {
    static int smem = 0;  // shared memory per SM (H100, H200: 228 KB)
    if (!smem) cudaCheck(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, g_device));
    size_t per = (size_t)smem / c, less = 1024 + MEM_STATIC_SMEM;
    return per > less ? per - less : 0;
}
static int mem_split_shape(int nbh, int R, size_t* bytes) {
    static int nsm = 0;  // SMs
    if (!nsm) cudaCheck(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, g_device));
    int c = 1;
    while (c < 4 && (size_t)nbh * R > (size_t)c * nsm) c *= 2;
    int nt = MEM_THREADS / c;
    if (getenv("MIRAS_MEM_THREADS")) {
        const char* hint =
            "MIRAS_MEM_THREADS=N threads per CTA of the split memory kernels, a multiple of 32 in 64..512";
        nt = env_int("MIRAS_MEM_THREADS", nt, 64, MEM_THREADS, hint);
        if (nt % 32) DIE(hint, "unknown MIRAS_MEM_THREADS=%d", nt);
        c = MEM_THREADS / nt;
    }
    size_t per = mem_smem_per_cta(c);
    if (per < *bytes) *bytes = per;
    return nt;
}
// the trainer's and the decoder's split of this model's memory: g_mem_split where it applies (MAC has its own kernels)
static int mem_split_of(const MemCfg* m, const Config* c) {
    return g_mem_split > 1 && c->arch != ARCH_MAC && mem_split_ok(m, g_mem_split) ? g_mem_split : 1;
}
// one launch of a generic memory kernel (or the decoder's) with nt threads per block: split (R > 1), as clusters of R
template <class Args>
static void mem_kernel_launch(void (*k)(Args), const char* name, const Args& A, int R, int nbh, size_t smem, int nt) {
    mem_static_check((const void*)k, name);
    if (R <= 1) {
        k<<<nbh, nt, smem, g_stream>>>(A);
        return;
    }
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = R;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(nbh * R);
    cfg.blockDim = dim3(nt);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = g_stream;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    // the clusters that fit at once, asked once per shape: none is an error; fewer than the grid's, two waves (every
    // (sequence, head) then waits for a whole one before it starts: slower, not wrong), said once
    static void* last_k = NULL;
    static size_t last_smem = 0;
    static int last_nt = 0, last_R = 0, fit = 0, said = 0;
    if ((void*)k != last_k || smem != last_smem || nt != last_nt || R != last_R) {
        cudaCheck(cudaOccupancyMaxActiveClusters(&fit, k, &cfg));
        last_k = (void*)k;
        last_smem = smem;
        last_nt = nt;
        last_R = R;
    }
    if (fit < 1)
        DIE("fewer CTAs per cluster, MIRAS_MEM_SPLIT=2 or 1; or fewer threads per CTA, MIRAS_MEM_THREADS=128",
            "the memory's clusters of %d CTAs (%d threads, %zu bytes of shared memory each) do not fit on this GPU", R,
            nt, smem);
    if (fit < nbh && !said++ && g_rank == 0)
        printf("memory: %d clusters of %d CTAs fit at once, the grid has %d: more than one wave\n", fit, R, nbh);
    cudaCheck(cudaLaunchKernelEx(&cfg, k, A));
}
static size_t mem_smem_bytes(void) {  // a block's dynamic shared memory at most, beside MEM_STATIC_SMEM
    static int optin = -1;
    if (optin < 0) {
        cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
        optin -= MEM_STATIC_SMEM;
    }
    return optin > 0 ? (size_t)optin : 0;
}
// 9-12: the b = 1 delta rule (l2 bias, scalar eta: mem_wy_cfg) in WY chunks: 9 the single kernel per direction
// (mem_wy_*_kernel), 10 and 11 the split (wy_*_kernel), 12 the split with T = (I + L)^{-1} made by the prep kernel
// (products in place of the serial kernels' substitutions); the chunk products in 3xTF32 (9, 10) or TF32 (11, 12). The
// trainer takes the split (MIRAS_MEM_WY=1), the single kernels (=2) or the split with T (=3) at its -f's precision,
// until they are timed on a GPU against v6. Under 9-12 the other configurations run as 6.
static int mem_wy_cfg(const MemCfg* m, int b, int H, int D, int T) {
    int nw = (T + WY_C - 1) / WY_C, nseg = (T + TOK_SEG - 1) / TOK_SEG;  // (the split's 3 nw state slots)
    return mem_token6_cfg(m, b) && m->bias == BIAS_L2 && !m->cw && m->d == WY_C && H * m->d == D && 3 * nw <= nseg &&
           wy_smem_floats(m->d, 0) * sizeof(real) <= mem_smem_bytes() &&
           wy_split_smem_floats(m->d, 4) * sizeof(real) <= mem_smem_bytes();
}
static int mem_wy_ok(const MemArgs& A) { return A.aux && A.gpart && mem_wy_cfg(&A.m, A.b, A.H, A.D, A.T); }
static int mem_wy_use(MemArgs* A) {  // 0: not these kernels, 1: the split, 2: the single ones, 3: the split with T
    int v = A->ver == 9 ? 2 : A->ver == 12 ? 3 : A->ver == 10 || A->ver == 11 ? 1 : A->ver == 0 ? g_mem_wy : 0;
    if (!v || !mem_wy_ok(*A)) return 0;
    A->tc = A->ver == 9 || A->ver == 10 ? 3 : A->ver == 11 || A->ver == 12 ? 1 : A->tc;
    return v;
}
template <class K>
static size_t wy_smem(K kern, size_t floats) {  // a WY kernel's dynamic shared memory: allowed, and its bytes
    size_t sb = floats * sizeof(real);
    cudaCheck(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sb));
    return sb;
}
// the WY kernels of one direction (bwd) in mem_wy_use's variant wy: the single kernel (2) or the split's three (1, 3)
static void mem_wy_launch(const MemArgs& A, int nbh, int wy, int bwd) {
    int nw = nbh * ((A.T + WY_C - 1) / WY_C), d = A.m.d, inv = wy == 3;
    size_t sb;
    if (wy == 2) {
        if (bwd) {
            sb = wy_smem(mem_wy_backward_kernel, wy_smem_floats(d, 0));
            mem_wy_backward_kernel<<<nbh, MEM_THREADS, sb, g_stream>>>(A);
        } else {
            sb = wy_smem(mem_wy_forward_kernel, wy_smem_floats(d, 1));
            mem_wy_forward_kernel<<<nbh, MEM_THREADS, sb, g_stream>>>(A);
        }
        KCHECK("mem_wy");
        return;
    }
    sb = wy_smem(wy_prep_kernel, wy_split_smem_floats(d, 0));
    wy_prep_kernel<<<nw, MEM_THREADS, sb, g_stream>>>(A, bwd, inv);
    KCHECK("wy_prep");
    if (bwd) {
        sb = wy_smem(wy_bwd_serial_kernel, wy_split_smem_floats(d, 3));
        wy_bwd_serial_kernel<<<nbh, MEM_THREADS, sb, g_stream>>>(A, inv);
        KCHECK("wy_bwd_serial");
        sb = wy_smem(wy_bwd_grads_kernel, wy_split_smem_floats(d, 4));
        wy_bwd_grads_kernel<<<nw, MEM_THREADS, sb, g_stream>>>(A);
        KCHECK("wy_bwd_grads");
    } else {
        sb = wy_smem(wy_fwd_serial_kernel, wy_split_smem_floats(d, 1));
        wy_fwd_serial_kernel<<<nbh, MEM_THREADS, sb, g_stream>>>(A, inv);
        KCHECK("wy_fwd_serial");
        sb = wy_smem(wy_fwd_out_kernel, wy_split_smem_floats(d, 2));
        wy_fwd_out_kernel<<<nw, MEM_THREADS, sb, g_stream>>>(A);
        KCHECK("wy_fwd_out");
    }
}
// The shared-memory plan of a generic memory kernel's chunk scratch (fwd: the forward's arrays; mem_smem_plan) over
// nbh (sequence, head)s, split over R CTAs each (R = 1: none): the slice's arrays in the room that the exchange buffer
// (2 xn floats, 16-byte aligned) leaves; returns the threads per block (mem_split_shape)
// (chain: memory_forward_kernel's or memory_backward_kernel's, which copy the chunk-start state where the plan has
// room for it: g_mem_state)
static int mem_launch_plan(const MemCfg* m, int b, int fwd, int R, int xn, int nbh, MemSmem* sm, int noread = 0,
                           int chain = 0) {
    MemCfg ms = mem_split_cfg(m, R > 1 ? R : 1);
    size_t room = mem_smem_bytes(), xb = R > 1 ? 2 * (size_t)xn * sizeof(real) + 16 : 0;
    int nt = R > 1 ? mem_split_shape(nbh, R, &room) : MEM_THREADS;
    int state = !chain ? 0 : g_mem_state == 3 ? 2 : g_mem_state == 2 || (g_mem_state == 1 && noread) ? 1 : 0;
    *sm = mem_smem_plan(&ms, b, fwd, room > xb ? room - xb : 0, noread, state);
    return nt;
}
static void mem_say_ps(const MemSmem& sm, const char* dir) {  // (once per direction)
    static int said[2];
    int k = dir[0] == 'b';
    if (sm.ps && !said[k]++ && g_rank == 0)
        printf("memory: the %s chain's chunk-start state in shared memory (MIRAS_MEM_STATE=0: not)\n", dir);
}
// memory_reads_kernel of one direction (the reads of every chunk at once: MemArgs.pG), unsplit, on the first-pass
// scratches
static void mem_reads_launch(MemArgs A, int bwd) {
    A.pR = A.R;
    A.R = 1;
    A.chunks = A.pchunks;
    int cps = A.pcps > 1 ? A.pcps : 1, nt = MEM_THREADS / cps;
    size_t room = mem_smem_bytes(), per = mem_smem_per_cta(cps);
    A.sm = mem_smem_plan(&A.m, A.b, !bwd, room < per ? room : per);
    size_t sb = mem_dyn_bytes(A.sm.floats, 1, 0);
    cudaCheck(cudaFuncSetAttribute(memory_reads_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sb));
    mem_static_check((const void*)memory_reads_kernel, "memory_reads_kernel");
    memory_reads_kernel<<<A.pblocks, nt, sb, g_stream>>>(A, bwd);
    KCHECK("memory_reads");
}
static void mem_forward_launch(MemArgs A, int nbh) {
    if (A.m.lattice) {
        lattice_forward_kernel<<<nbh, lat_threads(A.m.d), 0, g_stream>>>(A);
        KCHECK("lattice_forward");
        return;
    }
    if (A.m.phistar) {
        phi_memory_forward_kernel<<<nbh, MEM_THREADS, 0, g_stream>>>(A, 0, A.nch);
        KCHECK("phi_memory_forward");
        return;
    }
    if (int wy = mem_wy_use(&A)) {
        mem_wy_launch(A, nbh, wy, 0);
        return;
    }
    if ((A.ver == 0 || A.ver >= 6) && mem_token6_ok(A)) {
        mem_token_forward_v6_kernel<<<nbh * TOK_R, TOK6_THREADS, 0, g_stream>>>(A);
        KCHECK("mem_token_forward_v6");
        return;
    }
    if ((A.ver == 0 || A.ver >= 4) && mem_token_ok(A)) {
        mem_token_forward_kernel<<<nbh, TOK_THREADS, 0, g_stream>>>(A);
        KCHECK("mem_token_forward");
        return;
    }
    A.tc = mem_tc_of(A);
    if (A.ver > 0 && A.ver < 3) A.pG = 0;  // (the reads apart: with the scratch plan of v3 and later)
    if (A.pG) A.xn = mem_split_xn(&A.m, A.b, 1);  // (the chain's exchange buffer: no reads to reduce)
    int nt = mem_launch_plan(&A.m, A.b, 1, A.R, A.xn, nbh, &A.sm, A.pG > 0, 1);
    if (A.ver > 0 && A.ver < 3) A.sm.n = A.sm.floats = A.sm.ps = 0;  // (v2: the chunk scratch in global memory)
    mem_say_ps(A.sm, "forward");
    size_t sb = mem_dyn_bytes(A.sm.floats, A.R, A.xn);
    cudaCheck(cudaFuncSetAttribute(memory_forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sb));
    mem_kernel_launch(memory_forward_kernel, "memory_forward_kernel", A, A.R, nbh, sb, nt);
    KCHECK("memory_forward");
    if (A.pG) mem_reads_launch(A, 0);  // the reads of every chunk, from the states just made
}
// (returns 1 when it ran with the reads apart: their pparts then go into memory_dbh_reduce_kernel's sums)
static int mem_backward_launch(MemArgs A, int nbh) {
    if (A.m.lattice) {
        lattice_backward_kernel<<<nbh, lat_threads(A.m.d), 0, g_stream>>>(A);
        KCHECK("lattice_backward");
        return 0;
    }
    if (A.m.phistar) {
        phi_memory_backward_kernel<<<nbh, MEM_THREADS, 0, g_stream>>>(A, 0, A.nch, NULL, A.dbh);
        KCHECK("phi_memory_backward");
        return 0;
    }
    if (int wy = mem_wy_use(&A)) {
        mem_wy_launch(A, nbh, wy, 1);
        return 0;
    }
    if ((A.ver == 0 || A.ver >= 6) && mem_token6_ok(A)) {
        cudaCheck(cudaFuncSetAttribute(mem_token_backward_v6_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)TOK6_SMEM_BYTES));
        mem_token_backward_v6_kernel<<<nbh * TOK_R, TOK6_THREADS, TOK6_SMEM_BYTES, g_stream>>>(A);
        KCHECK("mem_token_backward_v6");
        mem_token_reduce_v6_kernel<<<nblocks((size_t)A.B * A.T * A.D), NT, 0, g_stream>>>(A);
        KCHECK("mem_token_reduce_v6");
        return 0;
    }
    if ((A.ver == 0 || A.ver >= 4) && mem_token_ok(A)) {
        mem_token_backward_kernel<<<nbh, TOK_THREADS, 0, g_stream>>>(A);
        KCHECK("mem_token_backward");
        return 0;
    }
    A.tc = mem_tc_of(A);
    if (A.ver > 0 && A.ver < 3) A.pdP = NULL, A.pG = 0;  // (the reads apart: with v3+'s scratch plan)
    if (A.pdP) mem_reads_launch(A, 1);  // its first pass: the reads' part of every chunk
    if (A.pdP) A.xn = mem_split_xn(&A.m, A.b, 1);  // (the chain's exchange buffer: no reads to reduce)
    int nt = mem_launch_plan(&A.m, A.b, 0, A.R, A.xn, nbh, &A.sm, A.pdP != NULL, 1);
    if (A.ver > 0 && A.ver < 3) A.sm.n = A.sm.floats = A.sm.ps = 0;  // (v2: the chunk scratch in global memory)
    mem_say_ps(A.sm, "backward");
    size_t sb = mem_dyn_bytes(A.sm.floats, A.R, A.xn);
    cudaCheck(cudaFuncSetAttribute(memory_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sb));
    mem_kernel_launch(memory_backward_kernel, "memory_backward_kernel", A, A.R, nbh, sb, nt);
    KCHECK("memory_backward");
    return A.pdP != NULL;
}
// sum over the batch in a fixed order (a thread per element of P_0 and the LN affine)
// (parts: memory_reads_kernel's G unit sums per sequence and head, (B, H, G, nP + 2d), added after each sequence's)
__global__ void memory_dbh_reduce_kernel(real* dp0, real* dlng, real* dlnb, const real* dbh, int B, int H, int nP,
                                         int d, int ln, const real* parts, int G) {
    GRID_FOR(e, (size_t)H * (nP + 2 * d)) {
        int h = (int)(e / (nP + 2 * d)), i = (int)(e % (nP + 2 * d));
        real* dst = i < nP ? dp0 + (size_t)h * nP + i
                           : (!ln          ? NULL
                              : i < nP + d ? dlng + (size_t)h * d + (i - nP)
                                           : dlnb + (size_t)h * d + (i - nP - d));
        if (!dst) continue;
        real acc = *dst;
        for (int bb = 0; bb < B; bb++) {
            acc += dbh[((size_t)bb * H + h) * (nP + 2 * d) + i];
            for (int j = 0; j < G; j++) acc += parts[(((size_t)bb * H + h) * G + j) * (nP + 2 * d) + i];
        }
        *dst = acc;
    }
}

// ----------------------------------------------------------------------------
// 4. the GPU model (train_miras.c section 4): the CPU's parameter and activation layouts, in device memory

typedef struct {
    Model* hm;  // the host model: config, parameter sizes, and the parameters for the files
    Config cfg;
    MemCfg mem;
    size_t param_sizes[NUM_PARAM_TENSORS], num_params;
    ParameterTensors params, grads;  // device pointers
    real *params_memory, *grads_memory, *m_memory, *v_memory;  // v_memory: AdamW second moment
    int B, T;  // fixed at the first forward
    size_t act_sizes[NUM_ACT_TENSORS], num_acts;
    ActivationTensors acts, grads_acts;
    real *acts_memory, *grads_acts_memory;
    // bf16 mode (-f 2): the parameters in bf16, params_memory's layout (see g_prec); else NULL
    bf16* params_bf16;
    bf16* acts_bf16;  // bf16 mode: one buffer for the bf16 copies of the GEMMs' activation inputs, else NULL:
    bf16 *ln1b, *zb, *ln2b, *hgb, *lnfb;  // (L, N, D) u, z, ln2; (L, N, F) hg; (N, D) lnf
    // (L, B, H, slots, nP) memory state at every chunk start (every mem_ck-th with mem_ck > 1), or every
    // TOK_SEG-th token for v6 (mem_state_slots; S: momentum only); mem_Pw, mem_Sw: with mem_ck > 1 the blocks'
    // segment buffers, (B, H, mem_ck - 1, nP) each, else NULL
    real *mem_P, *mem_S;
    int mem_ck;
    int mem_R;  // the memory kernels' cluster split (MemArgs.R; g_mem_split where mem_split_ok, else 1)
    real *mem_Pw, *mem_Sw;
    // the reads apart (mem_par_cfg; else NULL): per chunk dL/dP_s (dL/dS_s) through the reads, (B, H, nch, nP)
    // each; the units' anchor and LN sums (B, H, mem_pG, nP + 2d); the first pass's chunk scratches (unsplit)
    real *mem_pdP, *mem_pdS, *mem_pparts, *pchunk_memory;
    real* mem_pfw;  // and (mem_fw_ok) every chunk's forward values for the backward chain, (B, H, nch, mem_pfwn)
    size_t mem_pfwn;
    MemChunkGpu* pchunks;
    int mem_pG, mem_pblocks;
    real* mem_dbh;  // (B, H, nP + 2d) per-sequence gradients of P_0 and the memory LN, summed over B after
    // (L, B, H, T, TOK_AUX) the b = 1 token kernels' forward values for the backward, or NULL
    real* mem_aux;
    // (B, H, T, TOK_R, TOK_GP) the v6 token backward's partial sums (one layer at a time), or NULL
    real* mem_gpart;
    real* lat_scratch;  // Lattice: (B, H, lat_k + 2, nP) the backward's segment states and carry, or NULL
    // the phi* memory (section 3c): (L, B, H, entries) signals (d_m each), offsets and tokens; (L, B, H, nchunks) the
    // chunk-start LA; a PhiScr per (sequence, head) in phi_scr_mem, their pointers in phi_scr (device); else NULL
    real *phi_av, *phi_lo, *phi_LA, *phi_scr_mem;
    int* phi_etok;
    PhiScr* phi_scr;
    MemChunkGpu* chunks;
    real* chunk_memory;  // one chunk scratch per (sequence, head), device
    int *inputs, *targets;  // (B, T) device
    int *h_inputs, *h_targets;  // and their host copies
    int *enc_uniq, *enc_off, *enc_pos, *h_cnt, *h_cur, *h_uniq, *h_off, *h_pos;  // encoder_backward's buckets
    int *argmax, *h_argmax;  // (B, T) argmax predictions (answer accuracy)
    real* h_losses;  // (B, T) host copy of the losses
    real* ce_stats;  // (B, T, 2) the softmax's max and denominator per position (the GPU keeps no probs)
    real mean_loss;  // -1 when the last forward had no targets
    // (B, T) host: 1 where a position's loss counts (answers of a synthetic task); NULL: all
    const uint8_t* loss_mask;
    // the forward's copy of it, device and host (used by the backward); has_mask: whether one was given
    uint8_t *mask, *h_mask;
    int has_mask;
    long adam_t;  // AdamW step count (bias correction)
    size_t opt_lo, opt_n;  // the parameters whose AdamW moments this rank keeps (all, or its share with -K 1)
    struct TitansGpu* tx;  // Titans layers (section 4b): the stream model and the TxActs, or NULL
    int tx_sub;  // 1 in the stream model itself
} ModelGpu;
// Titans layers (MAL, MAG; section 4b): the stream model X at (B, N_p + T) and the layer activations (tx_point's
// layout) with their gradients, in device memory
typedef struct TitansGpu {
    ModelGpu X;
    int Tn;
    real *mem, *gmem;
    size_t n;
    TxActs a, g;
} TitansGpu;

static int nchunks_gpu(const ModelGpu* M, int T) { return (T + M->cfg.b - 1) / M->cfg.b; }

// The GPU model of a built host model: parameters (and AdamW moments, if the host has them) copied over.
static void model_build_gpu(ModelGpu* M, Model* host) {
    memset(M, 0, sizeof *M);
    M->hm = host;
    M->cfg = host->cfg;
    MemCfg* mb = &M->mem;
    *mb = host->mem;
    memcpy(M->param_sizes, host->param_sizes, sizeof M->param_sizes);
    M->num_params = host->num_params;
    M->params_memory = (real*)dmalloc(M->num_params * sizeof(real));
    h2d(M->params_memory, host->params_memory, M->num_params * sizeof(real));
    point_parameters(&M->params, M->params_memory, M->param_sizes);
    M->opt_lo = host->opt_lo;
    M->opt_n = host->opt_n;
    if (host->m_memory) {
        M->m_memory = (real*)dmalloc(M->opt_n * sizeof(real));
        M->v_memory = (real*)dmalloc(M->opt_n * sizeof(real));
        h2d(M->m_memory, host->m_memory, M->opt_n * sizeof(real));
        h2d(M->v_memory, host->v_memory, M->opt_n * sizeof(real));
    }
    M->adam_t = host->adam_t;
    M->mean_loss = -1;
    if (g_prec == PREC_BF16) {  // the weights' bf16 copy; AdamW keeps it current from here on
        M->params_bf16 = (bf16*)dmalloc(M->num_params * sizeof(bf16));
        to_bf16_kernel<<<nblocks(M->num_params), NT, 0, g_stream>>>(M->params_bf16, M->params_memory, M->num_params);
        KCHECK("to_bf16");
        g_wbase = M->params_memory;
        g_wbf16 = M->params_bf16;
        g_wn = M->num_params;
    }
}
// parameters, AdamW moments and step count back into the host model (for save_checkpoint and the dumps)
static void model_to_host(ModelGpu* M) {
    Model* H = M->hm;
    d2h(H->params_memory, M->params_memory, M->num_params * sizeof(real));
    if (M->m_memory) {
        if (!H->m_memory) {
            H->m_memory = (real*)xmalloc(M->opt_n * sizeof(real));
            H->v_memory = (real*)xmalloc(M->opt_n * sizeof(real));
        }
        d2h(H->m_memory, M->m_memory, M->opt_n * sizeof(real));
        d2h(H->v_memory, M->v_memory, M->opt_n * sizeof(real));
    }
    H->adam_t = M->adam_t;
}

static void model_free_acts(ModelGpu* M) {
    if (M->tx) {  // Titans layers: the stream model and the TxActs
        model_free_acts(&M->tx->X);
        dfree(M->tx->mem);
        dfree(M->tx->gmem);
        free(M->tx);
        M->tx = NULL;
    }
    dfree(M->acts_memory);
    dfree(M->grads_acts_memory);
    dfree(M->acts_bf16);
    dfree(M->mem_P);
    dfree(M->mem_S);
    dfree(M->mem_Pw);
    dfree(M->mem_Sw);
    M->mem_Pw = M->mem_Sw = NULL;
    dfree(M->mem_dbh);
    dfree(M->mem_pdP);
    dfree(M->mem_pdS);
    dfree(M->mem_pparts);
    dfree(M->pchunk_memory);
    dfree(M->pchunks);
    dfree(M->mem_pfw);
    M->mem_pdP = M->mem_pdS = M->mem_pparts = M->pchunk_memory = M->mem_pfw = NULL;
    M->pchunks = NULL;
    dfree(M->mem_aux);
    dfree(M->mem_gpart);
    dfree(M->lat_scratch);
    M->lat_scratch = NULL;
    dfree(M->phi_av);
    dfree(M->phi_lo);
    dfree(M->phi_LA);
    dfree(M->phi_etok);
    dfree(M->phi_scr_mem);
    dfree(M->phi_scr);
    M->phi_av = M->phi_lo = M->phi_LA = M->phi_scr_mem = NULL;
    M->phi_etok = NULL;
    M->phi_scr = NULL;
    dfree(M->chunk_memory);
    dfree(M->chunks);
    dfree(M->inputs);
    dfree(M->targets);
    dfree(M->enc_uniq);
    dfree(M->enc_off);
    dfree(M->enc_pos);
    dfree(M->argmax);
    free(M->h_inputs);
    free(M->h_targets);
    free(M->h_cnt);
    free(M->h_cur);
    free(M->h_uniq);
    free(M->h_off);
    free(M->h_pos);
    free(M->h_argmax);
    free(M->h_losses);
    dfree(M->ce_stats);
    dfree(M->mask);
    free(M->h_mask);
}
// (Re)allocate activations for batch B, length T (lazily, like llm.c; a new shape reallocates).
static void titans_alloc_gpu(ModelGpu* M, int B, int T);  // section 4b
static void model_alloc_acts_gpu(ModelGpu* M, int B, int T) {
    if (M->acts_memory && M->B == B && M->T == T) return;
    model_free_acts(M);
    M->B = B;
    M->T = T;
    const Config* c = &M->cfg;
    size_t N = (size_t)B * T;
    fill_in_activation_sizes(M->act_sizes, c, B, T);
    // the CPU's layout less the head's (N, Vp) probs, which the GPU does not keep (see crossentropy_forward):
    // the (N) losses take their place, and probs is NULL (N Vp floats less in each: 6.6 GB in all at B=4, T=4096)
    M->num_acts = head_act_size(c, B, T) - N * c->Vp;
    for (int i = 0; i < NUM_ACT_TENSORS; i++) M->num_acts += M->act_sizes[i];
    M->acts_memory = (real*)dmalloc(M->num_acts * sizeof(real));
    M->grads_acts_memory = (real*)dmalloc(M->num_acts * sizeof(real));
    point_activations(&M->acts, M->acts_memory, M->act_sizes, c, B, T);
    point_activations(&M->grads_acts, M->grads_acts_memory, M->act_sizes, c, B, T);
    M->acts.losses = M->acts.probs;
    M->grads_acts.losses = M->grads_acts.probs;
    M->acts.probs = M->grads_acts.probs = NULL;
    M->acts_bf16 = M->ln1b = M->zb = M->ln2b = M->hgb = M->lnfb = NULL;
    if (g_prec == PREC_BF16) {
        size_t nD = (size_t)c->L * N * c->D, nF = (size_t)c->L * N * c->F;
        M->acts_bf16 = (bf16*)dmalloc((3 * nD + nF + N * c->D) * sizeof(bf16));
        M->ln1b = M->acts_bf16;
        M->zb = M->ln1b + nD;
        M->ln2b = M->zb + nD;
        M->hgb = M->ln2b + nD;
        M->lnfb = M->hgb + nF;
    }
    // (MAC: every chunk-start state, for its segments' reads)
    int ck = M->mem_ck = mem_ckpt_choose(&M->mem, c, B, T);
    size_t nstate = (size_t)c->L * B * c->H * mem_state_slots(&M->mem, c->b, T, c->arch == ARCH_MAC, ck) * M->mem.nP;
    M->mem_P = (real*)dmalloc(nstate * sizeof(real));
    M->mem_S = NULL;
    if (mem_carries_S(&M->mem)) M->mem_S = (real*)dmalloc(nstate * sizeof(real));
    if (ck > 1) {
        size_t nw = (size_t)B * c->H * (ck - 1) * M->mem.nP;
        M->mem_Pw = (real*)dmalloc(nw * sizeof(real));
        if (mem_carries_S(&M->mem)) M->mem_Sw = (real*)dmalloc(nw * sizeof(real));
        static int said = 0;
        if (!said++ && g_rank == 0) {
            double all = (double)c->L * B * c->H * nchunks_gpu(M, T) * M->mem.nP * sizeof(real) *
                         (1 + mem_carries_S(&M->mem)) / 1e9;
            printf(
                "memory states: one chunk-start state in %d kept, %.3g GB instead of %.3g GB (the backward "
                "recomputes the rest; MIRAS_MEM_CKPT=1 keeps all)\n",
                ck, all * mem_state_slots(&M->mem, c->b, T, 0, ck) / nchunks_gpu(M, T), all);
        }
    }
    M->mem_dbh = (real*)dmalloc((size_t)B * c->H * (M->mem.nP + 2 * M->mem.d) * sizeof(real));
    static int said_wy = 0;
    if (g_mem_wy && c->arch != ARCH_MAC && mem_wy_cfg(&M->mem, c->b, c->H, c->D, T) && !said_wy++ && g_rank == 0)
        printf("memory: the b = 1 delta rule in WY chunks of %d tokens, %s kernels (MIRAS_MEM_WY=%d)\n", WY_C,
               g_mem_wy == 2   ? "single"
               : g_mem_wy == 3 ? "split, T = (I + L)^-1,"
                               : "split",
               g_mem_wy);
    M->mem_aux = M->mem_gpart = NULL;
    if (c->lattice) M->lat_scratch = (real*)dmalloc((size_t)B * c->H * (c->lat_k + 2) * M->mem.nP * sizeof(real));
    if (M->mem.phistar) {  // section 3c: the entries of every (layer, sequence, head) and a scratch per block
        size_t ne = phi_entries(T, c->b, M->mem.omega), LBH = (size_t)c->L * B * c->H, nb = (size_t)B * c->H;
        M->phi_av = (real*)dmalloc(LBH * ne * M->mem.dm * sizeof(real));
        M->phi_lo = (real*)dmalloc(LBH * ne * sizeof(real));
        M->phi_etok = (int*)dmalloc(LBH * ne * sizeof(int));
        M->phi_LA = (real*)dmalloc(LBH * nchunks_gpu(M, T) * sizeof(real));
        PhiScr* hs = (PhiScr*)xmalloc(nb * sizeof(PhiScr));
        size_t per = phi_scr_carve(&hs[0], NULL, &M->mem, c->b, ne);
        M->phi_scr_mem = (real*)dmalloc(nb * per * sizeof(real));
        for (size_t i = 0; i < nb; i++) phi_scr_carve(&hs[i], M->phi_scr_mem + i * per, &M->mem, c->b, ne);
        M->phi_scr = (PhiScr*)dmalloc(nb * sizeof(PhiScr));
        h2d(M->phi_scr, hs, nb * sizeof(PhiScr));
        free(hs);
    }
    if (mem_token6_cfg(&M->mem, c->b)) {
        M->mem_aux = (real*)dmalloc((size_t)c->L * N * c->H * TOK_AUX * sizeof(real));
        M->mem_gpart = (real*)dmalloc(N * c->H * TOK_R * TOK_GP * sizeof(real));
    }
    // the chunk scratches, one per block: split, R per (sequence, head), each carved for its slice of dm
    M->mem_R = mem_split_of(&M->mem, c);
    static int said_split = 0;
    if (M->mem_R > 1 && !said_split++ && g_rank == 0)
        printf("memory: split over clusters of %d CTAs per (sequence, head), %d hidden units each (MIRAS_MEM_SPLIT)\n",
               M->mem_R, M->mem.dm / M->mem_R);
    else if (g_mem_split_asked && g_mem_split > 1 && M->mem_R == 1 && !said_split++ && g_rank == 0)
        printf(
            "memory: not split (MIRAS_MEM_SPLIT=%d takes deep memories without Muon or poly, d_m a multiple of %d, "
            "not MAC): one block per (sequence, head)\n",
            g_mem_split, 8 * g_mem_split);
    MemCfg ms = mem_split_cfg(&M->mem, M->mem_R);
    M->chunks = mem_chunks_alloc(&ms, c->b, B * c->H * M->mem_R, &M->chunk_memory);
    if (mem_par_cfg(&M->mem, c, ck, B, T, &M->mem_pG, &M->mem_pblocks)) {
        size_t ns = (size_t)B * c->H * nchunks_gpu(M, T) * M->mem.nP;
        M->mem_pdP = (real*)dmalloc(ns * sizeof(real));
        if (mem_carries_S(&M->mem)) M->mem_pdS = (real*)dmalloc(ns * sizeof(real));
        M->mem_pparts = (real*)dmalloc((size_t)B * c->H * M->mem_pG * (M->mem.nP + 2 * M->mem.d) * sizeof(real));
        if (mem_fw_ok(&M->mem)) {
            M->mem_pfwn = mem_fw_floats(&M->mem, c->b);
            M->mem_pfw = (real*)dmalloc((size_t)B * c->H * nchunks_gpu(M, T) * M->mem_pfwn * sizeof(real));
        }
        static int said_fw = 0;
        if (M->mem_pfw && !said_fw++ && g_rank == 0)
            printf(
                "memory: the backward chain loads each chunk's forward values, saved by the reads' pass "
                "(MIRAS_MEM_PAR_FW=0: recomputes them)\n");
        else if (mem_fw_cfg(&M->mem) && !said_fw++ && g_rank == 0)
            printf("memory: the backward chain recomputes each chunk's forward values (MIRAS_MEM_PAR_FW=0)\n");
        M->pchunks = mem_chunks_alloc(&M->mem, c->b, M->mem_pblocks, &M->pchunk_memory);
        static int said_par = 0;
        if (!said_par++ && g_rank == 0)
            printf(
                "memory: the reads of every chunk apart from the chain, on %d blocks of %d threads (%d ranges of "
                "chunks per (sequence, head); MIRAS_MEM_PAR=1)\n",
                M->mem_pblocks, MEM_THREADS / g_mem_par_ctas, M->mem_pG);
    }
    M->inputs = (int*)dmalloc(N * sizeof(int));
    M->targets = (int*)dmalloc(N * sizeof(int));
    M->h_inputs = (int*)xmalloc(N * sizeof(int));
    M->h_targets = (int*)xmalloc(N * sizeof(int));
    M->enc_uniq = (int*)dmalloc(N * sizeof(int));
    M->enc_off = (int*)dmalloc((N + 1) * sizeof(int));
    M->enc_pos = (int*)dmalloc(N * sizeof(int));
    M->h_cnt = (int*)xmalloc((c->V + 1) * sizeof(int));
    M->h_cur = (int*)xmalloc((c->V + 1) * sizeof(int));
    M->h_uniq = (int*)xmalloc(N * sizeof(int));
    M->h_off = (int*)xmalloc((N + 1) * sizeof(int));
    M->h_pos = (int*)xmalloc(N * sizeof(int));
    M->argmax = (int*)dmalloc(N * sizeof(int));
    M->h_argmax = (int*)xmalloc(N * sizeof(int));
    M->h_losses = (real*)xmalloc(N * sizeof(real));
    M->ce_stats = (real*)dmalloc(2 * N * sizeof(real));
    M->mask = (uint8_t*)dmalloc(N);
    M->h_mask = (uint8_t*)xmalloc(N);
    gpu_buffers(N, N * c->D);  // ones for column sums; scratch for the (N, D) gradient products
    // the rounding scratches at their largest (x, dout of at most (N, max(D, F)); dlogits has its own)
    if (g_prec == PREC_BF16) {
        size_t n = N * (size_t)(c->F > c->D ? c->F : c->D);
        if (n > g_xb_n) {
            dfree(g_xb);
            g_xb = (bf16*)dmalloc(n * sizeof(bf16));
            g_xb_n = n;
        }
        if (n > g_db_n) {
            dfree(g_db);
            g_db = (bf16*)dmalloc(n * sizeof(bf16));
            g_db_n = n;
        }
    }
    if (M->cfg.arch && !M->tx_sub) titans_alloc_gpu(M, B, T);  // Titans layers: the stream model at (B, N_p + T)
}

// embedding backward: the positions of each distinct token, in order (host-built buckets), then one thread per (token,
// channel)
static void encoder_backward_gpu(ModelGpu* M, real* dwte, const real* dout, int N, int C) {
    int V = M->cfg.V, *tok = M->h_inputs, *cnt = M->h_cnt, *cur = M->h_cur, nu = 0;
    memset(cnt, 0, (V + 1) * sizeof(int));
    for (int n = 0; n < N; n++) cnt[tok[n] + 1]++;
    for (int v = 0; v < V; v++) cnt[v + 1] += cnt[v];  // cnt[v]: first slot of token v
    memcpy(cur, cnt, (V + 1) * sizeof(int));
    for (int n = 0; n < N; n++) M->h_pos[cur[tok[n]]++] = n;
    for (int v = 0; v < V; v++)
        if (cnt[v + 1] > cnt[v]) {
            M->h_uniq[nu] = v;
            M->h_off[nu] = cnt[v];
            nu++;
        }
    M->h_off[nu] = N;
    h2d(M->enc_uniq, M->h_uniq, nu * sizeof(int));
    h2d(M->enc_off, M->h_off, (nu + 1) * sizeof(int));
    h2d(M->enc_pos, M->h_pos, N * sizeof(int));
    encoder_backward_kernel<<<nblocks((size_t)nu * C), NT, 0, g_stream>>>(dwte, dout, M->enc_uniq, M->enc_off,
                                                                          M->enc_pos, nu, C);
    KCHECK("encoder_backward");
}

// the memory kernels' arguments for layer l
static MemArgs mem_args(ModelGpu* M, int l) {
    const Config* c = &M->cfg;
    int B = M->B, T = M->T, H = c->H, D = c->D, d = M->mem.d, nP = M->mem.nP, nch = nchunks_gpu(M, T);
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H,
           oG = (size_t)l * N * (c->gate_rank ? D : H);
    ActivationTensors *a = &M->acts, *g = &M->grads_acts;
    MemArgs A;
    memset(&A, 0, sizeof A);
    A.m = M->mem;
    A.B = B;
    A.T = T;
    A.H = H;
    A.D = D;
    A.b = c->b;
    A.nch = nch;
    A.q = a->q + oD;
    A.k = a->k + oD;
    A.v = a->v + oD;
    A.ga = a->ga + oH;
    A.gth = a->gth + oH;
    A.geta = a->geta + oG;
    A.gdel = a->gdel + oG;
    A.y = a->y + oD;
    size_t so = (size_t)l * B * H * mem_state_slots(&M->mem, c->b, T, c->arch == ARCH_MAC, M->mem_ck) * nP;
    A.P = M->mem_P + so;
    A.S = M->mem_S ? M->mem_S + so : NULL;
    A.ck = M->mem_ck;
    A.Pw = M->mem_Pw;
    A.Sw = M->mem_Sw;
    size_t ml = M->hm->mlayer[l];  // the layer's index in the memory-only parameter tensors (train_miras.c)
    A.p0 = M->params.mem_p0 + ml * H * nP;
    A.lng = M->mem.ln ? M->params.mem_ln_g + ml * H * d : NULL;
    A.lnb = M->mem.ln ? M->params.mem_ln_b + ml * H * d : NULL;
    A.chunks = M->chunks;
    A.R = M->mem_R;
    A.xn = mem_split_xn(&M->mem, c->b);
    A.dy = g->y + oD;
    A.dq = g->q + oD;
    A.dk = g->k + oD;
    A.dv = g->v + oD;
    A.dga = g->ga + oH;
    A.dgth = g->gth + oH;
    A.dgeta = g->geta + oG;
    A.dgdel = g->gdel + oG;
    A.dbh = M->mem_dbh;
    A.pdP = M->mem_pdP;
    A.pdS = M->mem_pdS;
    A.pparts = M->mem_pparts;
    A.pchunks = M->pchunks;
    A.pG = M->mem_pG;
    A.pblocks = M->mem_pblocks;
    A.pcps = g_mem_par_ctas;
    A.pfw = M->mem_pfw;
    A.pfwn = M->mem_pfwn;
    A.aux = M->mem_aux ? M->mem_aux + (size_t)l * N * H * TOK_AUX : NULL;
    A.gpart = M->mem_gpart;
    A.lat = M->lat_scratch;
    A.tc = g_mem_tc;
    if (M->mem.omega > 1) {  // omega's window gates (H*c per row) and their gradients
        A.ggam = a->ggam + oH * M->mem.omega;
        A.dggam = g->ggam + oH * M->mem.omega;
    }
    if (M->mem.phistar) {  // the phi* memory's entries and scratch
        size_t ne = phi_entries(T, c->b, M->mem.omega), oL = (size_t)l * B * H;
        A.phs = M->phi_scr;
        A.phav = M->phi_av + oL * ne * M->mem.dm;
        A.phlo = M->phi_lo + oL * ne;
        A.phetok = M->phi_etok + oL * ne;
        A.phLA = M->phi_LA + oL * nch;
        A.phne = (int)ne;
    }
    if (M->mem.poly) {  // poly's features (H*D_phi per row) and their gradients
        size_t oP = oH * M->mem.din;
        A.qf = a->qf + oP;
        A.kf = a->kf + oP;
        A.dqf = g->qf + oP;
        A.dkf = g->kf + oP;
    }
    return A;
}
// The memory read of layer l for all sequences and heads (SPEC §5): y = MemoryRead(q, k, v, gates).
static void memory_forward_gpu(ModelGpu* M, int l) {
    MemArgs A = mem_args(M, l);
    mem_forward_launch(A, M->B * M->cfg.H);
}
// Backward through all chunks in reverse; then dL/dP_0 and the LN affine summed over the batch in a fixed order.
static void memory_backward_gpu(ModelGpu* M, int l) {
    MemArgs A = mem_args(M, l);
    const Config* c = &M->cfg;
    int H = c->H, d = M->mem.d, nP = M->mem.nP;
    int par = mem_backward_launch(A, M->B * H);
    if (M->mem.lattice) return;  // Lattice: S_0 = I is fixed (no P_0, no LN)
    size_t ml = M->hm->mlayer[l];  // in the memory-only parameter tensors
    memory_dbh_reduce_kernel<<<nblocks((size_t)H * (nP + 2 * d)), NT, 0, g_stream>>>(
        M->grads.mem_p0 + ml * H * nP, M->mem.ln ? M->grads.mem_ln_g + ml * H * d : NULL,
        M->mem.ln ? M->grads.mem_ln_b + ml * H * d : NULL, M->mem_dbh, M->B, H, nP, d, M->mem.ln,
        par ? M->mem_pparts : NULL, par ? M->mem_pG : 0);
    KCHECK("memory_dbh_reduce");
}

// The gates of layer l for N rows of u (SPEC §3): a, theta per head (sigmoid); eta = eta_max sigmoid and
// Yaad's delta = softplus, per head, or per channel through a rank-R projection u -> R^R -> R^D.
// Gates a preset does not learn are constants: a = 1, eta = 1, theta = 0 (gd).
// (ub: u's bf16 copy in bf16 mode, or NULL)
static void gate_forward_gpu(real* out, real* lr, const real* u, const bf16* ub, const real* w, const real* bias,
                             const real* up, int N, int D, int G, int R) {
    if (R) {
        matmul_forward_gpu(lr, u, w, NULL, N, D, R, ub);
        matmul_forward_gpu(out, lr, up, bias, N, R, G);
    } else
        matmul_forward_gpu(out, u, w, bias, N, D, G, ub);
}
static void gate_backward_gpu(real* du, real* dw, real* dbias, real* dup, real* dlr, const real* dout, const real* u,
                              const bf16* ub, const real* w, const real* up, const real* lr, int N, int D, int G,
                              int R) {
    if (R) {
        matmul_backward_gpu(dlr, dup, dbias, dout, lr, up, N, R, G);
        matmul_backward_gpu(du, dw, NULL, dlr, u, w, N, D, R, ub);
    } else
        matmul_backward_gpu(du, dw, dbias, dout, u, w, N, D, G, ub);
}
static void gates_forward_gpu(const ModelGpu* M, int l, const real* u, const bf16* ub, int N, real* ga, real* geta,
                              real* gth, real* gdel, real* eta_lr, real* del_lr) {
    l = M->hm->mlayer[l];  // the gate tensors are stacked over the memory layers
    const Config* c = &M->cfg;
    const ParameterTensors* p = &M->params;
    int D = c->D, H = c->H, R = c->gate_rank, Ge = R ? D : H;
    size_t gw = R ? (size_t)R * D : (size_t)H * D;
    // decoding (one row), gates per head: the learned ones in one launch with their activations (gemv_row_kernel),
    // the constant ones filled
    if (N == 1 && !R && g_prec != PREC_TF32) {
        real* out[GEMV_MAX];
        const real *W[GEMV_MAX], *bias[GEMV_MAX];
        int OC[GEMV_MAX], act[GEMV_MAX], n = 0;
        real scale[GEMV_MAX];
        auto add = [&](real* o, const real* w, const real* bi, int ac, real sc) {
            out[n] = o, W[n] = w + (size_t)l * H * D, bias[n] = bi + (size_t)l * H, OC[n] = H, act[n] = ac;
            scale[n++] = sc;
        };
        if (c->gate_a) add(ga, p->gate_a_w, p->gate_a_b, GEMV_SIGMOID, 1);
        if (c->gate_eta) add(geta, p->gate_eta_w, p->gate_eta_b, GEMV_SIGMOID, c->eta_max);
        if (c->algo != ALGO_GD) add(gth, p->gate_theta_w, p->gate_theta_b, GEMV_SIGMOID, 1);
        if (c->bias == BIAS_HUBER) add(gdel, p->gate_delta_w, p->gate_delta_b, GEMV_SOFTPLUS, 1);
        if (n) matmul_rows_gpu(n, out, u, W, bias, D, OC, act, scale);
        if (!c->gate_a) fill_const_gpu(ga, H, 1);
        if (!c->gate_eta) fill_const_gpu(geta, H, 1);
        if (c->algo == ALGO_GD) fill_const_gpu(gth, H, 0);
        return;
    }
    if (c->gate_a) {
        matmul_forward_gpu(ga, u, p->gate_a_w + (size_t)l * H * D, p->gate_a_b + (size_t)l * H, N, D, H, ub);
        gate_act_forward_gpu(ga, (size_t)N * H, 1);
    } else
        fill_const_gpu(ga, (size_t)N * H, 1);
    if (c->gate_eta) {
        gate_forward_gpu(geta, eta_lr, u, ub, p->gate_eta_w + l * gw, p->gate_eta_b + (size_t)l * Ge,
                         R ? p->gate_eta_up + (size_t)l * D * R : NULL, N, D, Ge, R);
        gate_act_forward_gpu(geta, (size_t)N * Ge, c->eta_max);
    } else
        fill_const_gpu(geta, (size_t)N * Ge, 1);
    if (c->algo != ALGO_GD) {
        matmul_forward_gpu(gth, u, p->gate_theta_w + (size_t)l * H * D, p->gate_theta_b + (size_t)l * H, N, D, H, ub);
        gate_act_forward_gpu(gth, (size_t)N * H, 1);
    } else
        fill_const_gpu(gth, (size_t)N * H, 0);
    if (c->bias == BIAS_HUBER) {
        gate_forward_gpu(gdel, del_lr, u, ub, p->gate_delta_w + l * gw, p->gate_delta_b + (size_t)l * Ge,
                         R ? p->gate_delta_up + (size_t)l * D * R : NULL, N, D, Ge, R);
        softplus_forward_gpu(gdel, (size_t)N * Ge);
    }
}
// from the gates' gradients (turned into pre-activation gradients in place) to du and the gate parameters
static void gates_backward_gpu(ModelGpu* M, int l, real* du, const real* u, const bf16* ub, int N,
                               const ActivationTensors* a, ActivationTensors* g, size_t oH, size_t oG, size_t oR) {
    // the gate tensors are stacked over the memory layers (the offsets oH, oG, oR are the caller's)
    l = M->hm->mlayer[l];
    const Config* c = &M->cfg;
    const ParameterTensors* p = &M->params;
    ParameterTensors* dp = &M->grads;
    int D = c->D, H = c->H, R = c->gate_rank, Ge = R ? D : H;
    size_t gw = R ? (size_t)R * D : (size_t)H * D, nH = (size_t)N * H, nG = (size_t)N * Ge;
    if (c->gate_a) {
        gate_act_backward_gpu(g->ga + oH, g->ga + oH, a->ga + oH, nH, 1);
        matmul_backward_gpu(du, dp->gate_a_w + (size_t)l * H * D, dp->gate_a_b + (size_t)l * H, g->ga + oH, u,
                            p->gate_a_w + (size_t)l * H * D, N, D, H, ub);
    }
    if (c->gate_eta) {
        gate_act_backward_gpu(g->geta + oG, g->geta + oG, a->geta + oG, nG, c->eta_max);
        gate_backward_gpu(du, dp->gate_eta_w + l * gw, dp->gate_eta_b + (size_t)l * Ge,
                          R ? dp->gate_eta_up + (size_t)l * D * R : NULL, g->geta_lr + oR, g->geta + oG, u, ub,
                          p->gate_eta_w + l * gw, R ? p->gate_eta_up + (size_t)l * D * R : NULL, a->geta_lr + oR, N, D,
                          Ge, R);
    }
    if (c->algo != ALGO_GD) {
        gate_act_backward_gpu(g->gth + oH, g->gth + oH, a->gth + oH, nH, 1);
        matmul_backward_gpu(du, dp->gate_theta_w + (size_t)l * H * D, dp->gate_theta_b + (size_t)l * H, g->gth + oH, u,
                            p->gate_theta_w + (size_t)l * H * D, N, D, H, ub);
    }
    if (c->bias == BIAS_HUBER) {
        softplus_backward_gpu(g->gdel + oG, g->gdel + oG, a->gdel + oG, nG);
        gate_backward_gpu(du, dp->gate_delta_w + l * gw, dp->gate_delta_b + (size_t)l * Ge,
                          R ? dp->gate_delta_up + (size_t)l * D * R : NULL, g->gdel_lr + oR, g->gdel + oG, u, ub,
                          p->gate_delta_w + l * gw, R ? p->gate_delta_up + (size_t)l * D * R : NULL, a->gdel_lr + oR, N,
                          D, Ge, R);
    }
}

// poly (SPEC §5.6; train_miras.c's poly_forward, poly_backward): degree-2 features of the l2-normed rows x (N*H rows of
// d), D_phi = 1 + d + d(d+1)/2 per row, a_i = softplus(rho_i):
//     phi(x) = [sqrt(a0); sqrt(a1) x; sqrt(a2) (x_i^2)_i; sqrt(2 a2) (x_i x_j)_{i<j}]   (pairs row-major: i, then j > i)
// A thread per (row, i): features 1+i, 1+d+i and the pairs (i, j > i), which start at 1 + 2d + i(d-1) - i(i-1)/2.
__device__ __forceinline__ void poly_scales_gpu(const real* rho, real* a, real* sa) {
    for (int i = 0; i < 3; i++) {
        a[i] = rho[i] > 20 ? rho[i] : log1pf(expf(rho[i]));
        sa[i] = sqrtf(a[i]);
    }
}
__device__ __forceinline__ int poly_pair0_gpu(int i, int d) { return 1 + 2 * d + i * (d - 1) - i * (i - 1) / 2; }
__global__ void poly_forward_kernel(real* out, const real* x, const real* rho, size_t rows, int d) {
    int dp = 1 + d + d * (d + 1) / 2;
    real a[3], sa[3];
    poly_scales_gpu(rho, a, sa);
    real s2b = sqrtf(2.0f) * sa[2];
    GRID_FOR(e, rows * d) {
        size_t r = e / d;
        int i = (int)(e % d), p = poly_pair0_gpu(i, d);
        const real* xi = x + r * d;
        real* o = out + r * dp;
        if (i == 0) o[0] = sa[0];
        o[1 + i] = sa[1] * xi[i];
        o[1 + d + i] = sa[2] * xi[i] * xi[i];
        for (int j = i + 1; j < d; j++) o[p + j - i - 1] = s2b * xi[i] * xi[j];
    }
}
// dx += dphi/dx^T dout (a thread per (row, i)); the rho gradient's three sums per row into part (rows, 3): a warp per
// row, summed in row order by poly_rho_sum_kernel (deterministic)
__global__ void poly_backward_kernel(real* dx, const real* dout, const real* x, const real* rho, size_t rows, int d) {
    int dp = 1 + d + d * (d + 1) / 2;
    real a[3], sa[3];
    poly_scales_gpu(rho, a, sa);
    real s2b = sqrtf(2.0f) * sa[2];
    GRID_FOR(e, rows * d) {
        size_t r = e / d;
        int i = (int)(e % d);
        const real *xi = x + r * d, *go = dout + r * dp;
        real g = sa[1] * go[1 + i] + 2 * sa[2] * xi[i] * go[1 + d + i];
        for (int j = 0; j < d; j++)
            if (j != i)
                g += s2b * xi[j] * go[j < i ? poly_pair0_gpu(j, d) + i - j - 1 : poly_pair0_gpu(i, d) + j - i - 1];
        dx[e] += g;
    }
}
__global__ void poly_rho_part_kernel(real* part, const real* dout, const real* x, size_t rows, int d) {
    int dp = 1 + d + d * (d + 1) / 2;
    size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (r >= rows) return;
    const real *xi = x + r * d, *go = dout + r * dp;
    real g1 = 0, g2 = 0, g2b = 0;
    for (int i = LANE; i < d; i += 32) {
        g1 += go[1 + i] * xi[i];
        g2 += go[1 + d + i] * xi[i] * xi[i];
        int p = poly_pair0_gpu(i, d);
        for (int j = i + 1; j < d; j++) g2b += go[p + j - i - 1] * xi[i] * xi[j];
    }
    g1 = warp_sum(g1);
    g2 = warp_sum(g2);
    g2b = warp_sum(g2b);
    if (LANE == 0) {
        part[r * 3] = go[0];
        part[r * 3 + 1] = g1;
        part[r * 3 + 2] = g2 + sqrtf(2.0f) * g2b;  // (the sqrt(2 a2) block: sqrt(2) sqrt(a2))
    }
}
__global__ void poly_rho_sum_kernel(real* drho, const real* part, const real* rho, size_t rows) {
    int k = threadIdx.x;  // 3 threads, one per rho_k, the rows in order
    if (k >= 3) return;
    real a[3], sa[3], g = 0;
    poly_scales_gpu(rho, a, sa);
    for (size_t r = 0; r < rows; r++) g += part[r * 3 + k];
    drho[k] += g * sa[k] / (2 * a[k]) * sigmoidr_gpu(rho[k]);  // d sqrt(a)/d rho = sigmoid(rho) / (2 sqrt(a))
}
static void poly_forward_gpu(real* out, const real* x, const real* rho, int N, int H, int d) {
    poly_forward_kernel<<<nblocks((size_t)N * H * d), NT, 0, g_stream>>>(out, x, rho, (size_t)N * H, d);
    KCHECK("poly_forward");
}
// (part: (N*H, 3) scratch)
static void poly_backward_gpu(real* dx, real* drho, const real* dout, const real* x, const real* rho, int N, int H,
                              int d, real* part) {
    size_t rows = (size_t)N * H;
    poly_backward_kernel<<<nblocks(rows * d), NT, 0, g_stream>>>(dx, dout, x, rho, rows, d);
    KCHECK("poly_backward");
    poly_rho_part_kernel<<<warp_blocks(rows), NT, 0, g_stream>>>(part, dout, x, rows, d);
    KCHECK("poly_rho_part");
    poly_rho_sum_kernel<<<1, 32, 0, g_stream>>>(drho, part, rho, rows);
    KCHECK("poly_rho_sum");
}

// omega's window gates (SPEC §5.5; train_miras.c's omega_gates_forward): gamma_t[o] = sigmoid(u_t W_gamma +
// b_gamma)[h*c + o], out (N, H*c) of layer l
static void omega_gates_forward_gpu(const ModelGpu* M, int l, const real* u, const bf16* ub, int N, real* out) {
    int D = M->cfg.D, Hc = M->cfg.H * M->mem.omega;
    size_t ml = M->hm->mlayer[l];
    matmul_forward_gpu(out, u, M->params.gate_gamma_w + ml * Hc * D, M->params.gate_gamma_b + ml * Hc, N, D, Hc, ub);
    gate_act_forward_gpu(out, (size_t)N * Hc, 1);
}
// dg (the gates' gradients, turned into pre-activation gradients in place) -> du, dW_gamma, db_gamma
static void omega_gates_backward_gpu(ModelGpu* M, int l, real* du, const real* u, const bf16* ub, int N, const real* g,
                                     real* dg) {
    int D = M->cfg.D, Hc = M->cfg.H * M->mem.omega;
    size_t ml = M->hm->mlayer[l];
    gate_act_backward_gpu(dg, dg, g, (size_t)N * Hc, 1);
    matmul_backward_gpu(du, M->grads.gate_gamma_w + ml * Hc * D, M->grads.gate_gamma_b + ml * Hc, dg, u,
                        M->params.gate_gamma_w + ml * Hc * D, N, D, Hc, ub);
}

// Section 3's memory mixer of layer l (SPEC §3), from u = M->acts.ln1 to M->acts.mo (model_forward then adds x):
// q, k, v = SiLU(conv(u W^T)), q and k l2-normed per head; y = the memory's read; mo = (RMSNorm_head(y) * SiLU(u
// Wg^T)) Wo^T. Also the stream model's of a Titans layer (section 4b). ub, zb: u's and z's bf16 copies, or NULL.
static void mixer_forward_gpu(ModelGpu* M, int l, bf16* ub, bf16* zb) {
    const Config* c = &M->cfg;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = M->mem.d;
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H;
    size_t ml = M->hm->mlayer[l];  // the layer's index in the memory-only parameter tensors
    ParameterTensors* p = &M->params;
    ActivationTensors* a = &M->acts;
    const real* u = a->ln1 + oD;
    matmul_forward_gpu(a->qp + oD, u, p->wq + (size_t)l * D * D, NULL, N, D, D, ub);
    matmul_forward_gpu(a->kp + oD, u, p->wk + (size_t)l * D * D, NULL, N, D, D, ub);
    matmul_forward_gpu(a->vp + oD, u, p->wv + (size_t)l * D * D, NULL, N, D, D, ub);
    // q = l2norm(SiLU(qc)) per head (the CPU's qs = SiLU(qc) in between: not stored here), k alike; v = SiLU(vc)
    conv_l2norm_forward_gpu(a->qc + oD, a->q + oD, a->qrn + oH, a->qp + oD, p->conv_q + ml * D * c->K, B, T, D, c->K,
                            d);
    conv_l2norm_forward_gpu(a->kc + oD, a->k + oD, a->krn + oH, a->kp + oD, p->conv_k + ml * D * c->K, B, T, D, c->K,
                            d);
    conv_forward_gpu(a->vc + oD, a->vp + oD, p->conv_v + ml * D * c->K, B, T, D, c->K, a->v + oD);
    if (M->mem.poly) {  // poly features (SPEC §5.6) of the l2-normed q, k
        size_t oP = oH * M->mem.din;
        poly_forward_gpu(a->qf + oP, a->q + oD, p->poly_rho + ml * 3, N, H, d);
        poly_forward_gpu(a->kf + oP, a->k + oD, p->poly_rho + ml * 3, N, H, d);
    }
    size_t oG = (size_t)l * N * (c->gate_rank ? D : H), oR = (size_t)l * N * c->gate_rank;
    gates_forward_gpu(M, l, u, ub, N, a->ga + oH, a->geta + oG, a->gth + oH, a->gdel + oG, a->geta_lr + oR,
                      a->gdel_lr + oR);
    if (M->mem.omega > 1) omega_gates_forward_gpu(M, l, u, ub, N, a->ggam + oH * M->mem.omega);
    memory_forward_gpu(M, l);
    rmsnorm_forward_gpu(a->yn + oD, a->yrstd + oH, a->y + oD, p->rmsh_w + ml * D, N, H, d);
    matmul_forward_gpu(a->gp + oD, u, p->wg + ml * D * D, NULL, N, D, D, ub);
    gate_mul_forward_gpu(a->z + oD, a->yn + oD, a->gp + oD, N * D, zb);
    matmul_forward_gpu(a->mo + oD, a->z + oD, p->wo + (size_t)l * D * D, NULL, N, D, D, zb);
}
// its backward: from dmo = dL/d mo to M->grads_acts.ln1 (accumulated, or written with du_first) and the parameters'
// gradients
// dmob: dmo's bf16 copy (bf16 mode; NULL: the Wo GEMM rounds dmo itself); du_first: nothing has added to du yet (the
// model's own layers; not MAG's stream, whose attention has), so its first GEMM writes it (beta 0)
static void mixer_backward_gpu(ModelGpu* M, int l, const real* dmo, bf16* ub, bf16* zb, const bf16* dmob = NULL,
                               bool du_first = false) {
    const Config* c = &M->cfg;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = M->mem.d;
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H;
    size_t ml = M->hm->mlayer[l];
    ParameterTensors *p = &M->params, *dp = &M->grads;
    ActivationTensors *a = &M->acts, *g = &M->grads_acts;
    const real* u = a->ln1 + oD;
    real* du = g->ln1 + oD;
    matmul_backward_gpu(g->z + oD, dp->wo + (size_t)l * D * D, NULL, dmo, a->z + oD, p->wo + (size_t)l * D * D, N, D, D,
                        zb, dmob, false);  // (dz's only writer)
    // bf16 mode: the projections' gradients only as bf16 copies (their GEMMs' operands), each in its own fp32 storage
    bool hb = g_prec == PREC_BF16;
    bf16 *dgpb = hb ? (bf16*)(g->gp + oD) : NULL, *dqpb = hb ? (bf16*)(g->qp + oD) : NULL,
         *dkpb = hb ? (bf16*)(g->kp + oD) : NULL, *dvpb = hb ? (bf16*)(g->vp + oD) : NULL;
    gate_mul_backward_gpu(g->yn + oD, g->gp + oD, g->z + oD, a->yn + oD, a->gp + oD, N * D, dgpb);
    matmul_backward_gpu(du, dp->wg + ml * D * D, NULL, g->gp + oD, u, p->wg + ml * D * D, N, D, D, ub, dgpb,
                        !du_first);  // (du_first: its first writer; the gates' and q, k, v's GEMMs add)
    rmsnorm_backward_gpu(g->y + oD, dp->rmsh_w + ml * D, g->yn + oD, a->y + oD, p->rmsh_w + ml * D, a->yrstd + oH, N, H,
                         d, NULL, NULL, true);  // (dy's first writer)
    memory_backward_gpu(M, l);
    gates_backward_gpu(M, l, du, u, ub, N, a, g, oH, (size_t)l * N * (c->gate_rank ? D : H),
                       (size_t)l * N * c->gate_rank);
    if (M->mem.omega > 1)
        omega_gates_backward_gpu(M, l, du, u, ub, N, a->ggam + oH * M->mem.omega, g->ggam + oH * M->mem.omega);
    if (M->mem.poly) {  // poly: the features' gradients into q, k (which hold the residual's) and rho
        size_t oP = oH * M->mem.din;
        const real* rho = p->poly_rho + ml * 3;
        poly_backward_gpu(g->q + oD, dp->poly_rho + ml * 3, g->qf + oP, a->q + oD, rho, N, H, d, g_scratch);
        poly_backward_gpu(g->k + oD, dp->poly_rho + ml * 3, g->kf + oP, a->k + oD, rho, N, H, d, g_scratch);
    }
    // (the CPU's l2norm_backward into dqs, then silu_backward into dqc: one pass here, dqs never stored)
    l2norm_silu_backward_gpu(g->qc + oD, g->q + oD, a->q + oD, a->qrn + oH, a->qc + oD, N, H, d);
    l2norm_silu_backward_gpu(g->kc + oD, g->k + oD, a->k + oD, a->krn + oH, a->kc + oD, N, H, d);
    silu_backward_gpu(g->vc + oD, g->v + oD, a->vc + oD, N * D, true);  // (the mixer is the only writer of these)
    conv_backward_gpu(g->qp + oD, dp->conv_q + ml * D * c->K, g->qc + oD, a->qp + oD, p->conv_q + ml * D * c->K, B, T,
                      D, c->K, dqpb, true);
    conv_backward_gpu(g->kp + oD, dp->conv_k + ml * D * c->K, g->kc + oD, a->kp + oD, p->conv_k + ml * D * c->K, B, T,
                      D, c->K, dkpb, true);
    conv_backward_gpu(g->vp + oD, dp->conv_v + ml * D * c->K, g->vc + oD, a->vp + oD, p->conv_v + ml * D * c->K, B, T,
                      D, c->K, dvpb, true);
    matmul_backward_gpu(du, dp->wq + (size_t)l * D * D, NULL, g->qp + oD, u, p->wq + (size_t)l * D * D, N, D, D, ub,
                        dqpb);
    matmul_backward_gpu(du, dp->wk + (size_t)l * D * D, NULL, g->kp + oD, u, p->wk + (size_t)l * D * D, N, D, D, ub,
                        dkpb);
    matmul_backward_gpu(du, dp->wv + (size_t)l * D * D, NULL, g->vp + oD, u, p->wv + (size_t)l * D * D, N, D, D, ub,
                        dvpb);
}

// ----------------------------------------------------------------------------
// 4b. Titans layers on the GPU (train_miras.c section 4b, SPEC §9.2-9.3): MAL, MAG and MAC
//
// As on the CPU: the memory mixer of a Titans layer runs over the stream [P || u] of Tn = N_p + T rows in a second
// ModelGpu X (the stream model: the model's parameters and gradients, its own activations at (B, Tn)), and only the
// sequence rows of its output are kept. The layer's attention (att_wq, att_wk, att_wv, att_wo) and the TxActs
// tensors (tx_point's layout, in device memory) are the model's.
//   MAL: x += Mixer([P||u])[seq];  x += attn_SWA(RMSNorm_attn(x)) Wo_a  (RoPE positions t, no prefix);  x += SwiGLU
//   MAG: y = attn_SWA([P||u]) Wo_a at the sequence queries (P rows: keys every query sees); m = Mixer([P||u])[seq];
//        x += o(y, m) = RMSNorm_g1(y) * sigmoid(RMSNorm_g2(m));  x += SwiGLU

// dst rows [dO, dO + n) of each of B sequences of dT rows (width C) = (acc: +=) src rows [sO, sO + n) of sT-row ones
__global__ void copy_rows_kernel(real* dst, const real* src, int B, int n, int C, int dT, int dO, int sT, int sO,
                                 int acc) {
    GRID_FOR(e, (size_t)B * n * C) {
        int i = (int)(e % C), t = (int)(e / C % n), bb = (int)(e / C / n);
        real v = src[((size_t)bb * sT + sO + t) * C + i];
        real* o = dst + ((size_t)bb * dT + dO + t) * C + i;
        *o = acc ? *o + v : v;
    }
}
static void copy_rows_gpu(real* dst, const real* src, int B, int n, int C, int dT, int dO, int sT, int sO, int acc) {
    if (!n) return;
    copy_rows_kernel<<<nblocks((size_t)B * n * C), NT, 0, g_stream>>>(dst, src, B, n, C, dT, dO, sT, sO, acc);
    KCHECK("copy_rows");
}
// the stream [P || u]: rows [0, np) of every sequence are P (np, C), rows [np, np + T) the sequence's u (B, T, C)
__global__ void stream_kernel(real* us, const real* P, const real* u, int B, int T, int np, int C) {
    GRID_FOR(e, (size_t)B * (np + T) * C) {
        int i = (int)(e % C), r = (int)(e / C % (np + T)), bb = (int)(e / C / (np + T));
        us[e] = r < np ? P[(size_t)r * C + i] : u[((size_t)bb * T + r - np) * C + i];
    }
}
// dP (np, C) += the prefix rows of the stream's gradient, summed over the batch in a fixed order
__global__ void prefix_grad_kernel(real* dP, const real* dus, int B, int Tn, int np, int C) {
    GRID_FOR(e, (size_t)np * C) {
        real s = dP[e];
        for (int bb = 0; bb < B; bb++) s += dus[(size_t)bb * Tn * C + e];
        dP[e] = s;
    }
}
// MAG's gate o = n1 * sigmoid(n2), and its backward: dn1 = dout s, dn2 = dout n1 s (1 - s)
__global__ void out_gate_forward_kernel(real* out, const real* n1, const real* n2, size_t n) {
    GRID_FOR(i, n) out[i] = n1[i] * sigmoidr_gpu(n2[i]);
}
__global__ void out_gate_backward_kernel(real* dn1, real* dn2, const real* dout, const real* n1, const real* n2,
                                         size_t n) {
    GRID_FOR(i, n) {
        real s = sigmoidr_gpu(n2[i]);
        dn1[i] = dout[i] * s;
        dn2[i] = dout[i] * n1[i] * s * (1 - s);
    }
}

// (re)allocate with the model's activations (model_alloc_acts_gpu): the stream model at (B, N_p + T), the TxActs
static void titans_alloc_gpu(ModelGpu* M, int B, int T) {
    TitansGpu* t = M->tx = (TitansGpu*)xmalloc(sizeof(TitansGpu));  // (model_free_acts freed the previous one)
    memset(t, 0, sizeof *t);
    ModelGpu* X = &t->X;
    t->Tn = T + M->cfg.npers;
    X->hm = M->hm;
    X->cfg = M->cfg;
    X->mem = M->mem;
    X->tx_sub = 1;
    X->cfg.F = 1;
    X->cfg.Vp = 1;  // X runs the mixers only: no room for its (unused) SwiGLU and logits activations
    memcpy(X->param_sizes, M->param_sizes, sizeof M->param_sizes);
    X->num_params = M->num_params;
    X->params = M->params;
    X->params_memory = M->params_memory;
    if (M->cfg.arch != ARCH_MAC) model_alloc_acts_gpu(X, B, t->Tn);  // (MAC's memory sees no prefix: no stream)
    t->n = tx_point(&t->a, NULL, &M->cfg, B, T, 1);  // (MAC phi*: dL/dLA alone; the rest is in each block's PhiScr)
    t->mem = (real*)dmalloc(t->n * sizeof(real));
    t->gmem = (real*)dmalloc(t->n * sizeof(real));
    tx_point(&t->a, t->mem, &M->cfg, B, T, 1);
    tx_point(&t->g, t->gmem, &M->cfg, B, T, 1);
}

// The attention of a Titans layer on rows ua (B sequences of Tr rows): q, k = RoPE(ua Wq_a^T), RoPE(ua Wk_a^T) at
// the rows' positions 0..Tr-1; v = ua Wv_a^T; z = attn (window W, prefix np); y = z Wo_a^T (train_miras.c's
// tx_attn_forward)
static void tx_attn_forward_gpu(ModelGpu* M, int l, const real* ua, int Tr, int np, size_t o, size_t oh) {
    const Config* c = &M->cfg;
    ParameterTensors* p = &M->params;
    TxActs* t = &M->tx->a;
    int B = M->B, D = c->D, H = c->H, d = D / H, Nq = B * Tr;
    size_t oW = (size_t)l * D * D;
    matmul_forward_gpu(t->q + o, ua, p->att_wq + oW, NULL, Nq, D, D);
    rope_forward_gpu(t->q + o, t->q + o, B, Tr, H, d, 1);
    matmul_forward_gpu(t->k + o, ua, p->att_wk + oW, NULL, Nq, D, D);
    rope_forward_gpu(t->k + o, t->k + o, B, Tr, H, d, 1);
    matmul_forward_gpu(t->v + o, ua, p->att_wv + oW, NULL, Nq, D, D);
    attention_forward_gpu(t->z + o, t->lse + oh, t->q + o, t->k + o, t->v + o, B, Tr, H, d, c->window, np);
    matmul_forward_gpu(t->y + o, t->z + o, p->att_wo + oW, NULL, Nq, D, D);
}
// its backward, from M->tx->g.y to dua (accumulated); the softmax's Di go to g.lse (scratch)
static void tx_attn_backward_gpu(ModelGpu* M, int l, real* dua, const real* ua, int Tr, int np, size_t o, size_t oh) {
    const Config* c = &M->cfg;
    ParameterTensors *p = &M->params, *dp = &M->grads;
    TxActs *t = &M->tx->a, *g = &M->tx->g;
    int B = M->B, D = c->D, H = c->H, d = D / H, Nq = B * Tr;
    size_t oW = (size_t)l * D * D;
    matmul_backward_gpu(g->z + o, dp->att_wo + oW, NULL, g->y + o, t->z + o, p->att_wo + oW, Nq, D, D);
    attention_backward_gpu(g->q + o, g->k + o, g->v + o, g->lse + oh, g->z + o, t->q + o, t->k + o, t->v + o, t->z + o,
                           t->lse + oh, B, Tr, H, d, c->window, np);
    rope_forward_gpu(g->q + o, g->q + o, B, Tr, H, d, -1);
    rope_forward_gpu(g->k + o, g->k + o, B, Tr, H, d, -1);
    matmul_backward_gpu(dua, dp->att_wq + oW, NULL, g->q + o, ua, p->att_wq + oW, Nq, D, D);
    matmul_backward_gpu(dua, dp->att_wk + oW, NULL, g->k + o, ua, p->att_wk + oW, Nq, D, D);
    matmul_backward_gpu(dua, dp->att_wv + oW, NULL, g->v + o, ua, p->att_wv + oW, Nq, D, D);
}

// ---- MAC, memory as context (SPEC §9.3; train_miras.c's mac_* functions, whose comment gives the equations).
// Segments of C tokens (whole chunks); the forward runs segment after segment, the backward in reverse, carrying
// dL/dP (and dL/dS) across segments in TxActs dPc, dSc. The memory kernels below are one block per (sequence, head)
// over a range of chunks, with the chunk scratch in global memory.

// the memory state at the first segment's start: P_0 and S = 0 in chunk 0's slot of every (sequence, head)
__global__ void mac_state_init_kernel(real* P, real* S, const real* p0, int B, int H, int nch, int nP) {
    GRID_FOR(e, (size_t)B * H * nP) {
        size_t bh = e / nP, i = e % nP, o = bh * nch * nP + i;
        P[o] = p0[(bh % H) * nP + i];
        if (S) S[o] = 0;
    }
}
// thread 0's setup of a MAC memory kernel (as memory_forward_kernel's)
__device__ void mac_block_setup(MemChunkGpu* c, MemCfg* m, const MemArgs* A) {
    if (threadIdx.x == 0) {
        *c = A->chunks[blockIdx.x];
        *m = A->m;
        c->p0 = m->anchor ? A->p0 + (size_t)(blockIdx.x % A->H) * m->nP : NULL;
        mem_tc = A->tc;
    }
    __syncthreads();
}
// the memory chunks [ch0, ch1) of the layer (mac_memory_forward): the start state of chunk ch0 is in A.P already
__global__ void __launch_bounds__(MEM_THREADS)
    mac_memory_forward_kernel(const __grid_constant__ MemArgs A, int ch0, int ch1) {
    __shared__ MemChunkGpu c;
    __shared__ MemCfg m;
    mac_block_setup(&c, &m, &A);
    int bb = blockIdx.x / A.H, h = blockIdx.x % A.H, nch = A.nch, nP = m.nP, b = A.b, T = A.T;
    size_t base = (((size_t)bb * A.H + h) * nch) * nP;
    real* P = A.P + base;
    real* S = mem_carries_S_gpu(&m) ? A.S + base : NULL;
    const real* lng = m.ln ? A.lng + (size_t)h * m.d : NULL;
    const real* lnb = m.ln ? A.lnb + (size_t)h * m.d : NULL;
    for (int ch = ch0; ch < ch1; ch++) {
        int t0 = ch * b, n = T - t0 < b ? T - t0 : b, last = ch == nch - 1;
        int nh = mem_load_chunk_gpu(&c, &A, bb, h, t0, n);  // omega's halo (a segment's first: the previous one's)
        mem_step_forward_gpu(&m, &c, nh + n, P + (size_t)ch * nP, S ? S + (size_t)ch * nP : NULL,
                             last ? NULL : P + (size_t)(ch + 1) * nP, (S && !last) ? S + (size_t)(ch + 1) * nP : NULL,
                             lng, lnb);
        scatter_rows_gpu(A.y, c.y + (size_t)nh * m.d, bb, h, t0, n, T, A.H, m.d);
    }
}
// its backward over the chunks [ch0, ch1) in reverse, from the carried dL/dP, dL/dS (none after the last segment:
// last = 1) to the carry at chunk ch0's start; dL/dP_0 (anchor) and the LN affine added to A.dbh
__global__ void __launch_bounds__(MEM_THREADS)
    mac_memory_backward_kernel(const __grid_constant__ MemArgs A, int ch0, int ch1, int last, real* carryP,
                               real* carryS) {
    __shared__ MemChunkGpu c;
    __shared__ MemCfg m;
    mac_block_setup(&c, &m, &A);
    int bb = blockIdx.x / A.H, h = blockIdx.x % A.H, nch = A.nch, nP = m.nP, b = A.b, T = A.T, d = m.d;
    size_t bh = (size_t)bb * A.H + h, base = bh * nch * nP;
    const real* lng = m.ln ? A.lng + (size_t)h * d : NULL;
    const real* lnb = m.ln ? A.lnb + (size_t)h * d : NULL;
    real *cP = carryP + bh * nP, *cS = mem_carries_S_gpu(&m) ? carryS + bh * nP : NULL;
    block_zero(c.dlng, d);
    block_zero(c.dlnb, d);
    if (m.anchor) block_zero(c.dp0, nP);
    real *dPn = last ? NULL : cP, *dSn = last ? NULL : cS, *dPs = c.Pa, *dSs = c.Sa;
    for (int ch = ch1 - 1; ch >= ch0; ch--) {
        int t0 = ch * b, n = T - t0 < b ? T - t0 : b;
        int nh = mem_load_chunk_gpu(&c, &A, bb, h, t0, n);  // omega's halo rows (their dy is 0)
        if (nh) block_zero(c.dy, (size_t)nh * d);
        gather_rows_gpu(c.dy + (size_t)nh * d, A.dy, bb, h, t0, n, T, A.H, d);
        mem_step_backward_gpu(&m, &c, nh + n, c.dy, A.P + base + (size_t)ch * nP,
                              mem_carries_S_gpu(&m) ? A.S + base + (size_t)ch * nP : NULL, dPn, dSn, dPs, dSs, lng,
                              lnb);
        if (m.omega > 1 || m.poly)  // (accumulates: the halo's rows are the previous segment's, whose inputs'
            omega_store_chunk_grads_gpu(&c, &A, bb, h, t0, n);  // backward runs after this one)
        else
            store_chunk_grads_gpu(&c, &A, bb, h, t0, n);
        dPn = dPs;
        dSn = dSs;
        dPs = dPs == c.Pa ? c.Pb : c.Pa;
        dSs = dSs == c.Sa ? c.Sb : c.Sa;
    }
    real* acc = A.dbh + bh * (nP + 2 * d);
    FOR(i, nP) {
        cP[i] = dPn[i];
        if (cS) cS[i] = dSn[i];
        if (m.anchor) acc[i] += c.dp0[i];
    }
    FOR(i, d) {
        acc[nP + i] += c.dlng[i];
        acc[nP + d + i] += c.dlnb[i];
    }
    __syncthreads();
}
// rows [t0, t0+n) as a read without update (a = 1, eta = 0, theta = 0, k = v = 0, no omega halo or window;
// mac_read_rows): q from uq; with poly the raw rows go to qr, kr and q's features from uqf (B*T, H*D_phi) to q and k
// (k's any finite row: eta = 0)
__device__ void mac_read_rows_gpu(MemChunkGpu* c, const MemArgs* A, const real* uq, const real* uqf, int bb, int h,
                                  int t0, int n) {
    int d = A->m.d, din = A->m.din, poly = A->m.poly;
    FOR(e, n * d) {
        real x = uq[((size_t)bb * A->T + t0 + e / d) * A->D + h * d + e % d];
        if (poly) {
            c->qr[e] = x;
            c->kr[e] = 0;
        } else {
            c->q[e] = x;
            c->k[e] = 0;
        }
        c->v[e] = 0;
    }
    if (poly) FOR(e, n * din) {
            real x = uqf[(((size_t)bb * A->T + t0 + e / din) * A->H + h) * din + e % din];
            c->q[e] = x;
            c->k[e] = x;
        }
    FOR(t, n) {
        c->a[t] = 1;
        c->theta[t] = 0;
        c->eta[t] = 0;
    }
    if (threadIdx.x == 0) {
        c->nh = 0;
        c->wc = 1;
    }
    __syncthreads();
}
// h rows [s0, s1) = M(uq; P_(s)) at the segment-start state (chunk s0/b's), in pieces of <= b rows (mac_h_forward)
__global__ void __launch_bounds__(MEM_THREADS)
    mac_read_forward_kernel(const __grid_constant__ MemArgs A, const real* uq, const real* uqf, real* hout, int s0,
                            int s1) {
    __shared__ MemChunkGpu c;
    __shared__ MemCfg m;
    mac_block_setup(&c, &m, &A);
    int bb = blockIdx.x / A.H, h = blockIdx.x % A.H, nP = m.nP, b = A.b;
    size_t base = (((size_t)bb * A.H + h) * A.nch + s0 / b) * nP;
    for (int t0 = s0; t0 < s1; t0 += b) {
        int n = s1 - t0 < b ? s1 - t0 : b;
        mac_read_rows_gpu(&c, &A, uq, uqf, bb, h, t0, n);
        mem_step_forward_gpu(&m, &c, n, A.P + base, mem_carries_S_gpu(&m) ? A.S + base : NULL, NULL, NULL,
                             m.ln ? A.lng + (size_t)h * m.d : NULL, m.ln ? A.lnb + (size_t)h * m.d : NULL);
        scatter_rows_gpu(hout, c.y, bb, h, t0, n, A.T, A.H, m.d);
    }
}
// its backward: duq rows (written; poly: the raw rows', and the features' into duqf), dL/dP_(s), dL/dS_(s) added to
// the carry, P_0 (anchor) and LN affine to A.dbh
__global__ void __launch_bounds__(MEM_THREADS)
    mac_read_backward_kernel(const __grid_constant__ MemArgs A, const real* uq, const real* uqf, const real* dh,
                             real* duq, real* duqf, int s0, int s1, real* carryP, real* carryS) {
    __shared__ MemChunkGpu c;
    __shared__ MemCfg m;
    mac_block_setup(&c, &m, &A);
    int bb = blockIdx.x / A.H, h = blockIdx.x % A.H, nP = m.nP, b = A.b, d = m.d;
    size_t bh = (size_t)bb * A.H + h, base = (bh * A.nch + s0 / b) * nP;
    real *cP = carryP + bh * nP, *cS = carryS + bh * nP, *acc = A.dbh + bh * (nP + 2 * d);
    for (int t0 = s0; t0 < s1; t0 += b) {
        int n = s1 - t0 < b ? s1 - t0 : b;
        block_zero(c.dlng, d);
        block_zero(c.dlnb, d);
        if (m.anchor) block_zero(c.dp0, nP);
        mac_read_rows_gpu(&c, &A, uq, uqf, bb, h, t0, n);
        gather_rows_gpu(c.dy, dh, bb, h, t0, n, A.T, A.H, d);
        mem_step_backward_gpu(&m, &c, n, c.dy, A.P + base, mem_carries_S_gpu(&m) ? A.S + base : NULL, NULL, NULL, c.Pa,
                              c.Sa, m.ln ? A.lng + (size_t)h * d : NULL, m.ln ? A.lnb + (size_t)h * d : NULL);
        scatter_rows_gpu(duq, c.dqr, bb, h, t0, n, A.T, A.H, d);  // (dqr: dq without poly)
        if (m.poly) scatter_rows_gpu(duqf, c.dq, bb, h, t0, n, A.T, A.H, m.din);
        FOR(i, nP) {
            cP[i] += c.Pa[i];
            if (mem_carries_S_gpu(&m)) cS[i] += c.Sa[i];
            if (m.anchor) acc[i] += c.dp0[i];
        }
        FOR(i, d) {
            acc[nP + i] += c.dlng[i];
            acc[nP + d + i] += c.dlnb[i];
        }
        __syncthreads();
    }
}
// MAC with Lattice (train_miras.c's mac_lat_*): the state S at every segment start in Sseg ((B, H, nsl, nP) of the
// layer: slot s of (sequence, head) bh at Sseg + (bh nsl + s) nP), the lat_k-th token states in A.P as
// lattice_forward_kernel keeps them; one block per (sequence, head), thread j the row or column j
__global__ void mac_lat_init_kernel(real* Sseg, int BH, int nsl, int d) {
    size_t nP = (size_t)d * d;
    GRID_FOR(e, (size_t)BH * nP) Sseg[(e / nP) * nsl * nP + e % nP] = (e % nP) / d == (e % nP) % d ? 1 : 0;  // S_0 = I
}
// h rows [s0, s1) = S_(s) uq (Lattice's read, no update)
__global__ void mac_lat_read_kernel(const __grid_constant__ MemArgs A, const real* Sseg, int nsl, int s, const real* uq,
                                    real* hout, int s0, int s1) {
    __shared__ real q[LAT_MAXD];
    int bb = blockIdx.x / A.H, h = blockIdx.x % A.H, d = A.m.d, j = threadIdx.x;
    const real* S = Sseg + ((size_t)blockIdx.x * nsl + s) * A.m.nP;
    for (int t = s0; t < s1; t++) {
        size_t o = ((size_t)bb * A.T + t) * A.D + (size_t)h * d;
        if (j < d) q[j] = uq[o + j];
        __syncthreads();
        if (j < d) {
            real acc = 0;
            for (int i = 0; i < d; i++) acc += S[(size_t)i * d + j] * q[i];
            hout[o + j] = acc;
        }
        __syncthreads();
    }
}
// its backward: duq = S_(s)^T dh (written), the carry G += dh uq^T (thread j: column j)
__global__ void mac_lat_read_backward_kernel(const __grid_constant__ MemArgs A, const real* Sseg, int nsl, int s,
                                             const real* uq, const real* dh, real* duq, int s0, int s1, real* carry) {
    __shared__ real q[LAT_MAXD], dy[LAT_MAXD];
    int bb = blockIdx.x / A.H, h = blockIdx.x % A.H, d = A.m.d, j = threadIdx.x;
    const real* S = Sseg + ((size_t)blockIdx.x * nsl + s) * A.m.nP;
    real* G = carry + (size_t)blockIdx.x * A.m.nP;
    for (int t = s0; t < s1; t++) {
        size_t o = ((size_t)bb * A.T + t) * A.D + (size_t)h * d;
        if (j < d) {
            q[j] = uq[o + j];
            dy[j] = dh[o + j];
        }
        __syncthreads();
        if (j < d) {
            duq[o + j] = dotv_gpu(S + (size_t)j * d, dy, d);
            for (int r = 0; r < d; r++) G[(size_t)j * d + r] += dy[r] * q[j];
        }
        __syncthreads();
    }
}
// the memory's steps over rows [s0, s1) from S_(s): reads into A.y, checkpoints every lat_k-th token, the end state
// into slot s + 1
__global__ void mac_lat_forward_kernel(const __grid_constant__ MemArgs A, real* Sseg, int nsl, int s, int s0, int s1) {
    __shared__ LatSh sh;
    size_t nP = A.m.nP;
    real* S = A.lat + (size_t)blockIdx.x * (A.m.lat_k + 2) * nP;
    real* seg = Sseg + (size_t)blockIdx.x * nsl * nP;
    block_copy(S, seg + (size_t)s * nP, nP);
    lat_rows_forward(&A, &sh, s0, s1, S);
    block_copy(seg + (size_t)(s + 1) * nP, S, nP);
}
// its backward over rows [s0, s1) in reverse, carrying G = dL/dS (carry, (B, H, nP)) from s1 to s0
// (lat_rows_backward; its first block, when it begins before s0, from S_(s))
__global__ void mac_lat_backward_kernel(const __grid_constant__ MemArgs A, const real* Sseg, int nsl, int s, int s0,
                                        int s1, real* carry) {
    __shared__ LatSh sh;
    size_t nP = A.m.nP;
    lat_rows_backward(&A, &sh, s0, s1, Sseg + ((size_t)blockIdx.x * nsl + s) * nP,
                      A.lat + (size_t)blockIdx.x * (A.m.lat_k + 2) * nP, carry + (size_t)blockIdx.x * nP);
}
// dbh += the carry at the first segment's start (dL/dP_0 through the state; S_0 = 0 is fixed)
__global__ void mac_carry_add_kernel(real* dbh, const real* carryP, int BH, int nP, int d) {
    GRID_FOR(e, (size_t)BH * nP) dbh[(e / nP) * (nP + 2 * d) + e % nP] += carryP[e];
}

// the causal conv of rows [t0, t1) of each sequence only (and act = SiLU of them), and its backward for those output
// rows: dx (rows back to t0 - K + 1) and dw accumulated; a thread per channel in the backward (no two write alike)
__global__ void mac_conv_rows_forward_kernel(real* out, real* act, const real* x, const real* w, int B, int T, int C,
                                             int K, int t0, int t1) {
    int n = t1 - t0;
    GRID_FOR(e, (size_t)B * n * C) {
        int i = (int)(e % C), t = t0 + (int)(e / C % n), bb = (int)(e / C / n);
        real s = 0;
        for (int j = 0; j < K; j++) {
            int tt = t - K + 1 + j;
            if (tt >= 0) s += w[i * K + j] * x[((size_t)bb * T + tt) * C + i];
        }
        size_t o = ((size_t)bb * T + t) * C + i;
        out[o] = s;
        act[o] = silur_gpu(s);
    }
}
__global__ void mac_conv_rows_backward_kernel(real* dx, real* dw, const real* dout, const real* x, const real* w, int B,
                                              int T, int C, int K, int t0, int t1) {
    GRID_FOR(i, (size_t)C) {
        real acc[CONV_KMAX] = {0};
        for (int bb = 0; bb < B; bb++)
            for (int t = t0; t < t1; t++) {
                real g = dout[((size_t)bb * T + t) * C + i];
                for (int j = 0; j < K; j++) {
                    int tt = t - K + 1 + j;
                    if (tt < 0) continue;
                    dx[((size_t)bb * T + tt) * C + i] += w[i * K + j] * g;
                    acc[j] += g * x[((size_t)bb * T + tt) * C + i];
                }
            }
        for (int j = 0; j < K; j++) dw[i * K + j] += acc[j];
    }
}

// The segment attention of queries [s0, s1): query j (u_j Wq_a^T, RoPE at N_p + j) over the keys P (np), h_s0..j,
// u_s0..j in this order (mac_attn_forward), online softmax as attention_forward_kernel; a warp per (sequence, row, head)
struct MacKV {
    const real *k, *v, *kh, *vh, *kP, *vP;  // (B, T, D) u and h rows; (np, D) P's
};
__device__ __forceinline__ size_t mac_key_row(int e, int np, int n, int bb, int T, int s0, int D, int h, int d,
                                              int* kind) {
    *kind = e < np ? 0 : e < np + n ? 1 : 2;  // P, h, u
    int r = *kind == 0 ? e : s0 + (e - np) % n;
    return *kind == 0 ? (size_t)r * D + (size_t)h * d : ((size_t)bb * T + r) * D + (size_t)h * d;
}
__global__ void mac_attn_forward_kernel(real* z, real* lse, const real* q, MacKV kv, int B, int T, int H, int d, int np,
                                        int s0, int s1) {
    real scale = 1 / sqrtf((real)d);
    int D = H * d, ns = s1 - s0;
    WARP_ROWS_FOR(r, (size_t)B * ns * H) {
        int h = (int)(r % H), j = s0 + (int)(r / H % ns), bb = (int)(r / H / ns), n = j - s0 + 1;
        size_t rj = ((size_t)bb * T + j) * D + (size_t)h * d;
        real qv[ATT_CPL], acc[ATT_CPL], mx = -1e30f, l = 0;
        for (int u = 0; u < ATT_CPL; u++) {
            int c = LANE + 32 * u;
            qv[u] = c < d ? q[rj + c] : 0;
            acc[u] = 0;
        }
        for (int e = 0; e < np + 2 * n; e++) {
            int kind;
            size_t re = mac_key_row(e, np, n, bb, T, s0, D, h, d, &kind);
            const real *ke = (kind == 0   ? kv.kP
                              : kind == 1 ? kv.kh
                                          : kv.k) +
                             re,
                       *ve = (kind == 0   ? kv.vP
                              : kind == 1 ? kv.vh
                                          : kv.v) +
                             re;
            real s = 0;
            for (int u = 0; u < ATT_CPL; u++) {
                int c = LANE + 32 * u;
                if (c < d) s += qv[u] * ke[c];
            }
            s = warp_sum(s) * scale;
            real mn = fmaxf(mx, s), corr = expf(mx - mn), p = expf(s - mn);
            l = l * corr + p;
            for (int u = 0; u < ATT_CPL; u++) {
                int c = LANE + 32 * u;
                if (c < d) acc[u] = acc[u] * corr + p * ve[c];
            }
            mx = mn;
        }
        for (int u = 0; u < ATT_CPL; u++) {
            int c = LANE + 32 * u;
            if (c < d) z[rj + c] = acc[u] / l;
        }
        if (LANE == 0) lse[((size_t)bb * T + j) * H + h] = mx + logf(l);
    }
}
// its backward (accumulated), with p = exp(s - lse_j), Dj = dout_j . z_j: dq_j += sum_e p (dout_j . v_e - Dj) k_e /
// sqrt(d) (a warp per query row, which stores Dj), then per key row e: dk_e += sum_j p (...) q_j / sqrt(d),
// dv_e += sum_j p dout_j over the queries j that see it: the h and u rows of the segment (a warp per row, kind and
// head), and the P rows (a warp per P row and head, over every sequence's queries of the segment)
__global__ void mac_attn_backward_dq_kernel(real* dq, real* Dsc, const real* dout, const real* z, const real* q,
                                            const real* lse, MacKV kv, int B, int T, int H, int d, int np, int s0,
                                            int s1) {
    real scale = 1 / sqrtf((real)d);
    int D = H * d, ns = s1 - s0;
    WARP_ROWS_FOR(r, (size_t)B * ns * H) {
        int h = (int)(r % H), j = s0 + (int)(r / H % ns), bb = (int)(r / H / ns), n = j - s0 + 1;
        size_t rj = ((size_t)bb * T + j) * D + (size_t)h * d;
        real qv[ATT_CPL], dov[ATT_CPL], acc[ATT_CPL], Dj = 0;
        for (int u = 0; u < ATT_CPL; u++) {
            int c = LANE + 32 * u;
            qv[u] = c < d ? q[rj + c] : 0;
            dov[u] = c < d ? dout[rj + c] : 0;
            acc[u] = 0;
            if (c < d) Dj += dov[u] * z[rj + c];
        }
        Dj = warp_sum(Dj);
        real lj = lse[((size_t)bb * T + j) * H + h];
        for (int e = 0; e < np + 2 * n; e++) {
            int kind;
            size_t re = mac_key_row(e, np, n, bb, T, s0, D, h, d, &kind);
            const real *ke = (kind == 0   ? kv.kP
                              : kind == 1 ? kv.kh
                                          : kv.k) +
                             re,
                       *ve = (kind == 0   ? kv.vP
                              : kind == 1 ? kv.vh
                                          : kv.v) +
                             re;
            real s = 0, dp = 0;
            for (int u = 0; u < ATT_CPL; u++) {
                int c = LANE + 32 * u;
                if (c < d) {
                    s += qv[u] * ke[c];
                    dp += dov[u] * ve[c];
                }
            }
            s = warp_sum(s);
            dp = warp_sum(dp);
            real p = expf(s * scale - lj), ds = p * (dp - Dj) * scale;
            for (int u = 0; u < ATT_CPL; u++) {
                int c = LANE + 32 * u;
                if (c < d) acc[u] += ds * ke[c];
            }
        }
        for (int u = 0; u < ATT_CPL; u++) {
            int c = LANE + 32 * u;
            if (c < d) dq[rj + c] += acc[u];
        }
        if (LANE == 0) Dsc[((size_t)bb * T + j) * H + h] = Dj;
    }
}
struct MacDKV {
    real *dk, *dv, *dkh, *dvh, *dkP, *dvP;
};
__global__ void mac_attn_backward_dkv_kernel(MacDKV g, const real* dout, const real* q, const real* lse,
                                             const real* Dsc, MacKV kv, int B, int T, int H, int d, int np, int s0,
                                             int s1) {
    int D = H * d, ns = s1 - s0;
    WARP_ROWS_FOR(r, (size_t)(B * ns * 2 + np) * H) {  // rows: (sequence, row, h or u), then the P rows
        int h = (int)(r % H);
        size_t w = r / H;
        if (w < (size_t)B * ns * 2) {
            int kind = (int)(w % 2), e = s0 + (int)(w / 2 % ns), bb = (int)(w / 2 / ns);
            size_t re = ((size_t)bb * T + e) * D + (size_t)h * d;
            attn_key_grad_gpu((kind ? g.dk : g.dkh) + re, (kind ? g.dv : g.dvh) + re, (kind ? kv.k : kv.kh) + re,
                              (kind ? kv.v : kv.vh) + re, dout, q, lse, Dsc, bb, bb + 1, e, s1, T, H, h, d, 1);
        } else {
            size_t re = (w - (size_t)B * ns * 2) * D + (size_t)h * d;
            attn_key_grad_gpu(g.dkP + re, g.dvP + re, kv.kP + re, kv.vP + re, dout, q, lse, Dsc, 0, B, s0, s1, T, H, h,
                              d, 1);
        }
    }
}

// y rows [s0, s1) -> the memory's inputs of those rows (projections, conv over the y sequence, SiLU, l2 norm, gates)
static void mac_inputs_forward_gpu(ModelGpu* M, int l, int s0, int s1) {
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
        matmul_forward_gpu(a->qp + oD + r * D, y, p->wq + oW, NULL, n, D, D);
        matmul_forward_gpu(a->kp + oD + r * D, y, p->wk + oW, NULL, n, D, D);
        matmul_forward_gpu(a->vp + oD + r * D, y, p->wv + oW, NULL, n, D, D);
    }
    size_t nc = (size_t)B * n * D;
    mac_conv_rows_forward_kernel<<<nblocks(nc), NT, 0, g_stream>>>(a->qc + oD, a->qs + oD, a->qp + oD,
                                                                   p->conv_q + (size_t)l * D * K, B, T, D, K, s0, s1);
    mac_conv_rows_forward_kernel<<<nblocks(nc), NT, 0, g_stream>>>(a->kc + oD, a->ks + oD, a->kp + oD,
                                                                   p->conv_k + (size_t)l * D * K, B, T, D, K, s0, s1);
    mac_conv_rows_forward_kernel<<<nblocks(nc), NT, 0, g_stream>>>(a->vc + oD, a->v + oD, a->vp + oD,
                                                                   p->conv_v + (size_t)l * D * K, B, T, D, K, s0, s1);
    KCHECK("mac_conv_rows_forward");
    for (int bb = 0; bb < B; bb++) {
        size_t r = (size_t)bb * T + s0, o = oD + r * D, oh = oH + r * H;
        l2norm_forward_gpu(a->q + o, a->qrn + oh, a->qs + o, n, H, d);
        l2norm_forward_gpu(a->k + o, a->krn + oh, a->ks + o, n, H, d);
        if (M->mem.poly) {  // poly features (SPEC §5.6) of the l2-normed q, k
            poly_forward_gpu(a->qf + oh * M->mem.din, a->q + o, p->poly_rho + (size_t)l * 3, n, H, d);
            poly_forward_gpu(a->kf + oh * M->mem.din, a->k + o, p->poly_rho + (size_t)l * 3, n, H, d);
        }
        gates_forward_gpu(M, l, t->z + o, NULL, n, a->ga + oh, a->geta + (size_t)l * N * Ge + r * Ge, a->gth + oh,
                          a->gdel + (size_t)l * N * Ge + r * Ge, a->geta_lr + (size_t)l * N * R + r * R,
                          a->gdel_lr + (size_t)l * N * R + r * R);
        if (M->mem.omega > 1) omega_gates_forward_gpu(M, l, t->z + o, NULL, n, a->ggam + oh * M->mem.omega);
    }
}
// its backward for rows [s0, s1): from the gradients of the memory's inputs of those rows to dy (M->tx->g.z) rows
static void mac_inputs_backward_gpu(ModelGpu* M, int l, int s0, int s1) {
    const Config* c = &M->cfg;
    ParameterTensors *p = &M->params, *dp = &M->grads;
    ActivationTensors *a = &M->acts, *g = &M->grads_acts;
    TxActs *t = &M->tx->a, *tg = &M->tx->g;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = D / H, K = c->K, n = s1 - s0, Ge = c->gate_rank ? D : H,
        R = c->gate_rank;
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H, oW = (size_t)l * D * D;
    for (int bb = 0; bb < B; bb++) {
        size_t r = (size_t)bb * T + s0, o = oD + r * D, oh = oH + r * H;
        gates_backward_gpu(M, l, tg->z + o, t->z + o, NULL, n, a, g, oh, (size_t)l * N * Ge + r * Ge,
                           (size_t)l * N * R + r * R);
        int w = M->mem.omega, din = M->mem.din;
        if (w > 1) omega_gates_backward_gpu(M, l, tg->z + o, t->z + o, NULL, n, a->ggam + oh * w, g->ggam + oh * w);
        if (M->mem.poly) {  // the features' gradients into q, k (which hold the residual's) and rho
            const real* rho = p->poly_rho + (size_t)l * 3;
            poly_backward_gpu(g->q + o, dp->poly_rho + (size_t)l * 3, g->qf + oh * din, a->q + o, rho, n, H, d,
                              g_scratch);
            poly_backward_gpu(g->k + o, dp->poly_rho + (size_t)l * 3, g->kf + oh * din, a->k + o, rho, n, H, d,
                              g_scratch);
        }
        l2norm_backward_gpu(g->qs + o, g->q + o, a->q + o, a->qrn + oh, n, H, d);
        l2norm_backward_gpu(g->ks + o, g->k + o, a->k + o, a->krn + oh, n, H, d);
        silu_backward_gpu(g->qc + o, g->qs + o, a->qc + o, (size_t)n * D);
        silu_backward_gpu(g->kc + o, g->ks + o, a->kc + o, (size_t)n * D);
        silu_backward_gpu(g->vc + o, g->v + o, a->vc + o, (size_t)n * D);
    }
    mac_conv_rows_backward_kernel<<<nblocks(D), NT, 0, g_stream>>>(g->qp + oD, dp->conv_q + (size_t)l * D * K,
                                                                   g->qc + oD, a->qp + oD,
                                                                   p->conv_q + (size_t)l * D * K, B, T, D, K, s0, s1);
    mac_conv_rows_backward_kernel<<<nblocks(D), NT, 0, g_stream>>>(g->kp + oD, dp->conv_k + (size_t)l * D * K,
                                                                   g->kc + oD, a->kp + oD,
                                                                   p->conv_k + (size_t)l * D * K, B, T, D, K, s0, s1);
    mac_conv_rows_backward_kernel<<<nblocks(D), NT, 0, g_stream>>>(g->vp + oD, dp->conv_v + (size_t)l * D * K,
                                                                   g->vc + oD, a->vp + oD,
                                                                   p->conv_v + (size_t)l * D * K, B, T, D, K, s0, s1);
    KCHECK("mac_conv_rows_backward");
    for (int bb = 0; bb < B; bb++) {  // the projections' rows [s0, s1) are complete: later rows' convs are done
        size_t o = oD + ((size_t)bb * T + s0) * D;
        const real* y = t->z + o;
        matmul_backward_gpu(tg->z + o, dp->wq + oW, NULL, g->qp + o, y, p->wq + oW, n, D, D);
        matmul_backward_gpu(tg->z + o, dp->wk + oW, NULL, g->kp + o, y, p->wk + oW, n, D, D);
        matmul_backward_gpu(tg->z + o, dp->wv + oW, NULL, g->vp + o, y, p->wv + oW, n, D, D);
    }
}
static MacKV mac_kv(ModelGpu* M, int l) {
    TxActs* t = &M->tx->a;
    size_t oD = (size_t)l * M->B * M->T * M->cfg.D, oP = (size_t)l * M->cfg.npers * M->cfg.D;
    MacKV kv = {t->k + oD, t->v + oD, t->kh + oD, t->vh + oD, t->kP + oP, t->vP + oP};
    return kv;
}

// MAC's mixing part of layer l: M->acts.mo from u = M->acts.ln1 (model_forward_gpu then adds x)
static void mac_layer_forward_gpu(ModelGpu* M, int l) {
    const Config* c = &M->cfg;
    ParameterTensors* p = &M->params;
    ActivationTensors* a = &M->acts;
    TxActs* t = &M->tx->a;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = D / H, K = c->K, np = c->npers, C = c->seg, b = c->b;
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H, oW = (size_t)l * D * D;
    const real* u = a->ln1 + oD;
    // the u sequence: the memory's q for h; the attention's q, k, v (positions N_p + t); P's keys and values
    matmul_forward_gpu(t->uqp + oD, u, p->wq + oW, NULL, N, D, D);
    conv_forward_gpu(t->uqc + oD, t->uqp + oD, p->conv_q + (size_t)l * D * K, B, T, D, K, t->uqs + oD);
    l2norm_forward_gpu(t->uq + oD, t->uqrn + oH, t->uqs + oD, N, H, d);
    real* uqf = M->mem.poly ? t->uqf + oH * M->mem.din : NULL;  // poly: uq's features (SPEC §5.6)
    if (uqf) poly_forward_gpu(uqf, t->uq + oD, p->poly_rho + (size_t)l * 3, N, H, d);
    matmul_forward_gpu(t->q + oD, u, p->att_wq + oW, NULL, N, D, D);
    rope_forward_gpu(t->q + oD, t->q + oD, B, T, H, d, 1, np);
    matmul_forward_gpu(t->k + oD, u, p->att_wk + oW, NULL, N, D, D);
    rope_forward_gpu(t->k + oD, t->k + oD, B, T, H, d, 1, np);
    matmul_forward_gpu(t->v + oD, u, p->att_wv + oW, NULL, N, D, D);
    if (np) {
        const real* Pr = p->pers + (size_t)l * np * D;
        real* kP = t->kP + (size_t)l * np * D;
        matmul_forward_gpu(kP, Pr, p->att_wk + oW, NULL, np, D, D);
        rope_forward_gpu(kP, kP, 1, np, H, d, 1);
        matmul_forward_gpu(t->vP + (size_t)l * np * D, Pr, p->att_wv + oW, NULL, np, D, D);
    }
    MemArgs A = mem_args(M, l);  // (A.sm empty: the chunk scratch stays in global memory)
    int lat = A.m.lattice, nsl = (T + C - 1) / C + 1;  // Lattice: the segment-start states (tx Sseg)
    real* Sseg = lat ? t->Sseg + (size_t)l * B * H * nsl * A.m.nP : NULL;
    if (lat)
        mac_lat_init_kernel<<<nblocks((size_t)B * H * A.m.nP), NT, 0, g_stream>>>(Sseg, B * H, nsl, A.m.d);
    else
        mac_state_init_kernel<<<nblocks((size_t)B * H * A.m.nP), NT, 0, g_stream>>>(A.P, A.S, A.p0, B, H, A.nch,
                                                                                    A.m.nP);
    KCHECK("mac_state_init");
    MacKV kv = mac_kv(M, l);
    for (int s0 = 0; s0 < T; s0 += C) {
        int s1 = s0 + C < T ? s0 + C : T, n = s1 - s0;
        if (lat)
            mac_lat_read_kernel<<<B * H, lat_threads(A.m.d), 0, g_stream>>>(A, Sseg, nsl, s0 / C, t->uq + oD, t->h + oD,
                                                                            s0, s1);
        else if (A.m.phistar)
            mac_phi_read_kernel<<<B * H, MEM_THREADS, 0, g_stream>>>(A, t->uq + oD, t->h + oD, s0, s1);
        else
            mac_read_forward_kernel<<<B * H, MEM_THREADS, 0, g_stream>>>(A, t->uq + oD, uqf, t->h + oD, s0, s1);
        KCHECK("mac_read_forward");
        for (int bb = 0; bb < B; bb++) {
            size_t o = oD + ((size_t)bb * T + s0) * D;
            matmul_forward_gpu(t->kh + o, t->h + o, p->att_wk + oW, NULL, n, D, D);
            rope_forward_gpu(t->kh + o, t->kh + o, 1, n, H, d, 1, np + s0);
            matmul_forward_gpu(t->vh + o, t->h + o, p->att_wv + oW, NULL, n, D, D);
        }
        mac_attn_forward_kernel<<<warp_blocks((size_t)B * n * H), NT, 0, g_stream>>>(t->z + oD, t->lse + oH, t->q + oD,
                                                                                     kv, B, T, H, d, np, s0, s1);
        KCHECK("mac_attn_forward");
        mac_inputs_forward_gpu(M, l, s0, s1);
        if (lat)
            mac_lat_forward_kernel<<<B * H, lat_threads(A.m.d), 0, g_stream>>>(A, Sseg, nsl, s0 / C, s0, s1);
        else if (A.m.phistar)
            phi_memory_forward_kernel<<<B * H, MEM_THREADS, 0, g_stream>>>(A, s0 / b, (s1 + b - 1) / b);
        else
            mac_memory_forward_kernel<<<B * H, MEM_THREADS, 0, g_stream>>>(A, s0 / b, (s1 + b - 1) / b);
        KCHECK("mac_memory_forward");
    }
    // x += RMSNorm_g1(y Wo_a^T) * sigmoid(RMSNorm_g2(m))
    matmul_forward_gpu(t->y + oD, t->z + oD, p->att_wo + oW, NULL, N, D, D);
    rmsnorm_forward_gpu(t->n1 + oD, t->r1 + (size_t)l * N, t->y + oD, p->og1_w + (size_t)l * D, N, 1, D);
    rmsnorm_forward_gpu(t->n2 + oD, t->r2 + (size_t)l * N, a->y + oD, p->og2_w + (size_t)l * D, N, 1, D);
    out_gate_forward_kernel<<<nblocks(N * D), NT, 0, g_stream>>>(a->mo + oD, t->n1 + oD, t->n2 + oD, N * D);
    KCHECK("out_gate_forward");
}
// Its backward: from M->grads_acts.res2 to du (M->grads_acts.ln1, accumulated) and the parameters
static void mac_layer_backward_gpu(ModelGpu* M, int l) {
    const Config* c = &M->cfg;
    ParameterTensors *p = &M->params, *dp = &M->grads;
    ActivationTensors *a = &M->acts, *g = &M->grads_acts;
    TxActs *t = &M->tx->a, *tg = &M->tx->g;
    int B = M->B, T = M->T, D = c->D, H = c->H, d = D / H, K = c->K, np = c->npers, C = c->seg, b = c->b;
    size_t N = (size_t)B * T, oD = (size_t)l * N * D, oH = (size_t)l * N * H, oW = (size_t)l * D * D;
    const real* u = a->ln1 + oD;
    real* du = g->ln1 + oD;
    MemArgs A = mem_args(M, l);  // (A.sm empty: the chunk scratch stays in global memory)
    int nP = A.m.nP;
    cudaCheck(cudaMemset(M->tx->gmem, 0, M->tx->n * sizeof(real)));
    cudaCheck(cudaMemset(M->mem_dbh, 0, (size_t)B * H * (nP + 2 * d) * sizeof(real)));
    out_gate_backward_kernel<<<nblocks(N * D), NT, 0, g_stream>>>(tg->n1 + oD, tg->n2 + oD, g->res2 + oD, t->n1 + oD,
                                                                  t->n2 + oD, N * D);
    KCHECK("out_gate_backward");
    rmsnorm_backward_gpu(tg->y + oD, dp->og1_w + (size_t)l * D, tg->n1 + oD, t->y + oD, p->og1_w + (size_t)l * D,
                         t->r1 + (size_t)l * N, N, 1, D);
    rmsnorm_backward_gpu(g->y + oD, dp->og2_w + (size_t)l * D, tg->n2 + oD, a->y + oD, p->og2_w + (size_t)l * D,
                         t->r2 + (size_t)l * N, N, 1, D);
    matmul_backward_gpu(tg->z + oD, dp->att_wo + oW, NULL, tg->y + oD, t->z + oD, p->att_wo + oW, N, D, D);
    MacKV kv = mac_kv(M, l);
    size_t oP = (size_t)l * np * D;
    MacDKV gkv = {tg->k + oD, tg->v + oD, tg->kh + oD, tg->vh + oD, tg->kP + oP, tg->vP + oP};
    real *carryP = tg->dPc, *carryS = tg->dSc, *Dsc = tg->lse + oH;  // (g.lse: the softmax's Dj, scratch)
    real *uqf = A.m.poly ? t->uqf + oH * A.m.din : NULL, *duqf = A.m.poly ? tg->uqf + oH * A.m.din : NULL;
    int lat = A.m.lattice, nsl = (T + C - 1) / C + 1;  // Lattice: the segment-start states (tx Sseg)
    real* Sseg = lat ? t->Sseg + (size_t)l * B * H * nsl * nP : NULL;
    for (int s = (T + C - 1) / C - 1; s >= 0; s--) {
        int s0 = s * C, s1 = s0 + C < T ? s0 + C : T, n = s1 - s0;
        // the memory's chunks of the segment, in reverse, from the carried dL/dP (none after the last chunk)
        if (lat)  // (the carry is 0 after the last segment: tx gmem was zeroed)
            mac_lat_backward_kernel<<<B * H, lat_threads(A.m.d), 0, g_stream>>>(A, Sseg, nsl, s, s0, s1, carryP);
        else if (A.m.phistar)  // (dL/dLA in the first B*H floats of tx g.phd)
            phi_memory_backward_kernel<<<B * H, MEM_THREADS, 0, g_stream>>>(A, s0 / b, (s1 + b - 1) / b, tg->phd, NULL);
        else
            mac_memory_backward_kernel<<<B * H, MEM_THREADS, 0, g_stream>>>(A, s0 / b, (s1 + b - 1) / b, s1 == T,
                                                                            carryP, carryS);
        KCHECK("mac_memory_backward");
        mac_inputs_backward_gpu(M, l, s0, s1);  // dy of the segment is complete: from the gate and the memory's inputs
        mac_attn_backward_dq_kernel<<<warp_blocks((size_t)B * n * H), NT, 0, g_stream>>>(
            tg->q + oD, Dsc, tg->z + oD, t->z + oD, t->q + oD, t->lse + oH, kv, B, T, H, d, np, s0, s1);
        KCHECK("mac_attn_backward_dq");
        mac_attn_backward_dkv_kernel<<<warp_blocks((size_t)(B * n * 2 + np) * H), NT, 0, g_stream>>>(
            gkv, tg->z + oD, t->q + oD, t->lse + oH, Dsc, kv, B, T, H, d, np, s0, s1);
        KCHECK("mac_attn_backward_dkv");
        for (int bb = 0; bb < B; bb++) {
            size_t o = oD + ((size_t)bb * T + s0) * D;
            rope_forward_gpu(tg->kh + o, tg->kh + o, 1, n, H, d, -1, np + s0);
            matmul_backward_gpu(tg->h + o, dp->att_wk + oW, NULL, tg->kh + o, t->h + o, p->att_wk + oW, n, D, D);
            matmul_backward_gpu(tg->h + o, dp->att_wv + oW, NULL, tg->vh + o, t->h + o, p->att_wv + oW, n, D, D);
        }
        // the h reads: dL/duq and dL/dP_(s), added to the carry
        if (lat)
            mac_lat_read_backward_kernel<<<B * H, lat_threads(A.m.d), 0, g_stream>>>(
                A, Sseg, nsl, s, t->uq + oD, tg->h + oD, tg->uq + oD, s0, s1, carryP);
        else if (A.m.phistar)
            mac_phi_read_backward_kernel<<<B * H, MEM_THREADS, 0, g_stream>>>(A, t->uq + oD, tg->h + oD, tg->uq + oD,
                                                                              s0, s1, carryP);
        else
            mac_read_backward_kernel<<<B * H, MEM_THREADS, 0, g_stream>>>(A, t->uq + oD, uqf, tg->h + oD, tg->uq + oD,
                                                                          duqf, s0, s1, carryP, carryS);
        KCHECK("mac_read_backward");
    }
    // P_0 and the memory LN, summed over the batch in a fixed order (the carry: dL/dP_0 through the state; Lattice:
    // S_0 = I is no parameter)
    if (!lat) {
        mac_carry_add_kernel<<<nblocks((size_t)B * H * nP), NT, 0, g_stream>>>(M->mem_dbh, carryP, B * H, nP, d);
        KCHECK("mac_carry_add");
        memory_dbh_reduce_kernel<<<nblocks((size_t)H * (nP + 2 * d)), NT, 0, g_stream>>>(
            dp->mem_p0 + (size_t)l * H * nP, A.m.ln ? dp->mem_ln_g + (size_t)l * H * d : NULL,
            A.m.ln ? dp->mem_ln_b + (size_t)l * H * d : NULL, M->mem_dbh, B, H, nP, d, A.m.ln, NULL, 0);
        KCHECK("memory_dbh_reduce");
    }
    // the u sequence: the attention's q, k, v; the memory's q for h; P's keys and values
    rope_forward_gpu(tg->q + oD, tg->q + oD, B, T, H, d, -1, np);
    rope_forward_gpu(tg->k + oD, tg->k + oD, B, T, H, d, -1, np);
    matmul_backward_gpu(du, dp->att_wq + oW, NULL, tg->q + oD, u, p->att_wq + oW, N, D, D);
    matmul_backward_gpu(du, dp->att_wk + oW, NULL, tg->k + oD, u, p->att_wk + oW, N, D, D);
    matmul_backward_gpu(du, dp->att_wv + oW, NULL, tg->v + oD, u, p->att_wv + oW, N, D, D);
    if (uqf)  // the h reads' feature gradients into uq's (which holds the residual's) and rho
        poly_backward_gpu(tg->uq + oD, dp->poly_rho + (size_t)l * 3, duqf, t->uq + oD, p->poly_rho + (size_t)l * 3, N,
                          H, d, g_scratch);
    l2norm_backward_gpu(tg->uqs + oD, tg->uq + oD, t->uq + oD, t->uqrn + oH, N, H, d);
    silu_backward_gpu(tg->uqc + oD, tg->uqs + oD, t->uqc + oD, N * D);
    conv_backward_gpu(tg->uqp + oD, dp->conv_q + (size_t)l * D * K, tg->uqc + oD, t->uqp + oD,
                      p->conv_q + (size_t)l * D * K, B, T, D, K);
    matmul_backward_gpu(du, dp->wq + oW, NULL, tg->uqp + oD, u, p->wq + oW, N, D, D);
    if (np) {
        const real* Pr = p->pers + oP;
        real *dPr = dp->pers + oP, *dkP = tg->kP + oP;
        rope_forward_gpu(dkP, dkP, 1, np, H, d, -1);
        matmul_backward_gpu(dPr, dp->att_wk + oW, NULL, dkP, Pr, p->att_wk + oW, np, D, D);
        matmul_backward_gpu(dPr, dp->att_wv + oW, NULL, tg->vP + oP, Pr, p->att_wv + oW, np, D, D);
    }
}

// The layer's mixing part, from x and u = RMSNorm(x) (M->acts.ln1) to M->acts.mo, so that model_forward_gpu's
// res2 = x + mo: MAL mo = m + attn_SWA(RMSNorm_attn(x + m)) Wo_a, MAG mo = o(y, m) (train_miras.c's
// titans_layer_forward)
static void titans_layer_forward_gpu(ModelGpu* M, int l, const real* x) {
    if (M->cfg.arch == ARCH_MAC) {
        mac_layer_forward_gpu(M, l);
        return;
    }
    TitansGpu* t = M->tx;
    ModelGpu* X = &t->X;
    const Config* c = &M->cfg;
    ParameterTensors* p = &M->params;
    int B = M->B, T = M->T, Tn = t->Tn, np = c->npers, D = c->D, H = c->H;
    size_t N = (size_t)B * T, Ns = (size_t)B * Tn;
    size_t oD = (size_t)l * N * D, oS = (size_t)l * Ns * D;
    real *us = X->acts.ln1 + oS, *m = t->a.m + oD, *mo = M->acts.mo + oD;
    stream_kernel<<<nblocks(Ns * D), NT, 0, g_stream>>>(us, p->pers + (size_t)l * np * D, M->acts.ln1 + oD, B, T, np,
                                                        D);
    KCHECK("stream");
    mixer_forward_gpu(X, l, NULL, NULL);
    copy_rows_gpu(m, X->acts.mo + oS, B, T, D, T, 0, Tn, np, 0);  // m = the mixer's sequence rows
    if (c->arch == ARCH_MAL) {
        d2d(mo, m, N * D * sizeof(real));
        residual_forward_gpu(m, x, m, N * D);  // m := x + m, the attention sublayer's input
        rmsnorm_forward_gpu(t->a.ua + oD, t->a.ra + (size_t)l * N, m, p->rmsa_w + (size_t)l * D, N, 1, D);
        tx_attn_forward_gpu(M, l, t->a.ua + oD, T, 0, oD, (size_t)l * N * H);
        residual_forward_gpu(mo, mo, t->a.y + oD, N * D);
    } else {  // MAG
        tx_attn_forward_gpu(M, l, us, Tn, np, oS, (size_t)l * Ns * H);
        real* ys = t->a.ys + oD;
        copy_rows_gpu(ys, t->a.y + oS, B, T, D, T, 0, Tn, np, 0);
        rmsnorm_forward_gpu(t->a.n1 + oD, t->a.r1 + (size_t)l * N, ys, p->og1_w + (size_t)l * D, N, 1, D);
        rmsnorm_forward_gpu(t->a.n2 + oD, t->a.r2 + (size_t)l * N, m, p->og2_w + (size_t)l * D, N, 1, D);
        out_gate_forward_kernel<<<nblocks(N * D), NT, 0, g_stream>>>(mo, t->a.n1 + oD, t->a.n2 + oD, N * D);
        KCHECK("out_gate_forward");
    }
}
// Its backward: from M->grads_acts.res2 (= dL/d mo; model_backward_gpu has added it to dx already) to dx (MAL: the
// path through RMSNorm_attn), du (the sequence rows of the stream's gradient) and the parameters (P: the prefix rows)
static void titans_layer_backward_gpu(ModelGpu* M, int l, real* dx, real* du) {
    if (M->cfg.arch == ARCH_MAC) {
        mac_layer_backward_gpu(M, l);
        return;
    }
    TitansGpu* t = M->tx;
    ModelGpu* X = &t->X;
    const Config* c = &M->cfg;
    ParameterTensors *p = &M->params, *dp = &M->grads;
    int B = M->B, T = M->T, Tn = t->Tn, np = c->npers, D = c->D, H = c->H;
    size_t N = (size_t)B * T, Ns = (size_t)B * Tn;
    size_t oD = (size_t)l * N * D, oS = (size_t)l * Ns * D;
    X->grads = M->grads;
    cudaCheck(cudaMemset(X->grads_acts_memory, 0, X->num_acts * sizeof(real)));
    cudaCheck(cudaMemset(t->gmem, 0, t->n * sizeof(real)));
    const real* dres = M->grads_acts.res2 + oD;
    real* dm = t->g.m + oD;
    if (c->arch == ARCH_MAL) {
        d2d(t->g.y + oD, dres, N * D * sizeof(real));
        tx_attn_backward_gpu(M, l, t->g.ua + oD, t->a.ua + oD, T, 0, oD, (size_t)l * N * H);
        rmsnorm_backward_gpu(dm, dp->rmsa_w + (size_t)l * D, t->g.ua + oD, t->a.m + oD, p->rmsa_w + (size_t)l * D,
                             t->a.ra + (size_t)l * N, N, 1, D);
        residual_forward_gpu(dx, dx, dm, N * D);  // x's path through the attention sublayer's input x + m
        residual_forward_gpu(dm, dm, dres, N * D);  // dm = dres + that path
    } else {  // MAG: o = n1 * sigmoid(n2)
        real *dn1 = t->g.n1 + oD, *dn2 = t->g.n2 + oD, *dys = t->g.ys + oD;
        out_gate_backward_kernel<<<nblocks(N * D), NT, 0, g_stream>>>(dn1, dn2, dres, t->a.n1 + oD, t->a.n2 + oD,
                                                                      N * D);
        KCHECK("out_gate_backward");
        rmsnorm_backward_gpu(dys, dp->og1_w + (size_t)l * D, dn1, t->a.ys + oD, p->og1_w + (size_t)l * D,
                             t->a.r1 + (size_t)l * N, N, 1, D);
        rmsnorm_backward_gpu(dm, dp->og2_w + (size_t)l * D, dn2, t->a.m + oD, p->og2_w + (size_t)l * D,
                             t->a.r2 + (size_t)l * N, N, 1, D);
        copy_rows_gpu(t->g.y + oS, dys, B, T, D, Tn, np, T, 0, 0);
        tx_attn_backward_gpu(M, l, X->grads_acts.ln1 + oS, X->acts.ln1 + oS, Tn, np, oS, (size_t)l * Ns * H);
    }
    real* dmo = X->grads_acts.mo + oS;
    copy_rows_gpu(dmo, dm, B, T, D, Tn, np, T, 0, 0);  // (the P rows' outputs are not used: zero gradient)
    mixer_backward_gpu(X, l, dmo, NULL, NULL);
    const real* dus = X->grads_acts.ln1 + oS;
    if (np) {
        prefix_grad_kernel<<<nblocks((size_t)np * D), NT, 0, g_stream>>>(dp->pers + (size_t)l * np * D, dus, B, Tn, np,
                                                                         D);
        KCHECK("prefix_grad");
    }
    copy_rows_gpu(du, dus, B, T, D, T, 0, Tn, np, 1);  // the stream's sequence rows
}

// The forward pass (SPEC §2, §3). targets may be NULL (no loss). inputs, targets: host arrays.
static void model_forward_gpu(ModelGpu* M, const int* inputs, const int* targets, int B, int T) {
    const Config* c = &M->cfg;
    int L = c->L, D = c->D, H = c->H, F = c->F, Vp = c->Vp, d = M->mem.d;
    size_t N = (size_t)B * T;
    for (size_t i = 0; i < N; i++)
        if (inputs[i] < 0 || inputs[i] >= c->V || (targets && (targets[i] < 0 || targets[i] >= c->V)))
            DIE("the data's tokenizer must match the model's vocab (-V)", "token id %d out of range for vocab size %d",
                targets && (targets[i] < 0 || targets[i] >= c->V) ? targets[i] : inputs[i], c->V);
    model_alloc_acts_gpu(M, B, T);
    memcpy(M->h_inputs, inputs, N * sizeof(int));
    h2d(M->inputs, inputs, N * sizeof(int));
    if (targets) {
        memcpy(M->h_targets, targets, N * sizeof(int));
        h2d(M->targets, targets, N * sizeof(int));
    }
    ParameterTensors* p = &M->params;
    ActivationTensors* a = &M->acts;
    encoder_forward_gpu(a->encoded, M->inputs, p->wte, N, D);
    for (int l = 0; l < L; l++) {
        size_t oD = (size_t)l * N * D, oH = (size_t)l * N * H, oF = (size_t)l * N * F;
        real* x = l == 0 ? a->encoded : a->res3 + oD - N * D;
        real* u = a->ln1 + oD;
        // the bf16 copies of this layer's GEMM inputs (bf16 mode; all NULL otherwise)
        bf16 *ub = M->ln1b ? M->ln1b + oD : NULL, *zb = M->zb ? M->zb + oD : NULL,
             *ln2b = M->ln2b ? M->ln2b + oD : NULL, *hgb = M->hgb ? M->hgb + oF : NULL;
        if (l == 0)  // (the later layers' u came with the residual add that made their x, below)
            rmsnorm_forward_gpu(u, a->ln1_rstd + (size_t)l * N, x, p->rms1_w + (size_t)l * D, N, 1, D, ub);
        if (c->arch)
            titans_layer_forward_gpu(M, l, x);  // MAL, MAG (section 4b): a->mo from x and u
        else if (c->pattern[l] != 'M') {
            // attention (SPEC §9.1), as train_miras.c: z = attn(RoPE(u Wq^T), RoPE(u Wk^T), u Wv^T), lse in qrn
            matmul_forward_gpu(a->qp + oD, u, p->wq + (size_t)l * D * D, NULL, N, D, D, ub);
            matmul_forward_gpu(a->kp + oD, u, p->wk + (size_t)l * D * D, NULL, N, D, D, ub);
            matmul_forward_gpu(a->vp + oD, u, p->wv + (size_t)l * D * D, NULL, N, D, D, ub);
            rope_forward_gpu(a->q + oD, a->qp + oD, B, T, H, d, 1);
            rope_forward_gpu(a->k + oD, a->kp + oD, B, T, H, d, 1);
            attention_forward_gpu(a->z + oD, a->qrn + oH, a->q + oD, a->k + oD, a->vp + oD, B, T, H, d,
                                  c->pattern[l] == 'S' ? c->window : 0);
            // (z is the fp32 attention kernel's: in bf16 mode the product rounds it on the fly, it has no zb copy)
            matmul_forward_gpu(a->mo + oD, a->z + oD, p->wo + (size_t)l * D * D, NULL, N, D, D);
        } else
            mixer_forward_gpu(M, l, ub, zb);
        // res2 = x + mo, and its RMSNorm in the same pass; then x = res2 + SwiGLU(RMSNorm(res2))
        residual_rmsnorm_forward_gpu(a->res2 + oD, a->ln2 + oD, a->ln2_rstd + (size_t)l * N, x, a->mo + oD,
                                     p->rms2_w + (size_t)l * D, N, D, ln2b, true);
        matmul_forward_gpu(a->h1 + oF, a->ln2 + oD, p->mlp_w1 + (size_t)l * F * D, NULL, N, D, F, ln2b);
        matmul_forward_gpu(a->h3 + oF, a->ln2 + oD, p->mlp_w3 + (size_t)l * F * D, NULL, N, D, F, ln2b);
        swiglu_forward_gpu(a->hg + oF, a->h1 + oF, a->h3 + oF, N * F, hgb);
        matmul_forward_gpu(a->mlpo + oD, a->hg + oF, p->mlp_w2 + (size_t)l * D * F, NULL, N, F, D, hgb);
        // res3 = res2 + mlpo, the next layer's x, with its u = RMSNorm(x) in the same pass (after the last: the final norm)
        if (l + 1 < L)
            residual_rmsnorm_forward_gpu(a->res3 + oD, a->ln1 + oD + N * D, a->ln1_rstd + (size_t)(l + 1) * N,
                                         a->res2 + oD, a->mlpo + oD, p->rms1_w + (size_t)(l + 1) * D, N, D,
                                         M->ln1b ? M->ln1b + oD + N * D : NULL, false);  // (u: also the gates', MAL's)
        else
            residual_rmsnorm_forward_gpu(a->res3 + oD, a->lnf, a->lnf_rstd, a->res2 + oD, a->mlpo + oD, p->rmsf_w, N, D,
                                         M->lnfb, true);
    }
    matmul_forward_gpu(a->logits, a->lnf, p->wte, NULL, N, D, Vp, M->lnfb);
    if (!targets) {
        M->mean_loss = -1;
        return;
    }
    crossentropy_forward_gpu(a->losses, M->ce_stats, a->logits, M->targets, N, c->V, Vp);
    M->has_mask = M->loss_mask != NULL;  // the backward uses this forward's mask
    if (M->has_mask) {
        memcpy(M->h_mask, M->loss_mask, N);
        h2d(M->mask, M->h_mask, N);
    }
    d2h(M->h_losses, a->losses, N * sizeof(real));
    double s = 0, cnt = 0;
    for (size_t i = 0; i < N; i++)
        if (!M->has_mask || M->h_mask[i]) {
            s += M->h_losses[i];
            cnt++;
        }
    M->mean_loss = (real)(cnt ? s / cnt : 0);
}

static void model_zero_grad_gpu(ModelGpu* M) {
    if (!M->grads_memory) {
        M->grads_memory = (real*)dmalloc(M->num_params * sizeof(real));
        point_parameters(&M->grads, M->grads_memory, M->param_sizes);
    }
    cudaCheck(cudaMemset(M->grads_memory, 0, M->num_params * sizeof(real)));
}

// Zero the activation gradients that the backward accumulates (+=, GEMMs with beta 1) before its pass. Left out, as
// every backward writes them before anything reads them (swiglu_backward, the RMSNorm backwards with dres or set,
// the GEMMs with beta 0) or never uses them: dh1, dh3, dhg, dres2, dres3 (and dx of layer 0, dencoded), dln2, dz,
// dmo, dmlpo; and in the models of memory layers only (no attention, no Titans layers), the mixer's (du, whose first
// writer is the gate's GEMM with beta 0; the gate's dyn, dgp, the memory's output norm's dy, the convs' gradients
// dqc, dkc, dvc and dqp, dkp, dvp, written by l2norm_silu_backward, silu_backward and conv_backward with set; dqs,
// dks, which it never stores). Of a mixer layer's 29 (N, D)-sized gradients (F = 8 D / 3) that leaves 3 to zero (the
// memory's dq, dk, dv, which some memory kernels add to) instead of all 29.
static void zero_grads_acts_gpu(ModelGpu* M) {
    const Config* c = &M->cfg;
    ActivationTensors* g = &M->grads_acts;
    bool mixers = !c->arch;
    for (int l = 0; l < c->L; l++) mixers = mixers && c->pattern[l] == 'M';
    const real* always[] = {g->encoded, g->h1, g->h3, g->hg, g->res2, g->ln2, g->z, g->mo, g->mlpo, g->res3};
    const real* mixer[] = {g->ln1, g->yn, g->gp, g->qc, g->kc, g->vc, g->qs, g->ks, g->y, g->qp, g->kp, g->vp};
    real *p = M->grads_acts_memory, *run = p;  // run: where the range still to be zeroed starts
    for (int i = 0; i < NUM_ACT_TENSORS; i++) {
        bool left = false;
        for (const real* q : always) left = left || q == p;
        if (mixers)
            for (const real* q : mixer) left = left || q == p;
        if (left) {
            if (p > run) cudaCheck(cudaMemset(run, 0, (size_t)(p - run) * sizeof(real)));
            run = p + M->act_sizes[i];
        }
        p += M->act_sizes[i];
    }
    // (and the head's lnf: all but the (N, Vp) dlogits, which crossentropy_backward writes, and the unused dlosses)
    if (g->logits > run) cudaCheck(cudaMemset(run, 0, (size_t)(g->logits - run) * sizeof(real)));
}
// The backward pass: accumulates d(mean loss * loss_scale)/d(params) into M->grads.
static void model_backward_gpu(ModelGpu* M, real loss_scale) {
    if (M->mean_loss == -1) DIE(NULL, "internal: backward called without a forward with targets");
    if (!M->grads_memory) model_zero_grad_gpu(M);
    const Config* c = &M->cfg;
    int B = M->B, T = M->T, L = c->L, D = c->D, H = c->H, F = c->F, Vp = c->Vp, d = M->mem.d;
    size_t N = (size_t)B * T;
    ParameterTensors *p = &M->params, *dp = &M->grads;
    ActivationTensors *a = &M->acts, *g = &M->grads_acts;
    zero_grads_acts_gpu(M);
    size_t cnt = N;
    if (M->has_mask) {
        cnt = 0;
        for (size_t i = 0; i < N; i++) cnt += M->h_mask[i] != 0;
    }
    // bf16 mode: dlogits in bf16, in the first half of g->logits's (otherwise unused) fp32 storage
    bf16* dlogitsb = g_prec == PREC_BF16 ? (bf16*)g->logits : NULL;
    crossentropy_backward_gpu(g->logits, dlogitsb, a->logits, M->ce_stats, M->targets, M->has_mask ? M->mask : NULL,
                              cnt ? loss_scale / cnt : 0, N, c->V, Vp);
    matmul_backward_gpu(g->lnf, dp->wte, NULL, g->logits, a->lnf, p->wte, N, D, Vp, M->lnfb, dlogitsb);
    // bf16 mode: the residual stream's gradient (dres3, then dres2, then dres3 of the layer below, ...) also as bf16,
    // for the GEMM that reads it next (W2's, Wo's), written by the RMSNorm backward that makes it, in lnfb's storage
    // (free once the head's backward has read it)
    bf16* drb = M->lnfb;
    rmsnorm_backward_gpu(g->res3 + (size_t)(L - 1) * N * D, dp->rmsf_w, g->lnf, a->res3 + (size_t)(L - 1) * N * D,
                         p->rmsf_w, a->lnf_rstd, N, 1, D, NULL, drb, true);
    for (int l = L - 1; l >= 0; l--) {
        size_t oD = (size_t)l * N * D, oH = (size_t)l * N * H, oF = (size_t)l * N * F;
        real* x = l == 0 ? a->encoded : a->res3 + oD - N * D;
        real* dx = l == 0 ? g->encoded : g->res3 + oD - N * D;
        real *u = a->ln1 + oD, *du = g->ln1 + oD;
        bf16 *ub = M->ln1b ? M->ln1b + oD : NULL, *zb = M->zb ? M->zb + oD : NULL,
             *ln2b = M->ln2b ? M->ln2b + oD : NULL, *hgb = M->hgb ? M->hgb + oF : NULL;
        // x = res2 + SwiGLU(RMSNorm(res2))
        matmul_backward_gpu(g->hg + oF, dp->mlp_w2 + (size_t)l * D * F, NULL, g->res3 + oD, a->hg + oF,
                            p->mlp_w2 + (size_t)l * D * F, N, F, D, hgb, drb, false);  // (dhg's only writer)
        // (bf16 mode: dh1, dh3 only as bf16 copies, in their fp32 storage)
        bf16 *dh1b = g_prec == PREC_BF16 ? (bf16*)(g->h1 + oF) : NULL, *dh3b = dh1b ? (bf16*)(g->h3 + oF) : NULL;
        swiglu_backward_gpu(g->h1 + oF, g->h3 + oF, g->hg + oF, a->h1 + oF, a->h3 + oF, N * F, dh1b, dh3b);
        matmul_backward_gpu(g->ln2 + oD, dp->mlp_w1 + (size_t)l * F * D, NULL, g->h1 + oF, a->ln2 + oD,
                            p->mlp_w1 + (size_t)l * F * D, N, D, F, ln2b, dh1b, false);  // (dln2's first)
        matmul_backward_gpu(g->ln2 + oD, dp->mlp_w3 + (size_t)l * F * D, NULL, g->h3 + oF, a->ln2 + oD,
                            p->mlp_w3 + (size_t)l * F * D, N, D, F, ln2b, dh3b);
        // dres2 = dres3 + RMSNorm's way (the residual x = res2 + ..., added in the norm's backward pass)
        rmsnorm_backward_gpu(g->res2 + oD, dp->rms2_w + (size_t)l * D, g->ln2 + oD, a->res2 + oD,
                             p->rms2_w + (size_t)l * D, a->ln2_rstd + (size_t)l * N, N, 1, D, g->res3 + oD, drb);
        if (c->arch) {  // MAL, MAG (section 4b): dx = dres2, to which the layer adds x's own paths
            d2d(dx, g->res2 + oD, N * D * sizeof(real));
            titans_layer_backward_gpu(M, l, dx, du);
        } else if (c->pattern[l] != 'M') {  // attention (SPEC §9.1): back through Wo, attn (Di in g->qrn), RoPE, q k v
            matmul_backward_gpu(g->z + oD, dp->wo + (size_t)l * D * D, NULL, g->res2 + oD, a->z + oD,
                                p->wo + (size_t)l * D * D, N, D, D, NULL, drb, false);
            attention_backward_gpu(g->q + oD, g->k + oD, g->vp + oD, g->qrn + oH, g->z + oD, a->q + oD, a->k + oD,
                                   a->vp + oD, a->z + oD, a->qrn + oH, B, T, H, d,
                                   c->pattern[l] == 'S' ? c->window : 0);
            rope_forward_gpu(g->qp + oD, g->q + oD, B, T, H, d, -1);
            rope_forward_gpu(g->kp + oD, g->k + oD, B, T, H, d, -1);
            matmul_backward_gpu(du, dp->wq + (size_t)l * D * D, NULL, g->qp + oD, u, p->wq + (size_t)l * D * D, N, D, D,
                                ub);
            matmul_backward_gpu(du, dp->wk + (size_t)l * D * D, NULL, g->kp + oD, u, p->wk + (size_t)l * D * D, N, D, D,
                                ub);
            matmul_backward_gpu(du, dp->wv + (size_t)l * D * D, NULL, g->vp + oD, u, p->wv + (size_t)l * D * D, N, D, D,
                                ub);
        } else
            mixer_backward_gpu(M, l, g->res2 + oD, ub, zb, drb,
                               true);  // res2 = x + (RMSNorm_head(y) * SiLU(u Wg^T)) Wo^T
        // dx = dres2 + RMSNorm's way (res2 = x + ...; Titans layers: dx += it, after their own paths)
        rmsnorm_backward_gpu(dx, dp->rms1_w + (size_t)l * D, du, x, p->rms1_w + (size_t)l * D,
                             a->ln1_rstd + (size_t)l * N, N, 1, D, c->arch ? NULL : g->res2 + oD, l ? drb : NULL);
    }
    encoder_backward_gpu(M, dp->wte, g->encoded, N, D);
}

// global gradient norm (double, fixed order), and clipping to it (SPEC §8): if |g| > clip, g *= clip/|g|
static real grad_norm_gpu(const ModelGpu* M) {
    sumsq_kernel<<<NORM_BLOCKS, NT, 0, g_stream>>>(g_partials, M->grads_memory, M->num_params);
    KCHECK("sumsq");
    double h[NORM_BLOCKS];
    d2h(h, g_partials, sizeof h);
    double s = 0;
    for (int i = 0; i < NORM_BLOCKS; i++) s += h[i];
    return (real)sqrt(s);
}
// the first parameter tensor whose gradient holds a NaN or infinity (for the error message), or NULL
static const char* nonfinite_grad_tensor_gpu(const ModelGpu* M) {
    real* g = (real*)xmalloc(M->num_params * sizeof(real));
    d2h(g, M->grads_memory, M->num_params * sizeof(real));
    size_t off = 0;
    const char* name = NULL;
    for (int t = 0; t < NUM_PARAM_TENSORS && !name; t++) {
        for (size_t i = off; i < off + M->param_sizes[t]; i++)
            if (!isfinite(g[i])) {
                name = PARAM_NAMES[t];
                break;
            }
        off += M->param_sizes[t];
    }
    free(g);
    return name;
}
static void grad_clip_gpu(ModelGpu* M, real norm, real clip) {
    if (clip > 0 && norm > clip) {
        real sc = clip / norm;
        scale_kernel<<<nblocks(M->num_params), NT, 0, g_stream>>>(M->grads_memory, M->num_params, sc);
        KCHECK("grad_clip");
    }
}

// AdamW as torch.optim.AdamW: decoupled decay (on PARAM_DECAY tensors), bias-corrected moments, on the parameters
// [opt_lo, opt_lo + opt_n) (all, or this rank's share with -K 1; train_miras.c's dist_share).
static void model_update_gpu(ModelGpu* M, real lr, real beta1, real beta2, real eps, real wd) {
    if (!M->m_memory) {
        M->m_memory = (real*)dmalloc(M->opt_n * sizeof(real));
        M->v_memory = (real*)dmalloc(M->opt_n * sizeof(real));
    }
    M->adam_t++;
    real bc1 = (real)(1 - pow((double)beta1, (double)M->adam_t)),
         bc2 = (real)(1 - pow((double)beta2, (double)M->adam_t));
    size_t off = 0, lo = M->opt_lo, hi = M->opt_lo + M->opt_n;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        real decay = PARAM_DECAY[t] ? wd : 0;
        size_t i0 = off > lo ? off : lo, i1 = off + M->param_sizes[t] < hi ? off + M->param_sizes[t] : hi;
        if (i1 > i0) {
            adamw_kernel<<<nblocks(i1 - i0), NT, 0, g_stream>>>(
                M->params_memory + i0, M->params_bf16 ? M->params_bf16 + i0 : NULL, M->grads_memory + i0,
                M->m_memory + (i0 - lo), M->v_memory + (i0 - lo), i1 - i0, lr, beta1, beta2, eps, decay, bc1, bc2);
            KCHECK("adamw");
        }
        off += M->param_sizes[t];
    }
}

static void model_free_gpu(ModelGpu* M) {
    if (g_wbase == M->params_memory) {
        g_wbase = NULL;
        g_wbf16 = NULL;
        g_wn = 0;
    }
    dfree(M->params_memory);
    dfree(M->grads_memory);
    dfree(M->m_memory);
    dfree(M->v_memory);
    dfree(M->params_bf16);
    model_free_acts(M);
}

// ----------------------------------------------------------------------------
// 5. token-by-token decoding (SPEC §7) on the GPU, the scheme of train_miras.c's Decoder
//
// Per layer we keep the last K-1 rows before the conv, the memory state at the last chunk boundary, and the
// q, k, v and gates of the tokens of the current, partial chunk. A new token is read by the same chunk function
// over the partial chunk (its last row is the new output); when the chunk is full its end state becomes the new
// boundary state. Row for row this is the computation of the parallel forward. The memories without phi* or Lattice
// (mem_decode_recurrent, as the CPU's decoder: titans, ttt_mlp, yaad, moneta, memora, the linear memories, the ATLAS
// family's omega, poly and muon) instead step a running state token by token (decoder_recurrent_kernel): one row's
// work per token (and muon's NS5 per matrix); MIRAS_DECODE_CHUNK=1 keeps the chunk re-run for them too.

typedef struct {
    ModelGpu* M;
    int pos;
    ActivationTensors a;
    real* acts_memory;
    size_t act_sizes[NUM_ACT_TENSORS];  // one row (B = T = 1), device
    real* conv_hist;  // (L, 3, K-1, D) inputs of the q, k, v convs at the previous K-1 positions
    real *P, *S, *Pn, *Sn;  // (L, H, nP) boundary state; (H, nP) chunk-end scratch, one per head
    real* Pt;  // (L, H, nP) the running state of the recurrent step (decoder_recurrent_kernel), or NULL
    real* p0s;  // split and anchored: (L, H, nP) each memory layer's P_0 as its CTAs' slices (cl_slice), else NULL
    real* win;  // with Pt: (L, H R, dec_win_rows, dec_fac_width of a slice) the window's gradient factors
    real* pa;  // with Pt: (L, H) atlas_chunk's prod a
    // (L, H, b + c-1, rw) q, k, v, a, theta, eta, delta (gamma) of the current chunk's tokens (decoder_row_width),
    // after omega's halo: the c-1 tokens before the chunk
    real* part;
    MemChunkGpu* chunks;
    real* chunk_memory;  // one chunk scratch per head
    int* tok;
    real* logits;  // the token on the device; the logits on the host
    // per attention layer: keys (after RoPE) and values, (kvcap, D) for 'A' (grown), a ring (W, D) for 'S'
    real *kc[128], *vc[128];
    int kvcap;
    real* txbuf;  // Titans layers (section 5b): (9 D + 2) scratch, or NULL
    real* mac_seg;  // MAC: per layer, the segment-start state and the u sequence's conv history (mac_dec_seg)
    // phi* memory (section 3c), per (layer, head): every token's row (q, k, v, a, eta, gamma), the committed entries
    // (signals, offsets, tokens) and LA at the last chunk end (device; ph_cap rows and ph_necap entries each); P holds
    // W1 at the last chunk end; a PhiScr per head (ph_scr, device)
    real *ph_rows, *ph_av, *ph_lo, *ph_LA, *ph_scr_mem;
    int* ph_etok;
    PhiScr* ph_scr;
    int ph_cap;
    size_t ph_necap;
    MemSmem sm;  // decoder_memory_kernel's chunk scratch in shared memory (mem_smem_plan)
    // the cluster split (MIRAS_MEM_SPLIT, as the parallel forward's): R CTAs per head (chunks: H R scratches carved
    // for the slices; each head's P, S hold CTA r's slice at r nP / R); nt threads each; xn the exchange buffer's half
    int R, nt, xn;
    // CUDA graphs (decoder_use_graphs): the step's work on its own stream, one graph per chunk phase pos % b
    cudaStream_t stream;
    cudaGraphExec_t* graphs;  // (b), NULL entries until captured; NULL without graphs
    void* blas_ws;  // cuBLAS's workspace on that stream (set explicitly: no allocation inside a capture)
    int replays;  // steps run as a graph replay
} DecoderGpu;

typedef struct {
    MemCfg m;
    int H, b, cnt, rw, nh;  // nh: omega's halo rows ahead of the partial chunk
    const real *q, *k, *v, *ga, *gth, *geta, *gdel, *ggam, *qf, *kf;  // this token's row of the layer's memory inputs
    real *y, *part, *P, *S, *Pn, *Sn;  // part, P, S: this layer's
    real* Pt;  // decoder_recurrent_kernel: this layer's running state (P is then the chunk-start state)
    real* pa;  // atlas_chunk: prod a over the chunk so far, per head
    real* win;  // and its window of gradient factors (H R, dec_win_rows, dec_fac_width of a slice): the token's in slot
    // nh + cnt (omega; else 0), the halo's before it (so a CUDA graph of a chunk phase replays the same slots)
    const real *lng, *lnb;
    MemChunkGpu* chunks;
    const real* p0;  // this layer's P_0 (H, nP): the anchored retention's anchor
    const real* p0s;  // split and anchored: this layer's P_0 as its CTAs' slices (made once per decoder), else NULL
    MemSmem sm;  // the chunk scratch in shared memory and the products' precision, as memory_forward_kernel's
    int tc;
    int R, xn;  // the cluster split (MemArgs.R, .xn): R CTAs per head, each with its slice of P, S, Pn, Sn
} DecArgs;

// a decoder block's setup (thread 0): its chunk scratch (shared memory plan), MemCfg, anchor and the products' mode
__device__ void dec_block_setup(MemChunkGpu* c, MemCfg* m, const DecArgs* A, int h) {
    *c = A->chunks[blockIdx.x];
    *m = A->m;
    mem_smem_apply(c, &A->sm);
    c->p0 = m->anchor ? A->p0 + (size_t)h * m->nP : NULL;
    if (A->R > 1) mem_split_setup(c, m, A->R, A->xn, A->sm.floats);
    if (A->R > 1 && m->anchor)  // (its slice, made once per decoder: DecArgs.p0s)
        c->p0 = (real*)A->p0s + (size_t)h * A->m.nP + (size_t)(blockIdx.x % A->R) * m->nP;
    mem_tc = A->tc;
}
// the token's row of head h into row (the decoder's partial chunk): q, k, v, a, theta, eta, delta (poly's features of
// q, k; omega's gamma), decoder_row_width floats
__device__ void dec_put_row(const DecArgs* A, const MemCfg* m, int h, real* row) {
    int d = m->d, rw = A->rw, ew = m->cw ? d : 1, w = m->omega, din = m->din, fo = rw - (w > 1 ? w : 0) - 2 * din;
    FOR(i, d) {
        row[i] = A->q[h * d + i];
        row[d + i] = A->k[h * d + i];
        row[2 * d + i] = A->v[h * d + i];
    }
    if (threadIdx.x == 0) {
        row[3 * d] = A->ga[h];
        row[3 * d + 1] = A->gth[h];
    }
    FOR(i, ew) {
        row[3 * d + 2 + i] = A->geta[h * ew + i];
        if (m->bias == BIAS_HUBER) row[3 * d + 2 + ew + i] = A->gdel[h * ew + i];
    }
    if (w > 1) FOR(o, w) row[rw - w + o] = A->ggam[h * w + o];
    if (m->poly) FOR(i, din) {
            row[fo + i] = A->qf[(size_t)h * din + i];
            row[fo + din + i] = A->kf[(size_t)h * din + i];
        }
}
// chunk_set_row of the partial chunk's rows 0..n-1 into c (omega: the halo's, then the chunk's; poly: the raw q, k in
// qr, kr, the features in q, k)
__device__ void dec_load_rows(const MemCfg* m, MemChunkGpu* c, const real* part, int rw, int n) {
    int d = m->d, ew = m->cw ? d : 1, din = m->din, fo = rw - (m->omega > 1 ? m->omega : 0) - 2 * din;
    FOR(e, n * d) {
        int t = e / d, i = e % d;
        const real* r = part + (size_t)t * rw;
        c->qr[e] = r[i];
        c->kr[e] = r[d + i];
        c->v[e] = r[2 * d + i];
        if (m->cw) c->etac[e] = r[3 * d + 2 + i];
        if (m->bias == BIAS_HUBER) c->delta[e] = r[3 * d + 2 + ew + (m->cw ? i : 0)];
    }
    FOR(t, n) {
        const real* r = part + (size_t)t * rw;
        c->a[t] = r[3 * d];
        c->theta[t] = r[3 * d + 1];
        c->eta[t] = m->cw ? 1 : r[3 * d + 2];
    }
    if (m->poly) FOR(e, (size_t)n * din) {  // poly_rows: q, k are the features
            const real* r = part + (e / din) * rw + fo;
            c->q[e] = r[e % din];
            c->k[e] = r[din + e % din];
        }
}
// omega, at a full chunk's end (n rows with the halo): its last c-1 rows become the next chunk's halo (row by row,
// upwards: a row's source is below every row written before it)
__device__ void dec_keep_halo(real* part, int rw, int n, int w) {
    int keep = n < w - 1 ? n : w - 1;
    for (int j = 0; j < keep; j++) {
        FOR(i, rw) part[(size_t)j * rw + i] = part[(size_t)(n - keep + j) * rw + i];
        __syncthreads();
    }
}
// one block per head: append this token's row to the partial chunk, re-run the chunk, keep its last row. Split
// (A.R > 1): a cluster of R CTAs per head, each with its slice of the state (as memory_forward_kernel's); the first
// appends the row and writes y, every CTA reads the rows
__global__ void __launch_bounds__(MEM_THREADS) decoder_memory_kernel(const __grid_constant__ DecArgs A) {
    __shared__ MemChunkGpu c;
    __shared__ MemCfg m;
    int R = A.R > 1 ? A.R : 1, r = blockIdx.x % R, h = blockIdx.x / R;  // r: the CTA's rank in its cluster
    if (threadIdx.x == 0) dec_block_setup(&c, &m, &A, h);
    __syncthreads();
    int d = m.d, nP = A.m.nP, nPr = m.nP, rw = A.rw, n = A.cnt + 1, w = m.omega, nh = A.nh;
    // this token's row (after the nh halo rows): q, k, v, a, theta, eta, delta (poly's features of q, k; gamma)
    real* part = A.part + (size_t)h * mem_rows(&m, A.b) * rw;
    real* row = part + (size_t)(nh + A.cnt) * rw;
    if (r == 0) dec_put_row(&A, &m, h, row);
    if (R > 1)
        cg::this_cluster().sync();  // (the row written: every CTA of the cluster reads it)
    else
        __syncthreads();
    n += nh;
    dec_load_rows(&m, &c, part, rw, n);
    if (w > 1) {  // omega_halo: the halo rows take no step; the chunk's gates gamma
        FOR(e, n * w) c.gam[e] = part[(size_t)(e / w) * rw + rw - w + e % w];
        FOR(t, nh) {
            c.a[t] = 1;
            c.eta[t] = 0;
            c.theta[t] = 1;
        }
        if (threadIdx.x == 0) {
            c.nh = nh;
            c.wc = w;
        }
    }
    __syncthreads();
    size_t so = (size_t)h * nP + (size_t)r * nPr;  // (split: CTA r's slice of head h's state)
    real* P = A.P + so;
    real* S = A.S + so;
    int full = n - nh == A.b;
    real* Pn = A.Pn + so;
    real* Sn = A.Sn + so;
    mem_step_forward_gpu(&m, &c, n, P, S, full ? Pn : NULL, full ? Sn : NULL, m.ln ? A.lng + (size_t)h * d : NULL,
                         m.ln ? A.lnb + (size_t)h * d : NULL);
    if (r == 0) FOR(i, d) A.y[h * d + i] = c.y[(size_t)(n - 1) * d + i];
    if (full) {
        block_copy(P, Pn, nPr);
        if (mem_carries_S_gpu(&m)) block_copy(S, Sn, nPr);
    }
    if (R > 1) cg::this_cluster().sync();  // (every CTA has read the rows; none exits while its buffer may be read)
    if (full && w > 1 && r == 0) dec_keep_halo(part, rw, n, w);
}
// one memory matrix (rows, cols) at offset o of the state: its gradient is the outer product dl xk^T. Each thread
// steps 4 adjacent elements of a row at a time (16-byte accesses where aligned) and loads DEC_U such groups before
// it writes any: the loads are in flight together (as MM_U's in the products), not one round trip per element.
// (4 made ptxas spill each group's loaded P, S, P_0 right after its load, at the 128 registers of 512 threads: a
// store that waits for the load, so the groups' loads went one after another; at 2, one spill per pair of groups)
#define DEC_U 2
__device__ __forceinline__ real dec_step1(const MemCfg* m, real a, real th, real eta, real g, real p, real& s,
                                          real z) {  // one element: the momentum s in place, the state returned
    if (m->muon) {  // S = theta S + G; token level: P after NS5(S); chunk level: the reads' gd step
        s = th * s + g;
        if (m->muon == 1) return p;
        p = a * p - eta * g;
        return m->anchor ? p + (1 - a) * z : p;
    }
    p = a * p;
    if (m->momentum) {
        s = th * s - eta * g;
        p += s;
    } else
        p -= eta * g;
    return m->anchor ? p + (1 - a) * z : p;
}
// the window (train_miras.c's DecTerms): a slot's width, memory matrix k's factors in slot f (its gradient dl xk^T)
__device__ int dec_fac_width_gpu(const MemCfg* m) {
    return m->depth == 1 ? m->d + m->din : m->d + (2 + (m->gated ? 1 : 0)) * m->dm + m->din;
}
// (train_miras.c's dec_fac_mat as offsets, the same in every slot: dl at f + dlo, xk at f + xko)
__device__ void dec_fac_offs_gpu(const MemCfg* m, int k, int* dlo, int* xko) {
    int d = m->d, dm = m->dm, kk = m->depth == 1 ? d : d + (2 + (m->gated ? 1 : 0)) * dm;
    *dlo = k == 0 ? 0 : d + k * dm;
    *xko = k == 0 && m->depth == 2 ? d : kk;
}
// G's elements (j, q .. q + NQ-1): sum_t w_t dl_t[j] xk_t[q], the terms in order (train_miras.c's g[q] loops), each
// term's slot read through T (shared memory): no per-thread tables of the window's pointers and row factors
template <int NQ>
__device__ __forceinline__ void dec_g_gpu(const DecTerms* T, int dlo, int xko, int j, int q, real* g) {
    const real* f = T->f[0];
    real wd = T->w[0] * f[dlo + j];
#pragma unroll
    for (int i = 0; i < NQ; i++) g[i] = wd * f[xko + q + i];
    for (int t = 1; t < T->n; t++) {
        f = T->f[t];
        wd = T->w[t] * f[dlo + j];
#pragma unroll
        for (int i = 0; i < NQ; i++) g[i] += wd * f[xko + q + i];
    }
}
// memory matrix k (rows, cols at offset o of the state) stepped with G = sum_t w_t dl_t xk_t^T (train_miras.c's
// mem_decode_update; omega: the window's up to c terms, else the one term g_t)
__device__ void mem_decode_update_gpu(const MemCfg* m, const MemChunkGpu* c, real* Pt, real* S, size_t o,
                                      const DecTerms* T, int k, int rows, int cols) {
    real a = c->a[0], th = c->theta[0], eta = c->eta[0];
    real *P = Pt + o, *Sm = S + o;
    const real* z = m->anchor ? c->p0 + o : NULL;
    int dlo, xko;
    dec_fac_offs_gpu(m, k, &dlo, &xko);
    int hs = mem_carries_S_gpu(m);  // (momentum or muon: S stepped too)
    if (cols % 4 == 0 && al16(P) && (!hs || al16(Sm)) && (!z || al16(z))) {
        int n4 = rows * cols / 4, c4 = cols / 4, nth = blockDim.x;
        for (int e0 = threadIdx.x; e0 < n4; e0 += DEC_U * nth) {
            float4 p[DEC_U], sv[DEC_U], zv[DEC_U];
#pragma unroll
            for (int u = 0; u < DEC_U; u++) {  // the loads first
                int e4 = e0 + u * nth;
                if (e4 >= n4) continue;
                p[u] = ld4(P + 4 * (size_t)e4);
                sv[u] = hs ? ld4(Sm + 4 * (size_t)e4) : make_float4(0, 0, 0, 0);
                zv[u] = z ? ld4(z + 4 * (size_t)e4) : make_float4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < DEC_U; u++) {
                int e4 = e0 + u * nth;
                if (e4 >= n4) continue;
                real g[4];
                dec_g_gpu<4>(T, dlo, xko, e4 / c4, 4 * (e4 % c4), g);
                float4 r;
                r.x = dec_step1(m, a, th, eta, g[0], p[u].x, sv[u].x, zv[u].x);
                r.y = dec_step1(m, a, th, eta, g[1], p[u].y, sv[u].y, zv[u].y);
                r.z = dec_step1(m, a, th, eta, g[2], p[u].z, sv[u].z, zv[u].z);
                r.w = dec_step1(m, a, th, eta, g[3], p[u].w, sv[u].w, zv[u].w);
                st4(P + 4 * (size_t)e4, r);
                if (hs) st4(Sm + 4 * (size_t)e4, sv[u]);
            }
        }
        return;
    }
    FOR(e, rows * cols) {
        real sv = hs ? Sm[e] : 0, g;
        dec_g_gpu<1>(T, dlo, xko, e / cols, e % cols, &g);
        P[e] = dec_step1(m, a, th, eta, g, P[e], sv, z ? z[e] : 0);
        if (hs) Sm[e] = sv;
    }
}
// muon's step of the state from S (train_miras.c's dec_ns5_step): X = NS5(S) per matrix, P = a P [+ (1 - a) P_0] - eta X
__device__ void dec_ns5_step_gpu(const MemCfg* m, const MemChunkGpu* c, real* P, const real* S, real a, real eta) {
    size_t off[3], svo[3];
    int rows[3], cols[3], nm = muon_layout_gpu(m, off, rows, cols, svo);
    real* X = c->mX;
    for (int k = 0; k < nm; k++) ns5_forward_gpu(X + off[k], c->msv + svo[k], c->mtmp, S + off[k], rows[k], cols[k]);
    FOR(e, m->nP) P[e] = a * P[e] + (c->p0 ? (1 - a) * c->p0[e] : 0) - eta * X[e];
    __syncthreads();
}
// the write (train_miras.c's mem_decode_write): every memory matrix of Pt (and momentum S) stepped with G_t; muon's
// token-level rule then P = a P [+ (1 - a) P_0] - eta NS5(S) per matrix (NS5's scratch: c's muon arrays)
__device__ void mem_decode_write_gpu(const MemCfg* m, const MemChunkGpu* c, real* Pt, real* S, const DecTerms* T) {
    size_t off[3];
    int rows[3], cols[3], nm = mem_matrices_gpu(m, off, rows, cols);
    for (int k = 0; k < nm; k++) mem_decode_update_gpu(m, c, Pt, S, off[k], T, k, rows[k], cols[k]);
    __syncthreads();
    if (m->muon == 1) dec_ns5_step_gpu(m, c, Pt, S, c->a[0], c->eta[0]);
}
// row i of c's inner gradients into the window slot f (train_miras.c's dec_fac_store; split: the slice's widths)
__device__ void dec_fac_store_gpu(const MemCfg* m, const MemChunkGpu* c, int i, real* f) {
    int d = m->d, dm = m->dm, din = m->din;
    if (m->depth == 1) {
        FOR(e, d) f[e] = c->r[(size_t)i * d + e];
        FOR(e, din) f[d + e] = c->k[(size_t)i * din + e];
        return;
    }
    int g = m->gated ? 1 : 0;
    FOR(e, d) f[e] = c->g1[(size_t)i * d + e];
    FOR(e, dm) {
        f[d + e] = c->hk[(size_t)i * dm + e];
        f[d + dm + e] = c->g2[(size_t)i * dm + e];
        if (g) f[d + 2 * dm + e] = c->g3[(size_t)i * dm + e];
    }
    FOR(e, din) f[d + (2 + g) * dm + e] = c->k[(size_t)i * din + e];
}
// the read y = M(q; P) (train_miras.c's mem_decode_read), the reads of W1 (or W) and W2 scaled by cs[0], cs[1]; split,
// o = W1 h summed over the cluster (cl_reduce), as in mem_grad_forward_gpu
__device__ void mem_decode_read_gpu(const MemCfg* m, MemChunkGpu* c, const real* P, const real* cs, const real* lng,
                                    const real* lnb) {
    int d = m->d, dm = m->dm, din = m->din;
    if (m->depth == 1) {
        mm_nt_gpu(c->y, c->q, P, 1, d, din, cs[0], 0);  // y = W q
        return;
    }
    size_t o2 = (size_t)d * dm, o3 = o2 + (size_t)dm * din;  // y = q + LN(W1 GELU(W2 q)) (gated: (..) * W3 q)
    mm_nt_gpu(c->zq, c->q, P + o2, 1, dm, din, cs[1], 0);
    if (m->gated) mm_nt_gpu(c->zq3, c->q, P + o3, 1, dm, din, 1, 0);
    FOR(j, dm) c->hq[j] = gelu_gpu(c->zq[j], gelu_tanh_gpu(c->zq[j])) * (m->gated ? c->zq3[j] : 1);
    __syncthreads();
    bool cl = cl_on(c, SPLIT_P);
    mm_nt_gpu(cl ? cl_buf(c) : c->nq, c->hq, P, 1, d, dm, cs[0], 0);
    if (cl) {
        ClPart pt[1] = {{c->nq, 0, d, 0}};
        cl_reduce(c, pt, 1);
    }
    ln_out_forward_gpu(c->y, c->qr, c->nq, c->rq, lng, lnb, m, 1);
}
// The recurrent step (train_miras.c's mem_decode_step, for the memories mem_decode_recurrent takes): the token's
// inner gradient g_t at the chunk-start state P (mem_grad_forward_gpu, one row) into its slot of the window (omega's
// c - 1 tokens before the chunk re-taken at P at the chunk's first token), then with G_t = sum_o gamma_t[o] g_{t-o}
// (G_t = g_t without omega) the running state Pt and momentum S step in place,
//   momentum:  S_t = theta_t S_{t-1} - eta_t G_t,   P_t = a_t P_{t-1} + S_t        [+ (1 - a_t) P_0, anchored]
//   gd:        P_t = a_t P_{t-1} - eta_t G_t                                       [+ (1 - a_t) P_0, anchored]
// and the read y_t = M(q_t; P_t) (poly: q, k are the features; Moneta's lq: the gradients at W_s = P / s_s, the reads
// through Pt / s_s; Memora's kl: P the running logits, S the chunk's W_1, Pt the read state; as the CPU's); at the
// chunk's end Pt becomes P. One block per head; split (A.R > 1), a cluster per head, each CTA stepping its slice (the
// slices' layout is a memory of d_m / R hidden units, so the update is the same loop, and its window holds the slice's
// factors) and o = W1 h summed over the cluster (cl_reduce), as in mem_grad_forward_gpu.
__global__ void __launch_bounds__(MEM_THREADS) decoder_recurrent_kernel(const __grid_constant__ DecArgs A) {
    __shared__ MemChunkGpu c;
    __shared__ MemCfg m;
    __shared__ DecTerms T;
    int R = A.R > 1 ? A.R : 1, r = blockIdx.x % R, h = blockIdx.x / R;  // r: the CTA's rank in its cluster
    if (threadIdx.x == 0) {
        dec_block_setup(&c, &m, &A, h);
        mem_tc = 0;  // one row: the SIMT products (their state loads batched, MM_U), not 16-row tensor-core tiles of
    }  // which 15 rows would be padding and whose k-steps wait on their loads in turn
    __syncthreads();
    int d = m.d, nP = A.m.nP, nPr = m.nP, ew = m.cw ? d : 1, w = m.omega, nh = A.nh, din = m.din, rw = A.rw,
        fw = dec_fac_width_gpu(&m);
    size_t so = (size_t)h * nP + (size_t)r * nPr;  // (split: CTA r's slice of head h's state)
    int s = w > 1 ? nh + A.cnt : 0;  // the token's slot
    real *P = A.P + so, *Pt = A.Pt + so, *S = A.S + so;
    real* win = A.win + ((size_t)h * R + r) * (w > 1 ? A.b + w - 1 : 1) * fw;  // (dec_win_rows)
    real* part = A.part + (size_t)h * mem_rows(&m, A.b) * rw;
    const real *lng = m.ln ? A.lng + (size_t)h * d : NULL, *lnb = m.ln ? A.lnb + (size_t)h * d : NULL;
    if (w > 1 && r == 0) dec_put_row(&A, &m, h, part + (size_t)(nh + A.cnt) * rw);  // (omega: the later halos)
    if (w > 1 && A.cnt == 0 && nh > 0) {  // the halo's gradients (the c-1 tokens before the chunk) at the new P_s
        dec_load_rows(&m, &c, part, rw, nh);
        __syncthreads();
        mem_grad_forward_gpu(&m, &c, nh, P, lng, lnb);
        for (int t = 0; t < nh; t++) dec_fac_store_gpu(&m, &c, t, win + (size_t)t * fw);
        __syncthreads();
    }
    FOR(i, d) {  // the token as row 0 (chunk_set_row; poly_rows: the features in q, k)
        c.qr[i] = A.q[h * d + i];
        c.kr[i] = A.k[h * d + i];
        c.v[i] = A.v[h * d + i];
        if (m.cw) c.etac[i] = A.geta[h * d + i];
        if (m.bias == BIAS_HUBER) c.delta[i] = A.gdel[h * ew + (m.cw ? i : 0)];
    }
    if (m.poly) FOR(i, din) {
            c.q[i] = A.qf[(size_t)h * din + i];
            c.k[i] = A.kf[(size_t)h * din + i];
        }
    if (threadIdx.x == 0) {
        c.a[0] = A.ga[h];
        c.theta[0] = A.gth[h];
        c.eta[0] = m.cw ? 1 : A.geta[h];
        T.n = s + 1 < w ? s + 1 : w;  // G_t's terms: g_{t-o} in slot s - o, o < c, positions >= 0
        for (int o = 0; o < T.n; o++) {
            T.w[o] = w > 1 ? A.ggam[h * w + o] : 1;
            T.f[o] = win + (size_t)(s - o) * fw;
        }
    }
    __syncthreads();
    real cs[2] = {1, 1};  // the reads' scales (Moneta's lq: 1 / s_s per matrix)
    const real* Pg = P;  // where the gradient is taken
    int first = A.cnt == 0;
    if (m.retention == RET_LQ) {  // W_s = A_s / s_s
        lq_scales_gpu(&m, &c, P, c.Wa, cs);
        Pg = c.Wa;
    } else if (m.retention == RET_KL) {  // Memora: W_s = softmax(Z_s) at the chunk's first token, else W_1
        if (first) softmax_rows_gpu(&m, &c, P, c.Wa);
        Pg = first ? c.Wa : S;
    }
    mem_grad_forward_gpu(&m, &c, 1, Pg, lng, lnb);  // g_t: linear r k^T; deep (g1 hk^T, g2 k^T (, g3 k^T))
    dec_fac_store_gpu(&m, &c, 0, win + (size_t)s * fw);
    __syncthreads();
    if (m.retention == RET_KL) {
        mem_decode_write_gpu(&m, &c, P, NULL, &T);  // Z_t
        if (first) {  // W_1 = softmax(Z_1), the chunk's gradient point and token 0's read
            softmax_rows_gpu(&m, &c, P, S);
            block_copy(Pt, S, nPr);
        } else
            mem_decode_write_gpu(&m, &c, Pt, NULL, &T);  // R_t
    } else
        mem_decode_write_gpu(&m, &c, Pt, S, &T);
    mem_decode_read_gpu(&m, &c, Pt, cs, lng, lnb);
    if (r == 0) FOR(i, d) A.y[h * d + i] = c.y[i];
    int full = A.cnt + 1 == A.b;
    if (m.muon == 2) {  // atlas_chunk: A = prod a so far; at the chunk's end the carry P_end = A P_s [+ (1 - A) P_0] -
        real pa = (first ? 1 : A.pa[h]) * c.a[0];  // eta_last NS5(S_end), the next chunk's start and running state
        __syncthreads();
        if (threadIdx.x == 0) A.pa[h] = pa;
        if (full) {
            dec_ns5_step_gpu(&m, &c, P, S, pa, c.eta[0]);
            block_copy(Pt, P, nPr);
        }
    } else if (full && m.retention != RET_KL)
        block_copy(P, Pt, nPr);  // the chunk's end: the next chunk's start state (Memora's P: already)
    if (R > 1) cg::this_cluster().sync();  // (every CTA has read the halo; none exits while its buffer may be read)
    if (full && w > 1 && r == 0) dec_keep_halo(part, rw, nh + A.cnt + 1, w);
}
// CTA r's slices of each head's whole state (cl_slice), in place of (H, nP) whole states (the decoder's split P_0)
__global__ void mem_slice_kernel(real* dst, const real* src, MemCfg m, int R) {
    int h = blockIdx.x / R, r = blockIdx.x % R;
    cl_slice((real*)src + (size_t)h * m.nP, dst + (size_t)h * m.nP + (size_t)r * (m.nP / R), &m, R, r, 1);
}

// the phi* memory, one token (train_miras.c's phi_dec_head): one block per head; the token's row appended to the
// head's rows, the chunk so far (own rows t0..pos) recomputed from the committed state, exactly the parallel
// forward's arithmetic for these rows; at the chunk's end its entries, W1 and LA are committed
typedef struct {
    MemCfg m;
    int H, b, pos, ne;  // ne: the committed entries, phi_entries(t0, b, c)
    size_t cap, necap;  // token rows and entries per (layer, head)
    const real *q, *k, *v, *ga, *geta, *ggam;  // this token's row of the layer's memory inputs
    real *y, *rows, *av, *lo, *LA, *P, *Pn;  // rows, av, lo, LA, P: this layer's
    int* etok;
    PhiScr* scr;
} PhiDecArgs;
// head h's token rows (phi_dec_seq): q, k, v, a, eta, gamma per row of rw = 3d + 2 + c floats
__device__ PhiSeq phi_dec_seq_gpu(const PhiDecArgs* A, int h) {
    int d = A->m.d, c = A->m.omega;
    size_t rw = 3 * (size_t)d + 2 + c;
    real* rows = A->rows + (size_t)h * A->cap * rw;
    PhiSeq x = {rows, rows + d, rows + 2 * d, rows + 3 * d, rows + 3 * d + 1, c > 1 ? rows + 3 * d + 2 : NULL, rw,
                rw,   rw};
    return x;
}
// MAC's h read of one token (mac_phi_read_kernel's): uq (H, d) against the entries committed before the segment
// (A.ne) and its start W1 (W1seg, (H, nP)) into h (H, d)
__global__ void __launch_bounds__(MEM_THREADS)
    mac_phi_dec_read_kernel(PhiDecArgs A, const real* uq, const real* W1seg, real* hout) {
    __shared__ PhiScr s;
    __shared__ MemCfg m;
    phi_block_setup(&s, &m, A.scr, &A.m);
    int h = blockIdx.x, d = m.d;
    PhiSeq x = phi_dec_seq_gpu(&A, h);
    phi_h_read_gpu(&m, &s, &x, uq + (size_t)h * d, A.ne, A.etok + h * A.necap, A.av + h * A.necap * m.dm,
                   A.lo + h * A.necap, W1seg + (size_t)h * m.nP, hout + (size_t)h * d);
}
__global__ void __launch_bounds__(MEM_THREADS) phi_decode_kernel(PhiDecArgs A) {
    __shared__ PhiScr s;
    __shared__ MemCfg m;
    phi_block_setup(&s, &m, A.scr, &A.m);
    int h = blockIdx.x, d = m.d, b = A.b, c = m.omega, cnt = A.pos % b, t0 = A.pos - cnt, n = cnt + 1,
        nh = t0 < c - 1 ? t0 : c - 1, full = n == b;
    size_t rw = 3 * (size_t)d + 2 + c, nP = m.nP;
    PhiSeq x = phi_dec_seq_gpu(&A, h);
    real* row = x.q + (size_t)A.pos * rw;
    FOR(i, d) {
        row[i] = A.q[h * d + i];
        row[d + i] = A.k[h * d + i];
        row[2 * d + i] = A.v[h * d + i];
    }
    if (threadIdx.x == 0) {
        row[3 * d] = A.ga[h];
        row[3 * d + 1] = A.geta[h];
    }
    if (c > 1) FOR(o, c) row[3 * d + 2 + o] = A.ggam[h * c + o];
    __syncthreads();
    real *P = A.P + (size_t)h * nP, *Pn = A.Pn + (size_t)h * nP;
    real LAn = phi_chunk_forward_gpu(&m, &s, &x, t0, n, nh, A.ne, A.etok + h * A.necap, A.av + h * A.necap * m.dm,
                                     A.lo + h * A.necap, P, A.LA[h], s.y, d, full ? Pn : NULL);
    block_copy(A.y + (size_t)h * d, s.y + (size_t)cnt * d, d);
    if (full) {
        block_copy(P, Pn, nP);
        if (threadIdx.x == 0) A.LA[h] = LAn;
    }
}

// one conv output row from the history of K-1 rows and the current row x; then shift the history (a thread per channel)
__global__ void conv_step_kernel(real* out, real* hist, const real* x, const real* w, int C, int K) {
    GRID_FOR(ii, C) {
        int i = (int)ii;
        real s = w[i * K + K - 1] * x[i];
        for (int j = 0; j < K - 1; j++) s += w[i * K + j] * hist[(size_t)j * C + i];
        out[i] = s;
        if (K > 1) {
            for (int j = 0; j < K - 2; j++) hist[(size_t)j * C + i] = hist[(size_t)(j + 1) * C + i];
            hist[(size_t)(K - 2) * C + i] = x[i];
        }
    }
}
static void conv_step_gpu(real* out, real* hist, const real* x, const real* w, int C, int K) {
    conv_step_kernel<<<nblocks(C), NT, 0, g_stream>>>(out, hist, x, w, C, K);
    KCHECK("conv_step");
}
// A memory layer's q, k, v for one token in one launch (the eight of conv_step, silu_forward and l2norm_forward for
// q, k and v: at B = 1 each is microseconds of launch for a few hundred floats): per channel the conv from the K-1
// rows of history (shifted), SiLU, then q and k divided by their head's norm. One warp per head; each lane takes
// the channels those kernels' threads and lanes took, in their order, so the outputs (qc..vc, qs, ks, q, k, v, qrn,
// krn) are theirs bit for bit. hist: the layer's (3, K-1, D); x: qp, kp, vp; w: conv_q, conv_k, conv_v (D, K) each.
typedef struct {
    const real *x[3], *w[3];
    real *c[3], *s[3], *y[3], *rn[2];  // conv out, SiLU out (v's is y), l2-normed (q, k), 1/norm per head (q, k)
} DecQkv;
__global__ void dec_qkv_kernel(DecQkv A, real* hist, int D, int d, int K) {
    int h = blockIdx.x;
    for (int t = 0; t < 3; t++) {  // q, k, v
        real *hs = hist + (size_t)t * (K - 1) * D, ss = 0;
        const real *x = A.x[t], *w = A.w[t];
        for (int j = LANE; j < d; j += 32) {
            int i = h * d + j;
            real c = w[i * K + K - 1] * x[i];  // (conv_step_kernel)
            for (int r = 0; r < K - 1; r++) c += w[i * K + r] * hs[(size_t)r * D + i];
            A.c[t][i] = c;
            if (K > 1) {
                for (int r = 0; r < K - 2; r++) hs[(size_t)r * D + i] = hs[(size_t)(r + 1) * D + i];
                hs[(size_t)(K - 2) * D + i] = x[i];
            }
            real y = silur_gpu(c);  // (silu_forward_kernel)
            A.s[t][i] = y;
            ss += y * y;
        }
        if (t == 2) break;
        ss = warp_sum(ss);  // (l2norm_forward_kernel)
        real sc = (real)(1 / sqrt((double)ss + 1e-6));
        for (int j = LANE; j < d; j += 32) A.y[t][h * d + j] = A.s[t][h * d + j] * sc;
        if (LANE == 0) A.rn[t][h] = sc;
    }
}

static void titans_dec_init_gpu(DecoderGpu* dec);  // section 5b
static void decoder_init_gpu(DecoderGpu* dec, ModelGpu* M) {
    const Config* c = &M->cfg;
    MemCfg* m = &M->mem;
    memset(dec, 0, sizeof *dec);
    dec->M = M;
    fill_in_activation_sizes(dec->act_sizes, c, 1, 1);
    size_t n = head_act_size(c, 1, 1);
    for (int i = 0; i < NUM_ACT_TENSORS; i++) n += dec->act_sizes[i];
    dec->acts_memory = (real*)dmalloc(n * sizeof(real));
    point_activations(&dec->a, dec->acts_memory, dec->act_sizes, c, 1, 1);
    size_t LH = (size_t)c->L * c->H;
    dec->conv_hist = (real*)dmalloc((size_t)c->L * 3 * (c->K - 1 + 1) * c->D * sizeof(real));
    dec->P = (real*)dmalloc(LH * m->nP * sizeof(real));
    dec->S = (real*)dmalloc(LH * m->nP * sizeof(real));
    dec->Pn = (real*)dmalloc((size_t)c->H * m->nP * sizeof(real));
    dec->Sn = (real*)dmalloc((size_t)c->H * m->nP * sizeof(real));
    dec->part = (real*)dmalloc(LH * mem_rows(m, c->b) * decoder_row_width(m) * sizeof(real));  // (omega: + the halo)
    // the chunk scratches: one per head, or R per head carved for the slices (split, as the parallel forward's)
    dec->R = mem_split_of(m, c);
    MemCfg ms = mem_split_cfg(m, dec->R);
    dec->chunks = mem_chunks_alloc(&ms, c->b, c->H * dec->R, &dec->chunk_memory);
    dec->xn = mem_split_xn(m, c->b);
    dec->nt =
        mem_launch_plan(m, c->b, 1, dec->R, dec->xn, c->H, &dec->sm);  // (decoder_memory_kernel's, as the forward's)
    cudaCheck(cudaFuncSetAttribute(decoder_memory_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)mem_dyn_bytes(dec->sm.floats, dec->R, dec->xn)));
    cudaCheck(cudaFuncSetAttribute(decoder_recurrent_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)mem_dyn_bytes(dec->sm.floats, dec->R, dec->xn)));
    if (c->lattice) {  // Lattice: S_0 = I per head of each memory layer
        real* I = (real*)calloc((size_t)c->H * m->nP, sizeof(real));
        for (int h = 0; h < c->H; h++) lattice_identity(I + (size_t)h * m->nP, m->d);
        for (int l = 0; l < c->L; l++)
            if (M->hm->mlayer[l] >= 0) h2d(dec->P + (size_t)l * c->H * m->nP, I, (size_t)c->H * m->nP * sizeof(real));
        free(I);
    }
    for (int l = 0; l < c->L; l++)
        if (M->hm->mlayer[l] >= 0 && !c->lattice && dec->R > 1) {  // P_0 of each memory layer (split: sliced)
            mem_slice_kernel<<<c->H * dec->R, 256, 0, g_stream>>>(
                dec->P + (size_t)l * c->H * m->nP, M->params.mem_p0 + (size_t)M->hm->mlayer[l] * c->H * m->nP, *m,
                dec->R);
            KCHECK("mem_slice");
        } else if (M->hm->mlayer[l] >= 0 && !c->lattice)
            d2d(dec->P + (size_t)l * c->H * m->nP, M->params.mem_p0 + (size_t)M->hm->mlayer[l] * c->H * m->nP,
                (size_t)c->H * m->nP * sizeof(real));
    if (dec->R > 1 && m->anchor && !c->lattice) {  // the anchor's slices for every token (DecArgs.p0s): P as it starts
        dec->p0s = (real*)dmalloc(LH * m->nP * sizeof(real));
        d2d(dec->p0s, dec->P, LH * m->nP * sizeof(real));
    }
    // the recurrent step (decoder_recurrent_kernel, as train_miras.c's decoder; MIRAS_DECODE_CHUNK=1 re-runs the
    // partial chunk instead): the running state starts as P
    int rerun =
        env_int("MIRAS_DECODE_CHUNK", 0, 0, 1, "MIRAS_DECODE_CHUNK=1 re-runs the partial chunk per token, 0 not");
    if (mem_decode_recurrent(c, m) && !rerun) {
        dec->Pt = (real*)dmalloc(LH * m->nP * sizeof(real));
        d2d(dec->Pt, dec->P, LH * m->nP * sizeof(real));
        dec->win = (real*)dmalloc(LH * dec->R * dec_win_rows(m, c->b) * dec_fac_width(&ms) * sizeof(real));
        dec->pa = (real*)dmalloc(LH * sizeof(real));
    }
    dec->kvcap = 64;
    for (int l = 0; l < c->L; l++)
        if (c->pattern[l] != 'M') {
            size_t rows = c->pattern[l] == 'S' ? (size_t)c->window : (size_t)dec->kvcap;
            dec->kc[l] = (real*)dmalloc(rows * c->D * sizeof(real));
            dec->vc[l] = (real*)dmalloc(rows * c->D * sizeof(real));
        }
    dec->tok = (int*)dmalloc(sizeof(int));
    dec->logits = (real*)xmalloc((size_t)c->Vp * sizeof(real));
    if (c->arch) titans_dec_init_gpu(dec);  // Titans layers: their caches, and the P rows through each layer (5b)
}
// phi*: room for token rows up to pos (grown by doubling, the rows and entries kept) and the entries with the current
// chunk's (train_miras.c's phi_dec_grow)
static void phi_dec_grow_gpu(DecoderGpu* dec, int pos) {
    const MemCfg* m = &dec->M->mem;
    const Config* c = &dec->M->cfg;
    if (pos < dec->ph_cap) return;
    int cap = dec->ph_cap ? dec->ph_cap : 64;
    while (cap <= pos) cap *= 2;
    size_t LH = (size_t)c->L * c->H, rw = 3 * (size_t)m->d + 2 + m->omega, oc = dec->ph_cap, one = dec->ph_necap,
           ne = phi_entries(cap, c->b, m->omega) + c->b + m->omega, w = m->dm;
    real* rows = (real*)dmalloc(LH * cap * rw * sizeof(real));
    real* av = (real*)dmalloc(LH * ne * w * sizeof(real));
    real* lo = (real*)dmalloc(LH * ne * sizeof(real));
    int* etok = (int*)dmalloc(LH * ne * sizeof(int));
    for (size_t i = 0; i < LH && oc; i++) {
        d2d(rows + i * cap * rw, dec->ph_rows + i * oc * rw, oc * rw * sizeof(real));
        d2d(av + i * ne * w, dec->ph_av + i * one * w, one * w * sizeof(real));
        d2d(lo + i * ne, dec->ph_lo + i * one, one * sizeof(real));
        d2d(etok + i * ne, dec->ph_etok + i * one, one * sizeof(int));
    }
    dfree(dec->ph_rows);
    dfree(dec->ph_av);
    dfree(dec->ph_lo);
    dfree(dec->ph_etok);
    dec->ph_rows = rows;
    dec->ph_av = av;
    dec->ph_lo = lo;
    dec->ph_etok = etok;
    PhiScr* hs = (PhiScr*)xmalloc((size_t)c->H * sizeof(PhiScr));
    size_t per = phi_scr_carve(&hs[0], NULL, m, c->b, ne);
    dfree(dec->ph_scr_mem);
    dec->ph_scr_mem = (real*)dmalloc((size_t)c->H * per * sizeof(real));
    for (int h = 0; h < c->H; h++) phi_scr_carve(&hs[h], dec->ph_scr_mem + (size_t)h * per, m, c->b, ne);
    if (!dec->ph_scr) dec->ph_scr = (PhiScr*)dmalloc((size_t)c->H * sizeof(PhiScr));
    h2d(dec->ph_scr, hs, (size_t)c->H * sizeof(PhiScr));
    free(hs);
    if (!dec->ph_LA) dec->ph_LA = (real*)dmalloc(LH * sizeof(real));
    dec->ph_cap = cap;
    dec->ph_necap = ne;
}
// the phi* decoder's arguments for layer l at token pos (rows grown to hold it), ne = phi_entries(t0) committed entries
// (t0: the current chunk's start; MAC's h read: the segment's); the token's inputs and y are the caller's
static PhiDecArgs phi_dec_args(DecoderGpu* dec, int l, int pos, int t0) {
    const MemCfg* m = &dec->M->mem;
    int H = dec->M->cfg.H, b = dec->M->cfg.b;
    phi_dec_grow_gpu(dec, pos);
    size_t lh = (size_t)l * H, ne = dec->ph_necap, rw = 3 * (size_t)m->d + 2 + m->omega;
    PhiDecArgs A;
    memset(&A, 0, sizeof A);
    A.m = *m;
    A.H = H;
    A.b = b;
    A.pos = pos;
    A.ne = (int)phi_entries(t0, b, m->omega);
    A.cap = (size_t)dec->ph_cap;
    A.necap = ne;
    A.rows = dec->ph_rows + lh * dec->ph_cap * rw;
    A.av = dec->ph_av + lh * ne * m->dm;
    A.lo = dec->ph_lo + lh * ne;
    A.etok = dec->ph_etok + lh * ne;
    A.LA = dec->ph_LA + lh;
    A.P = dec->P + lh * m->nP;
    A.Pn = dec->Pn;
    A.scr = dec->ph_scr;
    return A;
}
// this position's attention row of layer l against its KV cache (train_miras.c's decoder_attention): q, k = RoPE at
// pos,
// k and v into the cache (slot pos, or pos mod W in the 'S' ring), then attention_forward_kernel's row i = pos
static void decoder_attention_gpu(DecoderGpu* dec, int l, real* out, const real* u) {
    ModelGpu* M = dec->M;
    const Config* c = &M->cfg;
    const ParameterTensors* p = &M->params;
    ActivationTensors* a = &dec->a;
    int D = c->D, H = c->H, d = D / H, pos = dec->pos, W = c->pattern[l] == 'S' ? c->window : 0;
    if (!W && pos >= dec->kvcap) {  // the 'A' caches are full: double them all (the 'S' rings keep W rows)
        int nc = 2 * dec->kvcap;
        for (int i = 0; i < c->L; i++)
            if (c->pattern[i] == 'A') {
                real* k2 = (real*)dmalloc((size_t)nc * D * sizeof(real));
                real* v2 = (real*)dmalloc((size_t)nc * D * sizeof(real));
                d2d(k2, dec->kc[i], (size_t)dec->kvcap * D * sizeof(real));
                d2d(v2, dec->vc[i], (size_t)dec->kvcap * D * sizeof(real));
                dfree(dec->kc[i]);
                dfree(dec->vc[i]);
                dec->kc[i] = k2;
                dec->vc[i] = v2;
            }
        dec->kvcap = nc;
    }
    int slot = W ? pos % W : pos;
    matmul_forward_gpu(a->qp, u, p->wq + (size_t)l * D * D, NULL, 1, D, D);
    matmul_forward_gpu(a->kp, u, p->wk + (size_t)l * D * D, NULL, 1, D, D);
    matmul_forward_gpu(dec->vc[l] + (size_t)slot * D, u, p->wv + (size_t)l * D * D, NULL, 1, D, D);
    rope_forward_gpu(a->q, a->qp, 1, 1, H, d, 1, pos);
    rope_forward_gpu(dec->kc[l] + (size_t)slot * D, a->kp, 1, 1, H, d, 1, pos);
    attention_forward_kernel<<<warp_blocks(H), NT, 0, g_stream>>>(out, NULL, a->q, dec->kc[l], dec->vc[l], 1, 0, H, d,
                                                                  W, pos, 1, W, 0);
    KCHECK("decoder_attention");
}
static void decoder_free_gpu(DecoderGpu* dec) {
    if (dec->graphs) {
        for (int i = 0; i < dec->M->cfg.b; i++)
            if (dec->graphs[i]) cudaCheck(cudaGraphExecDestroy(dec->graphs[i]));
        free(dec->graphs);
        dfree(dec->blas_ws);
        cudaCheck(cudaStreamDestroy(dec->stream));
    }
    for (int l = 0; l < dec->M->cfg.L; l++)
        if (dec->kc[l]) {
            dfree(dec->kc[l]);
            dfree(dec->vc[l]);
        }
    dfree(dec->acts_memory);
    dfree(dec->conv_hist);
    dfree(dec->P);
    dfree(dec->S);
    dfree(dec->Pn);
    dfree(dec->Sn);
    dfree(dec->Pt);
    dfree(dec->p0s);
    dfree(dec->win);
    dfree(dec->pa);
    dfree(dec->part);
    dfree(dec->chunk_memory);
    dfree(dec->chunks);
    dfree(dec->tok);
    dfree(dec->txbuf);
    dfree(dec->mac_seg);
    dfree(dec->ph_rows);
    dfree(dec->ph_av);
    dfree(dec->ph_lo);
    dfree(dec->ph_LA);
    dfree(dec->ph_etok);
    dfree(dec->ph_scr_mem);
    dfree(dec->ph_scr);
    free(dec->logits);
}

// out (OC) = res + W x for one row x (C), the residual add after the decoder's Wo and MLP down products: in the product's
// launch (gemv_row_kernel's res), with TF32 the product into tmp and residual_forward (the same a + b either way);
// res NULL: out = W x
static void matmul_row_res_gpu(real* out, const real* res, const real* x, const real* W, int C, int OC, real* tmp) {
    if (g_prec != PREC_TF32)
        matmul_rows_gpu(1, &out, x, &W, NULL, C, &OC, NULL, NULL, &res);
    else if (!res)
        matmul_forward_gpu(out, x, W, NULL, 1, C, OC);
    else {
        matmul_forward_gpu(tmp, x, W, NULL, 1, C, OC);
        residual_forward_gpu(out, res, tmp, OC);
    }
}
// the memory mixer of layer l for one row u at stream position pos (SPEC §3, §7): its conv, gates, the chunk re-run over
// the partial chunk (decoder_memory_kernel), and out = (RMSNorm_head(y) * SiLU(u Wg^T)) Wo^T (train_miras.c's
// decoder_mixer); res: out = res + that instead (the layer's residual, in Wo's launch)
static void decoder_mixer_gpu(DecoderGpu* dec, int l, const real* u, int pos, real* out, const real* res = NULL) {
    ModelGpu* M = dec->M;
    const Config* c = &M->cfg;
    const MemCfg* m = &M->mem;
    ParameterTensors* p = &M->params;
    ActivationTensors* a = &dec->a;
    int D = c->D, H = c->H, d = m->d, K = c->K, nP = m->nP, b = c->b;
    int cnt = pos % b, rw = decoder_row_width(m);  // rows already in the partial chunk; floats per row
    real* hist = dec->conv_hist + (size_t)l * 3 * (K - 1) * D;
    size_t ml = M->hm->mlayer[l];
    {  // q, k, v and the output gate's projections of u: one launch
        real* outs[4] = {a->qp, a->kp, a->vp, a->gp};
        const real* Ws[4] = {p->wq + (size_t)l * D * D, p->wk + (size_t)l * D * D, p->wv + (size_t)l * D * D,
                             p->wg + ml * D * D};
        int OCs[4] = {D, D, D, D};
        matmul_rows_forward_gpu(4, outs, u, Ws, D, OCs);
    }
    DecQkv Q = {{a->qp, a->kp, a->vp}, {p->conv_q + ml * D * K, p->conv_k + ml * D * K, p->conv_v + ml * D * K},
                {a->qc, a->kc, a->vc}, {a->qs, a->ks, a->v},
                {a->q, a->k, a->v},    {a->qrn, a->krn}};
    dec_qkv_kernel<<<H, 32, 0, g_stream>>>(Q, hist, D, d, K);  // conv, SiLU, l2 norm of q, k, v
    KCHECK("dec_qkv");
    gates_forward_gpu(M, l, u, NULL, 1, a->ga, a->geta, a->gth, a->gdel, a->geta_lr, a->gdel_lr);
    int w = m->omega;
    if (w > 1) omega_gates_forward_gpu(M, l, u, NULL, 1, a->ggam);
    if (m->poly) {
        poly_forward_gpu(a->qf, a->q, p->poly_rho + ml * 3, 1, H, d);
        poly_forward_gpu(a->kf, a->k, p->poly_rho + ml * 3, 1, H, d);
    }
    if (c->lattice) {
        lattice_decode_kernel<<<H, lat_threads(d), 0, g_stream>>>(*m, dec->P + (size_t)l * H * nP, a->q, a->k, a->v,
                                                                  a->geta, a->ga, a->y);
        KCHECK("lattice_decode");
    } else if (m->phistar) {  // section 3c
        PhiDecArgs A = phi_dec_args(dec, l, pos, pos - cnt);
        A.q = a->q;
        A.k = a->k;
        A.v = a->v;
        A.ga = a->ga;
        A.geta = a->geta;
        A.ggam = a->ggam;
        A.y = a->y;
        phi_decode_kernel<<<H, MEM_THREADS, 0, g_stream>>>(A);
        KCHECK("phi_decode");
    } else {
        DecArgs A;
        memset(&A, 0, sizeof A);
        A.m = *m;
        A.H = H;
        A.b = b;
        A.cnt = cnt;
        A.rw = rw;
        A.nh = pos - cnt < w - 1 ? pos - cnt : w - 1;  // omega's halo rows of this chunk
        A.ggam = a->ggam;
        A.qf = a->qf;
        A.kf = a->kf;
        A.q = a->q;
        A.k = a->k;
        A.v = a->v;
        A.ga = a->ga;
        A.gth = a->gth;
        A.geta = a->geta;
        A.gdel = a->gdel;
        A.y = a->y;
        A.part = dec->part + (size_t)l * H * mem_rows(m, b) * rw;
        A.P = dec->P + (size_t)l * H * nP;
        A.S = dec->S + (size_t)l * H * nP;
        A.Pn = dec->Pn;
        A.Sn = dec->Sn;
        A.lng = m->ln ? p->mem_ln_g + ml * H * d : NULL;
        A.lnb = m->ln ? p->mem_ln_b + ml * H * d : NULL;
        A.chunks = dec->chunks;
        A.p0 = p->mem_p0 + ml * H * nP;
        A.p0s = dec->p0s ? dec->p0s + (size_t)l * H * nP : NULL;
        A.tc = g_mem_tc;  // (the parallel forward's: the same chunk products, on the tensor cores)
        A.sm = dec->sm;
        A.R = dec->R;
        A.xn = dec->xn;
        size_t sb = mem_dyn_bytes(A.sm.floats, A.R, A.xn);
        if (dec->Pt) {  // the recurrent step: P is the chunk-start state, Pt the running one
            A.Pt = dec->Pt + (size_t)l * H * nP;
            MemCfg ms = mem_split_cfg(m, dec->R);  // (a slice's factors per CTA)
            A.win = dec->win + (size_t)l * H * dec->R * dec_win_rows(m, b) * dec_fac_width(&ms);
            A.pa = dec->pa + (size_t)l * H;
            mem_kernel_launch(decoder_recurrent_kernel, "decoder_recurrent_kernel", A, A.R, H, sb, dec->nt);
            KCHECK("decoder_recurrent");
        } else {
            mem_kernel_launch(decoder_memory_kernel, "decoder_memory_kernel", A, A.R, H, sb, dec->nt);
            KCHECK("decoder_memory");
        }
    }
    rmsnorm_forward_gpu(a->yn, a->yrstd, a->y, p->rmsh_w + ml * D, 1, H, d);
    gate_mul_forward_gpu(a->z, a->yn, a->gp, D);  // (gp: with q, k, v above)
    matmul_row_res_gpu(out, res, a->z, p->wo + (size_t)l * D * D, D, D, a->mo);
}

// ---- 5b. Titans layers (MAL, MAG; MAC below) token by token (train_miras.c section 5b). Layer l's cache: MAG's N_p persistent
// rows (slots 0..N_p-1), then a ring of the last W rows (row j >= N_p in slot N_p + (j - N_p) mod W); MAL: the ring.
// Before the first token, the P rows run through the layer's memory (stream positions 0..N_p-1) and MAG's cache.

// attention row j of layer l on the row ua, its key and value into the cache; out = z Wo_a^T (train_miras.c's
// tx_dec_attn)
static void tx_dec_attn_gpu(DecoderGpu* dec, int l, const real* ua, int j, int np, real* out) {
    ModelGpu* M = dec->M;
    const Config* c = &M->cfg;
    const ParameterTensors* p = &M->params;
    int D = c->D, H = c->H, d = D / H, W = c->window;
    size_t oW = (size_t)l * D * D, slot = (size_t)(j < np ? j : np + (j - np) % W);
    real *q = dec->txbuf + 4 * D, *kp = q + D, *z = q + 2 * D;
    matmul_forward_gpu(kp, ua, p->att_wq + oW, NULL, 1, D, D);
    rope_forward_gpu(q, kp, 1, 1, H, d, 1, j);
    matmul_forward_gpu(kp, ua, p->att_wk + oW, NULL, 1, D, D);
    rope_forward_gpu(dec->kc[l] + slot * D, kp, 1, 1, H, d, 1, j);
    matmul_forward_gpu(dec->vc[l] + slot * D, ua, p->att_wv + oW, NULL, 1, D, D);
    attention_forward_kernel<<<warp_blocks(H), NT, 0, g_stream>>>(z, NULL, q, dec->kc[l], dec->vc[l], 1, 0, H, d, W, j,
                                                                  1, W, np);
    KCHECK("tx_dec_attn");
    matmul_forward_gpu(out, z, p->att_wo + oW, NULL, 1, D, D);
}
// MAC token by token (train_miras.c's mac_dec_layer): the layer keeps the state at the segment start (Pseg, Sseg),
// the u sequence's conv history, and a cache of keys and values: P's N_p rows, then h_j and u_j of the segment's
// j-th token at rows N_p + 2j and N_p + 2j + 1 (so a query's keys are one contiguous range: attention_forward_kernel
// adds them in this order, not P, h..., u... as the parallel forward: the same sum, rounded differently)
static real* mac_dec_seg(DecoderGpu* dec, int l) {  // layer l's Pseg (H, nP), Sseg (H, nP), conv history (K-1, D)
    const Config* c = &dec->M->cfg;
    return dec->mac_seg + (size_t)l * (2 * (size_t)c->H * dec->M->mem.nP + (size_t)(c->K - 1) * c->D);
}
static void mac_dec_init_gpu(DecoderGpu* dec, int l) {
    ModelGpu* M = dec->M;
    const Config* c = &M->cfg;
    const ParameterTensors* p = &M->params;
    int D = c->D, H = c->H, d = D / H, np = c->npers, C = c->seg;
    size_t oW = (size_t)l * D * D;
    dec->kc[l] = (real*)dmalloc((size_t)(np + 2 * C) * D * sizeof(real));
    dec->vc[l] = (real*)dmalloc((size_t)(np + 2 * C) * D * sizeof(real));
    if (np) {  // P's keys (RoPE positions 0..N_p-1) and values
        const real* Pr = p->pers + (size_t)l * np * D;
        real* kp = (real*)dmalloc((size_t)np * D * sizeof(real));
        matmul_forward_gpu(kp, Pr, p->att_wk + oW, NULL, np, D, D);
        rope_forward_gpu(dec->kc[l], kp, 1, np, H, d, 1);
        matmul_forward_gpu(dec->vc[l], Pr, p->att_wv + oW, NULL, np, D, D);
        dfree(kp);
    }
}
static void mac_dec_layer_gpu(DecoderGpu* dec, int l, const real* u) {
    ModelGpu* M = dec->M;
    const Config* c = &M->cfg;
    const MemCfg* m = &M->mem;
    const ParameterTensors* p = &M->params;
    int D = c->D, H = c->H, d = D / H, np = c->npers, C = c->seg, K = c->K, nP = m->nP, pos = dec->pos, j = pos % C;
    size_t oW = (size_t)l * D * D;
    real *kc = dec->kc[l], *vc = dec->vc[l], *Pseg = mac_dec_seg(dec, l), *Sseg = Pseg + (size_t)H * nP,
         *hist = Sseg + (size_t)H * nP;
    real *uq = dec->txbuf, *t1 = uq + D, *t2 = uq + 2 * D, *hrow = uq + 3 * D, *q = uq + 4 * D, *y = uq + 5 * D,
         *yo = uq + 6 * D, *r = uq + 7 * D, *rn = uq + 8 * D;
    if (j == 0) {  // a new segment: its start state (the last chunk boundary's), and an empty h / u cache
        d2d(Pseg, dec->P + (size_t)l * H * nP, (size_t)H * nP * sizeof(real));
        d2d(Sseg, dec->S + (size_t)l * H * nP, (size_t)H * nP * sizeof(real));
    }
    // the u sequence's memory q, and h = M(uq; P_(s)) per head (a one-row read without update)
    matmul_forward_gpu(t1, u, p->wq + oW, NULL, 1, D, D);
    conv_step_gpu(t2, hist, t1, p->conv_q + (size_t)l * D * K, D, K);
    silu_forward_gpu(t1, t2, D);
    l2norm_forward_gpu(uq, rn, t1, 1, H, d);
    real* uqf = m->poly ? uq + 9 * D + 2 : NULL;  // poly: uq's features (H*D_phi, after txbuf's rows)
    if (uqf) poly_forward_gpu(uqf, uq, p->poly_rho + (size_t)l * 3, 1, H, d);
    MemArgs A;
    memset(&A, 0, sizeof A);
    A.m = *m;
    A.T = 1;
    A.H = H;
    A.D = D;
    A.b = c->b;
    A.nch = 1;
    A.P = Pseg;
    A.S = mem_carries_S(m) ? Sseg : NULL;
    A.p0 = p->mem_p0 + (size_t)l * H * nP;
    A.lng = m->ln ? p->mem_ln_g + (size_t)l * H * d : NULL;
    A.lnb = m->ln ? p->mem_ln_b + (size_t)l * H * d : NULL;
    A.chunks = dec->chunks;
    if (m->lattice)  // (Pseg: (H, nP), one slot per head)
        mac_lat_read_kernel<<<H, lat_threads(d), 0, g_stream>>>(A, Pseg, 1, 0, uq, hrow, 0, 1);
    else if (m->phistar)  // (the entries committed before the segment are unchanged since its start)
        mac_phi_dec_read_kernel<<<H, MEM_THREADS, 0, g_stream>>>(phi_dec_args(dec, l, pos, pos - j), uq, Pseg, hrow);
    else
        mac_read_forward_kernel<<<H, MEM_THREADS, 0, g_stream>>>(A, uq, uqf, hrow, 0, 1);
    KCHECK("mac_dec_read");
    // keys and values of h_j and u_j (RoPE position N_p + pos), the query; attention over P, h_0, u_0, .., h_j, u_j
    matmul_forward_gpu(t1, hrow, p->att_wk + oW, NULL, 1, D, D);
    rope_forward_gpu(kc + (size_t)(np + 2 * j) * D, t1, 1, 1, H, d, 1, np + pos);
    matmul_forward_gpu(vc + (size_t)(np + 2 * j) * D, hrow, p->att_wv + oW, NULL, 1, D, D);
    matmul_forward_gpu(t1, u, p->att_wk + oW, NULL, 1, D, D);
    rope_forward_gpu(kc + (size_t)(np + 2 * j + 1) * D, t1, 1, 1, H, d, 1, np + pos);
    matmul_forward_gpu(vc + (size_t)(np + 2 * j + 1) * D, u, p->att_wv + oW, NULL, 1, D, D);
    matmul_forward_gpu(t1, u, p->att_wq + oW, NULL, 1, D, D);
    rope_forward_gpu(q, t1, 1, 1, H, d, 1, np + pos);
    attention_forward_kernel<<<warp_blocks(H), NT, 0, g_stream>>>(y, NULL, q, kc, vc, 1, 0, H, d, 0, np + 2 * j + 1, 1,
                                                                  0, 0);
    KCHECK("mac_dec_attn");
    // the memory on the y stream (its write and read; m = the raw read, in dec->a.y), then the gate
    decoder_mixer_gpu(dec, l, y, pos, t1);
    matmul_forward_gpu(yo, y, p->att_wo + oW, NULL, 1, D, D);
    rmsnorm_forward_gpu(t1, r, yo, p->og1_w + (size_t)l * D, 1, 1, D);
    rmsnorm_forward_gpu(t2, r + 1, dec->a.y, p->og2_w + (size_t)l * D, 1, 1, D);
    out_gate_forward_kernel<<<nblocks(D), NT, 0, g_stream>>>(dec->a.mo, t1, t2, D);
    KCHECK("out_gate_forward");
}
// decoder_init_gpu's part: the caches, and each layer's P rows through its memory and MAG's attention
static void titans_dec_init_gpu(DecoderGpu* dec) {
    ModelGpu* M = dec->M;
    const Config* c = &M->cfg;
    int D = c->D, np = c->npers;
    dec->txbuf = (real*)dmalloc(((size_t)(9 * D + 2) + (M->mem.poly ? (size_t)c->H * M->mem.din : 0)) * sizeof(real));
    if (c->arch == ARCH_MAC) {
        dec->mac_seg =
            (real*)dmalloc((size_t)c->L * (2 * (size_t)c->H * M->mem.nP + (size_t)(c->K - 1) * D) * sizeof(real));
        for (int l = 0; l < c->L; l++) mac_dec_init_gpu(dec, l);
        return;
    }
    for (int l = 0; l < c->L; l++) {
        size_t rows = (size_t)(c->arch == ARCH_MAG ? np : 0) + c->window;
        dec->kc[l] = (real*)dmalloc(rows * D * sizeof(real));
        dec->vc[l] = (real*)dmalloc(rows * D * sizeof(real));
        for (int s = 0; s < np; s++) {
            const real* P = M->params.pers + ((size_t)l * np + s) * D;
            decoder_mixer_gpu(dec, l, P, s, dec->txbuf);
            if (c->arch == ARCH_MAG) tx_dec_attn_gpu(dec, l, P, s, np, dec->txbuf);
        }
    }
}
// decoder_step_gpu's part: layer l's a->mo from x and u (as titans_layer_forward_gpu)
static void titans_dec_layer_gpu(DecoderGpu* dec, int l, const real* x, const real* u) {
    ModelGpu* M = dec->M;
    const Config* c = &M->cfg;
    const ParameterTensors* p = &M->params;
    int D = c->D, np = c->npers;
    real *m = dec->txbuf, *t1 = m + D, *t2 = m + 2 * D, *y = m + 3 * D, *r = m + 7 * D;
    real* mo = dec->a.mo;
    if (c->arch == ARCH_MAC) {
        mac_dec_layer_gpu(dec, l, u);
        return;
    }
    decoder_mixer_gpu(dec, l, u, np + dec->pos, m);
    if (c->arch == ARCH_MAL) {
        residual_forward_gpu(t1, x, m, D);
        rmsnorm_forward_gpu(t2, r, t1, p->rmsa_w + (size_t)l * D, 1, 1, D);
        tx_dec_attn_gpu(dec, l, t2, dec->pos, 0, y);
        residual_forward_gpu(mo, m, y, D);
    } else {
        tx_dec_attn_gpu(dec, l, u, np + dec->pos, np, y);
        rmsnorm_forward_gpu(t1, r, y, p->og1_w + (size_t)l * D, 1, 1, D);
        rmsnorm_forward_gpu(t2, r + 1, m, p->og2_w + (size_t)l * D, 1, 1, D);
        out_gate_forward_kernel<<<nblocks(D), NT, 0, g_stream>>>(mo, t1, t2, D);
        KCHECK("out_gate_forward");
    }
}

// One step's device work for the token in dec->tok at position dec->pos: every layer, then the logits (device)
static void decoder_forward_gpu(DecoderGpu* dec) {
    ModelGpu* M = dec->M;
    const Config* c = &M->cfg;
    ParameterTensors* p = &M->params;
    ActivationTensors* a = &dec->a;
    int D = c->D, F = c->F;
    encoder_forward_gpu(a->encoded, dec->tok, p->wte, 1, D);
    real* x = a->encoded;
    for (int l = 0; l < c->L; l++) {
        // with one row, the layer-stacked activations of dec->a hold one layer; reuse them per layer
        real* u = a->ln1;
        rmsnorm_forward_gpu(u, a->ln1_rstd, x, p->rms1_w + (size_t)l * D, 1, 1, D);
        if (c->arch) {
            titans_dec_layer_gpu(dec, l, x, u);  // MAL, MAG (section 5b)
            residual_forward_gpu(a->res2, x, a->mo, D);
        } else if (c->pattern[l] != 'M') {  // attention: this position's row against the KV cache, then Wo
            decoder_attention_gpu(dec, l, a->z, u);
            matmul_row_res_gpu(a->res2, x, a->z, p->wo + (size_t)l * D * D, D, D, a->mo);  // res2 = x + z Wo^T
        } else
            decoder_mixer_gpu(dec, l, u, dec->pos, a->res2, x);  // 'M': res2 = x + the mixer's output
        rmsnorm_forward_gpu(a->ln2, a->ln2_rstd, a->res2, p->rms2_w + (size_t)l * D, 1, 1, D);
        {  // the SwiGLU branches: one launch
            real* outs[2] = {a->h1, a->h3};
            const real* Ws[2] = {p->mlp_w1 + (size_t)l * F * D, p->mlp_w3 + (size_t)l * F * D};
            int OCs[2] = {F, F};
            matmul_rows_forward_gpu(2, outs, a->ln2, Ws, D, OCs);
        }
        swiglu_forward_gpu(a->hg, a->h1, a->h3, F);
        // the next layer's input, in place: x = res2 + hg W2^T (this layer reads x no more)
        matmul_row_res_gpu(x, a->res2, a->hg, p->mlp_w2 + (size_t)l * D * F, F, D, a->mlpo);
    }
    rmsnorm_forward_gpu(a->lnf, a->lnf_rstd, x, p->rmsf_w, 1, 1, D);
    matmul_forward_gpu(a->logits, a->lnf, p->wte, NULL, 1, D, c->Vp);
}

// Decoding with CUDA graphs (the sampler's default, MIRAS_DECODE_GRAPH=0 turns it off; --decode-test checks it). A
// step launches a few dozen small kernels per layer, each costing a launch (several us) for microseconds of work at B = 1;
// a graph replays the whole step as one launch. The step's launch arguments depend on the position only through the
// chunk phase cnt = pos % b and omega's halo rows (constant once a chunk has c - 1 tokens before it), so one graph per
// phase serves every later chunk: captured the first time the phase comes after the first b + c tokens (which run as
// plain launches: any lazily allocated scratch exists by then), replayed from then on. Models whose step depends on
// the position otherwise (attention layers and Titans layers: the KV cache; the phi* memory: its entries) and
// MIRAS_SYNC=1 (a synchronisation inside a capture is refused) decode without graphs.
static int decoder_graphable(const ModelGpu* M) {
    const Config* c = &M->cfg;
    if (c->arch || M->mem.phistar || g_sync) return 0;
    for (int l = 0; l < c->L; l++)
        if (c->pattern[l] != 'M') return 0;
    return 1;
}
#define DEC_BLAS_WS ((size_t)32 << 20)  // cuBLAS's recommended workspace on Hopper
static void decoder_use_graphs(DecoderGpu* dec) {
    if (!decoder_graphable(dec->M)) return;
    // a blocking stream: its work is ordered with the legacy stream's synchronous copies around each step
    cudaCheck(cudaStreamCreateWithFlags(&dec->stream, cudaStreamDefault));
    dec->graphs = (cudaGraphExec_t*)calloc(dec->M->cfg.b, sizeof(cudaGraphExec_t));
    dec->blas_ws = dmalloc(DEC_BLAS_WS);
}

// Feed one token; returns the Vp logits of the next-token distribution (host memory, valid until the next call).
static const real* decoder_step_gpu(DecoderGpu* dec, int token) {
    const Config* c = &dec->M->cfg;
    if (token < 0 || token >= c->V)
        DIE("prompt tokens must be < vocab size", "token %d out of range for vocab %d", token, c->V);
    h2d(dec->tok, &token, sizeof(int));
    if (!dec->graphs)
        decoder_forward_gpu(dec);
    else {
        g_stream = dec->stream;  // the step's work on the decoder's stream (the copies around it stay synchronous)
        cublasCheck(cublasSetStream(g_blas, g_stream));
        cublasCheck(cublasSetWorkspace(g_blas, dec->blas_ws, DEC_BLAS_WS));
        int ph = dec->pos % c->b;
        if (dec->pos < c->b + dec->M->mem.omega)
            decoder_forward_gpu(dec);
        else {
            if (!dec->graphs[ph]) {
                cudaGraph_t g;
                cudaCheck(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal));
                decoder_forward_gpu(dec);
                cudaCheck(cudaStreamEndCapture(g_stream, &g));
                cudaCheck(cudaGraphInstantiate(&dec->graphs[ph], g, 0));
                cudaCheck(cudaGraphDestroy(g));
            }
            cudaCheck(cudaGraphLaunch(dec->graphs[ph], g_stream));
            dec->replays++;
        }
        g_stream = 0;
        cublasCheck(cublasSetStream(g_blas, 0));  // (and cuBLAS's default workspace back)
    }
    d2h(dec->logits, dec->a.logits, (size_t)c->Vp * sizeof(real));
    dec->pos++;
    return dec->logits;
}

// ----------------------------------------------------------------------------
// 6. dump mode, the decode test, evaluation, sampling

// Dump mode, the layout of train_miras.c's dump_run (test_miras --compare diffs the two): IN is a fixture-layout
// file; OUT: 256 int32 (20261104, 1, B, T, V, num_params, nsteps), then float32 logits (B*T*V), loss, every
// gradient, the losses of nsteps AdamW steps on the batch (the first is the loss above), and the params after them.
static void read_dump_input(const char* in, Model* HM, Config* cfg, int* hdr, int** inp, int** tgt) {
    dump_input_read(in, HM, cfg, hdr, inp, tgt);  // train_miras.c: every header field checked against the file size
}
static void dump_run_gpu(const char* in, const char* out) {
    int h[256];
    Config cfg;
    Model HM;
    int *inp, *tgt;
    read_dump_input(in, &HM, &cfg, h, &inp, &tgt);
    int B = h[100], T = h[101], nsteps = h[102];
    real lr = bits_f32(h[103]), b1 = bits_f32(h[104]), b2 = bits_f32(h[105]), eps = bits_f32(h[106]),
         wd = bits_f32(h[107]), clip = bits_f32(h[108]);
    ModelGpu M;
    model_build_gpu(&M, &HM);
    size_t N = (size_t)B * T;
    FILE* g = fopen(out, "wb");
    if (!g) DIE(NULL, "cannot write %s", out);
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
    real* logits = (real*)xmalloc(N * cfg.Vp * sizeof(real));
    real* grads = (real*)xmalloc(M.num_params * sizeof(real));
    for (int s = 0; s <= nsteps; s++) {
        model_forward_gpu(&M, inp, tgt, B, T);
        model_zero_grad_gpu(&M);
        model_backward_gpu(&M, 1);
        if (s == 0) {
            d2h(logits, M.acts.logits, N * cfg.Vp * sizeof(real));
            d2h(grads, M.grads_memory, M.num_params * sizeof(real));
            for (size_t n = 0; n < N; n++) write_reals(g, logits + n * cfg.Vp, cfg.V);
            write_reals(g, &M.mean_loss, 1);
            write_reals(g, grads, M.num_params);
        }
        losses[s] = M.mean_loss;
        if (s == nsteps) break;
        grad_clip_gpu(&M, grad_norm_gpu(&M), clip);
        model_update_gpu(&M, lr, b1, b2, eps, wd);
    }
    model_to_host(&M);
    write_reals(g, losses, nsteps);
    write_reals(g, HM.params_memory, M.num_params);
    if (fclose(g) != 0) DIE(NULL, "failed writing %s", out);
    free(losses);
    free(logits);
    free(grads);
    free(inp);
    free(tgt);
    model_free_gpu(&M);
    model_free(&HM);
}

// --decode-test IN: token-by-token logits on the GPU against the GPU's parallel forward, for prompt lengths
// 1, b-1, b+1, 2b+3 and T (the rows of the file's first sequence, repeated). Exit code 1 if any error > 1e-5 (1e-4 with
// muon). One decoding of the longest length serves them all: the decoder is causal, so its first T steps are a T-token
// decoding's, and each length's parallel forward (whose chunks end differently) is compared with those T rows.
static int decode_test(const char* in) {
    int h[256];
    Config cfg;
    Model HM;
    int *inp, *tgt;
    read_dump_input(in, &HM, &cfg, h, &inp, &tgt);
    int T0 = h[101], b = cfg.b, Vp = cfg.Vp, lens[5] = {1, b - 1, b + 1, 2 * b + 3, T0}, Tmax = 0;
    for (int li = 0; li < 5; li++) Tmax = lens[li] > Tmax ? lens[li] : Tmax;
    ModelGpu M;
    model_build_gpu(&M, &HM);
    // (long enough for the CUDA graphs' check below too, whose plain decoder it is)
    int graphs = decoder_graphable(&M), Tg = 3 * b + M.mem.omega;
    if (graphs && Tg > Tmax) Tmax = Tg;
    int* tok = (int*)xmalloc(Tmax * sizeof(int));
    for (int t = 0; t < Tmax; t++) tok[t] = inp[t % T0];
    // the plain decoder and, stepped beside it on the same tokens (two decoders alive at once), the one with CUDA
    // graphs (checked below)
    DecoderGpu dec, graph;
    decoder_init_gpu(&dec, &M);
    if (graphs) {
        decoder_init_gpu(&graph, &M);
        decoder_use_graphs(&graph);
    }
    real* seq = (real*)xmalloc((size_t)Tmax * Vp * sizeof(real));
    real* l1 = graphs ? (real*)xmalloc((size_t)Tg * Vp * sizeof(real)) : NULL;
    for (int t = 0; t < Tmax; t++) {
        memcpy(seq + (size_t)t * Vp, decoder_step_gpu(&dec, tok[t]), Vp * sizeof(real));
        if (graphs && t < Tg) memcpy(l1 + (size_t)t * Vp, decoder_step_gpu(&graph, tok[t]), Vp * sizeof(real));
    }
    double worst = -1;
    int worst_T = 0, checked = 0;  // (worst -1 until a length is checked: none checked fails)
    for (int li = 0; li < 5; li++) {
        int T = lens[li];
        if (T < 1) continue;
        checked++;
        model_forward_gpu(&M, tok, NULL, 1, T);
        real* par = (real*)xmalloc((size_t)T * Vp * sizeof(real));
        d2h(par, M.acts.logits, (size_t)T * Vp * sizeof(real));
        double err = relerr_rr(seq, par, (size_t)T * Vp);
        printf("  decode T=%d: err %.2e%s%s\n", T, err, dec.Pt ? " (the recurrent step)" : "",
               dec.R > 1 ? " (the memory split over clusters: MIRAS_MEM_SPLIT)" : "");
        if (err > worst || !(err == err)) {
            worst = err == err ? err : INFINITY;
            worst_T = T;
        }
        free(par);
    }
    decoder_free_gpu(&dec);
    free(tok);
    // (muon: 10x, test_miras.c's NS5_SLACK: five Newton-Schulz iterations per token amplify float rounding)
    double tol = cfg.algo >= ALGO_MUON ? 1e-4 : 1e-5;
    int ok = checked > 0 && worst >= 0 && worst <= tol;
    // decoding with CUDA graphs (decoder_use_graphs) against the plain decoder, token by token over 3b + c tokens:
    // b + c plain steps, then every phase captured and replayed, and replayed again; the same kernels on the same
    // inputs, so the logits agree to rounding at most (bit for bit on the emulator)
    if (graphs) {
        int want = Tg - b - M.mem.omega;
        double err = relerr_rr(l1, seq, (size_t)Tg * Vp);
        free(l1);
        int gok = graph.replays == want && err <= 1e-6;  // (NaN fails)
        printf(
            "  decode T=%d with CUDA graphs: %d steps replayed (want %d), err %.2e against the plain decoder (tol 1e-06)\n",
            Tg, graph.replays, want, err);
        ok = ok && gok;
        decoder_free_gpu(&graph);
    } else
        printf("  (this model decodes without CUDA graphs: attention, Titans layers or phi* memory)\n");
    printf(
        "%s - %s: GPU decode equals the GPU parallel forward for prompt lengths 1, b-1, b+1, 2b+3, T (%d checked): worst err %.2e at T=%d (tol %.0e)\n",
        ok ? "ok" : "FAIL", in, checked, worst, worst_T, tol);
    free(seq);
    model_free_gpu(&M);
    model_free(&HM);
    free(inp);
    free(tgt);
    return ok ? 0 : 1;
}

// validation: mean loss over nb batches from the start of the val shards; with answer masks
// (synthetic tasks) also the accuracy of argmax predictions on the answer tokens only
static real evaluate_gpu(ModelGpu* M, DataLoader* dl, int nb, real* acc) {
    dataloader_reset(dl);
    double loss = 0;
    long right = 0, total = 0;
    int N = dl->B * dl->T, V = M->cfg.V, Vp = M->cfg.Vp;
    const uint8_t* keep = M->loss_mask;
    for (int i = 0; i < nb; i++) {
        // answers-only runs score val on answers too
        dataloader_next(dl);
        if (M->loss_mask) M->loss_mask = dl->mask + 1;
        model_forward_gpu(M, dl->inputs, dl->targets, dl->B, dl->T);
        loss += M->mean_loss;
        if (dl->has_mask) {
            argmax_kernel<<<warp_blocks(N), NT, 0, g_stream>>>(M->argmax, M->acts.logits, N, V, Vp);
            KCHECK("argmax");
            d2h(M->h_argmax, M->argmax, N * sizeof(int));
            for (int n = 0; n < N; n++) {
                if (!dl->mask[n + 1]) continue;  // mask marks the answer token; it is the target of position n
                right += M->h_argmax[n] == dl->targets[n];
                total++;
            }
        }
    }
    *acc = total ? (real)right / total : -1;
    M->loss_mask = keep;
    return (real)(loss / nb);
}

// The latency floor of one decoder step (B = 1): the bytes it must read at least, every weight once as the dense
// products read them (bf16 copies with -f 2, else fp32) and each memory layer's state P (and S with momentum or
// muon), over the card's peak memory bandwidth (2 x memory clock x bus width: 3.35 TB/s on an H100 SXM). -1 where the
// device does not say.
static double decode_floor_ms(const ModelGpu* M) {
    int clk = 0, bus = 0;  // kHz, bits
    cudaCheck(cudaDeviceGetAttribute(&clk, cudaDevAttrMemoryClockRate, g_device));
    cudaCheck(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, g_device));
    if (clk <= 0 || bus <= 0) return -1;
    int nmem = 0;
    for (int l = 0; l < M->cfg.L; l++) nmem += M->hm->mlayer[l] >= 0;
    double bytes = (double)M->num_params * (g_prec == PREC_BF16 ? sizeof(bf16) : sizeof(real)) +
                   (double)nmem * M->cfg.H * M->mem.nP * sizeof(real) * (mem_carries_S(&M->mem) ? 2 : 1);
    return 1e3 * bytes / (2.0 * clk * 1e3 * bus / 8);
}

static void generate_gpu(ModelGpu* M, const Tokenizer* tk, const int* prompt, int np, int ngen, uint64_t* rng) {
    DecoderGpu dec;
    decoder_init_gpu(&dec, M);
    // CUDA graphs: on by default since run 7 (faster on the H200 in runs 5 and 7, 2.59 -> 2.32 and 2.17 -> 2.09 ms)
    if (env_int("MIRAS_DECODE_GRAPH", 1, 0, 1, "MIRAS_DECODE_GRAPH=0 decodes without CUDA graphs, 1 with"))
        decoder_use_graphs(&dec);
    const real* logits = NULL;
    for (int i = 0; i < np; i++) {
        logits = decoder_step_gpu(&dec, prompt[i]);
        print_token(tk, prompt[i], M->cfg.V);
    }
    // per-token latency of the generated tokens (B = 1): the whole loop, and the decoder step alone (one token through
    // the model, ending with its logits on the host: synchronous), without the host's sampling and printing
    // MIRAS_DECODE_PROFILE=n: the decoder steps of generated tokens 16 .. 16 + n - 1 between cudaProfilerStart and
    // cudaProfilerStop, for `ncu --profile-from-start off` (dev/cuda/memlab_device.sh part 9: every kernel's duration)
    int prof_n = env_int("MIRAS_DECODE_PROFILE", 0, 0, INT_MAX, "MIRAS_DECODE_PROFILE=n profiles n decoder steps"),
        prof_at = 16;
    double t0 = now_s(), tstep = 0;
    for (int i = 0; i < ngen; i++) {
        int t = sample_token(logits, M->cfg.V, 1.0, rng);
        print_token(tk, t, M->cfg.V);
        fflush(stdout);
        if (i + 1 < ngen) {
            if (prof_n > 0 && i == prof_at) cudaCheck(cudaProfilerStart());
            double ts = now_s();
            logits = decoder_step_gpu(&dec, t);
            tstep += now_s() - ts;
            if (prof_n > 0 && i == prof_at + prof_n - 1) cudaCheck(cudaProfilerStop());
        }
    }
    printf("\n");
    if (ngen > 1)
        printf("decode: %d tokens, %.3f ms per token, of which the decoder step %.3f ms (floor %.4f ms)%s\n", ngen - 1,
               1e3 * (now_s() - t0) / (ngen - 1), 1e3 * tstep / (ngen - 1), decode_floor_ms(M),
               dec.graphs ? ", CUDA graphs" : "");
    decoder_free_gpu(&dec);
}

// ----------------------------------------------------------------------------
// 7. main: train_miras.c's training loop with the model on the GPU (the host Model keeps the files' side)

static void usage(void) {
    printf("usage: train_miras_cu [flags]   (defaults in brackets; the flags of train_miras, plus the GPU's)\n");
    printf(USAGE, PRESETS);
    printf(
        " gpu:   -f precision of the dense matrix products: 0 fp32, 1 TF32 tensor cores (~1e-3 relative error),\n"
        "        2 bf16 tensor cores (bf16 operands, fp32 accumulation, fp32 master weights and AdamW; ~1e-2 relative error) [0]\n"
        " --decode-test IN: token-by-token decoding against the parallel forward on the GPU (exit 1 above 1e-5)\n"
        " --make-input OUT: write a dump input (fixture layout) for the model of the flags, initialised with -y (or the weights of -e CKPT), B x T random tokens\n"
        " MIRAS_SYNC=1 in the environment synchronises after every kernel (to locate a failing one)\n");
}
// a NaN into the first gradient entry on the device (MIRAS_PLANT_NAN_STEP, see skip_nonfinite_step)
static void plant_nan(real* dgrads) {
    real v = NAN;
    h2d(dgrads, &v, sizeof v);
}
// the GPU trainer's own flags, taken before the shared ones
static int g_precision = PREC_FP32;
static const char *g_decode_in = NULL, *g_make_out = NULL;
static int gpu_flag(const char* f, const char* v) {
    if (!strcmp(f, "-f")) {
        g_precision = arg_int(f, v);
        return 1;
    }
    if (!strcmp(f, "--decode-test")) {
        g_decode_in = v;
        return 1;
    }
    if (!strcmp(f, "--make-input")) {
        g_make_out = v;
        return 1;
    }
    return 0;
}

// Data parallel on GPUs (train_miras.c section 6b, the same split and semantics): NCCL sums the gradients on the
// device, MPI only launches the ranks and hands out NCCL's id. Not yet run on GPUs (README "Data parallel").
#ifdef USE_MPI
#define ncclCheck(x)                                                                                       \
    do {                                                                                                   \
        ncclResult_t r_ = (x);                                                                             \
        if (r_ != ncclSuccess)                                                                             \
            DIE("check NCCL_DEBUG=INFO output and that every rank sees its GPU", "NCCL error %s at %s:%d", \
                ncclGetErrorString(r_), __FILE__, __LINE__);                                               \
    } while (0)
static ncclComm_t g_nccl;
static void nccl_init(void) {
    if (g_world <= 1) return;
    ncclUniqueId id;
    if (g_rank == 0) ncclCheck(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclCheck(ncclCommInitRank(&g_nccl, g_world, id, g_rank));
}
static void nccl_allreduce_grads(real* dgrads, size_t n) {  // in place, on the stream of the kernels (0)
    if (g_world > 1) ncclCheck(ncclAllReduce(dgrads, dgrads, n, ncclFloat, ncclSum, g_nccl, 0));
}
// -K 1 (ZeRO stage 1), after the update: each rank broadcasts its share of the weights (shares may differ in size
// by one, so a group of broadcasts rather than ncclAllGather), then the bf16 copy is refreshed from the fp32 weights
static void nccl_gather_params(ModelGpu* M) {
    if (g_world <= 1 || M->opt_n == M->num_params) return;
    ncclCheck(ncclGroupStart());
    for (int r = 0; r < g_world; r++) {
        size_t lo, n;
        dist_share(M->num_params, r, &lo, &n);
        if (n) ncclCheck(ncclBroadcast(M->params_memory + lo, M->params_memory + lo, n, ncclFloat, r, g_nccl, 0));
    }
    ncclCheck(ncclGroupEnd());
    if (M->params_bf16) {
        to_bf16_kernel<<<nblocks(M->num_params), NT, 0, g_stream>>>(M->params_bf16, M->params_memory, M->num_params);
        KCHECK("to_bf16");
    }
}
#else
static void nccl_init(void) {}
static void nccl_allreduce_grads(real*, size_t) {}
static void nccl_gather_params(ModelGpu*) {}
#endif

int main(int argc, char** argv) {
    dist_init(&argc, &argv);
    g_die_collective = 1;  // until training starts, every rank meets the same errors
    Args a;
    args_parse(&a, argc, argv, usage, gpu_flag);
    if ((a.dump_in || g_decode_in || g_make_out) && g_world > 1)
        DIE("run it as one process, without mpirun", "dump, decode-test and make-input modes do not run on %d ranks",
            g_world);
    if (a.dump_in) {
        gpu_init(g_precision);
        dump_run_gpu(a.dump_in, a.dump_out);
        return 0;
    }
    if (g_decode_in) {
        gpu_init(g_precision);
        return decode_test(g_decode_in);
    }
    if (g_make_out) {
        make_input_run(&a, g_make_out);
        return 0;
    }
    gpu_init(g_precision);
    Config cfg;
    char ckpt_path[4096];
    const char* load_path = args_resolve(&a, &cfg, ckpt_path, sizeof ckpt_path);
    if (a.warmup < 0) a.warmup = default_warmup(&cfg);  // -u not given
    Model model;
    model_build(&model, &cfg);  // the host model: initialisation and the checkpoint files
    TrainState st = {0, 0, 0, a.seed * 0x9E3779B97F4A7C15ULL + 1};
    if (load_path)
        load_checkpoint(&model, load_path, a.resume ? &st : NULL);
    else
        model_init(&model, a.seed);
    dist_check_resume(&a, load_path, &st);
    if (a.zero) dist_shard_optimizer(&model);  // -K 1: this rank's share of the AdamW moments, on the host and the GPU
    ModelGpu gm;
    model_build_gpu(&gm, &model);
    nccl_init();
    Run run;
    gm.loss_mask = run_open(&run, &a, &cfg, &st);
    // accum: micro-batches per rank and step
    int accum = dist_accum(&a), B = a.B, T = a.T;
    long max_steps = a.max_steps;
    DataLoader* train = &run.train;
    if (max_steps > 0) dist_place_loader(train, &st, accum);
    if (g_world > 1 && g_rank == 0)
        printf("data parallel (NCCL): %d ranks, each %d x %d tokens per step; validation and sampling on rank 0\n",
               g_world, accum, B * T);
    if (g_rank == 0)
        printf(
            "train_miras_cu | preset %s | V %d D %d L %d H %d E %d F %d b %d | %zu params | B %d T %d accum %d | %s%s\n",
            load_path && !(a.given & G_P) ? "(from checkpoint)" : a.preset, cfg.V, cfg.D, cfg.L, cfg.H, cfg.E, cfg.F,
            cfg.b, model.num_params, B, T, accum, gpu_name(),
            g_prec == PREC_TF32   ? " (TF32)"
            : g_prec == PREC_BF16 ? " (bf16)"
                                  : "");
    if (max_steps == 0) {
        if (g_rank == 0) {
            real acc, vl = evaluate_gpu(&gm, &run.val, a.val_batches, &acc);
            report_val(&run, -1, vl, acc);
        }
        return 0;
    }
    int skipped = 0;  // steps skipped for a non-finite loss or gradient (-N)
    g_die_collective = 0;
    for (long step = st.step; step < max_steps; step++) {
        dist_test_kill(step + 1);
        if (g_rank == 0 && run.have_val && a.val_every > 0 && step % a.val_every == 0) {
            real acc, vl = evaluate_gpu(&gm, &run.val, a.val_batches, &acc);
            report_val(&run, step, vl, acc);
        }
        if (g_rank == 0 && a.sample_every > 0 && step > 0 && step % a.sample_every == 0) {
            int p0 = train->inputs[0];
            printf("sample: ");
            generate_gpu(&gm, &run.tk, &p0, 1, a.gen_tokens, &st.rng);
        }
        cudaCheck(cudaDeviceSynchronize());
        double t0 = now_s();
        real loss = 0;
        int bad_loss = 0;
        model_zero_grad_gpu(&gm);
        for (int k = 0; k < accum; k++) {
            dataloader_next(train);
            model_forward_gpu(&gm, train->inputs, train->targets, B, T);
            if (!isfinite(gm.mean_loss)) {  // skipped below if -N allows (the data still moves on)
                if (skipped >= a.max_skip)
                    DIE("lower the learning rate -l or raise warmup -u (or allow skipped steps with -N)",
                        "loss is not finite (%s) at step %ld", isnan(gm.mean_loss) ? "nan" : "inf", step + 1);
                bad_loss = 1;
                continue;
            }
            model_backward_gpu(&gm, (real)1 / (accum * g_world));
            loss += gm.mean_loss / (accum * g_world);
        }
        if (g_world > 1) {  // the other ranks' micro-batches; the sums over the ranks (gradients: one ncclAllReduce)
            dataloader_skip(train, (long)(g_world - 1) * accum);
            nccl_allreduce_grads(gm.grads_memory, gm.num_params);
            double ls[2] = {loss, (double)bad_loss};
            dist_allreduce_f64(ls, 2);
            loss = (real)ls[0];
            bad_loss = ls[1] > 0;
        }
        if (step + 1 == planted_nan_step()) plant_nan(gm.grads_memory);
        real norm = bad_loss ? NAN : grad_norm_gpu(&gm);
        real lrs = lr_at(step, max_steps, a.lr, a.warmup, a.final_frac);
        if (!isfinite(norm)) {  // skip the update (weights and AdamW moments stay) while -N allows, else stop
            if (!skip_nonfinite_step(&run, step + 1, &skipped, a.max_skip, bad_loss ? "loss" : "gradient norm")) {
                g_die_collective = 1;
                const char* t = nonfinite_grad_tensor_gpu(&gm);
                die_nonfinite_grad(norm, step + 1, t, 0, 0, NULL, cfg.b);
            }
        } else {
            grad_clip_gpu(&gm, norm, a.clip);
            model_update_gpu(&gm, lrs, 0.9, 0.95, 1e-8, a.wd);
            nccl_gather_params(&gm);
            cudaCheck(cudaDeviceSynchronize());
            double dt = now_s() - t0;
            if (g_rank == 0) report_step(&run, step + 1, max_steps, loss, lrs, norm, dt, a.tokens_per_step / dt);
        }
        st.step = step + 1;
        st.shard = train->shard;
        st.pos = train->pos;
        if ((a.ckpt_every > 0 && st.step % a.ckpt_every == 0) || st.step == max_steps || st.step == a.stop_at) {
            model_to_host(&gm);
            dist_checkpoint_state(&st, train, model.params_memory, model.num_params);
            dist_save_checkpoint(&model, ckpt_path, &st);
        }
        if (st.step == a.stop_at) {
            if (g_rank == 0) printf("stopped after step %ld (-S); continue with -r 1\n", st.step);
            return 0;
        }
    }
    if (g_rank == 0 && run.have_val) {
        real acc, vl = evaluate_gpu(&gm, &run.val, a.val_batches, &acc);
        report_val(&run, max_steps, vl, acc);
    }
    if (g_rank == 0 && a.gen_tokens > 0 && st.step > 0) {
        int p0 = train->inputs[0];
        printf("sample: ");
        uint64_t r = st.rng;
        generate_gpu(&gm, &run.tk, &p0, 1, a.gen_tokens, &r);
    }
    run_close(&run);
    model_free_gpu(&gm);
    model_free(&model);
    return 0;
}
