// The AVX-512 set's packed float GEMM (simd/float_gemm_avx512.cpp), shared with the set's
// direct tiles (simd/mul_mat_avx512.cpp) through the canonical K block.
#pragma once
#include <cstdint>

#include "cpu/mul_mat_float.h"

namespace pyggml::cpu::mm {
constexpr int64_t kFloatKB512 = 512;  // the avx512 set's canonical K block
// The avx512 direct tiles take one column over rows 1 to 4 KiB apart (8 KiB for 2-byte weights)
// one row at a time.
// Several rows streamed side by side from that stride ran at 0.6-0.75 of one sequential stream on
// Zen 4 with the weights coming from memory (f16 / bf16 K 2048: MUL_MAT of 32 MiB, MUL_MAT_ID's
// one-token experts; 1 and 2 threads); a row's K blocks are independent sums, so the core
// overlaps them. The cost: the same rows held in L3 (a 4 MiB weight dotted over and over, which a
// model's decode does not do) ran at 0.66 of the side-by-side tile. Side-by-side blocks of one
// row (four streams 1 KiB apart) ran at 0.4. f16 / bf16 rows of 8 KiB (K 4096 x M 4096, 32 MiB)
// ran 1.2x / 1.36x faster one at a time (bench/ab_builds.py, 1 thread by CPU time, every round
// ahead; 2 threads 1.19x / 1.38x median); f32 rows of 16 KiB ran at 0.89 of the tile, so f32
// keeps the 4 KiB bound.
constexpr size_t kRowAtATimeStride = 4096, kRowAtATimeStride2 = 8192;
// Shorter rows from memory stream better one at a time too: a ~110M F16 model's decode (rows of
// 768 values, 1.5 KiB) took 10.0 ms a token with the tiles and 7.15 with one row at a time
// (2 threads; its K 768 x N 2048 products 3.9 -> 2.4 ms, the 32000-row output 2.35 -> 1.6 ms).
// Rows under 1 KiB (the tiny test models', whose weights sit in cache) keep the tiles.
constexpr size_t kRowAtATimeMinStride = 1024;
// Whether one column is dotted one row at a time with rows `stride` bytes apart, of weights of
// `weight_bytes` bytes a value.
inline bool row_at_a_time(size_t stride, size_t weight_bytes) {
    return stride >= kRowAtATimeMinStride && stride <= (weight_bytes == 2 ? kRowAtATimeStride2 : kRowAtATimeStride);
}
// Fills mr, nr, mc, nc, micro, pack_a and pack_b of the avx512 float set.
void float_gemm_avx512(FloatKernels& f);
}  // namespace pyggml::cpu::mm
