// 256-bit tile kernels of the repacked MUL_MAT path for the K-quants (q4_K, q5_K, q6_K;
// bit-identical to the scalar tiles of quant_repack_scalar.cpp), built per instruction set by
// quant_repack_k_avx2.cpp and quant_repack_k_avx512.cpp (integer dots: idot256.h). Per record
// (one 256-value super-block of 8 rows) and sub-block of 32 values, the weight slots are
// decoded once and serve up to kKCols columns (8 on VNNI, 4 on AVX2). The sub-block scales
// enter the integer dot exactly (scaled_slots_acc: row r's slot sums times its scale, (sc, sc)
// in 32-bit lane r), so the 8 sub-blocks add up in 32-bit lanes, and one convert + one or two
// fma per super-block and column update 8 outputs. Defines fill_repack_k(Kernels&), outside
// the target region.
#pragma once
#include <cstring>

#include "cpu/quant_repack_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include "cpu/simd/idot256.h"

namespace pyggml::cpu::rp {
#include "cpu/simd/quant_repack_common256.h"
namespace {
inline __m256i bcast8(const void* p) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return _mm256_set1_epi64x(v);
}

// The weights stream from memory: during sub-block j of record ib, fetch the j-th eighth of
// record ib + kAhead, every line of it (a record spans 19 to 27 lines; fetching one line per
// sub-block left most of them to the hardware prefetcher: repacked q6_K then streamed one
// thread at 0.6-0.7 of the plain kernel's rate, now at 1.0-1.3 of it).
constexpr int kAhead = 2;
template <class Rec>
inline void prefetch_eighth(const Rec* g, int64_t ib, int j) {
    constexpr int kLines = int((sizeof(Rec) + 511) / 512);  // 8 * kLines lines cover a record
    const char* p = (const char*)(g + ib + kAhead) + 64 * kLines * j;
    for (int l = 0; l < kLines; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
}

// 8 unsigned scale bytes (one per row) as (sc, sc) 16-bit pairs in 32-bit lane r.
inline __m256i scales_u8(const uint8_t* p) {
    const __m256i pick = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,  //
                                          4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    return _mm256_shuffle_epi8(bcast8(p), pick);
}
// The same for signed bytes: placed in the high byte, then shifted down with its sign.
inline __m256i scales_i8(const int8_t* p) {
    const __m256i pick = _mm256_setr_epi8(-1, 0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3,  //
                                          -1, 4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7);
    return _mm256_srai_epi16(_mm256_shuffle_epi8(bcast8(p), pick), 8);
}

// Bits 2t, 2t + 1 of each byte of qh (slots 0..3) and qh + 32 (slots 4..7) to bits 4, 5.
inline void add_bits45(const uint8_t* qh, __m256i* u) {
    const __m256i two = _mm256_set1_epi8(0x30);
    for (int half = 0; half < 2; ++half) {
        const __m256i h = _mm256_loadu_si256((const __m256i*)(qh + 32 * half));
        __m256i* v = u + 4 * half;
        v[0] = _mm256_or_si256(v[0], _mm256_and_si256(_mm256_slli_epi16(h, 4), two));
        v[1] = _mm256_or_si256(v[1], _mm256_and_si256(_mm256_slli_epi16(h, 2), two));
        v[2] = _mm256_or_si256(v[2], _mm256_and_si256(h, two));
        v[3] = _mm256_or_si256(v[3], _mm256_and_si256(_mm256_srli_epi16(h, 2), two));
    }
}

// q4_K and q5_K. Pair sums reach 2 * 15 * 127 (q4: 8 slots fit 16 bits) or 2 * 31 * 127
// (q5: 4 slots). The mins: lane r of m[p] holds (m_{r,2p}, m_{r,2p+1}), madd'ed with the
// column's (bs32_{2p}, bs32_{2p+1}).
template <class Rec, int NC>
void tile_k4(int64_t nb, const void* group, const void* const* cols, float* out) {
    constexpr bool five = sizeof(Rec) == sizeof(Q5_Kx8);
    const Rec* g = (const Rec*)group;
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
        const Rec& w = g[ib];
        const ActK* y[NC];
        for (int c = 0; c < NC; ++c) y[c] = (const ActK*)cols[c] + ib;
        __m256i isum[NC];
        for (int c = 0; c < NC; ++c) isum[c] = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
            prefetch_eighth(g, ib, j);
            __m256i u[8];
            nibbles(w.qs + 128 * j, u);
            if constexpr (five) add_bit4(w.qh + 32 * j, u);
            const __m256i sc = scales_u8(w.sc + 8 * j);
#pragma GCC unroll 8
            for (int c = 0; c < NC; ++c) {
                const int8_t* yq = y[c]->qs + 32 * j;
                isum[c] = scaled_slots_acc<five ? 4 : 8>(isum[c], u, yq, 0, 8, sc);
            }
        }
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)w.d));
        const __m256 dm8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)w.dmin));
        __m256i m[4];
        for (int p = 0; p < 4; ++p) m[p] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(w.m + 16 * p)));
        for (int c = 0; c < NC; ++c) {
            __m256i summ = _mm256_setzero_si256();
            for (int p = 0; p < 4; ++p) {
                int32_t pair;
                std::memcpy(&pair, y[c]->bs32 + 2 * p, 4);
                summ = _mm256_add_epi32(summ, _mm256_madd_epi16(m[p], _mm256_set1_epi32(pair)));
            }
            const __m256 dy = _mm256_set1_ps(y[c]->d);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(d8, dy), acc[c]);
            acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(summ), _mm256_mul_ps(dm8, dy), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + kRows * c, acc[c]);
}

// q6_K: levels 0..63 (pair sums up to 2 * 63 * 127: 2 slots fit 16 bits), one signed scale
// per 16 values (4 slots); the level offset 32 comes out as 32 * sum_g sc_g * bs16_g.
template <int NC>
void tile_q6_k(int64_t nb, const void* group, const void* const* cols, float* out) {
    const Q6_Kx8* g = (const Q6_Kx8*)group;
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
        const Q6_Kx8& w = g[ib];
        const ActK* y[NC];
        for (int c = 0; c < NC; ++c) y[c] = (const ActK*)cols[c] + ib;
        __m256i isum[NC];
        for (int c = 0; c < NC; ++c) isum[c] = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
            prefetch_eighth(g, ib, j);
            __m256i u[8];
            nibbles(w.qs + 128 * j, u);
            add_bits45(w.qh + 64 * j, u);
            const __m256i sa = scales_i8(w.sc + 8 * (2 * j)), sb = scales_i8(w.sc + 8 * (2 * j + 1));
#pragma GCC unroll 8
            for (int c = 0; c < NC; ++c) {
                const int8_t* yq = y[c]->qs + 32 * j;
                isum[c] = scaled_slots_acc<2>(scaled_slots_acc<2>(isum[c], u, yq, 0, 4, sa), u, yq, 4, 8, sb);
            }
        }
        // lane r of o[p]: (sc_{r,2p}, sc_{r,2p+1}) as 16-bit
        __m256i o[8];
        for (int p = 0; p < 8; ++p) {
            const __m128i x = _mm_loadu_si128((const __m128i*)(w.sc + 16 * p));
            o[p] = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x, _mm_srli_si128(x, 8)));
        }
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)w.d));
        for (int c = 0; c < NC; ++c) {
            __m256i offs = _mm256_setzero_si256();
            for (int p = 0; p < 8; ++p) {
                int32_t pair;
                std::memcpy(&pair, y[c]->bs16 + 2 * p, 4);
                offs = _mm256_add_epi32(offs, _mm256_madd_epi16(o[p], _mm256_set1_epi32(pair)));
            }
            const __m256i is = _mm256_sub_epi32(isum[c], _mm256_slli_epi32(offs, 5));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(d8, _mm256_set1_ps(y[c]->d)), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + kRows * c, acc[c]);
}

// Columns per call: 8 where the set has 32 vector registers (the VNNI build), so each
// sub-block's decoded slots serve 8 columns; AVX2's 16 registers hold 4 columns' state.
constexpr int kKCols = kIdotVnni ? 8 : 4;
template <class Rec>
void k4_dispatch(int64_t nb, const void* g, const void* const* cols, int nc, float* out) {
    for_columns<kKCols>(nc, [&](auto n) { tile_k4<Rec, decltype(n)::value>(nb, g, cols, out); });
}
void q6_k_dispatch(int64_t nb, const void* g, const void* const* cols, int nc, float* out) {
    for_columns<kKCols>(nc, [&](auto n) { tile_q6_k<decltype(n)::value>(nb, g, cols, out); });
}

}  // namespace
}  // namespace pyggml::cpu::rp

#include "cpu/simd/idot256_end.h"

// Outside the target region: filling the table must run on any CPU.
namespace pyggml::cpu::rp {
namespace {
void fill_repack_k(Kernels& k) {
    k.tile[(int)Type::Q4_K] = k4_dispatch<Q4_Kx8>;
    k.tile[(int)Type::Q5_K] = k4_dispatch<Q5_Kx8>;
    k.tile[(int)Type::Q6_K] = q6_k_dispatch;
    for (Type t : {Type::Q4_K, Type::Q5_K, Type::Q6_K}) k.tile_cols[(int)t] = kKCols;
}
}  // namespace
}  // namespace pyggml::cpu::rp
#else
namespace pyggml::cpu::rp {
namespace {
void fill_repack_k(Kernels&) {}
}  // namespace
}  // namespace pyggml::cpu::rp
#endif
