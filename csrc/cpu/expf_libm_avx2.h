// expf for eight floats at once, bit for bit glibc's expf (2.27 and later, its FMA build):
// x·32/ln2 split into k + r in double (|r| <= 1/2), 2^(k/32) from a 32-entry table of
// 2^(i/32) with the exponent added in as an integer, a cubic in r, one rounding to float.
// Every multiply-add below is the single fused operation that build executes, in its order.
// Lanes where |x| >= 88 (under- and overflow ranges, infinities, NaN) take the scalar expf,
// except -inf, which is 0. The flash-attention kernel uses it where ggml calls expf per
// column, so that its softmax weights keep ggml's bits.
#pragma once
#include <cmath>
#include <cstdint>
#include <immintrin.h>

namespace pyggml::cpu {

// bits(2^(i/32)) - (i << 47): the table's entries with the index's share of the exponent taken out
alignas(64) inline constexpr uint64_t kExp2Table32[32] = {
    0x3ff0000000000000ULL, 0x3fefd9b0d3158574ULL, 0x3fefb5586cf9890fULL, 0x3fef9301d0125b51ULL,
    0x3fef72b83c7d517bULL, 0x3fef54873168b9aaULL, 0x3fef387a6e756238ULL, 0x3fef1e9df51fdee1ULL,
    0x3fef06fe0a31b715ULL, 0x3feef1a7373aa9cbULL, 0x3feedea64c123422ULL, 0x3feece086061892dULL,
    0x3feebfdad5362a27ULL, 0x3feeb42b569d4f82ULL, 0x3feeab07dd485429ULL, 0x3feea47eb03a5585ULL,
    0x3feea09e667f3bcdULL, 0x3fee9f75e8ec5f74ULL, 0x3feea11473eb0187ULL, 0x3feea589994cce13ULL,
    0x3feeace5422aa0dbULL, 0x3feeb737b0cdc5e5ULL, 0x3feec49182a3f090ULL, 0x3feed503b23e255dULL,
    0x3feee89f995ad3adULL, 0x3feeff76f2fb5e47ULL, 0x3fef199bdd85529cULL, 0x3fef3720dcef9069ULL,
    0x3fef5818dcfba487ULL, 0x3fef7c97337b9b5fULL, 0x3fefa4afa2a490daULL, 0x3fefd0765b6e4540ULL,
};

__attribute__((target("avx2,fma"))) inline __m128 expf_libm_half(__m128 x) {
    const __m256d inv_ln2_n = _mm256_set1_pd(0x1.71547652b82fep+5);  // 32 / ln 2
    const __m256d shift = _mm256_set1_pd(0x1.8p+52);                 // rounds to an integer
    const __m256d c0 = _mm256_set1_pd(0x1.c6af84b912394p-20);
    const __m256d c1 = _mm256_set1_pd(0x1.ebfce50fac4f3p-13);
    const __m256d c2 = _mm256_set1_pd(0x1.62e42ff0c52d6p-6);
    const __m256d xd = _mm256_cvtps_pd(x);
    const __m256d kds = _mm256_fmadd_pd(xd, inv_ln2_n, shift);
    const __m256i ki = _mm256_castpd_si256(kds);
    const __m256d kd = _mm256_sub_pd(kds, shift);
    const __m256d r = _mm256_fmsub_pd(inv_ln2_n, xd, kd);
    const __m256i idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    const __m256i t = _mm256_add_epi64(_mm256_i64gather_epi64((const long long*)kExp2Table32, idx, 8),
                                       _mm256_slli_epi64(ki, 47));
    const __m256d z = _mm256_fmadd_pd(r, c0, c1);
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, c2, _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    y = _mm256_mul_pd(y, _mm256_castsi256_pd(t));
    return _mm256_cvtpd_ps(y);
}

__attribute__((target("avx2,fma"))) inline __m256 expf_libm8(__m256 x) {
    __m256 y = _mm256_set_m128(expf_libm_half(_mm256_extractf128_ps(x, 1)), expf_libm_half(_mm256_castps256_ps128(x)));
    const __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 20), _mm256_set1_epi32(0x7ff));
    const __m256i big = _mm256_cmpgt_epi32(top, _mm256_set1_epi32(0x42a));  // |x| >= 88, inf, NaN
    const __m256 neg_inf = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_castps_si256(x), _mm256_set1_epi32((int)0xff800000u)));
    y = _mm256_andnot_ps(neg_inf, y);
    const int scalar = _mm256_movemask_ps(_mm256_andnot_ps(neg_inf, _mm256_castsi256_ps(big)));
    if (scalar) {
        alignas(32) float xs[8], ys[8];
        _mm256_store_ps(xs, x);
        _mm256_store_ps(ys, y);
        for (int l = 0; l < 8; ++l)
            if (scalar >> l & 1) ys[l] = expf(xs[l]);
        y = _mm256_load_ps(ys);
    }
    return y;
}

}  // namespace pyggml::cpu
