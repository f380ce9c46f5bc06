// The CUDA emulator's model of unwritten device memory (dev/cuda/emu): what cudaMalloc returns reads as NaN until
// written (EMU_POISON=0: as malloc gives it, fresh pages of zeros), so that a kernel reading memory nothing wrote shows
// NaN in its results instead of the zeros that hid such reads. Emulator only: a GPU's fresh memory holds whatever its
// last user left, often zeros, so this is no GPU check.
// usage: emu_poison_check [expect: nan | not-nan]; prints one line, exit 0 when the copy of a never-written buffer
// (1 MB, so that malloc takes fresh pages) is all NaN (nan) or has a value that is not NaN (not-nan)
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__global__ void copy_kernel(float* out, const float* in, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i];
}

int main(int argc, char** argv) {
    int want_nan = !(argc > 1 && !strcmp(argv[1], "not-nan")), n = 1 << 18;
    float *in, *out, *h = (float*)malloc((size_t)n * sizeof(float));
    if (cudaMalloc((void**)&in, (size_t)n * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void**)&out, (size_t)n * sizeof(float)) != cudaSuccess || !h) {
        printf("allocation failed\n");
        return 2;
    }
    copy_kernel<<<4, 128>>>(out, in, n);  // in: never written
    cudaMemcpy(h, out, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost);
    int nans = 0;
    for (int i = 0; i < n; i++) nans += isnan(h[i]) != 0;
    printf("%d of %d values read from unwritten memory are NaN\n", nans, n);
    return want_nan ? nans != n : nans == n;
}
