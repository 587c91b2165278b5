// Row primitives of the norm, softmax and rope kernels: one function table per SIMD level
// (simd/isa.h). The plain loops below are the reference path and the scalar table; the AVX2
// and AVX-512 tables live in simd/rowops_avx2.cpp and simd/rowops_avx512.cpp.
#pragma once
#include <cmath>
#include <cstdint>

#include "cpu/simd/isa.h"
#include "pyggml/types.h"

namespace pyggml::cpu::rowops {

using Level = simd::Isa;
// The level a kernel call uses (the one detector, capped by PYGGML_ISA / gg.set_isa).
inline Level level() { return simd::cpu_isa(); }

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

// The contract every level implements (the plain loops above define it).
struct RowOps {
    double (*sum)(const float* x, int64_t n);
    double (*sumsq)(const float* x, int64_t n);
    double (*center_sumsq)(float* y, const float* x, float mean, int64_t n);
    void (*scale)(float* y, const float* x, float s, int64_t n);
    float (*scale_mask_max)(float* y, const float* x, float sc, const float* m32, const uint16_t* m16, float slope,
                            int64_t n);
    double (*exp_sum)(float* y, float M, int64_t n);
    void (*rot_neox)(float* d, const float* s, const float* c, const float* sn, int64_t h);
    void (*rot_normal)(float* d, const float* s, const float* cc, const float* ss, int64_t n);
    void (*sincos)(const float* th, float* c, float* s, float mc, float ms, int64_t n);
};

const RowOps& rowops_scalar();   // simd/rowops_scalar.cpp
const RowOps& rowops_avx2();     // simd/rowops_avx2.cpp (the scalar table off x86)
const RowOps& rowops_avx512();   // simd/rowops_avx512.cpp (the scalar table off x86)
inline const RowOps& kernels_for(Level l) {
    switch (l) {
        case Level::Avx512: return rowops_avx512();
        case Level::Avx2: return rowops_avx2();
        default: return rowops_scalar();
    }
}

inline double sum(Level l, const float* x, int64_t n) { return kernels_for(l).sum(x, n); }
inline double sumsq(Level l, const float* x, int64_t n) { return kernels_for(l).sumsq(x, n); }
inline double center_sumsq(Level l, float* y, const float* x, float mean, int64_t n) {
    return kernels_for(l).center_sumsq(y, x, mean, n);
}
inline void scale(Level l, float* y, const float* x, float s, int64_t n) { kernels_for(l).scale(y, x, s, n); }
inline float scale_mask_max(Level l, float* y, const float* x, float sc, const float* m32, const uint16_t* m16,
                            float slope, int64_t n) {
    return kernels_for(l).scale_mask_max(y, x, sc, m32, m16, slope, n);
}
inline double exp_sum(Level l, float* y, float M, int64_t n) { return kernels_for(l).exp_sum(y, M, n); }
inline void rot_neox(Level l, float* d, const float* s, const float* c, const float* sn, int64_t h) {
    kernels_for(l).rot_neox(d, s, c, sn, h);
}
inline void rot_normal(Level l, float* d, const float* s, const float* cc, const float* ss, int64_t n) {
    kernels_for(l).rot_normal(d, s, cc, ss, n);
}
inline void sincos(Level l, const float* th, float* c, float* s, float mc, float ms, int64_t n) {
    kernels_for(l).sincos(th, c, s, mc, ms, n);
}

}  // namespace pyggml::cpu::rowops
