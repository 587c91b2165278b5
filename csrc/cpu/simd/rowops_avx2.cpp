// AVX2 + FMA + F16C row primitives (the RowOps contract of cpu/rowops_simd.h).
#include "cpu/rowops_simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/simd/exp_simd.h"

namespace pyggml::cpu::rowops {

namespace avx2 {
#define PG_AVX2 __attribute__((target("avx2,fma,f16c")))

PG_AVX2 inline double hsum_pd(__m256d v) {
    __m128d lo = _mm256_castpd256_pd128(v), hi = _mm256_extractf128_pd(v, 1);
    lo = _mm_add_pd(lo, hi);
    return _mm_cvtsd_f64(_mm_add_sd(lo, _mm_unpackhi_pd(lo, lo)));
}
PG_AVX2 inline float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
using simd::exp_ps;  // simd/exp_simd.h

PG_AVX2 inline double sum(const float* x, int64_t n) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    double s = hsum_pd(_mm256_add_pd(a0, a1));
    for (; i < n; ++i) s += (double)x[i];
    return s;
}
PG_AVX2 inline double sumsq(const float* x, int64_t n) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 v = _mm256_loadu_ps(x + i), w = _mm256_loadu_ps(x + i + 8);
        const __m256d v0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), v1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        const __m256d w0 = _mm256_cvtps_pd(_mm256_castps256_ps128(w)), w1 = _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1));
        a0 = _mm256_fmadd_pd(v0, v0, a0);
        a1 = _mm256_fmadd_pd(v1, v1, a1);
        a2 = _mm256_fmadd_pd(w0, w0, a2);
        a3 = _mm256_fmadd_pd(w1, w1, a3);
    }
    double s = hsum_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    for (; i < n; ++i) s += (double)x[i] * (double)x[i];
    return s;
}
PG_AVX2 inline double center_sumsq(float* y, const float* x, float mean, int64_t n) {
    const __m256 m = _mm256_set1_ps(mean);
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + i), m);
        _mm256_storeu_ps(y + i, v);
        const __m256d v0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), v1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        a0 = _mm256_fmadd_pd(v0, v0, a0);
        a1 = _mm256_fmadd_pd(v1, v1, a1);
    }
    double s = hsum_pd(_mm256_add_pd(a0, a1));
    for (; i < n; ++i) {
        const float v = x[i] - mean;
        y[i] = v;
        s += (double)v * (double)v;
    }
    return s;
}
PG_AVX2 inline void scale(float* y, const float* x, float s, int64_t n) {
    const __m256 k = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), k));
    for (; i < n; ++i) y[i] = x[i] * s;
}
PG_AVX2 inline float scale_mask_max(float* y, const float* x, float sc, const float* m32, const uint16_t* m16,
                                    float slope, int64_t n) {
    const __m256 k = _mm256_set1_ps(sc), sl = _mm256_set1_ps(slope);
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), k);
        if (m32) v = _mm256_fmadd_ps(sl, _mm256_loadu_ps(m32 + i), v);
        else if (m16) v = _mm256_fmadd_ps(sl, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(m16 + i))), v);
        _mm256_storeu_ps(y + i, v);
        mx = _mm256_max_ps(v, mx);
    }
    float r = hmax_ps(mx);
    for (; i < n; ++i) {
        float v = x[i] * sc;
        if (m32) v += slope * m32[i];
        else if (m16) v += slope * fp16_to_fp32(m16[i]);
        y[i] = v;
        r = r > v ? r : v;
    }
    return r;
}
PG_AVX2 inline double exp_sum(float* y, float M, int64_t n) {
    const __m256 m = _mm256_set1_ps(M);
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(y + i), m));
        _mm256_storeu_ps(y + i, e);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double s = hsum_pd(_mm256_add_pd(a0, a1));
    for (; i < n; ++i) {
        const float e = std::exp(y[i] - M);
        y[i] = e;
        s += (double)e;
    }
    return s;
}
PG_AVX2 inline void rot_neox(float* d, const float* s, const float* c, const float* sn, int64_t h) {
    int64_t i = 0;
    for (; i + 8 <= h; i += 8) {
        const __m256 x0 = _mm256_loadu_ps(s + i), x1 = _mm256_loadu_ps(s + i + h);
        const __m256 cv = _mm256_loadu_ps(c + i), sv = _mm256_loadu_ps(sn + i);
        _mm256_storeu_ps(d + i, _mm256_fmsub_ps(x0, cv, _mm256_mul_ps(x1, sv)));
        _mm256_storeu_ps(d + i + h, _mm256_fmadd_ps(x0, sv, _mm256_mul_ps(x1, cv)));
    }
    for (; i < h; ++i) {
        const float x0 = s[i], x1 = s[i + h];
        d[i] = x0 * c[i] - x1 * sn[i];
        d[i + h] = x0 * sn[i] + x1 * c[i];
    }
}
PG_AVX2 inline void rot_normal(float* d, const float* s, const float* cc, const float* ss, int64_t n) {
    int64_t i = 0;
    // (x0*cos - x1*sin, x0*sin + x1*cos) with the x0 products fused and the x1 products
    // rounded first: ggml's rounding, bit for bit
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(s + i);
        const __m256 c = _mm256_loadu_ps(cc + i), sg = _mm256_loadu_ps(ss + i);   // (c, c), (-s, s)
        const __m256 cs = _mm256_blend_ps(c, sg, 0xAA), nsc = _mm256_blend_ps(sg, c, 0xAA);  // (c, s), (-s, c)
        _mm256_storeu_ps(d + i, _mm256_fmadd_ps(_mm256_moveldup_ps(x), cs, _mm256_mul_ps(_mm256_movehdup_ps(x), nsc)));
    }
    plain::rot_normal(d + i, s + i, cc + i, ss + i, n - i);
}
// libm's cosf / sinf, as ggml's RoPE cache: a vector polynomial would be 1 ulp off now and
// then, and quantized models amplify that (the cache is built once per token, so it is cheap).
PG_AVX2 inline void sincos(const float* th, float* c, float* s, float mc, float ms, int64_t n) {
    plain::sincos(th, c, s, mc, ms, n);
}
#undef PG_AVX2
}  // namespace avx2

const RowOps& rowops_avx2() {
    static const RowOps k{avx2::sum, avx2::sumsq, avx2::center_sumsq, avx2::scale, avx2::scale_mask_max, avx2::exp_sum, avx2::rot_neox, avx2::rot_normal, avx2::sincos};
    return k;
}

}  // namespace pyggml::cpu::rowops
#else
namespace pyggml::cpu::rowops {
const RowOps& rowops_avx2() { return rowops_scalar(); }
}
#endif
