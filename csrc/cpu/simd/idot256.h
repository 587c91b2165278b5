// The 256-bit integer-dot primitives of the quantized kernels, and their target region. A
// kernel body (quant_*_body.h) is compiled twice: by simd/<family>_avx2.cpp with maddubs +
// madd, and by simd/<family>_avx512.cpp, which defines PYGGML_IDOT_VNNI first, with AVX512-VNNI's
// vpdpbusd / vpdpwssd. Every primitive returns the same exact 32-bit integers either way (no
// 16-bit saturation is reached, the callers' bounds say why), so both builds of a kernel give
// bit-identical floats.
//
// Opens the target region (#pragma GCC push_options + target); the includer closes it with
// #pragma GCC pop_options after its kernels and fills its tables outside it (that code runs on
// any CPU). Include at file scope (the primitives live in the global anonymous namespace).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#pragma GCC push_options
#if defined(PYGGML_IDOT_VNNI)
// GCC 12 flags the _mm512_undefined_* inside its own intrinsic headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#else
#pragma GCC target("avx2,fma,f16c")
#endif

namespace {

#if defined(PYGGML_IDOT_VNNI)
constexpr bool kIdotVnni = true;
#else
constexpr bool kIdotVnni = false;
#endif

// acc + (8 x i32, each the sum of 4 products of unsigned u and signed s bytes). maddubs' 16-bit
// pair sums stay below 2 * 255 * 128 only for the callers' levels (|products| of at most
// 2 * 128 * 127 for the sign trick's |a|, 2 * 63 * 128 for the largest levels).
inline __m256i udot_acc(__m256i acc, __m256i u, __m256i s) {
#if defined(PYGGML_IDOT_VNNI)
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
inline __m256i udot(__m256i u, __m256i s) {
#if defined(PYGGML_IDOT_VNNI)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}
// Sum of (u - off) * s per 4-byte group, exact for u <= 31, off <= 16 (maddubs: no 16-bit
// saturation): the same integers as udot on the signed values, without the sign trick.
inline __m256i udot_offset(__m256i u, __m256i s, int off) {
#if defined(PYGGML_IDOT_VNNI)
    return _mm256_sub_epi32(udot(u, s), udot(_mm256_set1_epi8((char)off), s));
#else
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, s), _mm256_maddubs_epi16(_mm256_set1_epi8((char)off), s));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
#endif
}
// acc + (per 4-byte group, sc times the sum of its 4 products u * s), where sc16 holds the
// group's scale twice as 16-bit (sc, sc) and |sum| * |sc| fits 32 bits.
inline __m256i scaled_udot_acc(__m256i acc, __m256i u, __m256i s, __m256i sc16) {
#if defined(PYGGML_IDOT_VNNI)
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), sc16);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc16));
#endif
}

// acc + (per 32-bit lane, a16's two 16-bit values times b16's, summed): vpdpwssd, or madd + add.
inline __m256i madd_acc(__m256i acc, __m256i a16, __m256i b16) {
#if defined(PYGGML_IDOT_VNNI)
    return _mm256_dpwssd_epi32(acc, a16, b16);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a16, b16));
#endif
}

// ---- slots: u[k] times 4 activation bytes y[4k..4k+3] broadcast to every 32-bit lane ----
inline __m256i bcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
// maddubs over slots [k0, k1), the 16-bit pair sums added up (the caller's kFit bounds them).
inline __m256i slot_pair_sums(const __m256i* u, const int8_t* y, int k0, int k1) {
    __m256i p = _mm256_maddubs_epi16(u[k0], bcast4(y + 4 * k0));
    for (int k = k0 + 1; k < k1; ++k) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u[k], bcast4(y + 4 * k)));
    return p;
}
// acc + sum over slots [k0, k1) of udot(u[k], bcast4(y + 4k)). The maddubs form adds the pair
// sums of up to kFit slots in 16 bits before widening (the caller's levels keep them below
// 2^15); vpdpbusd accumulates in 32 bits, two chains (k even, k odd) to halve the latency.
template <int kFit>
inline __m256i slots_acc(__m256i acc, const __m256i* u, const int8_t* y, int k0, int k1) {
#if defined(PYGGML_IDOT_VNNI)
    if (k1 - k0 < 4) {
        for (int k = k0; k < k1; ++k) acc = _mm256_dpbusd_epi32(acc, u[k], bcast4(y + 4 * k));
        return acc;
    }
    __m256i odd = _mm256_setzero_si256();
    for (int k = k0; k + 1 < k1; k += 2) {
        acc = _mm256_dpbusd_epi32(acc, u[k], bcast4(y + 4 * k));
        odd = _mm256_dpbusd_epi32(odd, u[k + 1], bcast4(y + 4 * k + 4));
    }
    if ((k1 - k0) % 2) acc = _mm256_dpbusd_epi32(acc, u[k1 - 1], bcast4(y + 4 * (k1 - 1)));
    return _mm256_add_epi32(acc, odd);
#else
    for (int k = k0; k < k1; k += kFit)
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(slot_pair_sums(u, y, k, std::min(k + kFit, k1)), _mm256_set1_epi16(1)));
    return acc;
#endif
}
// acc + sc * (the sum over slots [k0, k1) as slots_acc), sc16 holding (sc, sc) as 16-bit in
// each 32-bit lane: the maddubs form multiplies the pair sums in madd; vpdpbusd's 32-bit sums
// are multiplied once by the lane's scale (sign-extended from the high half).
template <int kFit>
inline __m256i scaled_slots_acc(__m256i acc, const __m256i* u, const int8_t* y, int k0, int k1, __m256i sc16) {
#if defined(PYGGML_IDOT_VNNI)
    const __m256i sum = slots_acc<kFit>(_mm256_setzero_si256(), u, y, k0, k1);
    return _mm256_add_epi32(acc, _mm256_mullo_epi32(sum, _mm256_srai_epi32(sc16, 16)));
#else
    for (int k = k0; k < k1; k += kFit)
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(slot_pair_sums(u, y, k, std::min(k + kFit, k1)), sc16));
    return acc;
#endif
}

}  // namespace
