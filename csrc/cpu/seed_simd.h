// SIMD helpers of the seed-op kernels (DSV4 hyper-connections, lightning indexer, SSM scan):
// one function table per SIMD level (simd/isa.h). The plain loops below are the reference
// and the scalar table; the AVX2 and AVX-512 tables live in simd/seed_avx2.cpp and
// simd/seed_avx512.cpp.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cpu/simd/isa.h"

namespace pyggml::cpu::seed {

using Isa = simd::Isa;
// The level a kernel call uses (the one detector, capped by PYGGML_ISA / gg.set_isa).
inline Isa isa() { return simd::cpu_isa(); }

// Lightning indexer: kv rows per score block (4 AVX-512 vectors).
constexpr int64_t kLiBlock = 64;

// ---- plain loops (reference) ----

// o[i] = sum_h xs[h][i] * w[h]
__attribute__((always_inline)) inline void hc_pre_body(float* __restrict o, const char* x0, size_t xnb1,
                                                          const float* w, int64_t hc, int64_t n) {
    const float* x = (const float*)x0;
    const float w0 = w[0];
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] * w0;
    for (int64_t h = 1; h < hc; ++h) {
        const float* __restrict xh = (const float*)(x0 + h * xnb1);
        const float wh = w[h];
        for (int64_t i = 0; i < n; ++i) o[i] += xh[i] * wh;
    }
}

// o[i] = comb given: x[i]*p + sum_s r_s[i]*c[s];  identity: x[i]*p + r_d[i]
__attribute__((always_inline)) inline void hc_post_body(float* __restrict o, const float* __restrict x, float p,
                                                     const char* r0, size_t rnb1, const float* c, int64_t hc,
                                                     int64_t d, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] * p;
    if (!c) {
        const float* __restrict r = (const float*)(r0 + d * rnb1);
        for (int64_t i = 0; i < n; ++i) o[i] += r[i];
        return;
    }
    for (int64_t s = 0; s < hc; ++s) {
        const float* __restrict r = (const float*)(r0 + s * rnb1);
        const float cs = c[s];
        for (int64_t i = 0; i < n; ++i) o[i] += r[i] * cs;
    }
}

// o[i] = scale * sum_h x_h[i] * sigmoid(g_h[i])   (h increasing)
__attribute__((always_inline)) inline void hc_pre_gated_body(float* __restrict o, const char* x0, size_t xnb1,
                                                                const char* g0, size_t gnb1, float scale,
                                                                int64_t hc, int64_t i0, int64_t n) {
    for (int64_t i = i0; i < n; ++i) {
        float sum = 0.0f;
        for (int64_t h = 0; h < hc; ++h) {
            const float g = ((const float*)(g0 + h * gnb1))[i];
            sum += ((const float*)(x0 + h * xnb1))[i] * (1.0f / (1.0f + std::exp(-g)));
        }
        o[i] = scale * sum;
    }
}

// DSV4_HC_COMB works on kHcLanes tokens at once, one token per lane: P[k * kHcLanes + lane]
// holds entry k = d + 4*s of that token's 4x4 matrix (d = dst stream, s = src stream).
constexpr int64_t kHcLanes = 8;

// On entry P holds the logits, on return the Sinkhorn-normalised combine weights: a softmax
// over d for each s (plus eps), then a src normalisation, then n_iter-1 rounds of dst and src
// normalisations, each scaling by 1 / (eps + the sum) (sums in increasing index order).
inline void hc_comb4_scalar(float* P, float eps, int n_iter) {
    constexpr int64_t L = kHcLanes;
    for (int64_t l = 0; l < L; ++l) {
        auto at = [&](int64_t d, int64_t s) -> float& { return P[(d + 4 * s) * L + l]; };
        for (int64_t s = 0; s < 4; ++s) {
            float mx = -INFINITY;
            for (int64_t d = 0; d < 4; ++d) mx = at(d, s) > mx ? at(d, s) : mx;
            float sum = 0.0f;
            for (int64_t d = 0; d < 4; ++d) {
                at(d, s) = std::exp(at(d, s) - mx);
                sum += at(d, s);
            }
            for (int64_t d = 0; d < 4; ++d) at(d, s) = at(d, s) / sum + eps;
        }
        auto norm_src = [&] {  // for each dst: divide by eps + sum over src
            for (int64_t d = 0; d < 4; ++d) {
                float sum = 0.0f;
                for (int64_t s = 0; s < 4; ++s) sum += at(d, s);
                const float inv = 1.0f / (eps + sum);
                for (int64_t s = 0; s < 4; ++s) at(d, s) *= inv;
            }
        };
        auto norm_dst = [&] {  // for each src: divide by eps + sum over dst
            for (int64_t s = 0; s < 4; ++s) {
                float sum = 0.0f;
                for (int64_t d = 0; d < 4; ++d) sum += at(d, s);
                const float inv = 1.0f / (eps + sum);
                for (int64_t d = 0; d < 4; ++d) at(d, s) *= inv;
            }
        };
        norm_src();
        for (int it = 1; it < n_iter; ++it) {
            norm_dst();
            norm_src();
        }
    }
}

// The contract every level implements.
struct SeedOps {
    // hc_pre_body above (packed rows).
    void (*hc_pre)(float* o, const char* x0, size_t xnb1, const float* w, int64_t hc, int64_t n);
    // hc_post_body above (packed rows).
    void (*hc_post)(float* o, const float* x, float p, const char* r0, size_t rnb1, const float* c, int64_t hc,
                    int64_t d, int64_t n);
    // scores[0..kLiBlock) = sum_h relu(q_h . KT[:, j]) * w[h] (h increasing); KT is d-major with
    // row stride ldk.
    void (*li_block)(const float* KT, int64_t ldk, const char* q0, size_t qnb1, const float* w, int64_t H,
                     int64_t D, float* sc);
    // sum_i a[i] * b[i] over two packed f32 vectors (dot_scalar below is the reference).
    float (*dot)(const float* a, const float* b, int64_t n);
    // hc_comb4_scalar above (kHcLanes tokens, hc == 4).
    void (*hc_comb4)(float* P, float eps, int n_iter);
    // hc_pre_gated_body above over i in [0, n) (packed rows).
    void (*hc_pre_gated)(float* o, const char* x0, size_t xnb1, const char* g0, size_t gnb1, float scale,
                         int64_t hc, int64_t n);
};

inline float dot_scalar(const float* a, const float* b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

const SeedOps& seed_scalar();   // simd/seed_scalar.cpp
const SeedOps& seed_avx2();     // simd/seed_avx2.cpp (the scalar table off x86)
const SeedOps& seed_avx512();   // simd/seed_avx512.cpp (the scalar table off x86)
inline const SeedOps& kernels_for(Isa l) {
    switch (l) {
        case Isa::Avx512: return seed_avx512();
        case Isa::Avx2: return seed_avx2();
        default: return seed_scalar();
    }
}

}  // namespace pyggml::cpu::seed
