// Scalar activation functions shared by UNARY and GLU kernels (f32 math).
#pragma once
#include <cmath>
#include <cstdint>

#include "pyggml/types.h"

namespace pyggml::cpu {

inline float sigmoid_f32(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu_f32(float x) { return x / (1.0f + std::exp(-x)); }
inline float softplus_f32(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
inline float gelu_quick_f32(float x) { return x * sigmoid_f32(1.702f * x); }
inline float gelu_erf_f32(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

inline float gelu_tanh_exact(float x) {
    const float c = 0.79788456080286535588f;  // sqrt(2/pi)
    return 0.5f * x * (1.0f + std::tanh(c * x * (1.0f + 0.044715f * x * x)));
}

// GELU as ggml's CPU computes it: for |x| < 10 the input is rounded to f16 and the value
// read from a table of f16-rounded GELU values; 0 below -10, x above 10.
struct GeluTable {
    uint16_t v[65536];
    GeluTable() {
        for (uint32_t h = 0; h < 65536; ++h) v[h] = fp32_to_fp16(gelu_tanh_exact(fp16_to_fp32((uint16_t)h)));
    }
};
inline const GeluTable& gelu_table() { static const GeluTable t; return t; }
inline float gelu_f32(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return fp16_to_fp32(gelu_table().v[fp32_to_fp16(x)]);
}

}  // namespace pyggml::cpu
