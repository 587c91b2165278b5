// Pieces shared by the dense and the sparse flash-attention kernels: the scratch bump allocator,
// the chunk fold, the online-softmax max update, ALiBi slopes, K/V rows asked for ahead and
// widened to f32, and the final row (sinks folded in, then normalised).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cpu/flash_attn_kernels.h"
#include "cpu/kernels.h"

namespace pyggml::cpu::fa {

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Bump allocator over a thread's scratch (64-byte aligned pieces).
struct Bump {
    uintptr_t p;
    template <class T> T* take(int64_t n) {
        T* r = (T*)p;
        p += (uintptr_t)round_up((int64_t)(n * sizeof(T)), 64);
        return r;
    }
};

// Folds a chunk's softmax state (Mc, Zc, Oc) into the running (M, Z, O); chunks go in
// ascending order. Never inlined: the split and the in-unit fold run the same instructions.
__attribute__((noinline)) inline void fold_state(float& M, float& Z, float* O, float Mc, float Zc, const float* Oc,
                                                 int64_t Dv) {
    if (Zc == 0.0f) return;
    const float Mn = std::max(M, Mc);
    const float so = std::exp(M - Mn), sn = std::exp(Mc - Mn);
    for (int64_t d = 0; d < Dv; ++d) O[d] = O[d] * so + Oc[d] * sn;
    Z = Z * so + Zc * sn;
    M = Mn;
}

// Online softmax for one query row of a tile whose logits (maximum mt) are in srow: raises the
// running max M, rescaling the accumulated O (Dv values) and Z, and returns the new max. A row
// with nothing finite yet is zeroed and gets -inf.
inline float raise_max(const Kernels& kern, float* srow, int n, float mt, float& M, float& Z, float* O, int64_t Dv) {
    const float Mnew = std::max(M, mt);
    if (Mnew == -INFINITY) {
        std::fill(srow, srow + n, 0.0f);
        return Mnew;
    }
    if (Mnew > M) {
        const float ratio = M == -INFINITY ? 0.0f : std::exp(M - Mnew);
        if (Z != 0.0f) kern.scale(O, Dv, ratio);
        Z *= ratio;
        M = Mnew;
    }
    return Mnew;
}

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

// Asks for K/V rows idx[0..n) of head h, sequence s to be brought into L2 ahead of use (the
// memory works while the tile computes). Into L2, not L1: a tile's lines overflow L1's miss
// buffers (into L1: SmolLM2-135M decode at 4096 cached tokens, Q8_0 cache, 13% more time a
// token; bench_ops fa_sparse, head size 128 with 8 K/V heads: no gain over no prefetch, L2
// 0.5-0.8 of that time).
inline void prefetch_rows(const Tensor* t, const int32_t* idx, int n, int64_t h, int64_t s) {
    const size_t bytes = t->row_bytes();
    for (int jj = 0; jj < n; ++jj) prefetch_to_l2(t->row(idx[jj], h, s), bytes);
}

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
