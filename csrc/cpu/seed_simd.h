// SIMD helpers of the seed-op kernels (DSV4 hyper-connections, lightning indexer, SSM scan).
// Each helper has a plain loop (the reference path) plus AVX2+FMA and AVX-512 variants that are
// compiled with target attributes and picked once at run time (the wheel stays portable).
#pragma once
// GCC 12's AVX-512 headers initialise "undefined" vectors as `__m512 __Y = __Y;`, which trips
// -W(maybe-)uninitialized at every inlined call site; silence that false positive in the seed-op
// translation units (they are the only includers of this header).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace pyggml::cpu::seed {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

inline Isa detect_isa() {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
    return Isa::Scalar;
}

// PYGGML_ISA=scalar|avx2 (the project-wide cap; PYGGML_SEED_ISA is an older alias) lowers the
// level (tests use it to cover the plain loops); read once.
inline Isa isa() {
    static const Isa level = [] {
        Isa l = detect_isa();
        const char* e = std::getenv("PYGGML_ISA");
        if (!e) e = std::getenv("PYGGML_SEED_ISA");
        if (e) {
            if (std::strcmp(e, "scalar") == 0) l = Isa::Scalar;
            else if (std::strcmp(e, "avx2") == 0 && l == Isa::Avx512) l = Isa::Avx2;
        }
        return l;
    }();
    return level;
}

#define PG_SEED_AVX2 __attribute__((target("avx2,fma")))
#define PG_SEED_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

// ---- dot product of two packed f32 vectors ----
inline float dot_scalar(const float* a, const float* b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

PG_SEED_AVX2 inline float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

PG_SEED_AVX2 inline float dot_avx2(const float* a, const float* b, int64_t n) {
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

PG_SEED_AVX512 inline float dot_avx512(const float* a, const float* b, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    s0 = _mm512_add_ps(s0, s1);
    if (i < n) {  // masked tail
        for (; i < n; i += 16) {
            const int64_t r = n - i;
            const __mmask16 m = r >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << r) - 1);
            s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
        }
    }
    return _mm512_reduce_add_ps(s0);
}

inline float dot(Isa l, const float* a, const float* b, int64_t n) {
    switch (l) {
        case Isa::Avx512: return dot_avx512(a, b, n);
        case Isa::Avx2: return dot_avx2(a, b, n);
        default: return dot_scalar(a, b, n);
    }
}

// ---- SSM state update fused with the output dot:
//      st[i] = st[i]*dA + B[i]*xdt;  return sum_i st[i]*C[i]
inline float ssm_update_dot_scalar(float* st, const float* B, const float* C, float dA, float xdt, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        const float v = st[i] * dA + B[i] * xdt;
        st[i] = v;
        s += v * C[i];
    }
    return s;
}

PG_SEED_AVX2 inline float ssm_update_dot_avx2(float* st, const float* B, const float* C, float dA, float xdt,
                                              int64_t n) {
    const __m256 va = _mm256_set1_ps(dA), vx = _mm256_set1_ps(xdt);
    __m256 s0 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(st + i), va, _mm256_mul_ps(_mm256_loadu_ps(B + i), vx));
        _mm256_storeu_ps(st + i, v);
        s0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(C + i), s0);
    }
    float s = hsum256(s0);
    for (; i < n; ++i) {
        const float v = st[i] * dA + B[i] * xdt;
        st[i] = v;
        s += v * C[i];
    }
    return s;
}

PG_SEED_AVX512 inline float ssm_update_dot_avx512(float* st, const float* B, const float* C, float dA, float xdt,
                                                  int64_t n) {
    const __m512 va = _mm512_set1_ps(dA), vx = _mm512_set1_ps(xdt);
    __m512 s0 = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const int64_t r = n - i;
        const __mmask16 m = r >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << r) - 1);
        const __m512 v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, st + i), va,
                                         _mm512_mul_ps(_mm512_maskz_loadu_ps(m, B + i), vx));
        _mm512_mask_storeu_ps(st + i, m, v);
        s0 = _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(m, C + i), s0);
    }
    return _mm512_reduce_add_ps(s0);
}

// Four state rows (consecutive, stride d_state = n) sharing B and C: same per-row arithmetic
// and lane assignment as ssm_update_dot_avx512, so results are bit-identical to four calls.
PG_SEED_AVX512 inline void ssm_update_dot4_avx512(float* st, const float* B, const float* C, float dA,
                                                  const float* xdt, int64_t n, float* y) {
    const __m512 va = _mm512_set1_ps(dA);
    const __m512 x0 = _mm512_set1_ps(xdt[0]), x1 = _mm512_set1_ps(xdt[1]), x2 = _mm512_set1_ps(xdt[2]),
                 x3 = _mm512_set1_ps(xdt[3]);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    float* r0 = st;
    float* r1 = st + n;
    float* r2 = st + 2 * n;
    float* r3 = st + 3 * n;
    for (int64_t i = 0; i < n; i += 16) {
        const int64_t r = n - i;
        const __mmask16 m = r >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << r) - 1);
        const __m512 b = _mm512_maskz_loadu_ps(m, B + i), c = _mm512_maskz_loadu_ps(m, C + i);
        const __m512 v0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, r0 + i), va, _mm512_mul_ps(b, x0));
        const __m512 v1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, r1 + i), va, _mm512_mul_ps(b, x1));
        const __m512 v2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, r2 + i), va, _mm512_mul_ps(b, x2));
        const __m512 v3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, r3 + i), va, _mm512_mul_ps(b, x3));
        _mm512_mask_storeu_ps(r0 + i, m, v0);
        _mm512_mask_storeu_ps(r1 + i, m, v1);
        _mm512_mask_storeu_ps(r2 + i, m, v2);
        _mm512_mask_storeu_ps(r3 + i, m, v3);
        s0 = _mm512_fmadd_ps(v0, c, s0);
        s1 = _mm512_fmadd_ps(v1, c, s1);
        s2 = _mm512_fmadd_ps(v2, c, s2);
        s3 = _mm512_fmadd_ps(v3, c, s3);
    }
    y[0] = _mm512_reduce_add_ps(s0);
    y[1] = _mm512_reduce_add_ps(s1);
    y[2] = _mm512_reduce_add_ps(s2);
    y[3] = _mm512_reduce_add_ps(s3);
}

inline float ssm_update_dot(Isa l, float* st, const float* B, const float* C, float dA, float xdt, int64_t n) {
    switch (l) {
        case Isa::Avx512: return ssm_update_dot_avx512(st, B, C, dA, xdt, n);
        case Isa::Avx2: return ssm_update_dot_avx2(st, B, C, dA, xdt, n);
        default: return ssm_update_dot_scalar(st, B, C, dA, xdt, n);
    }
}

}  // namespace pyggml::cpu::seed
