// The cuBLAS subset of train_miras.cu on the CPU (column-major, as cuBLAS; double accumulation), for dev/cuda/emu.
#pragma once
#include "cuda_runtime.h"
typedef void* cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
inline cublasStatus_t cublasCreate(cublasHandle_t* h) { *h = (void*)1; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
// C (m, n) = alpha op(A) op(B) + beta C; op(A) (m, k), op(B) (k, n); all column-major
inline cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* alpha,
                                  const float* A, int lda, const float* B, int ldb, const float* beta, float* C, int ldc) {
    if (m < 0 || n < 0 || k < 0 || lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m || lda < 1 || ldb < 1 || ldc < 1) return CUBLAS_STATUS_INVALID_VALUE;
    for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) {
        double s = 0;
        for (int l = 0; l < k; l++) s += (double)(ta ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda]) * (tb ? B[j + (size_t)l * ldb] : B[l + (size_t)j * ldb]);
        float* c = &C[i + (size_t)j * ldc];
        *c = (float)(*alpha * s + (*beta != 0 ? (double)*beta * *c : 0));
    }
    return CUBLAS_STATUS_SUCCESS;
}
// y = alpha op(A) x + beta y, A (m, n) column-major
inline cublasStatus_t cublasSgemv(cublasHandle_t, cublasOperation_t ta, int m, int n, const float* alpha, const float* A, int lda,
                                  const float* x, int incx, const float* beta, float* y, int incy) {
    if (lda < (m > 1 ? m : 1) || incx < 1 || incy < 1) return CUBLAS_STATUS_INVALID_VALUE;
    int ny = ta ? n : m, nx = ta ? m : n;
    for (int i = 0; i < ny; i++) {
        double s = 0;
        for (int l = 0; l < nx; l++) s += (double)(ta ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda]) * x[(size_t)l * incx];
        float* c = &y[(size_t)i * incy];
        *c = (float)(*alpha * s + (*beta != 0 ? (double)*beta * *c : 0));
    }
    return CUBLAS_STATUS_SUCCESS;
}
