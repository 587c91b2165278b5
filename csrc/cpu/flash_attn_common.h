// Per-row pieces shared by the dense and the sparse flash-attention kernels: ALiBi slopes, K/V
// rows widened to f32, and the final row (sinks folded in, then normalised).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cpu/flash_attn_kernels.h"
#include "cpu/kernels.h"

namespace pyggml::cpu::fa {

// ALiBi slope of head h: powers of m0 for the first n_head_log2 heads, odd powers of m1 after;
// 1 when max_bias is 0.
struct AlibiSlopes {
    float max_bias = 0.0f, m0 = 1.0f, m1 = 1.0f;
    int64_t n_head_log2 = 1;

    AlibiSlopes() = default;
    AlibiSlopes(float bias, int64_t n_head) : max_bias(bias) {
        n_head_log2 = n_head > 0 ? (int64_t)1 << (int64_t)std::floor(std::log2((double)n_head)) : 1;
        m0 = std::pow(2.0f, -max_bias / (float)n_head_log2);
        m1 = std::pow(2.0f, -(max_bias / 2.0f) / (float)n_head_log2);
    }
    float operator()(int64_t h) const {
        if (!(max_bias > 0.0f)) return 1.0f;
        return h < n_head_log2 ? std::pow(m0, (float)(h + 1)) : std::pow(m1, (float)(2 * (h - n_head_log2) + 1));
    }
};

// Row j of head h, sequence s of K or V as n floats: in place for F32, else widened into buf.
inline const float* row_as_f32(const Kernels& kern, const Tensor* t, int64_t j, int64_t h, int64_t s, float* buf,
                               int64_t n) {
    const char* src = t->row(j, h, s);
    switch (t->type) {
        case Type::F32: return (const float*)src;
        case Type::F16: kern.f16_to_f32((const uint16_t*)src, buf, n); return buf;
        default: to_float_row(t->type, src, buf, n); return buf;
    }
}

// The output row of one (head, token): the sink of head h (if any) joins the softmax, then the
// accumulated o (scaled in place) is divided by Z; a row with Z == 0 (all masked) is zeros.
inline void finish_row(const Kernels& kern, const Tensor* sinks, float* o, float M, float Z, int64_t h, int64_t Dv,
                       float* out) {
    constexpr float kNegInf = -INFINITY;
    if (sinks) {
        const float sk = ((const float*)sinks->data)[h];
        const float Mn = std::max(M, sk);
        if (Mn != kNegInf) {
            const float ratio = M == kNegInf ? 0.0f : std::exp(M - Mn);
            if (ratio != 1.0f) kern.scale(o, Dv, ratio);
            Z = Z * ratio + std::exp(sk - Mn);
        }
    }
    if (Z == 0.0f) {
        std::fill(out, out + Dv, 0.0f);
        return;
    }
    const float inv = 1.0f / Z;
    for (int64_t d = 0; d < Dv; ++d) out[d] = o[d] * inv;
}

}  // namespace pyggml::cpu::fa
