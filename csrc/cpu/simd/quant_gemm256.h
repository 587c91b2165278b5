// 256-bit quantized GEMM tiles, built per instruction set by quant_gemm_avx2.cpp and
// quant_gemm_avx512.cpp (integer dots: idot256.h): one packed weight row times one packed
// group of 8 activation columns, every output bit-identical to the dot kernels of the same
// set (mm_quant256.h, quant_dot256.h). Defines fill_quant_gemm(Kernels&) (the qg_* rows).
//
// 32-value block types: the dot kernels keep, per output, an 8-lane f32 accumulator whose lane l
// adds, block after block, (integer dot of values 4l..4l+3 of the block) * scale, and end with a
// fixed horizontal sum. Here vector acc[l] holds lane l of the 8 columns' accumulators: the 4
// weight bytes of lane l are broadcast and multiplied with the 8 columns' 4 activation bytes
// (packed side by side), which gives each column the same exact integer; the f32 operations
// (the scale products, FMAs, final sum) are the dot kernels' one for one, in their order, and
// a block's 8 scales are one vector product.
// K-quants: the dot kernel's own loop (dot_kquant: a decoded super-block shared by 4 columns)
// on a row decoded once for all columns instead of once per 4 columns.
//
// Packed weight rows (per vec_dot block):
//   signed (q8_0, q4_0, q5_0, iq4_nl, mxfp4, nvfp4): a[32] int8, |a|[32], scale of lanes 0..3
//     and of lanes 4..7 (f32; equal but for nvfp4's 16-value sub-blocks)            72 bytes
//     (VNNI build: instead of |a|, o[8] = -128 * (sum of group l of a) as int32: vpdpbusd
//     takes the activations as unsigned bytes y + 128 and a signed, from o, which leaves the
//     same integer a . y without the sign trick)
//   with a min (q4_1, q5_1): u[32] levels, d, m (f32)                                40 bytes
//   K-quants: u[256] levels in pair order (below), the chunk scales as dot_kquant shuffles
//     them (16 x int16, even groups then odd), scales and mins (16 x int16 each), d, dmin
//     (f32), padding                                                                 384 bytes
// Packed activation groups (per vec_dot block, 8 columns):
//   q8_0: qs[lane][col][4], d[col] (f32)                                             288 bytes
//     (VNNI build: qs + 128, as unsigned bytes)
//   q8_1: qs[lane][col][4], d[col], s[col]                                           320 bytes
//   q8_K: the 8 columns' q8_K rows one after the other (column c at c * row bytes), each
//     block's qs in pair order                                                       2336 bytes
// Pair order (K-quants): chunks 2p and 2p + 1 (values 64p..64p+63) become two vectors X, Y whose
// 16-bit lane 2l + h holds values 4l, 4l + 1 (X) or 4l + 2, 4l + 3 (Y) of chunk 2p + h. The sum
// of the two maddubs is then, in 32-bit lane l, (dot of group l of chunk 2p, of chunk 2p + 1) as
// 16-bit, and one vpdpwssd / madd with the pair's scales adds the dot kernel's two chunk terms
// of lane l: 3 multiplies per 64 values and column instead of 4 (the same integers).
#pragma once
#include <cstring>

#include "cpu/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include "cpu/simd/idot256.h"

namespace pyggml::cpu::mm {
#include "cpu/simd/quant_decode256.h"

namespace {

constexpr int kSignedRow = 72, kMinRow = 40, kKRow = 384;
constexpr int kQ8_0Group = 288, kQ8_1Group = 320, kQ8_KGroup = 2336;

inline uint32_t u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline float f32(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
}
inline __m256i bcast32(const uint8_t* p) { return _mm256_set1_epi32((int)u32(p)); }

// The dot kernels' horizontal sum (128-bit halves, then pairs, then the last two) per column.
inline __m256 lane_sum(const __m256 acc[8]) {
    const __m256 s0 = _mm256_add_ps(acc[0], acc[4]), s1 = _mm256_add_ps(acc[1], acc[5]);
    const __m256 s2 = _mm256_add_ps(acc[2], acc[6]), s3 = _mm256_add_ps(acc[3], acc[7]);
    return _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
}

// ---- activation packing ----
// 4-byte group g of column c's `qs` (at byte offset qs_off in each block), xor flip -> dst[g][c].
inline void interleave(const uint8_t* const* col, int ncols, size_t qs_off, int groups, uint8_t* dst, uint32_t flip) {
    for (int g = 0; g < groups; ++g)
        for (int c = 0; c < kQgCols; ++c) {
            const uint32_t v = (c < ncols ? u32(col[c] + qs_off + 4 * g) : 0u) ^ flip;
            std::memcpy(dst + (g * kQgCols + c) * 4, &v, 4);
        }
}

template <class Block>
void pack_act_legacy(const void* cols, size_t stride, int ncols, int64_t k, void* outv) {
    constexpr bool kSum = sizeof(Block) == sizeof(BlockQ8_1);
    uint8_t* out = (uint8_t*)outv;
    for (int64_t ib = 0; ib < k / 32; ++ib, out += kSum ? kQ8_1Group : kQ8_0Group) {
        const uint8_t* col[kQgCols];
        float d[kQgCols], s[kQgCols];
        for (int c = 0; c < kQgCols; ++c) {
            const Block* y = c < ncols ? (const Block*)((const char*)cols + c * stride) + ib : nullptr;
            col[c] = (const uint8_t*)y;
            d[c] = y ? f16(y->d) : 0.0f;
            if constexpr (kSum) s[c] = y ? f16(((const BlockQ8_1*)y)->s) : 0.0f;
        }
        // signed tiles of the VNNI build read q8_0 values + 128 (unsigned)
        const uint32_t flip = kIdotVnni && !kSum ? 0x80808080u : 0u;
        interleave(col, ncols, offsetof(Block, qs), 8, out, flip);
        std::memcpy(out + 256, d, 32);
        if constexpr (kSum) std::memcpy(out + 288, s, 32);
    }
}

// Chunks a (2p) and b (2p + 1) in pair order at out (X) and out + 32 (Y).
inline void put_pair(uint8_t* out, __m256i a, __m256i b) {
    _mm256_storeu_si256((__m256i*)out, _mm256_blend_epi16(a, _mm256_slli_epi32(b, 16), 0xAA));
    _mm256_storeu_si256((__m256i*)(out + 32), _mm256_blend_epi16(_mm256_srli_epi32(a, 16), b, 0xAA));
}

void pack_act_q8_K(const void* cols, size_t stride, int ncols, int64_t k, void* outv) {
    const int64_t nb = k / kQK_K;
    const size_t row = size_t(nb) * sizeof(BlockQ8_K);
    for (int c = 0; c < kQgCols; ++c) {
        uint8_t* out = (uint8_t*)outv + c * row;
        if (c >= ncols) {
            std::memset(out, 0, row);
            continue;
        }
        std::memcpy(out, (const char*)cols + c * stride, row);
        for (int64_t ib = 0; ib < nb; ++ib) {
            int8_t* qs = ((BlockQ8_K*)out)[ib].qs;
            for (int p = 0; p < 4; ++p)
                put_pair((uint8_t*)qs + 64 * p, _mm256_loadu_si256((const __m256i*)(qs + 64 * p)),
                         _mm256_loadu_si256((const __m256i*)(qs + 64 * p + 32)));
        }
    }
}

// ---- weight row packing ----
inline void put_f32(uint8_t* p, float v) { std::memcpy(p, &v, 4); }
inline void put_signed(uint8_t* out, __m256i a, float d_lo, float d_hi) {
    _mm256_storeu_si256((__m256i*)out, a);
    if constexpr (kIdotVnni) {  // -128 * group sums: (y + 128) . a + o = y . a
        const __m256i sums = udot(_mm256_set1_epi8(1), a);
        _mm256_storeu_si256((__m256i*)(out + 32), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sums, 7)));
    } else {
        _mm256_storeu_si256((__m256i*)(out + 32), _mm256_sign_epi8(a, a));
    }
    put_f32(out + 64, d_lo);
    put_f32(out + 68, d_hi);
}

template <class Dec>
void pack_row_signed(const void* row, int64_t k, void* outv, const float*) {
    const typename Dec::Block* x = (const typename Dec::Block*)row;
    uint8_t* out = (uint8_t*)outv;
    for (int64_t ib = 0; ib < k / 32; ++ib, out += kSignedRow) {
        float d;
        const __m256i a = Dec::values(x[ib], d);
        put_signed(out, a, d, d);
    }
}

// nvfp4: a 64-value block is two q8_0 activation blocks; within each, lanes 0..3 take the
// first 16-value sub-block's scale, lanes 4..7 the second's (values as mm_dot_nvfp4 orders them).
void pack_row_nvfp4(const void* row, int64_t k, void* outv, const float* scale) {
    const BlockNVFP4* x = (const BlockNVFP4*)row;
    uint8_t* out = (uint8_t*)outv;
    const __m128i lut = _mm_loadu_si128((const __m128i*)kNvfp4Lut), m4 = _mm_set1_epi8(0x0F);
    for (int64_t ib = 0; ib < k / 64; ++ib)
        for (int h = 0; h < 2; ++h, out += kSignedRow) {
            const __m128i q = _mm_loadu_si128((const __m128i*)(x[ib].qs + 16 * h));
            const __m128i lo = _mm_and_si128(q, m4), hi = _mm_and_si128(_mm_srli_epi16(q, 4), m4);
            const __m256i a = _mm256_set_m128i(_mm_shuffle_epi8(lut, _mm_unpackhi_epi64(lo, hi)),
                                               _mm_shuffle_epi8(lut, _mm_unpacklo_epi64(lo, hi)));
            put_signed(out, a, scale[x[ib].d[2 * h]], scale[x[ib].d[2 * h + 1]]);
        }
}

template <class Dec>
void pack_row_with_min(const void* row, int64_t k, void* outv, const float*) {
    const typename Dec::Block* x = (const typename Dec::Block*)row;
    uint8_t* out = (uint8_t*)outv;
    for (int64_t ib = 0; ib < k / 32; ++ib, out += kMinRow) {
        _mm256_storeu_si256((__m256i*)out, Dec::levels(x[ib]));
        put_f32(out + 32, f16(x[ib].d));
        put_f32(out + 36, f16(x[ib].m));
    }
}

template <class Unp>
void pack_row_kquant(const void* row, int64_t k, void* outv, const float*) {
    const typename Unp::Block* x = (const typename Unp::Block*)row;
    uint8_t* out = (uint8_t*)outv;
    const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    KBlock w;
    for (int64_t ib = 0; ib < k / kQK_K; ++ib, out += kKRow) {
        Unp::run(x[ib], w);
        for (int p = 0; p < 4; ++p) put_pair(out + 64 * p, w.u[2 * p], w.u[2 * p + 1]);
        const __m128i eo = _mm_shuffle_epi8(w.scales, even_odd);
        _mm256_storeu_si256((__m256i*)(out + 256),
                            _mm256_set_m128i(_mm_cvtepi8_epi16(_mm_srli_si128(eo, 8)), _mm_cvtepi8_epi16(eo)));
        _mm256_storeu_si256((__m256i*)(out + 288), _mm256_cvtepi8_epi16(w.scales));
        _mm256_storeu_si256((__m256i*)(out + 320), _mm256_cvtepu8_epi16(w.mins));
        put_f32(out + 352, w.d);
        put_f32(out + 356, w.dmin);
    }
}

// ---- tiles ----
// Every tile takes R packed rows (R = 1: qg_tile; R = 2: qg_tile2, rows wstride bytes apart,
// out[8 * r + c]): each activation vector loaded serves both rows, each output keeps the
// one-row tile's operations.
// kPasses = 2 (nvfp4, and the two-pass types of passes_of): the dot kernel keeps one
// accumulator for the even activation blocks and one for the odd ones, and sums them lane by
// lane before the horizontal sum.
template <int kPasses, int R>
void tile_signed_rows(int64_t k, const uint8_t* w, size_t wstride, const uint8_t* g, float* out) {
    const int64_t nq = k / 32;
    __m256 acc[R][8], first[R][8];
    for (int p = 0; p < kPasses; ++p) {
        for (int r = 0; r < R; ++r)
            for (int l = 0; l < 8; ++l) acc[r][l] = _mm256_setzero_ps();
        for (int64_t ib = p; ib < nq; ib += kPasses) {
            const uint8_t* gb = g + ib * kQ8_0Group;
            const __m256 dy = _mm256_loadu_ps((const float*)(gb + 256));
            __m256 s_lo[R], s_hi[R];
            for (int r = 0; r < R; ++r) {
                const uint8_t* wb = w + r * wstride + ib * kSignedRow;
                s_lo[r] = _mm256_mul_ps(_mm256_set1_ps(f32(wb + 64)), dy);
                s_hi[r] = kPasses == 1 ? s_lo[r] : _mm256_mul_ps(_mm256_set1_ps(f32(wb + 68)), dy);
            }
#pragma GCC unroll 8
            for (int l = 0; l < 8; ++l) {
                const __m256i y = _mm256_loadu_si256((const __m256i*)(gb + 32 * l));
                for (int r = 0; r < R; ++r) {
                    const uint8_t* wb = w + r * wstride + ib * kSignedRow;
                    // e: |a| (maddubs: the sign trick), or o = -128 * (group sum of a) for
                    // VNNI's y + 128 unsigned times a signed
                    const __m256i a = bcast32(wb + 4 * l), e = bcast32(wb + 32 + 4 * l);
                    const __m256i d = kIdotVnni ? udot_acc(e, y, a) : udot(e, _mm256_sign_epi8(y, a));
                    acc[r][l] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), l < 4 ? s_lo[r] : s_hi[r], acc[r][l]);
                }
            }
        }
        if (kPasses == 2 && p == 0)
            for (int r = 0; r < R; ++r)
                for (int l = 0; l < 8; ++l) first[r][l] = acc[r][l];
    }
    for (int r = 0; r < R; ++r) {
        if (kPasses == 2)
            for (int l = 0; l < 8; ++l) acc[r][l] = _mm256_add_ps(first[r][l], acc[r][l]);
        _mm256_storeu_ps(out + 8 * r, lane_sum(acc[r]));
    }
}

#if defined(PYGGML_IDOT_VNNI)
// Two groups side by side in one 512-bit vector: 32 bytes (or 8 floats) of each.
inline __m512i join(const uint8_t* a, const uint8_t* b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)a)),
                              _mm256_loadu_si256((const __m256i*)b), 1);
}
inline __m512 join_ps(const uint8_t* a, const uint8_t* b) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps((const float*)a)), _mm256_loadu_ps((const float*)b),
                              1);
}
// lane_sum of 16 columns.
inline __m512 lane_sum_wide(const __m512 acc[8]) {
    const __m512 s0 = _mm512_add_ps(acc[0], acc[4]), s1 = _mm512_add_ps(acc[1], acc[5]);
    const __m512 s2 = _mm512_add_ps(acc[2], acc[6]), s3 = _mm512_add_ps(acc[3], acc[7]);
    return _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
}
// tile_signed_rows<kPasses, 2> on two groups at once (16 columns, element for element the same
// operations), out[16 * r + c].
template <int kPasses>
void tile_signed_wide(int64_t k, const void* wv, size_t wstride, const void* gv, size_t gstride, float* out) {
    const uint8_t *w = (const uint8_t*)wv, *g = (const uint8_t*)gv;
    const int64_t nq = k / 32;
    __m512 acc[2][8], first[2][8];
    for (int p = 0; p < kPasses; ++p) {
        for (int r = 0; r < 2; ++r)
            for (int l = 0; l < 8; ++l) acc[r][l] = _mm512_setzero_ps();
        for (int64_t ib = p; ib < nq; ib += kPasses) {
            const uint8_t* g0 = g + ib * kQ8_0Group;
            const uint8_t* g1 = g0 + gstride;
            const __m512 dy = join_ps(g0 + 256, g1 + 256);
            __m512 s_lo[2], s_hi[2];
            for (int r = 0; r < 2; ++r) {
                const uint8_t* wb = w + r * wstride + ib * kSignedRow;
                s_lo[r] = _mm512_mul_ps(_mm512_set1_ps(f32(wb + 64)), dy);
                s_hi[r] = kPasses == 1 ? s_lo[r] : _mm512_mul_ps(_mm512_set1_ps(f32(wb + 68)), dy);
            }
#pragma GCC unroll 8
            for (int l = 0; l < 8; ++l) {
                const __m512i y = join(g0 + 32 * l, g1 + 32 * l);
                for (int r = 0; r < 2; ++r) {
                    const uint8_t* wb = w + r * wstride + ib * kSignedRow;
                    const __m512i a = _mm512_set1_epi32((int)u32(wb + 4 * l)), e = _mm512_set1_epi32((int)u32(wb + 32 + 4 * l));
                    const __m512i d = _mm512_dpbusd_epi32(e, y, a);
                    acc[r][l] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), l < 4 ? s_lo[r] : s_hi[r], acc[r][l]);
                }
            }
        }
        if (kPasses == 2 && p == 0)
            for (int r = 0; r < 2; ++r)
                for (int l = 0; l < 8; ++l) first[r][l] = acc[r][l];
    }
    for (int r = 0; r < 2; ++r) {
        if (kPasses == 2)
            for (int l = 0; l < 8; ++l) acc[r][l] = _mm512_add_ps(first[r][l], acc[r][l]);
        _mm512_storeu_ps(out + 16 * r, lane_sum_wide(acc[r]));
    }
}
// tile_with_min_rows<2> on two groups at once (16 columns), out[16 * r + c].
void tile_with_min_wide(int64_t k, const void* wv, size_t wstride, const void* gv, size_t gstride, float* out) {
    const uint8_t *w = (const uint8_t*)wv, *g = (const uint8_t*)gv;
    __m512 acc[2][8], mins[2];
    for (int r = 0; r < 2; ++r) {
        mins[r] = _mm512_setzero_ps();
        for (int l = 0; l < 8; ++l) acc[r][l] = _mm512_setzero_ps();
    }
    for (int64_t ib = 0; ib < k / 32; ++ib) {
        const uint8_t* g0 = g + ib * kQ8_1Group;
        const uint8_t* g1 = g0 + gstride;
        const __m512 dy = join_ps(g0 + 256, g1 + 256), sy = join_ps(g0 + 288, g1 + 288);
        __m512 s[2];
        for (int r = 0; r < 2; ++r) {
            const uint8_t* wb = w + r * wstride + ib * kMinRow;
            s[r] = _mm512_mul_ps(_mm512_set1_ps(f32(wb + 32)), dy);
            mins[r] = _mm512_fmadd_ps(_mm512_set1_ps(f32(wb + 36)), sy, mins[r]);
        }
#pragma GCC unroll 8
        for (int l = 0; l < 8; ++l) {
            const __m512i y = join(g0 + 32 * l, g1 + 32 * l);
            for (int r = 0; r < 2; ++r) {
                const __m512i a = _mm512_set1_epi32((int)u32(w + r * wstride + ib * kMinRow + 4 * l));
                const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a, y);
                acc[r][l] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), s[r], acc[r][l]);
            }
        }
    }
    for (int r = 0; r < 2; ++r) _mm512_storeu_ps(out + 16 * r, _mm512_add_ps(lane_sum_wide(acc[r]), mins[r]));
}
#endif

// q4_1 / q5_1: levels times q8_1 values; the block minimums times q8_1's sums, one FMA chain.
template <int R>
void tile_with_min_rows(int64_t k, const uint8_t* w, size_t wstride, const uint8_t* g, float* out) {
    __m256 acc[R][8], mins[R];
    for (int r = 0; r < R; ++r) {
        mins[r] = _mm256_setzero_ps();
        for (int l = 0; l < 8; ++l) acc[r][l] = _mm256_setzero_ps();
    }
    for (int64_t ib = 0; ib < k / 32; ++ib) {
        const uint8_t* gb = g + ib * kQ8_1Group;
        __m256 s[R];
        for (int r = 0; r < R; ++r) {
            const uint8_t* wb = w + r * wstride + ib * kMinRow;
            s[r] = _mm256_mul_ps(_mm256_set1_ps(f32(wb + 32)), _mm256_loadu_ps((const float*)(gb + 256)));
            mins[r] = _mm256_fmadd_ps(_mm256_set1_ps(f32(wb + 36)), _mm256_loadu_ps((const float*)(gb + 288)), mins[r]);
        }
#pragma GCC unroll 8
        for (int l = 0; l < 8; ++l) {
            const __m256i y = _mm256_loadu_si256((const __m256i*)(gb + 32 * l));
            for (int r = 0; r < R; ++r) {
                const __m256i d = udot(bcast32(w + r * wstride + ib * kMinRow + 4 * l), y);
                acc[r][l] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), s[r], acc[r][l]);
            }
        }
    }
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + 8 * r, _mm256_add_ps(lane_sum(acc[r]), mins[r]));
}

// K-quants: dot_kquant's integers and float operations, NC columns, on R packed rows (pair
// order: 16-bit sums of two maddubs reach 4 * 63 * 128 < 2^15 for the largest levels, q6_K's);
// out[8 * r + j].
template <class Unp, int NC, int R>
void kquant_columns(int64_t k, const uint8_t* w, size_t wstride, const uint8_t* cols, size_t stride, float* out) {
    // pair p's scales: 32-bit lane p of each 128-bit half (even groups low, odd high) broadcast
    __m256i pick[4];
    for (int p = 0; p < 4; ++p) pick[p] = _mm256_set1_epi32(0x03020100 + 0x04040404 * p);
    __m256 acc[R][NC];
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < NC; ++j) acc[r][j] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < k / kQK_K; ++ib) {
        const uint8_t* wb[R];
        __m256i lanes[R];
        for (int r = 0; r < R; ++r) {
            wb[r] = w + r * wstride + ib * kKRow;
            lanes[r] = _mm256_loadu_si256((const __m256i*)(wb[r] + 256));
        }
        const BlockQ8_K* y[NC];
        __m256i isum[R][NC];
        for (int j = 0; j < NC; ++j) {
            y[j] = (const BlockQ8_K*)(cols + j * stride) + ib;
            for (int r = 0; r < R; ++r) isum[r][j] = _mm256_setzero_si256();
        }
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
            __m256i sc[R], ux[R], uy[R];
            for (int r = 0; r < R; ++r) {
                sc[r] = _mm256_shuffle_epi8(lanes[r], pick[p]);
                ux[r] = _mm256_loadu_si256((const __m256i*)(wb[r] + 64 * p));
                uy[r] = _mm256_loadu_si256((const __m256i*)(wb[r] + 64 * p + 32));
            }
#pragma GCC unroll 4
            for (int j = 0; j < NC; ++j) {
                const __m256i qx = _mm256_loadu_si256((const __m256i*)(y[j]->qs + 64 * p));
                const __m256i qy = _mm256_loadu_si256((const __m256i*)(y[j]->qs + 64 * p + 32));
                for (int r = 0; r < R; ++r) {
                    const __m256i d16 = _mm256_add_epi16(_mm256_maddubs_epi16(ux[r], qx), _mm256_maddubs_epi16(uy[r], qy));
                    isum[r][j] = madd_acc(isum[r][j], d16, sc[r]);
                }
            }
        }
        for (int r = 0; r < R; ++r) {
            const float d = f32(wb[r] + 352), dmin = f32(wb[r] + 356);
#pragma GCC unroll 4
            for (int j = 0; j < NC; ++j) {
                const __m256i bsums = _mm256_loadu_si256((const __m256i*)y[j]->bsums);
                if constexpr (Unp::kOffShift >= 0) {
                    const __m256i scales = _mm256_loadu_si256((const __m256i*)(wb[r] + 288));
                    isum[r][j] = _mm256_sub_epi32(isum[r][j], _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales), Unp::kOffShift));
                }
                acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][j]), _mm256_set1_ps(d * y[j]->d), acc[r][j]);
                if constexpr (Unp::kMins) {
                    const __m256i mins = _mm256_loadu_si256((const __m256i*)(wb[r] + 320));
                    acc[r][j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mins)),
                                                 _mm256_set1_ps(dmin * y[j]->d), acc[r][j]);
                }
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < NC; ++j) out[8 * r + j] = hsum(acc[r][j]);
}

template <class Unp, int R>
void kquant_rows(int64_t k, const uint8_t* w, size_t wstride, const uint8_t* g, float* out) {
    const size_t stride = size_t(k / kQK_K) * sizeof(BlockQ8_K);
    kquant_columns<Unp, 4, R>(k, w, wstride, g, stride, out);
    kquant_columns<Unp, 4, R>(k, w, wstride, g + 4 * stride, stride, out + 4);
}

// QgTileFn / QgTile2Fn adapters of a tile template F<R>.
template <template <int> class F>
void tile1(int64_t k, const void* w, const void* g, float* out) {
    F<1>::run(k, (const uint8_t*)w, 0, (const uint8_t*)g, out);
}
template <template <int> class F>
void tile2(int64_t k, const void* w, size_t wstride, const void* g, float* out) {
    F<2>::run(k, (const uint8_t*)w, wstride, (const uint8_t*)g, out);
}
template <int R> struct Signed1 { static void run(int64_t k, const uint8_t* w, size_t s, const uint8_t* g, float* o) { tile_signed_rows<1, R>(k, w, s, g, o); } };
template <int R> struct Signed2 { static void run(int64_t k, const uint8_t* w, size_t s, const uint8_t* g, float* o) { tile_signed_rows<2, R>(k, w, s, g, o); } };
template <int R> struct WithMin { static void run(int64_t k, const uint8_t* w, size_t s, const uint8_t* g, float* o) { tile_with_min_rows<R>(k, w, s, g, o); } };
template <class Unp>
struct KQuant {
    template <int R> struct Rows { static void run(int64_t k, const uint8_t* w, size_t s, const uint8_t* g, float* o) { kquant_rows<Unp, R>(k, w, s, g, o); } };
};

}  // namespace
}  // namespace pyggml::cpu::mm

#include "cpu/simd/idot256_end.h"

// Outside the target region: filling the table must run on any CPU.
namespace pyggml::cpu::mm {
namespace {
// Two-row tiles where the set has 32 vector registers (the VNNI build): the 16 accumulators of
// two rows spill with AVX2's 16.
template <template <int> class F>
void set_tiles(Kernels& k, Type t) {
    k.qg_tile[(int)t] = tile1<F>;
    k.qg_tile2[(int)t] = kIdotVnni ? tile2<F> : nullptr;
}
void set_signed(Kernels& k, Type t, QgPackRowFn pack, int passes = 1) {
    if (t == Type::NVFP4 || passes == 2) set_tiles<Signed2>(k, t);
    else set_tiles<Signed1>(k, t);
#if defined(PYGGML_IDOT_VNNI)
    k.qg_tile_wide[(int)t] = t == Type::NVFP4 || passes == 2 ? tile_signed_wide<2> : tile_signed_wide<1>;
#endif
    k.qg_pack_row[(int)t] = pack;
    k.qg_row_block_bytes[(int)t] = kSignedRow;
}
template <class Unp>
void set_kquant(Kernels& k, Type t) {
    set_tiles<KQuant<Unp>::template Rows>(k, t);
    k.qg_pack_row[(int)t] = pack_row_kquant<Unp>;
    k.qg_row_block_bytes[(int)t] = kKRow;
}

void fill_quant_gemm(Kernels& k) {
    k.qg_pack_act[(int)Type::Q8_0] = pack_act_legacy<BlockQ8_0>;
    k.qg_pack_act[(int)Type::Q8_1] = pack_act_legacy<BlockQ8_1>;
    k.qg_pack_act[(int)Type::Q8_K] = pack_act_q8_K;
    k.qg_act_block_bytes[(int)Type::Q8_0] = kQ8_0Group;
    k.qg_act_block_bytes[(int)Type::Q8_1] = kQ8_1Group;
    k.qg_act_block_bytes[(int)Type::Q8_K] = kQ8_KGroup;
    set_signed(k, Type::Q8_0, pack_row_signed<DecQ8_0>);
    set_signed(k, Type::Q4_0, pack_row_signed<DecQ4_0>);
    set_signed(k, Type::Q5_0, pack_row_signed<DecQ5_0>);
    set_signed(k, Type::IQ4_NL, pack_row_signed<DecIQ4NL>, passes_of<DecIQ4NL>(0));
    set_signed(k, Type::MXFP4, pack_row_signed<DecMXFP4>, passes_of<DecMXFP4>(0));
    set_signed(k, Type::NVFP4, pack_row_nvfp4);
    for (Type t : {Type::Q4_1, Type::Q5_1}) {
        set_tiles<WithMin>(k, t);
        k.qg_row_block_bytes[(int)t] = kMinRow;
#if defined(PYGGML_IDOT_VNNI)
        k.qg_tile_wide[(int)t] = tile_with_min_wide;
#endif
    }
    k.qg_pack_row[(int)Type::Q4_1] = pack_row_with_min<DecQ4_1>;
    k.qg_pack_row[(int)Type::Q5_1] = pack_row_with_min<DecQ5_1>;
    set_kquant<UnpQ2_K>(k, Type::Q2_K);
    set_kquant<UnpQ3_K>(k, Type::Q3_K);
    set_kquant<UnpQ4_K>(k, Type::Q4_K);
    set_kquant<UnpQ5_K>(k, Type::Q5_K);
    set_kquant<UnpQ6_K>(k, Type::Q6_K);
}
}  // namespace
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
namespace {
void fill_quant_gemm(Kernels&) {}
}  // namespace
}  // namespace pyggml::cpu::mm
#endif
