// Thread block clusters on a GPU and on dev/cuda's emulator: the same small program, so that a GPU session can
// confirm the emulator's model (CTAs of a cluster run together; __syncthreads per CTA, cluster.sync for all; each
// CTA's own shared memory, static and dynamic; map_shared_rank reads another CTA's) before memory kernels that split
// a (sequence, head) over a cluster are built on it.
// Each cluster of C CTAs owns n values per CTA; CTA r keeps its slice x_r in dynamic shared memory and its rank in a
// static __shared__ variable; after cluster.sync every CTA writes out[r][i] = sum_s (s + 1) x_s[i] + sum_s rank_s,
// reading the other CTAs' shared memory (distributed shared memory), then waits at cluster.sync again so that no
// CTA exits while another still reads its memory.
// -m 1 leaves out the first cluster.sync, -m 2 the last: on the emulator the first reads unwritten (NaN) memory and
// fails, the second stops at the exited CTA (the checks that these mistakes do not pass).
// build: nvcc -O2 -arch=sm_90 -o cluster_check dev/cuda/cluster_check.cu; emulator: dev/cuda/test_emu_cluster.sh
// usage: cluster_check [-C cluster size (2, 4, 8)] [-n values per CTA] [-g clusters] [-m mutation]; exit 0 when right
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
namespace cg = cooperative_groups;

__global__ void cluster_sum_kernel(float* out, const float* x, int n, int mut) {
    extern __shared__ float slice[];  // this CTA's n values
    __shared__ float rank;            // this CTA's rank (a static __shared__: one per CTA too)
    cg::cluster_group cl = cg::this_cluster();
    unsigned r = cl.block_rank(), C = cl.num_blocks();
    const float* xr = x + (size_t)blockIdx.x * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) slice[i] = xr[i];
    if (threadIdx.x == 0) rank = (float)r;
    if (mut != 1) cl.sync();  // every CTA's slice and rank written
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float s = 0;
        for (unsigned q = 0; q < C; q++) {
            const float* other = cl.map_shared_rank(slice, q);
            const float* orank = cl.map_shared_rank(&rank, q);
            s += (q + 1) * other[i] + *orank;
        }
        out[(size_t)blockIdx.x * n + i] = s;
    }
    if (mut != 2) cl.sync();  // nobody reads a CTA's shared memory after it exits
}

#define CK(x)                                                                               \
    do {                                                                                    \
        cudaError_t e = (x);                                                                \
        if (e != cudaSuccess) {                                                             \
            fprintf(stderr, "cluster_check: %s: %s\n", #x, cudaGetErrorString(e));          \
            exit(2);                                                                        \
        }                                                                                   \
    } while (0)

int main(int argc, char** argv) {
    int C = 4, n = 300, g = 3, mut = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-C")) C = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-g")) g = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-m")) mut = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: cluster_check [-C cluster size] [-n values per CTA] [-g clusters] [-m mutation]\n");
            return 2;
        }
    }
    if (C < 1 || C > 8 || n < 1 || g < 1) {
        fprintf(stderr, "cluster_check: -C 1..8, -n >= 1, -g >= 1\n");
        return 2;
    }
    int nb = C * g;
    size_t N = (size_t)nb * n;
    float *hx = (float*)malloc(N * sizeof(float)), *ho = (float*)malloc(N * sizeof(float)), *dx, *dout;
    for (size_t i = 0; i < N; i++) hx[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    CK(cudaMalloc((void**)&dx, N * sizeof(float)));
    CK(cudaMalloc((void**)&dout, N * sizeof(float)));
    CK(cudaMemcpy(dx, hx, N * sizeof(float), cudaMemcpyHostToDevice));
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = C;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(nb);
    cfg.blockDim = dim3(128);
    cfg.dynamicSmemBytes = n * sizeof(float);
    cfg.stream = 0;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, cluster_sum_kernel, dout, (const float*)dx, n, mut));
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(ho, dout, N * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0;  // the largest |out - want| / (|want| + 1); a NaN makes it NaN, which fails
    for (int b = 0; b < nb; b++) {
        int c0 = b - b % C;
        for (int i = 0; i < n; i++) {
            double want = 0;
            for (int q = 0; q < C; q++) want += (q + 1) * (double)hx[(size_t)(c0 + q) * n + i] + q;
            double e = fabs(ho[(size_t)b * n + i] - want) / (fabs(want) + 1);
            worst = isnan(e) || e > worst ? e : worst;
        }
    }
    int ok = worst <= 1e-6;
    printf("cluster_check: %d clusters of %d CTAs, %d values each: max err %.2e: %s\n", g, C, n, worst,
           ok ? "ok" : "FAIL");
    cudaFree(dx);
    cudaFree(dout);
    free(hx);
    free(ho);
    return ok ? 0 : 1;
}
