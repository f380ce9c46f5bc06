// The bfloat16 subset of cuda_bf16.h that train_miras.cu uses, for dev/cuda/emu: the storage type and the
// conversions, float -> bf16 rounding to nearest even (as __float2bfloat16 does on the GPU; NaN stays NaN).
#pragma once
#include <cstdint>
#include <cstring>
struct __nv_bfloat16 { uint16_t x; };
inline __nv_bfloat16 __float2bfloat16(float f) {
    uint32_t u; memcpy(&u, &f, 4); __nv_bfloat16 b;
    if ((u & 0x7fffffffu) > 0x7f800000u) { b.x = (uint16_t)((u >> 16) | 0x40); return b; }  // NaN: keep it a (quiet) NaN
    u += 0x7fffu + ((u >> 16) & 1);                                                          // round to nearest, ties to even
    b.x = (uint16_t)(u >> 16); return b;
}
inline float __bfloat162float(__nv_bfloat16 b) { uint32_t u = (uint32_t)b.x << 16; float f; memcpy(&f, &u, 4); return f; }
struct alignas(4) __nv_bfloat162 { __nv_bfloat16 x, y; };
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162{__float2bfloat16(a), __float2bfloat16(b)}; }
