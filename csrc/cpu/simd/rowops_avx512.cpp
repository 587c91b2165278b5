// AVX-512 (F/BW/VL/DQ) row primitives (the RowOps contract of cpu/rowops_simd.h).
#include "cpu/rowops_simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/simd/exp_simd.h"

namespace pyggml::cpu::rowops {

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

const RowOps& rowops_avx512() {
    static const RowOps k{avx512::sum, avx512::sumsq, avx512::center_sumsq, avx512::scale, avx512::scale_mask_max, avx512::exp_sum, avx512::rot_neox, avx512::rot_normal, avx512::sincos};
    return k;
}

}  // namespace pyggml::cpu::rowops
#else
namespace pyggml::cpu::rowops {
const RowOps& rowops_avx512() { return rowops_scalar(); }
}
#endif
