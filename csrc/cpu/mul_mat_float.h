// MUL_MAT with f32 / f16 / bf16 weights: one accumulation order per output, whatever the batch.
//
// Speculative decoding verifies n+1 tokens in one batch and must reproduce one-token decoding
// bit for bit, so a column's result may not depend on how many columns share the call. Every
// output y[m, n] = sum_k a[m, k] * b[k, n] of one kernel set is therefore computed in the same
// order on every path (direct tiles for few columns, the packed GEMM for many, MUL_MAT_ID's
// dots), the canonical order of that set:
//   - K is cut into blocks of `kb` values (the last one may be shorter);
//   - in a block, one accumulator of `lanes` lanes takes multiply-adds (fused in the SIMD sets)
//     of consecutive `lanes`-value chunks of a's row and b's column, the last chunk of the row
//     zero-padded in both;
//   - the block's value is the accumulator's horizontal sum by the set's fixed tree;
//   - y = block 0, then y = y + block i, in order.
// The avx512 set's bf16 weights on AVX512-BF16 CPUs use chunks of 32 values taken as 16 bf16
// pairs per accumulator (simd/float_bf16_avx512.cpp), with b rounded to bf16 as above.
// Only the instruction-level parallelism differs between paths: several rows and columns per
// tile (never a split of one output's accumulator). b is first converted as ggml's CPU converts
// it for these weights (rounded to f16 / bf16 for f16 / bf16 weights), once per column.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu/kernels.h"
#include "cpu/simd/isa.h"
#include "pyggml/types.h"

namespace pyggml::cpu::mm {

// Weight kinds of the float kernels.
enum FloatKind : int { kFloatF32 = 0, kFloatF16 = 1, kFloatBF16 = 2 };
inline bool is_float_weight(Type t) { return t == Type::F32 || t == Type::F16 || t == Type::BF16; }
inline int float_kind(Type t) { return t == Type::F32 ? kFloatF32 : t == Type::F16 ? kFloatF16 : kFloatBF16; }

constexpr int kMaxDirectRows = 8, kMaxDirectCols = 4;

// out[r * 4 + c] = y(weight row r at a + r * a_stride bytes, column c at b + c * b_stride
// bytes) for r < rows (1..8), c < cols (1..4): b's columns already converted, as f32 values
// (`direct`) or, for f16 weights, as the same values stored in f16 (`direct_f16b`: half the
// bytes to stream, widened in registers).
using FloatDirectFn = void (*)(int64_t k, const void* a, size_t a_stride, int rows, const void* b,
                               size_t b_stride, int cols, float* out);
// One packed tile: ap holds nq chunks of mr weight rows (ap[(q * mr + r) * lanes + l]), bp nq
// chunks of nr columns (bp[(q * nr + j) * lanes + l]), in units of unit_values values; writes the block values of the mv x nv
// valid outputs to c[j * ldc + r], or adds them to c where `accumulate` (the blocks after the first).
// While it runs it may prefetch the pf_lines cache lines from pf (the next column panel's).
using FloatMicroFn = void (*)(int64_t nq, const float* ap, const float* bp, float* c, int64_t ldc, int mv, int nv,
                              bool accumulate, const char* pf, int pf_lines);
// Packs one panel of mr weight rows for `ap`: values [k0, k0 + kc) of rows r < rows (a + r *
// a_stride bytes) widened to f32, zero past kc (to a whole chunk) and for rows >= rows; the
// panel takes a_panel_floats(nq) floats (a set may pad its layout).
using FloatPackAFn = void (*)(const void* a, size_t a_stride, int rows, int64_t k0, int64_t kc, float* ap);
// Packs one panel of nr columns for `bp`: cols[j] (j < nr) holds kq * lanes f32 values of column
// j (zero past K), or is null for a column past the last (zeros). The bf16-pair form
// (unit_values 2) rounds the values to bf16 as it packs: they may come unrounded.
constexpr int kMaxFloatMR = 32, kMaxFloatNR = 12;
using FloatPackBFn = void (*)(const float* const* cols, int64_t kq, float* bp);

struct FloatKernels {
    int lanes;
    int64_t kb;             // the canonical K block: a multiple of lanes
    int mr, nr;             // packed tile
    int64_t mc, nc;         // cache blocks of the packed GEMM: multiples of mr / nr
    int64_t a_panel_pad;    // floats a packed weight panel takes past its nq * mr * chunk_floats values
    // values per 4-byte unit of the packed panels: 2 where a unit holds a bf16 pair (the packed
    // panels then take half the floats of f32 values: no unused half of each block for the
    // prefetches to pull into L1)
    int unit_values = 1;
    FloatDirectFn direct[3];  // by FloatKind
    FloatDirectFn direct_f16b;
    // bf16 weights with their columns stored as bf16 (the pair form of
    // simd/float_bf16_avx512.cpp; null elsewhere): MUL_MAT converts their columns to bf16
    FloatDirectFn direct_bf16b;
    FloatMicroFn micro;
    // f16 weights where the set packs them as f16 (pack_a[kFloatF16] then writes a different
    // layout, within a_panel_floats); null: micro
    FloatMicroFn micro_f16 = nullptr;
    FloatPackAFn pack_a[3];   // by FloatKind
    FloatPackBFn pack_b;
    int direct_cols;                      // columns per direct tile (at most kMaxDirectCols)
    int direct_rows[kMaxDirectCols + 1];  // rows per direct tile for 1..4 columns
};

// Floats a packed weight panel's lane slice takes past its values (one cache line; a set's
// a_panel_pad holds one per slice): slices of whole 512-value blocks would fall a multiple of
// 4 KiB apart, and a packing step's stores, one per slice, in one set of the 8-way L1.
constexpr int64_t kFloatSlicePad = 16;
// Floats one chunk of one row or column takes in the packed panels.
inline int chunk_floats(const FloatKernels& fk) { return fk.lanes / fk.unit_values; }
// Floats of one packed weight panel of nq chunks.
inline size_t a_panel_floats(const FloatKernels& fk, int64_t nq) { return size_t(nq) * fk.mr * chunk_floats(fk) + fk.a_panel_pad; }

const FloatKernels& float_kernels_scalar();
const FloatKernels& float_kernels_avx2();
const FloatKernels& float_kernels_avx512();
const FloatKernels& float_kernels_avx512_bf16();  // bf16 weights where simd::avx512_bf16()
inline const FloatKernels& float_kernels_for(simd::Isa isa) {
    switch (isa) {
        case simd::Isa::Avx512: return float_kernels_avx512();
        case simd::Isa::Avx2: return float_kernels_avx2();
        default: return float_kernels_scalar();
    }
}
// The set that computes weights of type w at level isa (the current level: simd::cpu_isa()).
inline const FloatKernels& float_kernels_for(simd::Isa isa, Type w) {
    if (w == Type::BF16 && isa == simd::Isa::Avx512 && simd::avx512_bf16()) return float_kernels_avx512_bf16();
    return float_kernels_for(isa);
}

}  // namespace pyggml::cpu::mm

namespace pyggml::cpu {
// The whole float MUL_MAT node (mul_mat_float.cpp) and its scratch bytes.
void float_mul_mat_forward(const ComputeParams& p, Tensor* dst);
size_t float_mul_mat_work_size(const Tensor* dst, int n_threads);
bool float_mul_mat_barrier_free(const Tensor* dst);
}  // namespace pyggml::cpu
