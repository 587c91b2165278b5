// AVX2 + FMA GLU rows (the GluOps contract of cpu/glu_simd.h). x * sigmoid(a x) is
// x / (1 + e^(-a x)) with the vector exp of simd/exp_simd.h (~2 ulp) and a true division;
// where e^(-a x) overflows f32 the denominator is +inf, as in the scalar loop (so -inf gives
// NaN and large negative x give -0). The tail of a row takes the scalar loop. The clamps keep
// C's fmin/fmax rule for a NaN operand (the other operand is returned): min_ps/max_ps return
// their second operand when one is NaN.
#include "cpu/glu_simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/simd/exp_simd.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace pyggml::cpu::glu {

namespace {

// x * sigmoid(a * x)
inline __m256 x_sigmoid(__m256 x, __m256 a) {
    const __m256 arg = _mm256_mul_ps(_mm256_xor_ps(a, _mm256_set1_ps(-0.0f)), x);
    const __m256 over = _mm256_cmp_ps(arg, _mm256_set1_ps(88.7228394f), _CMP_GT_OQ);  // e^arg > FLT_MAX
    const __m256 den = _mm256_add_ps(_mm256_set1_ps(1.0f), simd::exp_ps(arg));
    return _mm256_div_ps(x, _mm256_blendv_ps(den, _mm256_set1_ps(INFINITY), over));
}

inline __m256 fmin_c(__m256 x, __m256 hi) { return _mm256_min_ps(x, hi); }  // NaN x -> hi
inline __m256 fmax_c(__m256 x, __m256 lo) { return _mm256_max_ps(x, lo); }  // NaN x -> lo

void reglu(const float* g, const float* u, float* o, int64_t n) {
    const __m256 zero = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 pos = _mm256_cmp_ps(x, zero, _CMP_GT_OQ);
        _mm256_storeu_ps(o + i, _mm256_and_ps(pos, _mm256_mul_ps(x, _mm256_loadu_ps(u + i))));
    }
    reglu_scalar(g + i, u + i, o + i, n - i);
}

void swiglu(const float* g, const float* u, float* o, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_mul_ps(x_sigmoid(_mm256_loadu_ps(g + i), one), _mm256_loadu_ps(u + i)));
    swiglu_scalar(g + i, u + i, o + i, n - i);
}

void geglu_quick(const float* g, const float* u, float* o, int64_t n) {
    const __m256 a = _mm256_set1_ps(1.702f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_mul_ps(x_sigmoid(_mm256_loadu_ps(g + i), a), _mm256_loadu_ps(u + i)));
    geglu_quick_scalar(g + i, u + i, o + i, n - i);
}

void swiglu_oai(const float* g, const float* u, float* o, int64_t n, float alpha, float limit) {
    const __m256 a = _mm256_set1_ps(alpha), hi = _mm256_set1_ps(limit), lo = _mm256_set1_ps(-limit);
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = fmin_c(_mm256_loadu_ps(g + i), hi);
        const __m256 y = fmax_c(fmin_c(_mm256_loadu_ps(u + i), hi), lo);
        _mm256_storeu_ps(o + i, _mm256_mul_ps(x_sigmoid(x, a), _mm256_add_ps(y, one)));
    }
    swiglu_oai_scalar(g + i, u + i, o + i, n - i, alpha, limit);
}

void swiglu_clamp(const float* g, const float* u, float* o, int64_t n, float limit) {
    const __m256 hi = _mm256_set1_ps(limit), lo = _mm256_set1_ps(-limit), one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = fmin_c(_mm256_loadu_ps(g + i), hi);
        const __m256 y = fmax_c(fmin_c(_mm256_loadu_ps(u + i), hi), lo);
        _mm256_storeu_ps(o + i, _mm256_mul_ps(x_sigmoid(x, one), y));
    }
    swiglu_clamp_scalar(g + i, u + i, o + i, n - i, limit);
}

}  // namespace

const GluOps& glu_avx2() {
    static const GluOps k{reglu, swiglu, geglu_quick, swiglu_oai, swiglu_clamp};
    return k;
}

}  // namespace pyggml::cpu::glu

#pragma GCC pop_options
#else
namespace pyggml::cpu::glu {
const GluOps& glu_avx2() { return glu_scalar(); }
}
#endif
