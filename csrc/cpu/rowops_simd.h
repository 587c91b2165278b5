// Row primitives of the norm, softmax and rope kernels: a plain loop (the reference path)
// plus AVX2+FMA and AVX-512 variants, picked at run time (the wheel is built without
// -march flags). Set PYGGML_CPU_SIMD=scalar|avx2|avx512 to force a lower level (tests use
// it to run every path on one machine; a level the CPU lacks is never used).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PYGGML_ROWOPS_X86 1
#endif

#include "cpu/simd/exp_simd.h"
#include "pyggml/types.h"

namespace pyggml::cpu::rowops {

enum class Level { Scalar = 0, Avx2 = 1, Avx512 = 2 };

inline Level cpu_level() {
#ifdef PYGGML_ROWOPS_X86
    static const Level l = [] {
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
            return Level::Avx512;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
            return Level::Avx2;
        return Level::Scalar;
    }();
    return l;
#else
    return Level::Scalar;
#endif
}

// The level a kernel call uses: the CPU's, lowered by PYGGML_ISA (project-wide; PYGGML_CPU_SIMD
// is an older alias) if set.
inline Level level() {
    Level l = cpu_level();
    const char* e = std::getenv("PYGGML_ISA");
    if (!e) e = std::getenv("PYGGML_CPU_SIMD");
    if (e) {
        Level want = l;
        if (!std::strcmp(e, "scalar")) want = Level::Scalar;
        else if (!std::strcmp(e, "avx2")) want = Level::Avx2;
        if ((int)want < (int)l) l = want;
    }
    return l;
}

// ============================== plain loops (reference) ==============================
namespace plain {

inline double sum(const float* x, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += (double)x[i];
    return s;
}
inline double sumsq(const float* x, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += (double)x[i] * (double)x[i];
    return s;
}
// y = x - mean; returns sum(y^2) in double
inline double center_sumsq(float* y, const float* x, float mean, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i] - mean;
        y[i] = v;
        s += (double)v * (double)v;
    }
    return s;
}
inline void scale(float* y, const float* x, float s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}
// y = x*scale + slope*mask (mask f32 or f16 or null); returns max(y) (-inf for n == 0)
inline float scale_mask_max(float* y, const float* x, float sc, const float* m32, const uint16_t* m16, float slope,
                            int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i] * sc;
        if (m32) v += slope * m32[i];
        else if (m16) v += slope * fp16_to_fp32(m16[i]);
        y[i] = v;
        mx = mx > v ? mx : v;
    }
    return mx;
}
// y = exp(y - M); returns sum in double
inline double exp_sum(float* y, float M, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float e = std::exp(y[i] - M);
        y[i] = e;
        s += (double)e;
    }
    return s;
}
// NEOX pairs (x[i], x[i+h]), i < h, angle i.
inline void rot_neox(float* d, const float* s, const float* c, const float* sn, int64_t h) {
    for (int64_t i = 0; i < h; ++i) {
        const float x0 = s[i], x1 = s[i + h];
        d[i] = x0 * c[i] - x1 * sn[i];
        d[i + h] = x0 * sn[i] + x1 * c[i];
    }
}
// NORMAL pairs (x[2i], x[2i+1]); cc[2i] = cc[2i+1] = cos_i, ss[2i] = -sin_i, ss[2i+1] = sin_i.
inline void rot_normal(float* d, const float* s, const float* cc, const float* ss, int64_t n) {
    for (int64_t i = 0; i < n; i += 2) {
        const float x0 = s[i], x1 = s[i + 1];
        d[i] = x0 * cc[i] + x1 * ss[i];
        d[i + 1] = x1 * cc[i + 1] + x0 * ss[i + 1];
    }
}

// c[i] = cos(th[i]) * mc, s[i] = sin(th[i]) * ms (s may alias th).
inline void sincos(const float* th, float* c, float* s, float mc, float ms, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float t = th[i];
        c[i] = std::cos(t) * mc;
        s[i] = std::sin(t) * ms;
    }
}

}  // namespace plain

// sin/cos of float angles evaluated in double: reduction by k*pi/2 (two-part pi/2, fma) and
// Taylor polynomials to degree 11/12 on [-pi/4, pi/4] (error < 1e-12, far below f32 rounding).
// Angles beyond kSinCosMax take the scalar libm path (the reduction's quadrant index is int32).
constexpr double kPio2Hi = 1.5707963267948966, kPio2Lo = 6.123233995736766e-17, k2OverPi = 0.6366197723675814;
constexpr double kS[5] = {-1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800};
constexpr double kC[6] = {-1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800, 1.0 / 479001600};
constexpr float kSinCosMax = 1e8f;

#ifdef PYGGML_ROWOPS_X86
// ============================== AVX2 + FMA ==============================
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
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(s + i);
        const __m256 sw = _mm256_permute_ps(x, 0xB1);  // swap within pairs
        _mm256_storeu_ps(d + i, _mm256_fmadd_ps(x, _mm256_loadu_ps(cc + i), _mm256_mul_ps(sw, _mm256_loadu_ps(ss + i))));
    }
    plain::rot_normal(d + i, s + i, cc + i, ss + i, n - i);
}
// 4 lanes of sin/cos (see kPio2Hi above)
PG_AVX2 inline void sincos_pd(__m256d x, __m256d* sn, __m256d* cs) {
    const __m256d k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(k2OverPi)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(kPio2Hi), x);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(kPio2Lo), r);
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d ps = _mm256_set1_pd(kS[4]);
    for (int j = 3; j >= 0; --j) ps = _mm256_fmadd_pd(ps, r2, _mm256_set1_pd(kS[j]));
    ps = _mm256_fmadd_pd(_mm256_mul_pd(ps, r2), r, r);
    __m256d pc = _mm256_set1_pd(kC[5]);
    for (int j = 4; j >= 0; --j) pc = _mm256_fmadd_pd(pc, r2, _mm256_set1_pd(kC[j]));
    pc = _mm256_fmadd_pd(pc, r2, _mm256_set1_pd(1.0));
    const __m256i q = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k));
    const __m256i one = _mm256_set1_epi64x(1), two = _mm256_set1_epi64x(2);
    const __m256d swap = _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(q, one), one));
    const __m256i sbit = _mm256_set1_epi64x((long long)0x8000000000000000ULL);
    const __m256d sneg = _mm256_castsi256_pd(_mm256_and_si256(_mm256_cmpeq_epi64(_mm256_and_si256(q, two), two), sbit));
    const __m256i q1 = _mm256_add_epi64(q, one);
    const __m256d cneg = _mm256_castsi256_pd(_mm256_and_si256(_mm256_cmpeq_epi64(_mm256_and_si256(q1, two), two), sbit));
    *sn = _mm256_xor_pd(_mm256_blendv_pd(ps, pc, swap), sneg);
    *cs = _mm256_xor_pd(_mm256_blendv_pd(pc, ps, swap), cneg);
}
PG_AVX2 inline void sincos(const float* th, float* c, float* s, float mc, float ms, int64_t n) {
    const __m128 vmc = _mm_set1_ps(mc), vms = _mm_set1_ps(ms);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m128 t = _mm_loadu_ps(th + i);
        const __m128 big = _mm_cmp_ps(_mm_andnot_ps(_mm_set1_ps(-0.0f), t), _mm_set1_ps(kSinCosMax), _CMP_NLT_UQ);
        if (_mm_movemask_ps(big)) {
            plain::sincos(th + i, c + i, s + i, mc, ms, 4);
            continue;
        }
        __m256d sv, cv;
        sincos_pd(_mm256_cvtps_pd(t), &sv, &cv);
        // round sin/cos to f32 first, then scale in f32 (as cosf(theta) * mscale)
        const __m128 cf = _mm256_cvtpd_ps(cv), sf = _mm256_cvtpd_ps(sv);
        _mm_storeu_ps(c + i, _mm_mul_ps(cf, vmc));
        _mm_storeu_ps(s + i, _mm_mul_ps(sf, vms));
    }
    plain::sincos(th + i, c + i, s + i, mc, ms, n - i);
}
#undef PG_AVX2
}  // namespace avx2

// ============================== AVX-512 ==============================
// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsics as
// uninitialized (false positive); silence that for this block only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace avx512 {
#define PG_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

PG_AVX512 inline __mmask16 tail_mask(int64_t r) { return (__mmask16)((1u << r) - 1u); }
PG_AVX512 inline __m512d lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
PG_AVX512 inline __m512d hi_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)); }

using simd::exp_ps;  // simd/exp_simd.h

PG_AVX512 inline double sum(const float* x, int64_t n) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        a0 = _mm512_add_pd(a0, lo_pd(v));
        a1 = _mm512_add_pd(a1, hi_pd(v));
    }
    if (i < n) {
        const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
        a0 = _mm512_add_pd(a0, lo_pd(v));
        a1 = _mm512_add_pd(a1, hi_pd(v));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
}
PG_AVX512 inline double sumsq(const float* x, int64_t n) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(), a2 = _mm512_setzero_pd(), a3 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 v = _mm512_loadu_ps(x + i), w = _mm512_loadu_ps(x + i + 16);
        const __m512d v0 = lo_pd(v), v1 = hi_pd(v), w0 = lo_pd(w), w1 = hi_pd(w);
        a0 = _mm512_fmadd_pd(v0, v0, a0);
        a1 = _mm512_fmadd_pd(v1, v1, a1);
        a2 = _mm512_fmadd_pd(w0, w0, a2);
        a3 = _mm512_fmadd_pd(w1, w1, a3);
    }
    for (; i < n; i += 16) {
        const __m512 v = n - i >= 16 ? _mm512_loadu_ps(x + i) : _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
        const __m512d v0 = lo_pd(v), v1 = hi_pd(v);
        a0 = _mm512_fmadd_pd(v0, v0, a0);
        a1 = _mm512_fmadd_pd(v1, v1, a1);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
}
PG_AVX512 inline double center_sumsq(float* y, const float* x, float mean, int64_t n) {
    const __m512 m = _mm512_set1_ps(mean);
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : tail_mask(n - i);
        const __m512 v = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + i), m);
        _mm512_mask_storeu_ps(y + i, k, v);
        const __m512d v0 = lo_pd(v), v1 = hi_pd(v);
        a0 = _mm512_fmadd_pd(v0, v0, a0);
        a1 = _mm512_fmadd_pd(v1, v1, a1);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
}
PG_AVX512 inline void scale(float* y, const float* x, float s, int64_t n) {
    const __m512 k = _mm512_set1_ps(s);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), k));
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), k));
    }
}
PG_AVX512 inline float scale_mask_max(float* y, const float* x, float sc, const float* m32, const uint16_t* m16,
                                      float slope, int64_t n) {
    const __m512 k = _mm512_set1_ps(sc), sl = _mm512_set1_ps(slope);
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 t = n - i >= 16 ? (__mmask16)0xFFFF : tail_mask(n - i);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(t, x + i), k);
        if (m32) v = _mm512_fmadd_ps(sl, _mm512_maskz_loadu_ps(t, m32 + i), v);
        else if (m16) v = _mm512_fmadd_ps(sl, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(t, m16 + i)), v);
        _mm512_mask_storeu_ps(y + i, t, v);
        mx = _mm512_mask_max_ps(mx, t, v, mx);
    }
    return _mm512_reduce_max_ps(mx);
}
PG_AVX512 inline double exp_sum(float* y, float M, int64_t n) {
    const __m512 m = _mm512_set1_ps(M);
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 t = n - i >= 16 ? (__mmask16)0xFFFF : tail_mask(n - i);
        const __m512 e = _mm512_maskz_mov_ps(t, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, y + i), m)));
        _mm512_mask_storeu_ps(y + i, t, e);
        a0 = _mm512_add_pd(a0, lo_pd(e));
        a1 = _mm512_add_pd(a1, hi_pd(e));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
}
PG_AVX512 inline void rot_neox(float* d, const float* s, const float* c, const float* sn, int64_t h) {
    for (int64_t i = 0; i < h; i += 16) {
        const __mmask16 t = h - i >= 16 ? (__mmask16)0xFFFF : tail_mask(h - i);
        const __m512 x0 = _mm512_maskz_loadu_ps(t, s + i), x1 = _mm512_maskz_loadu_ps(t, s + i + h);
        const __m512 cv = _mm512_maskz_loadu_ps(t, c + i), sv = _mm512_maskz_loadu_ps(t, sn + i);
        _mm512_mask_storeu_ps(d + i, t, _mm512_fmsub_ps(x0, cv, _mm512_mul_ps(x1, sv)));
        _mm512_mask_storeu_ps(d + i + h, t, _mm512_fmadd_ps(x0, sv, _mm512_mul_ps(x1, cv)));
    }
}
PG_AVX512 inline void rot_normal(float* d, const float* s, const float* cc, const float* ss, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 t = n - i >= 16 ? (__mmask16)0xFFFF : tail_mask(n - i);
        const __m512 x = _mm512_maskz_loadu_ps(t, s + i);
        const __m512 sw = _mm512_permute_ps(x, 0xB1);  // swap within pairs
        _mm512_mask_storeu_ps(d + i, t, _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(t, cc + i),
                                                        _mm512_mul_ps(sw, _mm512_maskz_loadu_ps(t, ss + i))));
    }
}
// 8 lanes of sin/cos (see kPio2Hi above)
PG_AVX512 inline void sincos_pd(__m512d x, __m512d* sn, __m512d* cs) {
    const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(k2OverPi)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(kPio2Hi), x);
    r = _mm512_fnmadd_pd(k, _mm512_set1_pd(kPio2Lo), r);
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d ps = _mm512_set1_pd(kS[4]);
    for (int j = 3; j >= 0; --j) ps = _mm512_fmadd_pd(ps, r2, _mm512_set1_pd(kS[j]));
    ps = _mm512_fmadd_pd(_mm512_mul_pd(ps, r2), r, r);
    __m512d pc = _mm512_set1_pd(kC[5]);
    for (int j = 4; j >= 0; --j) pc = _mm512_fmadd_pd(pc, r2, _mm512_set1_pd(kC[j]));
    pc = _mm512_fmadd_pd(pc, r2, _mm512_set1_pd(1.0));
    const __m256i q = _mm512_cvtpd_epi32(k);
    const __mmask8 swap = _mm256_test_epi32_mask(q, _mm256_set1_epi32(1));
    const __mmask8 sneg = _mm256_test_epi32_mask(q, _mm256_set1_epi32(2));
    const __mmask8 cneg = _mm256_test_epi32_mask(_mm256_add_epi32(q, _mm256_set1_epi32(1)), _mm256_set1_epi32(2));
    const __m512d s0 = _mm512_mask_blend_pd(swap, ps, pc), c0 = _mm512_mask_blend_pd(swap, pc, ps);
    *sn = _mm512_mask_sub_pd(s0, sneg, _mm512_setzero_pd(), s0);
    *cs = _mm512_mask_sub_pd(c0, cneg, _mm512_setzero_pd(), c0);
}
PG_AVX512 inline void sincos(const float* th, float* c, float* s, float mc, float ms, int64_t n) {
    const __m256 vmc = _mm256_set1_ps(mc), vms = _mm256_set1_ps(ms);
    for (int64_t i = 0; i < n; i += 8) {
        const __mmask8 t = n - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (n - i)) - 1u);
        const __m256 x = _mm256_maskz_loadu_ps(t, th + i);
        if (_mm256_cmp_ps_mask(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(kSinCosMax), _CMP_NLT_UQ)) {
            plain::sincos(th + i, c + i, s + i, mc, ms, n - i >= 8 ? 8 : n - i);
            continue;
        }
        __m512d sv, cv;
        sincos_pd(_mm512_cvtps_pd(x), &sv, &cv);
        _mm256_mask_storeu_ps(c + i, t, _mm256_mul_ps(_mm512_cvtpd_ps(cv), vmc));
        _mm256_mask_storeu_ps(s + i, t, _mm256_mul_ps(_mm512_cvtpd_ps(sv), vms));
    }
}
#undef PG_AVX512
}  // namespace avx512
#pragma GCC diagnostic pop
#endif  // PYGGML_ROWOPS_X86

// ============================== dispatch ==============================
#ifdef PYGGML_ROWOPS_X86
#define PG_ROWOPS_DISPATCH(lvl, fn, ...)                                  \
    ((lvl) == Level::Avx512 ? avx512::fn(__VA_ARGS__)                     \
     : (lvl) == Level::Avx2 ? avx2::fn(__VA_ARGS__) : plain::fn(__VA_ARGS__))
#else
#define PG_ROWOPS_DISPATCH(lvl, fn, ...) plain::fn(__VA_ARGS__)
#endif

inline double sum(Level l, const float* x, int64_t n) { return PG_ROWOPS_DISPATCH(l, sum, x, n); }
inline double sumsq(Level l, const float* x, int64_t n) { return PG_ROWOPS_DISPATCH(l, sumsq, x, n); }
inline double center_sumsq(Level l, float* y, const float* x, float mean, int64_t n) {
    return PG_ROWOPS_DISPATCH(l, center_sumsq, y, x, mean, n);
}
inline void scale(Level l, float* y, const float* x, float s, int64_t n) { PG_ROWOPS_DISPATCH(l, scale, y, x, s, n); }
inline float scale_mask_max(Level l, float* y, const float* x, float sc, const float* m32, const uint16_t* m16,
                            float slope, int64_t n) {
    return PG_ROWOPS_DISPATCH(l, scale_mask_max, y, x, sc, m32, m16, slope, n);
}
inline double exp_sum(Level l, float* y, float M, int64_t n) { return PG_ROWOPS_DISPATCH(l, exp_sum, y, M, n); }
inline void rot_neox(Level l, float* d, const float* s, const float* c, const float* sn, int64_t h) {
    PG_ROWOPS_DISPATCH(l, rot_neox, d, s, c, sn, h);
}
inline void rot_normal(Level l, float* d, const float* s, const float* cc, const float* ss, int64_t n) {
    PG_ROWOPS_DISPATCH(l, rot_normal, d, s, cc, ss, n);
}
inline void sincos(Level l, const float* th, float* c, float* s, float mc, float ms, int64_t n) {
    PG_ROWOPS_DISPATCH(l, sincos, th, c, s, mc, ms, n);
}
#undef PG_ROWOPS_DISPATCH

}  // namespace pyggml::cpu::rowops
