// SIMD helpers of the recurrent-state kernels (cpu/delta_net.cpp: the gated delta rule;
// cpu/linear_attn.cpp: GLA, RWKV-6, RWKV-7): one function table per SIMD level (simd/isa.h).
// The plain loops below are the reference and the scalar table; the AVX2 table lives in
// simd/recurrent_avx2.cpp (AVX-512 CPUs use it too).
#pragma once
#include <cstdint>

#include "cpu/simd/isa.h"

namespace pyggml::cpu::recurrent {

// ---- plain loops (reference) ----

// Delta rule pass 1 on a state row: m = src * decay (per key dvec[i], or the scalar ds when
// dvec is null; src may be m); returns m . k.
inline float decay_dot_scalar(float* m, const float* src, const float* dvec, float ds, const float* k, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        m[i] = src[i] * (dvec ? dvec[i] : ds);
        s += m[i] * k[i];
    }
    return s;
}
// Delta rule pass 2: m += d * k; returns m . q.
inline float update_dot_scalar(float* m, float d, const float* k, const float* q, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        m[i] += d * k[i];
        s += m[i] * q[i];
    }
    return s;
}
// out = prev*g + kk*v   (GLA with g = g[i]; RWKV-6 state update with td[i])
inline void row_decay_update_scalar(float* out, const float* prev, float g, float kk, const float* v, int64_t n) {
    for (int64_t j = 0; j < n; ++j) out[j] = prev[j] * g + kk * v[j];
}
// y += s*x
inline void axpy_scalar(float* y, float s, const float* x, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] += s * x[j];
}
// RWKV-6 output row: y += r * (kt*v + prev)
inline void wkv6_out_scalar(float* y, float r, float kt, const float* v, const float* prev, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] += (kt * v[j] + prev[j]) * r;
}
inline float dot_scalar(const float* a, const float* b, int64_t n) {
    float s = 0.0f;
    for (int64_t j = 0; j < n; ++j) s += a[j] * b[j];
    return s;
}
// RWKV-7 row: out = prev*w + vi*k + sa*b, returns out . r
inline float wkv7_row_scalar(float* out, const float* prev, const float* w, float vi, const float* k, float sa,
                             const float* b, const float* r, int64_t n) {
    float y = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
        out[j] = prev[j] * w[j] + vi * k[j] + sa * b[j];
        y += out[j] * r[j];
    }
    return y;
}

// Mamba-2 state row: st = src*dA + B*xdt (st may equal src); returns st . C.
inline float ssm_row_scalar(float* st, const float* src, const float* B, const float* C, float dA, float xdt,
                            int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        const float v = src[i] * dA + B[i] * xdt;
        st[i] = v;
        s += v * C[i];
    }
    return s;
}

// The contract every level implements. The blocked entries need S % 8 == 0 and are null
// where a level has none (callers then loop over the row helpers).
struct RecurrentOps {
    float (*decay_dot)(float* m, const float* src, const float* dvec, float ds, const float* k, int64_t n);
    float (*update_dot)(float* m, float d, const float* k, const float* q, int64_t n);
    // Delta rule on one state row read from src (may be m), both passes while the row is in L1,
    // four accumulators a pass: returns M_j . q * scale. Needs S % 8 == 0.
    float (*delta_row)(float* m, const float* src, int64_t S, const float* dvec, float ds, const float* k,
                       const float* q, float v, float beta, float scale);
    // Delta rule in place on four state rows at once (row stride S), sharing the loads of k, q
    // and the decay: out[0..4) = M_r . q * scale. Needs S % 8 == 0.
    void (*delta_rows4)(float* m, int64_t S, const float* dvec, float ds, const float* k, const float* q,
                        const float* v, float beta, float scale, float* out);
    void (*row_decay_update)(float* out, const float* prev, float g, float kk, const float* v, int64_t n);
    void (*axpy)(float* y, float s, const float* x, int64_t n);
    void (*wkv6_out)(float* y, float r, float kt, const float* v, const float* prev, int64_t n);
    float (*dot)(const float* a, const float* b, int64_t n);
    float (*wkv7_row)(float* out, const float* prev, const float* w, float vi, const float* k, float sa,
                      const float* b, const float* r, int64_t n);
    // GLA (wkv6 false: y from the new state, times scale) or RWKV-6 (y from the previous
    // state and tf) for one head and token, eight output columns at a time.
    void (*cols8)(bool wkv6, float* cur, const float* prev, const float* decay, const float* k, const float* yw,
                  const float* tf, float scale, const float* v, float* y, int64_t S);
    // RWKV-7, four state rows at once.
    void (*wkv7_rows4)(float* cur, const float* prev, const float* w, const float* k, const float* vi,
                       const float* a, const float* b, const float* r, float* y, int64_t S);
    // Mamba-2 selective-scan row (ssm_row_scalar's contract).
    float (*ssm_row)(float* st, const float* src, const float* B, const float* C, float dA, float xdt, int64_t n);
};

const RecurrentOps& recurrent_scalar();   // simd/recurrent_scalar.cpp
const RecurrentOps& recurrent_avx2();     // simd/recurrent_avx2.cpp (the scalar table off x86)
// The table of the current SIMD level (the CPU's, capped by PYGGML_ISA / gg.set_isa).
inline const RecurrentOps& kernels() {
    return simd::cpu_isa() == simd::Isa::Scalar ? recurrent_scalar() : recurrent_avx2();
}

}  // namespace pyggml::cpu::recurrent
