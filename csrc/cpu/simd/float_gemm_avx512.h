// The AVX-512 set's packed float GEMM (simd/float_gemm_avx512.cpp), shared with the set's
// direct tiles (simd/mul_mat_avx512.cpp) through the canonical K block.
#pragma once
#include <cstdint>

#include "cpu/mul_mat_float.h"

namespace pyggml::cpu::mm {
constexpr int64_t kFloatKB512 = 512;  // the avx512 set's canonical K block
// Fills mr, nr, mc, nc, micro, pack_a and pack_b of the avx512 float set.
void float_gemm_avx512(FloatKernels& f);
}  // namespace pyggml::cpu::mm
