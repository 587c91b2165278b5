// bf16 weights as bf16 pairs on AVX512-BF16 CPUs (simd/float_bf16_avx512.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu/mul_mat_float.h"

namespace pyggml::cpu::mm {
// The float kernel set of bf16 weights where simd::avx512_bf16(): 32-value chunks, bf16 columns.
const FloatKernels& float_kernels_avx512_bf16();
// MUL_MAT_ID's dots of that form (DotFn / Dot2Fn of mul_mat_kernels.h; columns as f32 values).
void dot_bf16_pairs(int64_t k, const void* a, const void* b, size_t bs, int nc, float* o, const float* aux);
void dot2_bf16_pairs(int64_t k, const void* a, size_t as, const void* b, size_t bs, int nc, float* o, const float* aux);
}  // namespace pyggml::cpu::mm
