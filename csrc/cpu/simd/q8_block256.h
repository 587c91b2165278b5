// The first half of every 8-bit activation quantizer (q8_0, q8_1): one 32-value block loaded
// into four vectors, and its absolute maximum. Include inside a target region with AVX2.
#pragma once

namespace {

// False when the block holds NaN or inf (the caller then takes the scalar quantizer, whose
// fmax ignores NaN); else *amax is the block's largest |x|.
inline bool q8_block_load(const float* v, __m256 a[4], float* amax) {
    const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(3.402823466e38f);
    __m256 mx = _mm256_setzero_ps(), ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for (int i = 0; i < 4; ++i) {
        a[i] = _mm256_loadu_ps(v + 8 * i);
        const __m256 ab = _mm256_andnot_ps(sign, a[i]);
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(ab, big, _CMP_LE_OQ));
        mx = _mm256_max_ps(mx, ab);
    }
    if (_mm256_movemask_ps(ok) != 0xFF) return false;
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    *amax = _mm_cvtss_f32(m4);
    return true;
}

}  // namespace
