// The AVX-512 set's packed float GEMM (simd/float_gemm_avx512.cpp), shared with the set's
// direct tiles (simd/mul_mat_avx512.cpp) through the canonical K block.
#pragma once
#include <cstdint>

#include "cpu/mul_mat_float.h"

namespace pyggml::cpu::mm {
constexpr int64_t kFloatKB512 = 512;  // the avx512 set's canonical K block
// The avx512 direct tiles take one column over rows 1 to 4 KiB apart one row at a time.
// Several rows streamed side by side from that stride ran at 0.6-0.75 of one sequential stream on
// Zen 4 with the weights coming from memory (f16 / bf16 K 2048: MUL_MAT of 32 MiB, MUL_MAT_ID's
// one-token experts; 1 and 2 threads); a row's K blocks are independent sums, so the core
// overlaps them. The cost: the same rows held in L3 (a 4 MiB weight dotted over and over, which a
// model's decode does not do) ran at 0.66 of the side-by-side tile. At 8 and 16 KiB strides one
// row at a time was no faster (0.7-1.0x), so those keep the tiles; side-by-side blocks of one
// row (four streams 1 KiB apart) ran at 0.4.
constexpr size_t kRowAtATimeStride = 4096;
// Shorter rows from memory stream better one at a time too: a ~110M F16 model's decode (rows of
// 768 values, 1.5 KiB) took 10.0 ms a token with the tiles and 7.15 with one row at a time
// (2 threads; its K 768 x N 2048 products 3.9 -> 2.4 ms, the 32000-row output 2.35 -> 1.6 ms).
// Rows under 1 KiB (the tiny test models', whose weights sit in cache) keep the tiles.
constexpr size_t kRowAtATimeMinStride = 1024;
inline bool row_at_a_time(size_t stride) {
    return stride >= kRowAtATimeMinStride && stride <= kRowAtATimeStride;
}
// Fills mr, nr, mc, nc, micro, pack_a and pack_b of the avx512 float set.
void float_gemm_avx512(FloatKernels& f);
}  // namespace pyggml::cpu::mm
