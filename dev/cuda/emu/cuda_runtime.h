// A CPU emulator of the part of CUDA that train_miras.cu uses, to check its kernels' logic on a machine
// without a GPU (dev/cuda/emu_build.sh builds train_miras.cu with it). Not a simulator of performance.
//
// Each CUDA thread of a block is a coroutine (ucontext) on one OS thread; blocks (clusters) run one after another.
// A thread runs until it reaches __syncthreads(), a warp shuffle or its end; when every thread is waiting, the
// barriers whose groups have all arrived (the block for __syncthreads, the warp for a shuffle) are released.
// Threads run in the order EMU_ORDER says (asc, desc, or rand:SEED), so a missing
// barrier (a thread reading what another writes in the same phase) changes the result with the order: compare
// the outputs of two orders. In those orders no warp passes a shuffle or an mma before every thread has reached its
// first wait, which hides a read, then a warp-level operation, then a write by another warp, with no __syncthreads
// between: EMU_ORDER=warp (or warpdesc) runs one warp at a time through its warp-level waits to its next
// __syncthreads, so that such a write lands before the later warps' reads. A shuffle where part of a warp waits at
// __syncthreads is reported (a deadlock on a GPU).
// Thread block clusters (cudaLaunchKernelEx with cudaLaunchAttributeClusterDimension, cooperative_groups'
// this_cluster(): sync, block_rank, map_shared_rank): the CTAs of a cluster run together, one coroutine group of
// all their threads, each CTA with its own dynamic shared memory and its own copy of every __shared__ variable
// (dev/cuda/emu_launch.py rewrites `__shared__ T x;` as a per-CTA `emu::cta_static`); __syncthreads waits for the
// thread's CTA, cluster.sync() for the whole cluster, and map_shared_rank maps an address of this CTA's shared
// memory to the same place in another CTA's (refused when that CTA has exited: its shared memory is gone).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <cstdint>
#include <functional>
#include <tuple>
#include <vector>
#include <algorithm>
#include <ucontext.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <map>
#include <setjmp.h>
#include <time.h>

using std::isfinite; using std::isnan; using std::isinf;  // nvcc puts these in the global namespace
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(x)
#define __shared__ static
#define __grid_constant__  // (kernel parameters read in place: no copy to elide here)

struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
struct uint3 { unsigned x, y, z; };
struct alignas(16) float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
struct alignas(8) float2 { float x, y; };
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline uint3 threadIdx, blockIdx; inline dim3 blockDim, gridDim;   // the running thread's (set by the scheduler)


namespace emu {
inline long barriers;  // __syncthreads reached by thread 0 (EMU_BARRIERS=1 prints the count per launch)
// EMU_BARRIER_SITES=FILE: every barrier thread 0 of a CTA reaches (__syncthreads, cluster.sync), counted by kernel
// and call stack (up to 8 frames), written at exit as "kernel-offset count kind frame-offsets..." lines (offsets in
// the binary; dev/cuda/emu_sites.py names them with addr2line)
inline void* kernel;  // the running kernel (set by Bind's thread function)
struct Sites {
    std::map<std::vector<void*>, long> n[2];  // 0 __syncthreads, 1 cluster.sync
    const char* out = getenv("EMU_BARRIER_SITES");
    static long off(void* p) {
        Dl_info di;
        return dladdr(p, &di) ? (long)((char*)p - (char*)di.dli_fbase) : 0;
    }
    ~Sites() {
        if (!out) return;
        FILE* f = fopen(out, "w");
        if (!f) return;
        for (int k = 0; k < 2; k++)
            for (auto& e : n[k]) {
                fprintf(f, "%lx %ld %s", off(e.first[0]), e.second, k ? "cluster" : "block");
                for (size_t i = 1; i < e.first.size(); i++) fprintf(f, " %lx", off(e.first[i]) - 1);  // (in the call)
                fprintf(f, "\n");
            }
        fclose(f);
    }
};
inline Sites sites;
__attribute__((noinline)) inline void site(int k) {
    if (!sites.out) return;
    void* fr[10];
    int nf = backtrace(fr, 10);  // [0] site(), [1] the barrier function, [2] its caller, ...
    std::vector<void*> key{kernel};
    for (int i = 2; i < nf; i++) {
        key.push_back(fr[i]);  // (emu_sites.py cuts the stack at the kernel's frame)
    }
    sites.n[k][key]++;
}
enum { RUN, AT_BLOCK, AT_WARP, AT_CLUSTER, DONE };
static const int MAXC = 8;  // CTAs per cluster (the portable maximum)
// A switch between threads. On x86-64 (without ASan, whose stack bookkeeping wants the library's calls) it is
// emu_ctx_switch: push the callee-saved registers on the stack being left, save its stack pointer, load the other's,
// pop, return (the SSE and x87 control words are not switched: nothing here changes them): ten instructions, where glibc's _longjmp also walks the
// cancellation handlers (half of the emulator's time went to switching before, 2026-11-29). Elsewhere (or built with
// -DEMU_UCONTEXT) a thread is entered by swapcontext once, then by _setjmp / _longjmp. The order of the threads is
// the same either way.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(EMU_UCONTEXT)
#define EMU_ASM_SWITCH 1
}  // namespace emu
extern "C" void emu_ctx_switch(void** save_sp, void* load_sp);
asm(".text\n.weak emu_ctx_switch\n.type emu_ctx_switch,@function\nemu_ctx_switch:\n"
    "pushq %rbp\npushq %rbx\npushq %r12\npushq %r13\npushq %r14\npushq %r15\n"
    "movq %rsp, (%rdi)\nmovq %rsi, %rsp\n"
    "popq %r15\npopq %r14\npopq %r13\npopq %r12\npopq %rbx\npopq %rbp\nret\n"
    ".size emu_ctx_switch, .-emu_ctx_switch\n");
namespace emu {
struct Thread { void* sp; char* stack; };
#else
struct Thread { ucontext_t ctx; jmp_buf jb; int started; char* stack; };
#endif
struct State {
    std::vector<Thread> th; int cur = -1; const std::function<void()>* fn = nullptr;
    std::vector<unsigned char> st;  // each thread's state (RUN, AT_..., DONE): apart from th, so the scans stay in cache
    // how many threads wait at each barrier (or are done), kept as they arrive, so that a round finds the barriers to
    // open without a scan of every thread: per warp (of the cluster), per CTA, the cluster's; the threads a round
    // releases, in ascending order (the next round's threads in the asc and desc orders)
    std::vector<int> wat, wdone, cat, cdone, runq; int nclu = 0, ndone = 0;
#ifdef EMU_ASM_SWITCH
    void* sched_sp = nullptr;
#else
    ucontext_t sched; jmp_buf sjb;
#endif
    std::vector<int> order; uint64_t rng = 0; int mode = 0;  // 0 asc, 1 desc, 2 random
    // a warp-level operation: each lane posts its value, waits for the warp, reads the others'. Two buffers taken in
    // turn (each lane's parity), so one wait suffices: a lane posts into a buffer again two operations later, after
    // the next operation's wait, which every lane reaches only after its reads of this one
    uint64_t xbuf[2][MAXC * 32][32];  // shuffles: parity, warp of the cluster, lane
    uint32_t fbuf[2][MAXC * 32][32][6];  // mma fragments: parity, warp, lane, a0..a3 b0 b1
    unsigned char xpar[MAXC * 32 * 32], fpar[MAXC * 32 * 32];  // each thread's parity (reset per cluster)
    long launches = 0, switches = 0;
    int nt = 1, csize = 1; unsigned base = 0;  // threads per CTA, CTAs per cluster, the cluster's first blockIdx.x
    std::vector<float> dyn[MAXC];  // each CTA's dynamic shared memory (clusters run one after another)
    struct Static { char* base; size_t size; };
    std::vector<Static> statics;  // every cta_static's storage: MAXC copies of `size` bytes
};
inline State& S() { static State s; return s; }
inline int cta() { State& s = S(); return s.cur < 0 ? 0 : s.cur / s.nt; }  // the running thread's CTA in its cluster
// a __shared__ variable of type T (emu_launch.py's rewrite; ID tells the declarations apart): one copy per CTA
template <class T, int ID> inline T& cta_static() {
    static T store[MAXC];
    static bool reg = (S().statics.push_back({(char*)store, sizeof(T)}), true);
    (void)reg;
    return store[cta()];
}
static const size_t STACK = 256 * 1024;
inline void trampoline() {  // a thread's whole life: the kernel, then back to the scheduler for good
    State& s = S(); (*s.fn)(); s.st[s.cur] = DONE;
    s.wdone[s.cur >> 5]++; s.cdone[s.cur / s.nt]++; s.ndone++;
#ifdef EMU_ASM_SWITCH
    void* gone; emu_ctx_switch(&gone, s.sched_sp);
#else
    _longjmp(s.sjb, 1);
#endif
}
inline void wait(int st) {  // park the current thread at a barrier, back to the scheduler
    State& s = S(); s.st[s.cur] = (unsigned char)st;
    if (st == AT_WARP) s.wat[s.cur >> 5]++;
    else if (st == AT_BLOCK) s.cat[s.cur / s.nt]++;
    else s.nclu++;
#ifdef EMU_ASM_SWITCH
    emu_ctx_switch(&s.th[s.cur].sp, s.sched_sp);
#else
    if (!_setjmp(s.th[s.cur].jb)) _longjmp(s.sjb, 1);
#endif
}
inline void init_order() {
    State& s = S(); if (s.launches++) return;
    const char* o = getenv("EMU_ORDER");
    if (o && !strcmp(o, "desc")) s.mode = 1;
    else if (o && !strcmp(o, "warp")) s.mode = 3;
    else if (o && !strcmp(o, "warpdesc")) s.mode = 4;
    else if (o && !strncmp(o, "rand", 4)) { s.mode = 2; s.rng = (o[4] == ':' ? strtoull(o + 5, NULL, 10) : 1) * 2654435761ULL + 12345; }
}
inline uint64_t rnd() { State& s = S(); s.rng ^= s.rng << 13; s.rng ^= s.rng >> 7; s.rng ^= s.rng << 17; return s.rng; }
inline void run_block(int nt1) {  // one cluster of s.csize CTAs of nt1 threads (one CTA without clusters)
    State& s = S(); s.nt = nt1; int nt = nt1 * s.csize;
    if (nt <= 0 || nt > MAXC * 32 * 32) { fprintf(stderr, "emu: a cluster of %d threads (at most %d)\n", nt, MAXC * 32 * 32); abort(); }
    if ((int)s.th.size() < nt) { size_t o = s.th.size(); s.th.resize(nt); for (size_t i = o; i < (size_t)nt; i++) s.th[i].stack = (char*)malloc(STACK); }
    s.st.assign(nt, RUN);
    int nw = nt / 32;  // (a CTA is whole warps: run_launch checks)
    s.wat.assign(nw, 0); s.wdone.assign(nw, 0); s.cat.assign(s.csize, 0); s.cdone.assign(s.csize, 0); s.nclu = s.ndone = 0;
    s.runq.resize(nt); for (int i = 0; i < nt; i++) s.runq[i] = i;
    memset(s.xpar, 0, (size_t)nt); memset(s.fpar, 0, (size_t)nt);
#ifdef EMU_ASM_SWITCH
    for (int i = 0; i < nt; i++) {  // a stack that emu_ctx_switch "returns" into trampoline from
        void** p = (void**)(((uintptr_t)(s.th[i].stack + STACK)) & ~(uintptr_t)15);
        *--p = nullptr;  // trampoline's return address (it never returns): its entry sees rsp = 8 mod 16, as after a call
        *--p = (void*)&trampoline;
        for (int k = 0; k < 6; k++) *--p = nullptr;  // rbp rbx r12 r13 r14 r15
        s.th[i].sp = p;
    }
#else
    for (int i = 0; i < nt; i++) {
        Thread& t = s.th[i]; getcontext(&t.ctx); t.ctx.uc_stack.ss_sp = t.stack; t.ctx.uc_stack.ss_size = STACK; t.ctx.uc_link = NULL;
        makecontext(&t.ctx, trampoline, 0); t.started = 0;
    }
#endif
    unsigned char* st = s.st.data();
    s.order.resize(nt); for (int i = 0; i < nt; i++) s.order[i] = s.mode == 1 ? nt - 1 - i : i;
    auto step = [&](int i) {  // run thread i until it waits or ends
        s.cur = i; s.switches++; threadIdx.x = i % nt1; threadIdx.y = threadIdx.z = 0; blockIdx.x = s.base + i / nt1;
#ifdef EMU_ASM_SWITCH
        emu_ctx_switch(&s.sched_sp, s.th[i].sp);
#else
        if (!_setjmp(s.sjb)) { if (!s.th[i].started) { s.th[i].started = 1; swapcontext(&s.sched, &s.th[i].ctx); } else _longjmp(s.th[i].jb, 1); }
#endif
    };
    // a warp barrier opens when every lane of the warp is at it (or done), at least one at it
    auto warp_open = [&](int w) {
        if (!(s.wat[w] && s.wat[w] + s.wdone[w] == 32)) return 0;
        for (int i = w * 32; i < w * 32 + 32; i++) if (st[i] == AT_WARP) { st[i] = RUN; s.runq.push_back(i); }
        s.wat[w] = 0;
        return 1;
    };
    for (;;) {
        // a round: every thread that may run runs until it waits or ends (none may run after it)
        if (s.mode == 2) {
            for (int i = nt - 1; i > 0; i--) std::swap(s.order[i], s.order[rnd() % (i + 1)]);
            for (int k = 0; k < nt; k++) { int i = s.order[k]; if (st[i] == RUN) step(i); }
        } else if (s.mode >= 3) {  // warp by warp (ascending or descending): a warp runs on through its shuffles and
            for (int k = 0; k < nw; k++) {  // mma to its next __syncthreads before the next warp starts, so that a
                int w = s.mode == 3 ? k : nw - 1 - k;  // write after a warp-level operation lands before other warps'
                do                                     // reads of the same phase
                    for (int l = 0; l < 32; l++) if (st[w * 32 + l] == RUN) step(w * 32 + l);
                while (warp_open(w));
            }
        } else if (s.mode == 0)  // ascending: the threads the last round released (in ascending order)
            for (int i : s.runq) step(i);
        else
            for (int k = (int)s.runq.size() - 1; k >= 0; k--) step(s.runq[k]);
        s.runq.clear();
        if (s.ndone == nt) break;
        int released = 0;
        for (int w = 0; w < nw; w++) released |= warp_open(w);
        if (!released)  // a CTA's __syncthreads opens when all its threads are at it (or done)
            for (int c = 0; c < s.csize; c++)
                if (s.cat[c] && s.cat[c] + s.cdone[c] == nt1) {
                    for (int i = c * nt1; i < (c + 1) * nt1; i++) if (st[i] == AT_BLOCK) { st[i] = RUN; s.runq.push_back(i); }
                    s.cat[c] = 0; released = 1;
                }
        if (!released && s.nclu && s.nclu + s.ndone == nt) {
            for (int i = 0; i < nt; i++) if (st[i] == AT_CLUSTER) { st[i] = RUN; s.runq.push_back(i); }
            s.nclu = 0; released = 1;
        }
        if (!released) { fprintf(stderr, "emu: deadlock in block %u: threads wait at different barriers (divergent __syncthreads, cluster.sync or shuffle)\n", s.base); abort(); }
    }
}
inline void run_launch(dim3 grid, dim3 block, const std::function<void()>& fn, size_t smem, int csize = 1) {
    State& s = S(); init_order();
    if (csize < 1 || csize > MAXC || grid.x % csize) { fprintf(stderr, "emu: cluster of %d CTAs on a grid of %u\n", csize, grid.x); abort(); }
    s.csize = csize;
    for (int c = 0; c < csize; c++) s.dyn[c].assign(smem / sizeof(float) + 4, NAN);   // NaN: a read before a write shows in the results
    if (block.x % 32 || block.x > 1024) { fprintf(stderr, "emu: block size %u\n", block.x); abort(); }
    gridDim = grid; blockDim = block; s.fn = &fn;
    long b0 = barriers;
    for (unsigned y = 0; y < grid.y; y++)
        for (unsigned b = 0; b < grid.x; b += csize) { s.base = b; blockIdx.x = b; blockIdx.y = y; blockIdx.z = 0; run_block((int)block.x); }
    s.csize = 1; s.cur = -1;
    if (getenv("EMU_BARRIERS")) fprintf(stderr, "emu: launch of %u blocks: %ld barriers per block\n", grid.x, (barriers - b0) / (long)(grid.x * grid.y));
}
// A kernel and the values of its parameters at the launch: dev/cuda/emu_launch.py writes k<<<g, b>>>(args) as
// emu::launch(g, b, emu::bind(k)(args), ...), so that a launch recorded by a stream capture replays with the
// arguments it was given (as a CUDA graph's kernel node), not with what its variables hold at the replay
template <class... P> struct Bind {
    void (*k)(P...);
    std::function<void()> operator()(P... p) const { auto kk = k; auto t = std::make_tuple(p...); return [kk, t]() { kernel = (void*)kk; std::apply(kk, t); }; }
};
template <class... P> inline Bind<P...> bind(void (*k)(P...)) { return Bind<P...>{k}; }
} // namespace emu
// Streams and CUDA graphs. Work runs at once, in issue order, except on a stream that is capturing
// (cudaStreamBeginCapture): there launches, cuBLAS calls and async copies become the graph's nodes, and
// cudaGraphLaunch replays them in order. As on a GPU in cudaStreamCaptureModeGlobal, work on the legacy stream 0 and
// the synchronous calls (cudaMemcpy, cudaMemset, cudaMalloc, cudaFree, cudaDeviceSynchronize) during a capture are
// errors, so a launch that misses the capturing stream stops the run instead of escaping the graph.
struct EmuStream { int capturing = 0; std::vector<std::function<void()>> nodes; };
typedef EmuStream* cudaStream_t;
struct EmuGraph { std::vector<std::function<void()>> nodes; };
typedef EmuGraph* cudaGraph_t;
typedef EmuGraph* cudaGraphExec_t;
namespace emu {
inline int capturing = 0;  // streams capturing now
inline void no_capture(const char* what) {
    if (capturing) { fprintf(stderr, "emu: %s during a stream capture (not permitted in cudaStreamCaptureModeGlobal)\n", what); abort(); }
}
inline void enqueue(cudaStream_t st, std::function<void()> fn) {
    if (st && st->capturing) { st->nodes.push_back(std::move(fn)); return; }
    if (!st) no_capture("work on the legacy default stream");
    fn();
}
inline void launch(dim3 grid, dim3 block, std::function<void()> fn, size_t smem = 0, cudaStream_t st = 0, int csize = 1) {
    enqueue(st, [=]() { run_launch(grid, block, fn, smem, csize); });
}
inline void* dyn_smem() { return S().dyn[cta()].data(); }
// cluster.map_shared_rank: the address in CTA r's shared memory of what p is in this CTA's
inline void* map_shared(const void* p, unsigned r) {
    State& s = S(); int me = cta(); const char* c = (const char*)p;
    if ((int)r >= s.csize) { fprintf(stderr, "emu: map_shared_rank to CTA %u of a cluster of %d\n", r, s.csize); abort(); }
    int fin = 0;
    for (int i = r * s.nt; i < ((int)r + 1) * s.nt; i++) fin += s.st[i] == DONE;
    if (fin == s.nt) { fprintf(stderr, "emu: map_shared_rank to CTA %u, which has exited (block %u)\n", r, blockIdx.x); abort(); }
    const char* b = (const char*)s.dyn[me].data();
    if (c >= b && c < b + s.dyn[me].size() * sizeof(float)) return (char*)s.dyn[r].data() + (c - b);
    for (auto& g : s.statics) {
        const char* mine = g.base + me * g.size;
        if (c >= mine && c < mine + g.size) return g.base + r * g.size + (c - mine);
    }
    fprintf(stderr, "emu: map_shared_rank of an address outside shared memory (block %u, thread %u)\n", blockIdx.x, threadIdx.x);
    abort();
}
inline void check_align16(const void* p) {   // a 16-byte access must be 16-byte aligned on a GPU
    if ((uintptr_t)p & 15) { fprintf(stderr, "emu: misaligned 16-byte access at %p (block %u, thread %u)\n", p, blockIdx.x, threadIdx.x); abort(); }
}
inline void check_align8(const void* p) {   // and an 8-byte access 8-byte aligned
    if ((uintptr_t)p & 7) { fprintf(stderr, "emu: misaligned 8-byte access at %p (block %u, thread %u)\n", p, blockIdx.x, threadIdx.x); abort(); }
}
// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 for one warp: each lane posts its fragments, then computes
// its four outputs from every lane's (the PTX fragment layout; products in float, k in order)
inline void mma_m16n8k8_tf32(float* c, const uint32_t* a, const uint32_t* b);
} // namespace emu
#define EMU_CUDA 1

__attribute__((noinline)) inline void __syncthreads() {  // (noinline: EMU_BARRIER_SITES's return address is the site)
    if (threadIdx.x == 0) { emu::barriers++; emu::site(0); }
    emu::wait(emu::AT_BLOCK);
}
inline void __syncwarp(unsigned = 0xffffffffu) { emu::wait(emu::AT_WARP); }  // the warp's barrier
template <class T> inline T __shfl_xor_sync(unsigned, T v, int o) {
    emu::State& s = emu::S(); int lane = threadIdx.x & 31, w = s.cur >> 5, p = s.xpar[s.cur]; s.xpar[s.cur] ^= 1;
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    memcpy(&s.xbuf[p][w][lane], &v, sizeof v);
    emu::wait(emu::AT_WARP);
    T r; memcpy(&r, &s.xbuf[p][w][lane ^ o], sizeof r);
    return r;
}

// ---- the runtime API subset
typedef enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 } cudaError_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
struct cudaDeviceProp { char name[256]; };
// cudaMalloc's memory holds whatever the card's last user left: here it is filled with NaN, so that a read of memory
// that nothing wrote shows in the results (fresh host pages read as zeros and would hide it); EMU_POISON=0 leaves it
// as malloc gives it. (Since 2026-11-28; every emulated check passed with it then.)
inline cudaError_t cudaMalloc(void** p, size_t n) {
    emu::no_capture("cudaMalloc");
    *p = malloc(n);
    const char* po = getenv("EMU_POISON");
    if (*p && !(po && !strcmp(po, "0"))) for (size_t i = 0; i < n / sizeof(float); i++) ((float*)*p)[i] = NAN;
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) { emu::no_capture("cudaFree"); free(p); return cudaSuccess; }
inline cudaError_t cudaMemset(void* p, int v, size_t n) { emu::no_capture("cudaMemset"); memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { emu::no_capture("cudaMemcpy"); memmove(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t st = 0) {
    emu::enqueue(st, [=]() { memmove(d, s, n); });
    return cudaSuccess;
}
enum { cudaStreamDefault = 0, cudaStreamNonBlocking = 1 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1, cudaStreamCaptureModeRelaxed = 2 };
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* st, unsigned) { *st = new EmuStream(); return cudaSuccess; }
inline cudaError_t cudaStreamCreate(cudaStream_t* st) { return cudaStreamCreateWithFlags(st, 0); }
inline cudaError_t cudaStreamDestroy(cudaStream_t st) { delete st; return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { emu::no_capture("cudaStreamSynchronize"); return cudaSuccess; }
inline cudaError_t cudaStreamBeginCapture(cudaStream_t st, cudaStreamCaptureMode mode) {
    if (!st || st->capturing || mode != cudaStreamCaptureModeGlobal) { fprintf(stderr, "emu: cudaStreamBeginCapture on the legacy stream, twice, or not in global mode\n"); abort(); }
    st->capturing = 1; st->nodes.clear(); emu::capturing++;
    return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t* g) {
    if (!st || !st->capturing) { fprintf(stderr, "emu: cudaStreamEndCapture without a capture\n"); abort(); }
    *g = new EmuGraph{std::move(st->nodes)}; st->nodes.clear(); st->capturing = 0; emu::capturing--;
    return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long = 0) { *e = new EmuGraph(*g); return cudaSuccess; }
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t st) {
    emu::enqueue(st, [e]() { for (auto& f : e->nodes) f(); });
    return cudaSuccess;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) { delete e; return cudaSuccess; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { emu::no_capture("cudaDeviceSynchronize"); return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
// free and total device memory: an 80 GB card, or EMU_MEM_FREE bytes free (to exercise the trainer's memory plans)
inline cudaError_t cudaMemGetInfo(size_t* fr, size_t* total) {
    const char* s = getenv("EMU_MEM_FREE");
    *total = (size_t)80 << 30;
    *fr = s ? (size_t)strtod(s, NULL) : *total;
    return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) { snprintf(p->name, sizeof p->name, "CPU emulator (dev/cuda/emu)"); return cudaSuccess; }
// dynamic shared memory: the launch's size is all there is (no per-kernel limit to raise)
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16, cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81, cudaDevAttrMemoryClockRate = 36, cudaDevAttrGlobalMemoryBusWidth = 37, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
template <class F> inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }
// a kernel's static shared memory is ptxas's layout, unknown here: 0, or EMU_STATIC_SMEM bytes (to check the trainer's
// guard against a kernel that outgrows its plan's room, MEM_STATIC_SMEM)
struct cudaFuncAttributes { size_t sharedSizeBytes; };
template <class F> inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, F) {
    const char* s = getenv("EMU_STATIC_SMEM");
    a->sharedSizeBytes = s ? (size_t)atol(s) : 0;
    return cudaSuccess;
}
// an H100 SXM's values (memory clock in kHz, bus width in bits: 3.35 TB/s), so the trainer's arithmetic on them runs
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
    *v = a == cudaDevAttrMultiProcessorCount ? 132 : a == cudaDevAttrMaxSharedMemoryPerMultiprocessor ? 233472 : a == cudaDevAttrMemoryClockRate ? 2619000 : a == cudaDevAttrGlobalMemoryBusWidth ? 5120 : 227 * 1024;  // (an H100's or H200's SMs)
    return cudaSuccess;
}
// cudaLaunchKernelEx with a cluster dimension (the one launch attribute emulated): the kernel's CTAs in clusters
// of clusterDim.x (y and z must be 1)
enum cudaLaunchAttributeID { cudaLaunchAttributeClusterDimension = 4 };
union cudaLaunchAttributeValue { struct { unsigned x, y, z; } clusterDim; char pad[64]; };
struct cudaLaunchAttribute { cudaLaunchAttributeID id; cudaLaunchAttributeValue val; };
struct cudaLaunchConfig_t {
    dim3 gridDim, blockDim; size_t dynamicSmemBytes; cudaStream_t stream; cudaLaunchAttribute* attrs; unsigned numAttrs;
};
template <class... P, class... A> inline cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* c, void (*k)(P...), A&&... a) {
    int cs = 1;
    for (unsigned i = 0; i < c->numAttrs; i++)
        if (c->attrs[i].id == cudaLaunchAttributeClusterDimension) {
            auto d = c->attrs[i].val.clusterDim;
            if (d.y != 1 || d.z != 1) { fprintf(stderr, "emu: clusters along x only\n"); abort(); }
            cs = (int)d.x;
        }
    emu::launch(c->gridDim, c->blockDim, emu::bind(k)(P(a)...), c->dynamicSmemBytes, c->stream, cs);
    return cudaSuccess;
}
// how many clusters of a launch configuration fit on the device at once: an H100's or H200's 132 SMs, one CTA each
// (the emulator runs them one after another; this only lets the host code's check run)
template <class K> inline cudaError_t cudaOccupancyMaxActiveClusters(int* n, K, const cudaLaunchConfig_t* c) {
    int cs = 1;
    for (unsigned i = 0; i < c->numAttrs; i++)
        if (c->attrs[i].id == cudaLaunchAttributeClusterDimension) cs = (int)c->attrs[i].val.clusterDim.x;
    *n = 132 / cs;
    return cudaSuccess;
}
// __device__ variables (symbols) to and from the host
template <class T> inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& sym, size_t n, size_t off = 0, cudaMemcpyKind = cudaMemcpyDeviceToHost) {
    emu::no_capture("cudaMemcpyFromSymbol"); memcpy(dst, (const char*)&sym + off, n); return cudaSuccess;
}
template <class T> inline cudaError_t cudaMemcpyToSymbol(T& sym, const void* src, size_t n, size_t off = 0, cudaMemcpyKind = cudaMemcpyHostToDevice) {
    emu::no_capture("cudaMemcpyToSymbol"); memcpy((char*)&sym + off, src, n); return cudaSuccess;
}
// the SM's clock: here the count of thread switches so far (it grows with the work, it is not a time)
inline long long clock64() { return (long long)emu::S().switches; }
// events (the kernel lab times with them): host wall clock, meaningless for speed here
typedef struct { double t; }* cudaEvent_t;
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = (cudaEvent_t)calloc(1, sizeof **e); return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = 0) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); e->t = ts.tv_sec + 1e-9 * ts.tv_nsec; return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) { *ms = (float)(1e3 * (b->t - a->t)); return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t e) { return e ? "out of memory" : "no error"; }
inline const char* cudaGetErrorName(cudaError_t e) { return e ? "cudaErrorMemoryAllocation" : "cudaSuccess"; }

inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
inline void emu::mma_m16n8k8_tf32(float* c, const uint32_t* a, const uint32_t* b) {
    emu::State& s = emu::S(); int lane = threadIdx.x & 31, w = s.cur >> 5, g = lane >> 2, tg = lane & 3, p = s.fpar[s.cur];
    s.fpar[s.cur] ^= 1;
    uint32_t (*f)[6] = s.fbuf[p][w];
    for (int i = 0; i < 4; i++) f[lane][i] = a[i];
    f[lane][4] = b[0]; f[lane][5] = b[1];
    emu::wait(emu::AT_WARP);
    // the tensor core reads a TF32 operand's top 19 bits: the 13 low mantissa bits are dropped (truncation).
    // A(r, k) is lane (r % 8) * 4 + k % 4's register (r >= 8) + 2 (k >= 4); B(k, n) lane n * 4 + k % 4's 4 + (k >= 4).
    // This lane's outputs: rows g, g + 8, columns 2 tg, 2 tg + 1 (c[q]: row g + 8 (q / 2), column 2 tg + q % 2)
    float A[2][8], B[2][8];
    for (int k = 0; k < 8; k++)
        for (int h = 0; h < 2; h++) {
            A[h][k] = __uint_as_float(f[g * 4 + (k & 3)][h + 2 * (k >= 4)] & 0xffffe000u);
            B[h][k] = __uint_as_float(f[(2 * tg + h) * 4 + (k & 3)][4 + (k >= 4)] & 0xffffe000u);
        }
    for (int q = 0; q < 4; q++) {
        float acc = c[q];
        for (int k = 0; k < 8; k++) acc += A[q >> 1][k] * B[q & 1][k];
        c[q] = acc;
    }
}

// EMU_CALLS=FILE, in a build with -DEMU_CALLS -finstrument-functions (dev/cuda/emu_calls.sh): every function entry of
// thread 0 of block 0 during a launch, counted by kernel and function, written at exit as "kernel-offset
// function-offset count" lines. On the GPU each call of a __noinline__ function costs its arguments and the caller's
// live values a round trip through local memory (dev/cuda/sass_local.py counts those per function), so calls per
// chunk times that is the chain's local-memory traffic.
#ifdef EMU_CALLS
namespace emu {
struct Calls {
    std::map<std::pair<void*, void*>, long> n;
    const char* out = getenv("EMU_CALLS");
    ~Calls() {
        FILE* f = out ? fopen(out, "w") : NULL;
        if (!f) return;
        for (auto& e : n) fprintf(f, "%lx %lx %ld\n", Sites::off(e.first.first), Sites::off(e.first.second), e.second);
        fclose(f);
    }
};
inline Calls calls;
}  // namespace emu
extern "C" __attribute__((no_instrument_function)) void __cyg_profile_func_enter(void* fn, void*) {
    if (emu::calls.out && emu::S().cur >= 0 && threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0)
        emu::calls.n[{emu::kernel, fn}]++;
}
extern "C" __attribute__((no_instrument_function)) void __cyg_profile_func_exit(void*, void*) {}
#endif
