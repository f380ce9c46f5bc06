// The CUDA emulator's cuda_profiler_api.h (dev/cuda/emu): no profiler runs here, so starting and stopping one does
// nothing (train_miras.cu's MIRAS_DECODE_PROFILE brackets decoder steps for ncu on a GPU)
#pragma once
#include "cuda_runtime.h"
inline cudaError_t cudaProfilerStart() { return cudaSuccess; }
inline cudaError_t cudaProfilerStop() { return cudaSuccess; }
