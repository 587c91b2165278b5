// The AVX-512 set's packed float GEMM (simd/float_gemm_avx512.cpp), shared with the set's
// direct tiles (simd/mul_mat_avx512.cpp) through the canonical K block.
#pragma once
#include <cstdint>

#include "cpu/mul_mat_float.h"

namespace pyggml::cpu::mm {
constexpr int64_t kFloatKB512 = 512;  // the avx512 set's canonical K block
// The avx512 direct tiles take one column over rows exactly 4 KiB apart one row at a time.
// Several rows streamed side by side from that stride ran at 0.6-0.75 of one sequential stream on
// Zen 4 with the weights coming from memory (f16 / bf16 K 2048: MUL_MAT of 32 MiB, MUL_MAT_ID's
// one-token experts; 1 and 2 threads); a row's K blocks are independent sums, so the core
// overlaps them. The cost: the same rows held in L3 (a 4 MiB weight dotted over and over, which a
// model's decode does not do) ran at 0.66 of the side-by-side tile. At 8 and 16 KiB strides one
// row at a time was no faster (0.7-1.0x), so those keep the tiles; side-by-side blocks of one
// row (four streams 1 KiB apart) ran at 0.4.
constexpr size_t kRowAtATimeStride = 4096;
// Fills mr, nr, mc, nc, micro, pack_a and pack_b of the avx512 float set.
void float_gemm_avx512(FloatKernels& f);
}  // namespace pyggml::cpu::mm
