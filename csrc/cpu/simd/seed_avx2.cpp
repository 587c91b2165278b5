// AVX2 + FMA seed-op helpers (the SeedOps contract of cpu/seed_simd.h).
#include "cpu/seed_simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/simd/exp_simd.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace pyggml::cpu::seed {

namespace {
float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

void hc_pre(float* o, const char* x0, size_t xnb1, const float* w, int64_t hc, int64_t n) {
    hc_pre_body(o, x0, xnb1, w, hc, n);
}
void hc_post(float* o, const float* x, float p, const char* r0, size_t rnb1, const float* c, int64_t hc, int64_t d,
             int64_t n) {
    hc_post_body(o, x, p, r0, rnb1, c, hc, d, n);
}

void li_block(const float* KT, int64_t ldk, const char* q0, size_t qnb1, const float* w, int64_t H, int64_t D,
              float* sc) {
    const __m256 zero = _mm256_setzero_ps();
    for (int half = 0; half < 2; ++half) {  // 32 kv rows at a time: 4 vectors x 2 heads
        const float* K = KT + 32 * half;
        __m256 s[4] = {zero, zero, zero, zero};
        int64_t h = 0;
        for (; h + 2 <= H; h += 2) {
            const float* qa = (const float*)(q0 + h * qnb1);
            const float* qb = (const float*)(q0 + (h + 1) * qnb1);
            __m256 a[4] = {zero, zero, zero, zero}, b[4] = {zero, zero, zero, zero};
            for (int64_t d = 0; d < D; ++d) {
                const float* kr = K + d * ldk;
                const __m256 va = _mm256_broadcast_ss(qa + d), vb = _mm256_broadcast_ss(qb + d);
                for (int i = 0; i < 4; ++i) {
                    const __m256 kv = _mm256_loadu_ps(kr + 8 * i);
                    a[i] = _mm256_fmadd_ps(va, kv, a[i]);
                    b[i] = _mm256_fmadd_ps(vb, kv, b[i]);
                }
            }
            const __m256 wa = _mm256_set1_ps(w[h]), wb = _mm256_set1_ps(w[h + 1]);
            for (int i = 0; i < 4; ++i) {
                s[i] = _mm256_fmadd_ps(_mm256_max_ps(a[i], zero), wa, s[i]);
                s[i] = _mm256_fmadd_ps(_mm256_max_ps(b[i], zero), wb, s[i]);
            }
        }
        for (; h < H; ++h) {
            const float* qa = (const float*)(q0 + h * qnb1);
            __m256 a[4] = {zero, zero, zero, zero};
            for (int64_t d = 0; d < D; ++d) {
                const float* kr = K + d * ldk;
                const __m256 va = _mm256_broadcast_ss(qa + d);
                for (int i = 0; i < 4; ++i) a[i] = _mm256_fmadd_ps(va, _mm256_loadu_ps(kr + 8 * i), a[i]);
            }
            const __m256 wa = _mm256_set1_ps(w[h]);
            for (int i = 0; i < 4; ++i) s[i] = _mm256_fmadd_ps(_mm256_max_ps(a[i], zero), wa, s[i]);
        }
        for (int i = 0; i < 4; ++i) _mm256_storeu_ps(sc + 32 * half + 8 * i, s[i]);
    }
}


float dot(const float* a, const float* b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

// Eight tokens' Sinkhorn problems side by side, the 16 matrix entries in registers: the same
// operations in the same order as hc_comb4_scalar, only exp is the vector polynomial.
void hc_comb4(float* P, float eps, int n_iter) {
    __m256 v[16];
    for (int k = 0; k < 16; ++k) v[k] = _mm256_loadu_ps(P + k * kHcLanes);
    const __m256 ve = _mm256_set1_ps(eps), one = _mm256_set1_ps(1.0f);
    for (int s = 0; s < 4; ++s) {
        __m256* c = v + 4 * s;
        const __m256 mx = _mm256_max_ps(_mm256_max_ps(c[0], c[1]), _mm256_max_ps(c[2], c[3]));
        for (int d = 0; d < 4; ++d) c[d] = simd::exp_ps(_mm256_sub_ps(c[d], mx));
        const __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c[0], c[1]), c[2]), c[3]);
        for (int d = 0; d < 4; ++d) c[d] = _mm256_add_ps(_mm256_div_ps(c[d], sum), ve);
    }
    auto norm_src = [&] {
        for (int d = 0; d < 4; ++d) {
            const __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[d], v[d + 4]), v[d + 8]), v[d + 12]);
            const __m256 inv = _mm256_div_ps(one, _mm256_add_ps(ve, sum));
            for (int s = 0; s < 4; ++s) v[d + 4 * s] = _mm256_mul_ps(v[d + 4 * s], inv);
        }
    };
    auto norm_dst = [&] {
        for (int s = 0; s < 4; ++s) {
            __m256* c = v + 4 * s;
            const __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c[0], c[1]), c[2]), c[3]);
            const __m256 inv = _mm256_div_ps(one, _mm256_add_ps(ve, sum));
            for (int d = 0; d < 4; ++d) c[d] = _mm256_mul_ps(c[d], inv);
        }
    };
    norm_src();
    for (int it = 1; it < n_iter; ++it) {
        norm_dst();
        norm_src();
    }
    for (int k = 0; k < 16; ++k) _mm256_storeu_ps(P + k * kHcLanes, v[k]);
}

void hc_pre_gated(float* o, const char* x0, size_t xnb1, const char* g0, size_t gnb1, float scale, int64_t hc,
                  int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), vs = _mm256_set1_ps(scale);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 sum = _mm256_setzero_ps();
        for (int64_t h = 0; h < hc; ++h) {
            const __m256 g = _mm256_loadu_ps((const float*)(g0 + h * gnb1) + i);
            const __m256 sig = _mm256_div_ps(one, _mm256_add_ps(one, simd::exp_ps(_mm256_xor_ps(g, sign))));
            sum = _mm256_fmadd_ps(_mm256_loadu_ps((const float*)(x0 + h * xnb1) + i), sig, sum);
        }
        _mm256_storeu_ps(o + i, _mm256_mul_ps(vs, sum));
    }
    hc_pre_gated_body(o, x0, xnb1, g0, gnb1, scale, hc, i, n);
}

}  // namespace

const SeedOps& seed_avx2() {
    static const SeedOps k{hc_pre, hc_post, li_block, dot, hc_comb4, hc_pre_gated};
    return k;
}

}  // namespace pyggml::cpu::seed

#pragma GCC pop_options
#else
namespace pyggml::cpu::seed {
const SeedOps& seed_avx2() { return seed_scalar(); }
}
#endif
