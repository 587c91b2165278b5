// AVX2 + FMA (+ F16C) GLU rows (the GluOps contract of cpu/glu_simd.h). x * sigmoid(a x) is
// x / (1 + e^(-a x)) with the vector exp of simd/exp_simd.h (~2 ulp) and a true division;
// where e^(-a x) overflows f32 the denominator is +inf, as in the scalar loop (so -inf gives
// NaN and large negative x give -0). The tail of a row takes the scalar loop. The clamps keep
// C's fmin/fmax rule for a NaN operand (the other operand is returned): min_ps/max_ps return
// their second operand when one is NaN. GEGLU reads ggml's f16 GELU table with a gather (the
// scalar loop's values, bit for bit); GEGLU_ERF has a vector erf (~2e-7 relative, below).
#include "cpu/glu_simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/simd/exp_simd.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace pyggml::cpu::glu {

namespace {

// x * sigmoid(a * x)
inline __m256 x_sigmoid(__m256 x, __m256 a) {
    const __m256 arg = _mm256_mul_ps(_mm256_xor_ps(a, _mm256_set1_ps(-0.0f)), x);
    const __m256 over = _mm256_cmp_ps(arg, _mm256_set1_ps(88.7228394f), _CMP_GT_OQ);  // e^arg > FLT_MAX
    const __m256 den = _mm256_add_ps(_mm256_set1_ps(1.0f), simd::exp_ps(arg));
    return _mm256_div_ps(x, _mm256_blendv_ps(den, _mm256_set1_ps(INFINITY), over));
}

// e^x rounded exactly as ggml's AVX2 kernels evaluate it, so SwiGLU rows equal ggml's bit for
// bit: n = round(x log2 e) by the 1.5*2^23 shift, b = x - n ln2 in two parts, 2^n times a
// degree-5 polynomial in b; |n| > 126 rescales in two steps, |n| > 192 saturates (0 or inf).
inline __m256 exp_ggml_ps(__m256 x) {
    const __m256 shift = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
    const __m256 n = _mm256_sub_ps(z, shift);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(an, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    const __m256 b2 = _mm256_mul_ps(b, b);
    const __m256 hi = _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f));
    const __m256 lo = _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f));
    const __m256 poly = _mm256_fmadd_ps(_mm256_fmadd_ps(hi, b2, lo), b2,
                                        _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    const __m256 normal = _mm256_fmadd_ps(poly, k, k);
    if (!_mm256_movemask_ps(big)) return normal;
    const __m256i neg = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                         _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(neg, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, neg));
    const __m256 huge = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 scaled = _mm256_mul_ps(_mm256_fmadd_ps(s2, poly, s2), s1);
    return _mm256_blendv_ps(_mm256_blendv_ps(normal, scaled, big), _mm256_mul_ps(s1, s1), huge);
}

// GELU of ggml's f16 table: 0 for x <= -10, x for x >= 10, else the table entry of x rounded
// to f16. The table holds 16-bit values: a lane gathers the 32-bit word holding its entry and
// keeps the half its index picks (no read past the table).
inline __m256 gelu_table_ps(__m256 x, const uint16_t* table) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256i word = _mm256_i32gather_epi32((const int*)table, _mm256_srli_epi32(h, 1), 4);
    const __m256i half = _mm256_srlv_epi32(word, _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(1)), 4));
    const __m256i v = _mm256_and_si256(half, _mm256_set1_epi32(0xffff));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
    const __m256 gelu = _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
    const __m256 low = _mm256_cmp_ps(x, _mm256_set1_ps(-10.0f), _CMP_LE_OQ);
    const __m256 high = _mm256_cmp_ps(x, _mm256_set1_ps(10.0f), _CMP_GE_OQ);
    return _mm256_blendv_ps(_mm256_andnot_ps(low, gelu), x, high);
}

// Horner's rule over c[0..N) (c[0] the constant term).
template <int N>
inline __m256 poly(__m256 x, const float (&c)[N]) {
    __m256 p = _mm256_set1_ps(c[N - 1]);
    for (int i = N - 2; i >= 0; --i) p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(c[i]));
    return p;
}

// erf(x), relative error below ~2e-7: |x| < 1: x P(x^2); 1 <= |x| <= 4: 1 - e^(-x^2) Q(1/x),
// Q fitted to erfc(x) e^(x^2) (least squares on Chebyshev points, f32 coefficients); |x| > 4
// is taken as 4 (erf(4) rounds to 1 in f32). NaN stays NaN.
inline __m256 erf_ps(__m256 x) {
    static constexpr float kSmall[] = {1.1283792e+00f, -3.7612629e-01f, 1.1283612e-01f, -2.6854806e-02f,
                                       5.1900488e-03f, -8.0243120e-04f, 7.8980665e-05f};
    static constexpr float kLarge[] = {1.1467243e-04f, 5.6188565e-01f, 1.9604566e-02f, -3.7169698e-01f,
                                       2.1877617e-01f, 2.5930491e-01f, -5.6147563e-01f, 4.5619118e-01f,
                                       -1.8718474e-01f, 3.2063790e-02f};
    const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
    const __m256 a = _mm256_min_ps(_mm256_set1_ps(4.0f), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x));  // NaN kept
    const __m256 s = _mm256_mul_ps(a, a);
    const __m256 small = _mm256_mul_ps(a, poly(s, kSmall));
    const __m256 q = poly(_mm256_div_ps(_mm256_set1_ps(1.0f), a), kLarge);
    const __m256 large = _mm256_fnmadd_ps(simd::exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), s)), q, _mm256_set1_ps(1.0f));
    const __m256 r = _mm256_blendv_ps(small, large, _mm256_cmp_ps(a, _mm256_set1_ps(1.0f), _CMP_GE_OQ));
    return _mm256_or_ps(r, sign);
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

// SwiGLU uses ggml's exp (not exp_ps): real models' FFNs then round exactly as ggml's do.
void swiglu(const float* g, const float* u, float* o, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 den = _mm256_add_ps(one, exp_ggml_ps(_mm256_sub_ps(_mm256_setzero_ps(), x)));
        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_div_ps(x, den), _mm256_loadu_ps(u + i)));
    }
    swiglu_scalar(g + i, u + i, o + i, n - i);
}

// SiLU rows with SwiGLU's arithmetic (ggml's exp, a true division): equal to ggml's silu.
void silu(const float* x, float* o, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 den = _mm256_add_ps(one, exp_ggml_ps(_mm256_sub_ps(_mm256_setzero_ps(), v)));
        _mm256_storeu_ps(o + i, _mm256_div_ps(v, den));
    }
    silu_scalar(x + i, o + i, n - i);
}

void geglu(const float* g, const float* u, float* o, int64_t n) {
    const uint16_t* table = gelu_table().v;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_mul_ps(gelu_table_ps(_mm256_loadu_ps(g + i), table), _mm256_loadu_ps(u + i)));
    geglu_scalar(g + i, u + i, o + i, n - i);
}

// 0.5 x (1 + erf(x / sqrt 2)) * u, in the scalar loop's order
void geglu_erf(const float* g, const float* u, float* o, int64_t n) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f), r2 = _mm256_set1_ps(0.70710678118654752f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 gelu = _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, erf_ps(_mm256_mul_ps(x, r2))));
        _mm256_storeu_ps(o + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(u + i)));
    }
    geglu_erf_scalar(g + i, u + i, o + i, n - i);
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
    static const GluOps k{reglu, swiglu, geglu, geglu_erf, geglu_quick, swiglu_oai, swiglu_clamp, silu};
    return k;
}

}  // namespace pyggml::cpu::glu

#pragma GCC pop_options
#else
namespace pyggml::cpu::glu {
const GluOps& glu_avx2() { return glu_scalar(); }
}
#endif
