// AVX2 tile kernels of the repacked MUL_MAT path (bit-identical to quant_repack_scalar.cpp).
// Per record (one block of 8 rows): the weight slots are loaded (q4: split into nibbles) once
// and serve up to 4 columns; per column, 8 byte-dots against 4 broadcast activation bytes
// leave row r's integer dot in 32-bit lane r, then one convert and one fma (the 8 rows'
// scales as one vector) update all 8 outputs.
#include <cstring>

#include "cpu/quant_repack_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "cpu/simd/quant_repack_avx2.h"

namespace pyggml::cpu::rp {
namespace {
using avx2::bcast4;

// q4 levels (0..15) times activations: 16-bit pair sums stay below 2 * 15 * 127 in magnitude,
// so the 8 slots add up in 16 bits (< 32768) before one widening.
template <class Rec, int NC>
void tile_q4(int64_t nb, const void* group, const void* const* cols, float* out) {
    const Rec* g = (const Rec*)group;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
        const Rec& w = g[ib];
        _mm_prefetch((const char*)(g + ib) + 512, _MM_HINT_T0);
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)w.d));
        __m256 m8;
        if constexpr (sizeof(Rec) == sizeof(Q4_1x8)) m8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)w.m));
        __m256i u[8];
        avx2::nibbles(w.qs, u);
#pragma GCC unroll 4
        for (int c = 0; c < NC; ++c) {
            const Act& y = ((const Act*)cols[c])[ib];
            __m256i p = _mm256_maddubs_epi16(u[0], bcast4(y.qs));
#pragma GCC unroll 7
            for (int k = 1; k < 8; ++k) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u[k], bcast4(y.qs + 4 * k)));
            __m256i isum = _mm256_madd_epi16(p, ones);
            if constexpr (sizeof(Rec) == sizeof(Q4_0x8)) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(y.bias));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d8, _mm256_set1_ps(y.d)), acc[c]);
            if constexpr (sizeof(Rec) == sizeof(Q4_1x8)) acc[c] = _mm256_fmadd_ps(m8, _mm256_set1_ps(y.s), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + kRows * c, acc[c]);
}

// q8 weights: |w| times y with w's sign (pair sums below 2 * 128 * 127), widened per slot.
template <int NC>
void tile_q8_0(int64_t nb, const void* group, const void* const* cols, float* out) {
    const Q8_0x8* g = (const Q8_0x8*)group;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
        const Q8_0x8& w = g[ib];
        _mm_prefetch((const char*)(g + ib) + 1024, _MM_HINT_T0);
        _mm_prefetch((const char*)(g + ib) + 1024 + 64, _MM_HINT_T0);
        _mm_prefetch((const char*)(g + ib) + 1024 + 128, _MM_HINT_T0);
        _mm_prefetch((const char*)(g + ib) + 1024 + 192, _MM_HINT_T0);
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)w.d));
        __m256i a[8];
        for (int k = 0; k < 8; ++k) {
            const __m256i q = _mm256_loadu_si256((const __m256i*)(w.qs + 32 * k));
            a[k] = _mm256_sign_epi8(q, q);
        }
#pragma GCC unroll 4
        for (int c = 0; c < NC; ++c) {
            const Act& y = ((const Act*)cols[c])[ib];
            __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) {
                const __m256i q = _mm256_loadu_si256((const __m256i*)(w.qs + 32 * k));
                const __m256i p = _mm256_maddubs_epi16(a[k], _mm256_sign_epi8(bcast4(y.qs + 4 * k), q));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
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
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
        const Q5_0x8& w = g[ib];
        _mm_prefetch((const char*)(g + ib) + 512, _MM_HINT_T0);
        _mm_prefetch((const char*)(g + ib) + 576, _MM_HINT_T0);
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)w.d));
        __m256i u[8];
        avx2::nibbles(w.qs, u);
        avx2::add_bit4(w.qh, u);
#pragma GCC unroll 4
        for (int c = 0; c < NC; ++c) {
            const Act& y = ((const Act*)cols[c])[ib];
            __m256i pa = _mm256_maddubs_epi16(u[0], bcast4(y.qs));
            __m256i pb = _mm256_maddubs_epi16(u[4], bcast4(y.qs + 16));
#pragma GCC unroll 3
            for (int k = 1; k < 4; ++k) {
                pa = _mm256_add_epi16(pa, _mm256_maddubs_epi16(u[k], bcast4(y.qs + 4 * k)));
                pb = _mm256_add_epi16(pb, _mm256_maddubs_epi16(u[k + 4], bcast4(y.qs + 16 + 4 * k)));
            }
            __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(pa, ones), _mm256_madd_epi16(pb, ones));
            isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(y.bias));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d8, _mm256_set1_ps(y.d)), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + kRows * c, acc[c]);
}

template <class Rec>
void q4_dispatch(int64_t nb, const void* g, const void* const* cols, int nc, float* out) {
    avx2::for_columns(nc, [&](auto n) { tile_q4<Rec, decltype(n)::value>(nb, g, cols, out); });
}
void q8_0_dispatch(int64_t nb, const void* g, const void* const* cols, int nc, float* out) {
    avx2::for_columns(nc, [&](auto n) { tile_q8_0<decltype(n)::value>(nb, g, cols, out); });
}
void q5_0_dispatch(int64_t nb, const void* g, const void* const* cols, int nc, float* out) {
    avx2::for_columns(nc, [&](auto n) { tile_q5_0<decltype(n)::value>(nb, g, cols, out); });
}

}  // namespace
}  // namespace pyggml::cpu::rp

#pragma GCC pop_options

// Outside the target region: filling the table must run on any CPU.
namespace pyggml::cpu::rp {
const Kernels& kernels_avx2() {
    static const Kernels k = [] {
        Kernels s{};
        s.tile[(int)Type::Q4_0] = q4_dispatch<Q4_0x8>;
        s.tile[(int)Type::Q4_1] = q4_dispatch<Q4_1x8>;
        s.tile[(int)Type::Q8_0] = q8_0_dispatch;
        s.tile[(int)Type::Q5_0] = q5_0_dispatch;
        add_k_kernels_avx2(s);
        return s;
    }();
    return k;
}
}  // namespace pyggml::cpu::rp
#else
namespace pyggml::cpu::rp {
const Kernels& kernels_avx2() { return kernels_scalar(); }
}  // namespace pyggml::cpu::rp
#endif
