// The AVX-512 set's packed float GEMM (simd/float_gemm_avx512.cpp), shared with the set's
// direct tiles (simd/mul_mat_avx512.cpp) through the canonical K block.
#pragma once
#include <cstdint>

#include "cpu/mul_mat_float.h"

namespace pyggml::cpu::mm {
constexpr int64_t kFloatKB512 = 512;  // the avx512 set's canonical K block
// The avx512 direct tiles take one column over rows of at least this many values one row at a
// time. A tile's rows stream from addresses a row stride apart, which with power-of-two strides
// (rows of 4 or 8 KiB) ran MUL_MAT_ID's one-token f16 experts (K 2048 x M 1408, weights from L3)
// at 0.6-0.75 of the speed of one sequential stream on Zen 4 (1 and 2 threads); a row's K blocks
// are independent sums, so the core overlaps them. Side-by-side blocks of one row (four streams
// 1 KiB apart) ran at 0.4.
constexpr int64_t kRowAtATimeMinK = 4 * kFloatKB512;
// Fills mr, nr, mc, nc, micro, pack_a and pack_b of the avx512 float set.
void float_gemm_avx512(FloatKernels& f);
}  // namespace pyggml::cpu::mm
