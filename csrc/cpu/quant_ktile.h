// The K-quant tile path of MUL_MAT and MUL_MAT_ID (q2_K .. q6_K weights, many columns, the
// avx512 level; MUL_MAT_ID: an expert's tokens are its columns).
//
// Per super-block (256 values) and output, the integer dot of every sub-block is taken whole
// (vpdpbusd), multiplied once by its sub-block scale and summed in 32 bits (s1); the mins'
// (or the level offset's) integer term comes from the activation's sub-block sums (s2). The
// floats then run once per super-block: v = d * f32(s1) [- dmin * f32(s2), one fused
// rounding], out = out + v * d_act, in super-block order. That is the order of llama.cpp's
// AVX-512 tiled K-quant kernels, so the bits are theirs for the same q8_K activations.
//
// It is another order than the dot / GEMM / repacked paths' (8 lanes per super-block), so it
// only runs from kMinColumns columns on: narrower products (one-column decodes, verify batches
// of speculative decoding, experts with fewer tokens) keep the dot path's bits, column for
// column. From kMinColumns on, a column's result does not depend on the column count either
// (every column sees the same operations), nor on the threads.
//
// Layout: for each unit of 16 weight rows, the rows' super-blocks are decoded once into
// PanelSb records (levels interleaved 4 at a time across the 16 rows, so one vector holds 16
// rows' partial dots); each activation column's q8_K blocks become ActSb records.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/mul_mat_kernels.h"
#include "pyggml/types.h"

namespace pyggml::cpu::kt {

constexpr int kRows = 16;              // weight rows per panel (vector lanes)
constexpr int kCols = 8;               // activation columns per kernel call
constexpr int64_t kMinColumns = 32;    // narrower products keep the dot path's bits
constexpr int64_t kColBlock = 256;     // columns per unit where rows are few (MUL_MAT) / per expert unit

// 16 rows' super-block: level k of row r at q[k / 4][r][k % 4] (unsigned levels); sub-block
// scales and, for the types with mins, the mins ([sub-block][row]); `pairs` holds 16-bit
// pairs (x[2p], x[2p + 1]) per row: the mins (q2_K, q4_K, q5_K) or the scales (q3_K, q6_K,
// whose level offset needs sum_s sc_s * bsum_s).
struct alignas(64) PanelSb {
    uint8_t q[64][kRows][4];
    int32_t sc[16][kRows];
    int32_t pairs[8][kRows];
    float d[kRows];
    float dmin[kRows];
};
static_assert(sizeof(PanelSb) == 5760, "panel record");

// One q8_K block of an activation column: the values, the sums of 16 (bp16) and of 32 (bp32)
// values as 16-bit pairs, the scale.
struct alignas(64) ActSb {
    int8_t qs[256];
    int32_t bp16[8];
    int32_t bp32[4];
    float d;
    int32_t unused[3];
};
static_assert(sizeof(ActSb) == 320, "activation record");

// Decodes rows (block pointers rows[r], r < nrows; missing rows are zero) at super-block
// `ib` into one panel record.
using DecodeFn = void (*)(const char* const* rows, size_t block_bytes, int nrows, int64_t ib, PanelSb* out);
// out[16 * c + r] = dot(row r, column c) over nsb super-blocks, for c < nc (1..kCols):
// panel: nsb records; cols[c]: nsb ActSb records.
using TileFn = void (*)(int64_t nsb, const PanelSb* panel, const ActSb* const* cols, int nc, float* out);

struct Kernels {
    DecodeFn decode[kTypeIdLimit];
    TileFn tile[kTypeIdLimit];
};
// Filled where x86 SIMD is compiled in (simd/quant_ktile_avx512.cpp), else empty.
const Kernels& kernels_avx512();

// The pieces MUL_MAT's driver (quant_ktile.cpp) and MUL_MAT_ID's (mul_mat_id.cpp) share.

// Whether the tiles take weights a (q2_K..q6_K, whole super-blocks a row) with activations b
// (f32 / f16 / bf16) at the current level, whatever the column count; if so, out holds their
// kernels.
struct TypeKernels {
    DecodeFn decode;
    TileFn tile;
};
bool kernels_for(const Tensor* a, const Tensor* b, TypeKernels& out);

// Bytes of one column's ActSb records (K / 256 of them).
inline size_t act_col_bytes(int64_t K) { return size_t(K / 256) * sizeof(ActSb); }

// One activation column (K values of type bt) quantized as the dot path quantizes it (q8_K,
// into q8: K / 256 BlockQ8_K of scratch), then widened into ActSb records.
void convert_column(const mm::Kernels& kr, Type wt, Type bt, const char* brow, int64_t K, char* q8, ActSb* out,
                    std::vector<float>& tmp);

// Decodes weight rows m0 .. m0 + rows - 1 (rows <= kRows; row m at abase + m * row_stride)
// into nsb panel records; the matrix has m_end rows (where it streams from memory, the next
// panel's rows are prefetched).
void decode_panel(DecodeFn decode, const char* abase, size_t row_stride, size_t block_bytes, int64_t m0, int rows,
                  int64_t nsb, PanelSb* panel, int64_t m_end);

// Tiles a decoded panel with columns n0 .. n1 - 1, kCols per call: column(n) gives column n's
// ActSb records, store(n, v) takes its kRows outputs (v[r] for the panel's row r).
template <class Column, class Store>
void tile_columns(TileFn tile, int64_t nsb, const PanelSb* panel, int64_t n0, int64_t n1, Column&& column,
                  Store&& store) {
    float out[kRows * kCols];
    const ActSb* cols[kCols];
    for (int64_t n = n0; n < n1; n += kCols) {
        const int nc = (int)std::min<int64_t>(kCols, n1 - n);
        for (int c = 0; c < nc; ++c) cols[c] = column(n + c);
        tile(nsb, panel, cols, nc, out);
        for (int c = 0; c < nc; ++c) store(n + c, out + kRows * c);
    }
}

}  // namespace pyggml::cpu::kt

namespace pyggml::cpu {
// Whether MUL_MAT node dst takes the K-quant tile path at the current level.
bool use_ktile(const Tensor* dst);
void ktile_mul_mat_forward(const ComputeParams& p, Tensor* dst);
size_t ktile_mul_mat_work_size(const Tensor* dst, int n_threads);
bool ktile_mul_mat_barrier_free(const Tensor* dst);
}  // namespace pyggml::cpu
