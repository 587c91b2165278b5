// AVX-512 (F/BW/VL/DQ) seed-op helpers (the SeedOps contract of cpu/seed_simd.h).
#include "cpu/seed_simd.h"

#if defined(__x86_64__) || defined(__i386__)
// GCC 12's AVX-512 headers initialise "undefined" vectors as `__m512 __Y = __Y;`, which trips
// -W(maybe-)uninitialized at every inlined call site (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")

namespace pyggml::cpu::seed {

namespace {
void hc_pre(float* o, const char* x0, size_t xnb1, const float* w, int64_t hc, int64_t n) {
    hc_pre_body(o, x0, xnb1, w, hc, n);
}
void hc_post(float* o, const float* x, float p, const char* r0, size_t rnb1, const float* c, int64_t hc, int64_t d,
             int64_t n) {
    hc_post_body(o, x, p, r0, rnb1, c, hc, d, n);
}

void li_block(const float* KT, int64_t ldk, const char* q0, size_t qnb1, const float* w, int64_t H, int64_t D,
              float* sc) {
    const __m512 zero = _mm512_setzero_ps();
    __m512 s[4] = {zero, zero, zero, zero};
    int64_t h = 0;
    for (; h + 2 <= H; h += 2) {  // 4 vectors x 2 heads = 8 independent accumulators
        const float* qa = (const float*)(q0 + h * qnb1);
        const float* qb = (const float*)(q0 + (h + 1) * qnb1);
        __m512 a[4] = {zero, zero, zero, zero}, b[4] = {zero, zero, zero, zero};
        for (int64_t d = 0; d < D; ++d) {
            const float* kr = KT + d * ldk;
            const __m512 va = _mm512_set1_ps(qa[d]), vb = _mm512_set1_ps(qb[d]);
            for (int i = 0; i < 4; ++i) {
                const __m512 kv = _mm512_loadu_ps(kr + 16 * i);
                a[i] = _mm512_fmadd_ps(va, kv, a[i]);
                b[i] = _mm512_fmadd_ps(vb, kv, b[i]);
            }
        }
        const __m512 wa = _mm512_set1_ps(w[h]), wb = _mm512_set1_ps(w[h + 1]);
        for (int i = 0; i < 4; ++i) {
            s[i] = _mm512_fmadd_ps(_mm512_max_ps(a[i], zero), wa, s[i]);
            s[i] = _mm512_fmadd_ps(_mm512_max_ps(b[i], zero), wb, s[i]);
        }
    }
    for (; h < H; ++h) {
        const float* qa = (const float*)(q0 + h * qnb1);
        __m512 a[4] = {zero, zero, zero, zero};
        for (int64_t d = 0; d < D; ++d) {
            const float* kr = KT + d * ldk;
            const __m512 va = _mm512_set1_ps(qa[d]);
            for (int i = 0; i < 4; ++i) a[i] = _mm512_fmadd_ps(va, _mm512_loadu_ps(kr + 16 * i), a[i]);
        }
        const __m512 wa = _mm512_set1_ps(w[h]);
        for (int i = 0; i < 4; ++i) s[i] = _mm512_fmadd_ps(_mm512_max_ps(a[i], zero), wa, s[i]);
    }
    for (int i = 0; i < 4; ++i) _mm512_storeu_ps(sc + 16 * i, s[i]);
}


float dot(const float* a, const float* b, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    s0 = _mm512_add_ps(s0, s1);
    for (; i < n; i += 16) {  // masked tail
        const int64_t r = n - i;
        const __mmask16 m = r >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << r) - 1);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
    }
    return _mm512_reduce_add_ps(s0);
}

}  // namespace

const SeedOps& seed_avx512() {
    // The Sinkhorn block and the gated pre are 8-lane kernels: AVX-512 machines run the AVX2 ones.
    static const SeedOps k{hc_pre, hc_post, li_block, dot,
                           seed_avx2().hc_comb4, seed_avx2().hc_pre_gated};
    return k;
}

}  // namespace pyggml::cpu::seed

#pragma GCC pop_options
#else
namespace pyggml::cpu::seed {
const SeedOps& seed_avx512() { return seed_scalar(); }
}
#endif
