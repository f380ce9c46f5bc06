// The cuBLAS subset of train_miras.cu on the CPU (column-major, as cuBLAS; double accumulation), for dev/cuda/emu.
// cublasGemmEx takes fp32 or bf16 (CUDA_R_16BF) A and B, an fp32 C and fp32 compute: the bf16 operands are
// read exactly (they are already rounded) and accumulated in double, as the tensor cores' fp32 accumulation
// of exact bf16 products, up to the order of the sums.
#pragma once
#include "cuda_runtime.h"
#include "cuda_bf16.h"
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
struct EmuBlas { cudaStream_t stream = 0; };  // the stream a handle's calls go to (cublasSetStream)
typedef EmuBlas* cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
inline cublasStatus_t cublasCreate(cublasHandle_t* h) { *h = new EmuBlas(); return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t st) { h->stream = st; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t, void*, size_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
// C (m, n) = alpha op(A) op(B) + beta C; op(A) (m, k), op(B) (k, n); all column-major
// (each call goes to its handle's stream: run at once, or recorded by a capture with alpha and beta as they are now)
inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* alpha,
                                  const float* A, int lda, const float* B, int ldb, const float* beta, float* C, int ldc) {
    if (m < 0 || n < 0 || k < 0 || lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m || lda < 1 || ldb < 1 || ldc < 1) return CUBLAS_STATUS_INVALID_VALUE;
    float al = *alpha, be = *beta;
    emu::enqueue(h->stream, [=]() {
        for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) {
            double s = 0;
            for (int l = 0; l < k; l++) s += (double)(ta ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda]) * (tb ? B[j + (size_t)l * ldb] : B[l + (size_t)j * ldb]);
            float* c = &C[i + (size_t)j * ldc];
            *c = (float)(al * s + (be != 0 ? (double)be * *c : 0));
        }
    });
    return CUBLAS_STATUS_SUCCESS;
}
// y = alpha op(A) x + beta y, A (m, n) column-major
inline cublasStatus_t cublasSgemv(cublasHandle_t h, cublasOperation_t ta, int m, int n, const float* alpha, const float* A, int lda,
                                  const float* x, int incx, const float* beta, float* y, int incy) {
    if (lda < (m > 1 ? m : 1) || incx < 1 || incy < 1) return CUBLAS_STATUS_INVALID_VALUE;
    int ny = ta ? n : m, nx = ta ? m : n;
    float al = *alpha, be = *beta;
    emu::enqueue(h->stream, [=]() {
        for (int i = 0; i < ny; i++) {
            double s = 0;
            for (int l = 0; l < nx; l++) s += (double)(ta ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda]) * x[(size_t)l * incx];
            float* c = &y[(size_t)i * incy];
            *c = (float)(al * s + (be != 0 ? (double)be * *c : 0));
        }
    });
    return CUBLAS_STATUS_SUCCESS;
}
// C (m, n) = alpha op(A) op(B) + beta C with typed operands: A, B fp32 or bf16, C fp32, fp32 compute
inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* alpha,
                                   const void* A, cudaDataType at, int lda, const void* B, cudaDataType bt, int ldb, const void* beta,
                                   void* C, cudaDataType ct, int ldc, cublasComputeType_t comp, cublasGemmAlgo_t) {
    if (m < 0 || n < 0 || k < 0 || lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m || lda < 1 || ldb < 1 || ldc < 1) return CUBLAS_STATUS_INVALID_VALUE;
    if ((at != CUDA_R_32F && at != CUDA_R_16BF) || (bt != CUDA_R_32F && bt != CUDA_R_16BF) || ct != CUDA_R_32F || comp != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_INVALID_VALUE;
    auto get = [](const void* p, cudaDataType t, size_t i) -> double {
        return t == CUDA_R_16BF ? (double)__bfloat162float(((const __nv_bfloat16*)p)[i]) : (double)((const float*)p)[i];
    };
    float al = *(const float*)alpha, be = *(const float*)beta; float* Cf = (float*)C;
    emu::enqueue(h->stream, [=]() {
        for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) {
            double s = 0;
            for (int l = 0; l < k; l++) s += get(A, at, ta ? l + (size_t)i * lda : i + (size_t)l * lda) * get(B, bt, tb ? j + (size_t)l * ldb : l + (size_t)j * ldb);
            float* c = &Cf[i + (size_t)j * ldc];
            *c = (float)(al * s + (be != 0 ? (double)be * *c : 0));
        }
    });
    return CUBLAS_STATUS_SUCCESS;
}
