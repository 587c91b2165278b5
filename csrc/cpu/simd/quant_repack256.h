// 256-bit tile kernels of the repacked MUL_MAT path (bit-identical to quant_repack_scalar.cpp),
// built per instruction set by quant_repack_avx2.cpp and quant_repack_avx512.cpp (integer dots:
// idot256.h). Per record (one block of 8 rows): the weight slots are loaded (q4: split into
// nibbles) once and serve up to 4 columns; per column, 8 byte-dots against 4 broadcast
// activation bytes leave row r's integer dot in 32-bit lane r, then one convert and one fma
// (the 8 rows' scales as one vector) update all 8 outputs.
// Defines fill_repack(Kernels&) (the 32-value block tiles), outside the target region.
#pragma once
#include <cstring>

#include "cpu/quant_repack_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include "cpu/simd/idot256.h"

namespace pyggml::cpu::rp {
#include "cpu/simd/quant_repack_common256.h"
namespace {

// q4 levels (0..15) times activations: 16-bit pair sums stay below 2 * 15 * 127 in magnitude,
// so the 8 slots add up in 16 bits (< 32768) before one widening.
template <class Rec, int NC>
void tile_q4(int64_t nb, const void* group, const void* const* cols, float* out) {
    const Rec* g = (const Rec*)group;
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
        const Rec& w = g[ib];
        _mm_prefetch((const char*)(g + ib) + 512, _MM_HINT_T0);
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)w.d));
        __m256 m8;
        if constexpr (sizeof(Rec) == sizeof(Q4_1x8)) m8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)w.m));
        __m256i u[8];
        nibbles(w.qs, u);
#pragma GCC unroll 4
        for (int c = 0; c < NC; ++c) {
            const Act& y = ((const Act*)cols[c])[ib];
            const __m256i bias = _mm256_set1_epi32(sizeof(Rec) == sizeof(Q4_0x8) ? -y.bias : 0);
            const __m256i isum = slots_acc<8>(bias, u, y.qs, 0, 8);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d8, _mm256_set1_ps(y.d)), acc[c]);
            if constexpr (sizeof(Rec) == sizeof(Q4_1x8)) acc[c] = _mm256_fmadd_ps(m8, _mm256_set1_ps(y.s), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + kRows * c, acc[c]);
}

// How far ahead of the record in use tile_q8_0 prefetches (about 11 records). One column of
// q8_0 weights has little arithmetic per byte, so its stream needs more lines in flight than
// 1 KiB ahead kept: a ~110M q8_0 model's decode (K 768 products) summed 4-5% less kernel time
// a token at 2-6 KiB ahead, 1 and 2 threads (per-node profile, alternating, loaded machine).
constexpr int kQ8_0PrefetchBytes = 3072;

// q8 weights: |w| times y with w's sign (pair sums below 2 * 128 * 127), widened per slot; or
// (VNNI) w + 128 times y in 32 bits.
template <int NC>
void tile_q8_0(int64_t nb, const void* group, const void* const* cols, float* out) {
    const Q8_0x8* g = (const Q8_0x8*)group;
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
        const Q8_0x8& w = g[ib];
        for (int line = 0; line < 4; ++line)
            _mm_prefetch((const char*)(g + ib) + kQ8_0PrefetchBytes + 64 * line, _MM_HINT_T0);
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)w.d));
        // VNNI: the weights + 128 as unsigned levels (y.bias = 128 * sum(y) takes the offset
        // out, as for q4_0); maddubs: |w| times y with w's sign (its pair sums must fit 16 bits)
        __m256i a[8];
        for (int k = 0; k < 8; ++k) {
            const __m256i q = _mm256_loadu_si256((const __m256i*)(w.qs + 32 * k));
            a[k] = kIdotVnni ? _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)) : _mm256_sign_epi8(q, q);
        }
#pragma GCC unroll 4
        for (int c = 0; c < NC; ++c) {
            const Act& y = ((const Act*)cols[c])[ib];
            __m256i isum = _mm256_set1_epi32(kIdotVnni ? -y.bias : 0);
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) {
                if constexpr (kIdotVnni) {
                    isum = udot_acc(isum, a[k], bcast4(y.qs + 4 * k));
                    continue;
                }
                const __m256i q = _mm256_loadu_si256((const __m256i*)(w.qs + 32 * k));
                isum = udot_acc(isum, a[k], _mm256_sign_epi8(bcast4(y.qs + 4 * k), q));
            }
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d8, _mm256_set1_ps(y.d)), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + kRows * c, acc[c]);
}

// q5_0: levels 0..31 (the fifth bit from qh: bit s of each byte for slot s, moved to bit 4 by
// one 16-bit shift); pair sums reach 2 * 31 * 127, so 4 slots add up in 16 bits, then widen.
template <int NC>
void tile_q5_0(int64_t nb, const void* group, const void* const* cols, float* out) {
    const Q5_0x8* g = (const Q5_0x8*)group;
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
        const Q5_0x8& w = g[ib];
        _mm_prefetch((const char*)(g + ib) + 512, _MM_HINT_T0);
        _mm_prefetch((const char*)(g + ib) + 576, _MM_HINT_T0);
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)w.d));
        __m256i u[8];
        nibbles(w.qs, u);
        add_bit4(w.qh, u);
#pragma GCC unroll 4
        for (int c = 0; c < NC; ++c) {
            const Act& y = ((const Act*)cols[c])[ib];
            const __m256i isum = slots_acc<4>(_mm256_set1_epi32(-y.bias), u, y.qs, 0, 8);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d8, _mm256_set1_ps(y.d)), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + kRows * c, acc[c]);
}

template <class Rec>
void q4_dispatch(int64_t nb, const void* g, const void* const* cols, int nc, float* out) {
    for_columns(nc, [&](auto n) { tile_q4<Rec, decltype(n)::value>(nb, g, cols, out); });
}
void q8_0_dispatch(int64_t nb, const void* g, const void* const* cols, int nc, float* out) {
    for_columns(nc, [&](auto n) { tile_q8_0<decltype(n)::value>(nb, g, cols, out); });
}
void q5_0_dispatch(int64_t nb, const void* g, const void* const* cols, int nc, float* out) {
    for_columns(nc, [&](auto n) { tile_q5_0<decltype(n)::value>(nb, g, cols, out); });
}

}  // namespace
}  // namespace pyggml::cpu::rp

#include "cpu/simd/idot256_end.h"

// Outside the target region: filling the table must run on any CPU.
namespace pyggml::cpu::rp {
namespace {
void fill_repack(Kernels& s) {
    s.tile[(int)Type::Q4_0] = q4_dispatch<Q4_0x8>;
    s.tile[(int)Type::Q4_1] = q4_dispatch<Q4_1x8>;
    s.tile[(int)Type::Q8_0] = q8_0_dispatch;
    s.tile[(int)Type::Q5_0] = q5_0_dispatch;
}
}  // namespace
}  // namespace pyggml::cpu::rp
#else
namespace pyggml::cpu::rp {
namespace {
void fill_repack(Kernels& s) { s = kernels_scalar(); }
}  // namespace
}  // namespace pyggml::cpu::rp
#endif
