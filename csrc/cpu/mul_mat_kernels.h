// The per-instruction-set kernels of MUL_MAT / MUL_MAT_ID (implemented in simd/mul_mat_*.cpp
// and simd/quant_*.cpp): the CPU half of the type table, indexed by type id.
//
// Dot kernels take one weight row and nc (1..4) activation columns already converted to the
// weight's vec_dot_type (types.h): f32 for f32 weights, f32 values rounded to f16 / bf16 for
// f16 / bf16 weights, q8_0 / q8_1 / q8_K blocks for the block types. Accumulation is f32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "cpu/simd/isa.h"
#include "pyggml/types.h"

namespace pyggml::cpu::mm {

// out[j] = dot(a_row, b + j*b_stride) for j < nc; `aux` is the nvfp4 scale table (256 floats).
using DotFn = void (*)(int64_t k, const void* a_row, const void* b, size_t b_stride, int nc, float* out,
                       const float* aux);
// Two weight rows (a_row, a_row + a_stride) at once: out[r * 4 + j] = dot(row r, column j).
// Decoding both rows per block shares each activation block load and scale between them.
using Dot2Fn = void (*)(int64_t k, const void* a_row, size_t a_stride, const void* b, size_t b_stride, int nc,
                        float* out, const float* aux);
// Dot2Fn over converted columns with their extras (column j's at ext + j * ext_stride): the
// weights' levels start from the extras' offsets, so a block costs one integer dot per row and
// column, no sign trick (the same integers, and Dot2Fn's float operations: the same bits).
using Dot2xFn = void (*)(int64_t k, const void* a_row, size_t a_stride, const void* ext, size_t ext_stride, int nc,
                         float* out);
using CvtFn = void (*)(const void* src, float* dst, int64_t n);

// Quantized GEMM (simd/quant_gemm_*.cpp): 8 activation columns are packed together, each
// 4-value group of a block interleaved across the 8 columns, so that one output vector lane
// per column holds what lane l of the dot kernel's accumulator holds: every output then sees
// the dot kernel's exact operations in its order (results bit-identical to the dot path).
// A weight row is packed once (decoded levels, widened scales) and dotted with every group.
constexpr int kQgCols = 8;
// ncols (1..8) columns of vec_dot blocks, col_stride bytes apart -> one packed group (missing
// columns are zero).
using QgPackActFn = void (*)(const void* cols, size_t col_stride, int ncols, int64_t k, void* out);
using QgPackRowFn = void (*)(const void* row, int64_t k, void* out, const float* aux);
// out[c] = dot(packed row, column c of the packed group) for the 8 columns.
using QgTileFn = void (*)(int64_t k, const void* row, const void* group, float* out);
// Two packed rows (row, row + row_stride) at once, out[8 * r + c]: the same bits as QgTileFn
// per row, each activation load serving both.
using QgTile2Fn = void (*)(int64_t k, const void* rows, size_t row_stride, const void* group, float* out);
// Two packed rows times two packed groups (group, group + group_stride: 16 columns) at once,
// out[16 * r + c]: the same bits as QgTileFn per row and column (the VNNI build's 512-bit form).
using QgTileWideFn = void (*)(int64_t k, const void* rows, size_t row_stride, const void* group, size_t group_stride,
                              float* out);

// Extras of a q8_0 activation column for the one-column dots of mxfp4, iq4_nl and nvfp4, and
// for the two-row dots of q8_0, q4_0, q5_0, iq4_nl, mxfp4 over converted columns (dot2x): those
// take their values as unsigned levels u = value + offset, and start each lane's vpdpbusd
// (or maddubs sum) from -offset * (the sum of its 4-value group of y), so the lane ends at the
// same integer as the signed values' dot, and the float operations stay those of the signed
// kernels: the same bits. Made once per column (act_extras), after its q8_0 blocks, which every
// other kernel reads unchanged, starting 64-byte aligned (so none of their loads splits a line).
constexpr int kE2M1Offset = 12;    // -min(kE2M1Doubled): levels 0..24
constexpr int kIQ4NLOffset = 128;  // levels 1..241: exact under vpdpbusd only (maddubs would
                                   // saturate), so the AVX2 iq4_nl kernel keeps the signed values
// The level offset of weight type w's one-column dot (mxfp4, iq4_nl, nvfp4).
constexpr int kQ8_0Offset = 128;   // q8_0 bytes xor 0x80: levels 0..255, vpdpbusd only
constexpr int kQ4_0Offset = 8, kQ5_0Offset = 16;  // the blocks' own levels 0..15 / 0..31
constexpr int act_extra_offset(Type w) {
    switch (w) {
        case Type::IQ4_NL: return kIQ4NLOffset;
        case Type::Q8_0: return kQ8_0Offset;
        case Type::Q4_0: return kQ4_0Offset;
        case Type::Q5_0: return kQ5_0Offset;
        default: return kE2M1Offset;
    }
}
// mxfp4, iq4_nl: one per q8_0 block, then (after all K/32 of them) the blocks' d widened, one
// float each. Every load of a block's activations is one aligned load or a 4-byte broadcast.
struct ActExtra {
    int8_t qs[32];            // the block's values
    int32_t offset[8];        // -offset * (qs[4l] + ... + qs[4l + 3]) for lane l
};
// nvfp4: one per 64 values (q8_0 blocks y0, y1; group g = values 4g..4g+3 of a block). A
// weight block's 32 bytes masked give, in dword order, the nibbles of groups 0, 1, 4, 5 of
// its first half then of its second half (lo); shifted by 4, groups 2, 3, 6, 7 (hi). The
// activations come in that order too, so no shuffle brings the nibbles into value order.
struct ActUnitNVFP4 {
    int8_t lo[32];            // y0 groups 0, 1, 4, 5, then y1's
    int8_t hi[32];            // y0 groups 2, 3, 6, 7, then y1's
    int32_t offset_lo[8];     // -kE2M1Offset * (sum of lo's dword l)
    int32_t offset_hi[8];
    float d[8];               // y0.d 4 times, y1.d 4 times
};
// out[0] = dot(a_row, the q8_0 column b) for one column whose extras start at ext.
using Dot1xFn = void (*)(int64_t k, const void* a_row, const void* b, const void* ext, float* out,
                         const float* aux);
// out[0], out[1] = the Dot1xFn of rows a_row and a_row + a_stride (each row's bits as Dot1xFn's).
using Dot1x2Fn = void (*)(int64_t k, const void* a_row, size_t a_stride, const void* b, const void* ext,
                          float* out, const float* aux);

struct Kernels {
    simd::Isa isa;
    DotFn dot[kTypeIdLimit];              // by weight type; null: no kernel
    Dot2Fn dot2[kTypeIdLimit];            // two-row dots where a set has them; null: dot per row
    // the two-row dot also serves one column of long rows (MUL_MAT) and an expert's single
    // token (MUL_MAT_ID): it streams one long column faster than the one-row dot (which
    // otherwise does, a single weight stream per thread)
    bool dot2_one_column[kTypeIdLimit];
    Dot1xFn dot1x[kTypeIdLimit];          // one-column dots reading act_extras; null: dot
    Dot1x2Fn dot1x2[kTypeIdLimit];        // the same, two rows per call (one column of long rows)
    Dot2xFn dot2x[kTypeIdLimit];          // where dot2 runs on converted columns; null: dot2
    FromFloatFn quantize[kTypeIdLimit];   // by activation (vec_dot) type: q8_0, q8_1, q8_K
    CvtFn f16_to_f32;  // n halves -> floats
    CvtFn round_f16;   // floats -> floats rounded to f16 (RNE), in place allowed
    void (*quantize_q8_0)(const float* x, BlockQ8_0* y, int64_t n);  // = quantize_row_q8_0_cpu
    // quantized GEMM by weight type (null: no GEMM, the dot path serves every width); bytes
    // per vec_dot block of a packed row / of a packed group (by vec_dot type)
    QgTileFn qg_tile[kTypeIdLimit];
    QgTile2Fn qg_tile2[kTypeIdLimit];     // null: qg_tile row by row
    QgTileWideFn qg_tile_wide[kTypeIdLimit];  // null: qg_tile2 / qg_tile group by group
    QgPackRowFn qg_pack_row[kTypeIdLimit];
    QgPackActFn qg_pack_act[kTypeIdLimit];
    uint32_t qg_row_block_bytes[kTypeIdLimit];
    uint32_t qg_act_block_bytes[kTypeIdLimit];
};

constexpr int kMaxMR = 32, kMaxNR = 12;  // the largest tile of any kernel set

const Kernels& kernels_scalar();
const Kernels& kernels_avx2();
const Kernels& kernels_avx512();
inline const Kernels& kernels_for(simd::Isa isa) {
    switch (isa) {
        case simd::Isa::Avx512: return kernels_avx512();
        case simd::Isa::Avx2: return kernels_avx2();
        default: return kernels_scalar();
    }
}

// The block-type dots of each set (simd/quant_dot_*.cpp) fill their rows of k.dot / k.quantize
// (and, but for the scalar set, k.qg_* through add_quant_gemm_*). The avx512 ones are the
// 256-bit bodies (simd/quant_*256.h) built a second time with VNNI integer dots.
void add_quant_dots_scalar(Kernels& k);
void add_quant_dots_avx2(Kernels& k);
void add_quant_dots_avx512(Kernels& k);
void add_quant_dot2_avx2(Kernels& k);     // simd/quant_dot2_*.cpp: k.dot2 rows
void add_quant_dot2_avx512(Kernels& k);
void add_quant_gemm_avx2(Kernels& k);     // simd/quant_gemm_*.cpp: k.qg_* rows
void add_quant_gemm_avx512(Kernels& k);

// E2M1 codes doubled (bit 3 = sign); the nvfp4 scale table holds halved UE4M3 scales.
constexpr const int8_t* kNvfp4Lut = kE2M1Doubled;

}  // namespace pyggml::cpu::mm

namespace pyggml::cpu {
// Instruction sets with a mul_mat dot kernel of their own for weights of type t (a set that
// only reuses a lower set's kernel is not listed), detected or not: "scalar", "avx2", "avx512".
std::vector<const char*> mul_mat_kernel_isas(Type t);
// The same per path of MUL_MAT / MUL_MAT_ID: "dot", "dot2" (two-row dots), "dot1x" (one-column
// dots with activation extras), "gemm" (quantized GEMM tiles), "repack" (repacked-weight tiles),
// "ktile" (the K-quant tiles of quant_ktile.h, from kt::kMinColumns columns on).
std::vector<std::pair<const char*, std::vector<const char*>>> mul_mat_path_isas(Type t);
}  // namespace pyggml::cpu
