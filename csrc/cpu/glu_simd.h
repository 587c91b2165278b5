// SIMD helpers of the GLU kernel (cpu/glu.cpp): one function table per SIMD level
// (simd/isa.h). The plain loops below are the reference and the scalar table; the AVX2 table
// lives in simd/glu_avx2.cpp (AVX-512 CPUs use it too).
#pragma once
#include <cmath>
#include <cstdint>

#include "cpu/simd/isa.h"
#include "cpu/unary_math.h"

namespace pyggml::cpu::glu {

// ---- plain loops (reference): o[i] = act(g[i]) * u[i] ----

inline void reglu_scalar(const float* g, const float* u, float* o, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = g[i] > 0.0f ? g[i] * u[i] : 0.0f;
}
inline void swiglu_scalar(const float* g, const float* u, float* o, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = silu_f32(g[i]) * u[i];
}
// GELU read from ggml's f16 table (cpu/unary_math.h)
inline void geglu_scalar(const float* g, const float* u, float* o, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = gelu_f32(g[i]) * u[i];
}
inline void geglu_erf_scalar(const float* g, const float* u, float* o, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = gelu_erf_f32(g[i]) * u[i];
}
inline void geglu_quick_scalar(const float* g, const float* u, float* o, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = gelu_quick_f32(g[i]) * u[i];
}
// gate clamped above at limit, up clamped to [-limit, limit]; x*sigmoid(alpha*x) * (y + 1)
inline void swiglu_oai_scalar(const float* g, const float* u, float* o, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; ++i) {
        const float x = std::fmin(g[i], limit);
        const float y = std::fmax(std::fmin(u[i], limit), -limit);
        o[i] = x / (1.0f + std::exp(-alpha * x)) * (y + 1.0f);
    }
}
// the gate is clamped above at limit before SiLU, up to [-limit, limit]
inline void swiglu_clamp_scalar(const float* g, const float* u, float* o, int64_t n, float limit) {
    for (int64_t i = 0; i < n; ++i) {
        const float x = std::fmin(g[i], limit);
        const float y = std::fmax(std::fmin(u[i], limit), -limit);
        o[i] = silu_f32(x) * y;
    }
}

// SiLU alone (the UNARY kernel's f32 rows): o[i] = silu(x[i]).
inline void silu_scalar(const float* x, float* o, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = silu_f32(x[i]);
}

// The contract every level implements (packed f32 rows of n elements).
struct GluOps {
    void (*reglu)(const float* g, const float* u, float* o, int64_t n);
    void (*swiglu)(const float* g, const float* u, float* o, int64_t n);
    void (*geglu)(const float* g, const float* u, float* o, int64_t n);
    void (*geglu_erf)(const float* g, const float* u, float* o, int64_t n);
    void (*geglu_quick)(const float* g, const float* u, float* o, int64_t n);
    void (*swiglu_oai)(const float* g, const float* u, float* o, int64_t n, float alpha, float limit);
    void (*swiglu_clamp)(const float* g, const float* u, float* o, int64_t n, float limit);
    void (*silu)(const float* x, float* o, int64_t n);
};

const GluOps& glu_scalar();   // simd/glu_scalar.cpp
const GluOps& glu_avx2();     // simd/glu_avx2.cpp (the scalar table off x86)
// The table of the current SIMD level (the CPU's, capped by PYGGML_ISA / gg.set_isa).
inline const GluOps& kernels() { return simd::cpu_isa() == simd::Isa::Scalar ? glu_scalar() : glu_avx2(); }

}  // namespace pyggml::cpu::glu
