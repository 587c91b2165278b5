// CPU kernels of the DeepSeek-V4 hyper-connection ops (combine, pre, post).
//  - DSV4_HC_COMB: one 4x4 Sinkhorn problem per token, solved kHcLanes tokens at a time (one
//    per SIMD lane), blocks of tokens split across threads.
//  - DSV4_HC_PRE / DSV4_HC_POST: (token, slice of n_embd) work units split across threads; rows
//    with element-sized strides take a vectorised path (AVX-512 / AVX2 picked at run time; the
//    gated pre evaluates its sigmoids with the vector exp),
//    any other strides a plain strided loop. Sums over streams run in increasing order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/seed_simd.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {

inline float ld(const Tensor* t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
    return *(const float*)((const char*)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

constexpr int64_t kChunk = 1024;  // n_embd elements per work unit

}  // namespace

void cpu_forward_DSV4_HC_COMB(const ComputeParams& p, Tensor* dst) {
    const Tensor* mixes = dst->src[0];
    const Tensor* scale = dst->src[1];
    const Tensor* base = dst->src[2];
    const int64_t hc = dst->ne[0], T = dst->ne[2];
    if (hc != 4) return;  // the constructor only admits hc == 4
    const float eps = dst->param_f32(0);
    const int n_iter = dst->param_i32(1);
    const float s2 = ld(scale, 2);
    constexpr int64_t L = seed::kHcLanes;
    const seed::SeedOps& kern = seed::kernels_for(seed::isa());
    // Work units are blocks of L tokens; a short last block fills its spare lanes with zeros.
    int64_t b0, b1;
    split_range((T + L - 1) / L, p.ith, p.nth, b0, b1);
    float P[16 * L], bias[16];
    for (int64_t k = 0; k < 16; ++k) bias[k] = ld(base, 2 * hc + k);  // combine logits follow the gates
    const size_t mnb0 = mixes->nb[0], dnb0 = dst->nb[0], dnb1 = dst->nb[1];
    for (int64_t b = b0; b < b1; ++b) {
        const int64_t t0 = b * L, nt = std::min(L, T - t0);
        for (int64_t l = 0; l < L; ++l) {
            if (l >= nt) {
                for (int64_t k = 0; k < 16; ++k) P[k * L + l] = 0.0f;
                continue;
            }
            const char* m = mixes->ptr(2 * hc, t0 + l);
            for (int64_t k = 0; k < 16; ++k) P[k * L + l] = *(const float*)(m + k * mnb0) * s2 + bias[k];
        }
        kern.hc_comb4(P, eps, n_iter);
        for (int64_t l = 0; l < nt; ++l) {
            char* o = dst->ptr(0, 0, t0 + l);
            for (int64_t s = 0; s < hc; ++s)
                for (int64_t d = 0; d < hc; ++d) *(float*)(o + d * dnb0 + s * dnb1) = P[(d + hc * s) * L + l];
        }
    }
}
size_t cpu_work_size_DSV4_HC_COMB(const Tensor*, int) { return 0; }

void cpu_forward_DSV4_HC_PRE(const ComputeParams& p, Tensor* dst) {
    const Tensor* x = dst->src[0];
    const Tensor* w = dst->src[1];
    const bool gated = dst->param_i32(1) != 0;
    const float scale = dst->param_f32(0);
    const int64_t n_embd = x->ne[0], hc = x->ne[1], T = x->ne[2];
    if (n_embd == 0 || T == 0) return;
    const int64_t n_chunks = (n_embd + kChunk - 1) / kChunk;
    int64_t u0, u1;
    split_range(T * n_chunks, p.ith, p.nth, u0, u1);
    const seed::SeedOps& kern = seed::kernels_for(seed::isa());
    const bool packed = x->nb[0] == sizeof(float) && w->nb[0] == sizeof(float);
    const bool packed_gate = packed && hc > 0;
    std::vector<float> wv(gated ? 0 : hc);
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t t = u / n_chunks, i0 = (u % n_chunks) * kChunk;
        const int64_t i1 = std::min(n_embd, i0 + kChunk), n = i1 - i0;
        float* o = (float*)dst->ptr(i0, t);
        if (gated && packed_gate) {
            kern.hc_pre_gated(o, x->ptr(i0, 0, t), x->nb[1], w->ptr(i0, 0, t), w->nb[1], scale, hc, n);
            continue;
        }
        if (gated) {
            // scale * sum_h x*sigmoid(gate), h increasing (strided rows)
            for (int64_t i = i0; i < i1; ++i) {
                float sum = 0.0f;
                for (int64_t h = 0; h < hc; ++h) {
                    const float g = ld(w, i, h, t);
                    sum += ld(x, i, h, t) * (1.0f / (1.0f + std::exp(-g)));
                }
                o[i - i0] = scale * sum;
            }
            continue;
        }
        for (int64_t h = 0; h < hc; ++h) wv[h] = ld(w, h, t);
        if (packed && hc > 0) {
            const char* x0 = x->ptr(i0, 0, t);
            kern.hc_pre(o, x0, x->nb[1], wv.data(), hc, n);
        } else {
            for (int64_t i = i0; i < i1; ++i) {
                float sum = 0.0f;
                for (int64_t h = 0; h < hc; ++h) sum += ld(x, i, h, t) * wv[h];
                o[i - i0] = sum;
            }
        }
    }
}
size_t cpu_work_size_DSV4_HC_PRE(const Tensor*, int) { return 0; }

void cpu_forward_DSV4_HC_POST(const ComputeParams& p, Tensor* dst) {
    const Tensor* x = dst->src[0];
    const Tensor* res = dst->src[1];
    const Tensor* post = dst->src[2];
    const Tensor* comb = dst->src[3];
    const int64_t n_embd = dst->ne[0], hc = dst->ne[1], T = dst->ne[2];
    if (n_embd == 0 || hc == 0 || T == 0) return;
    const int64_t n_chunks = (n_embd + kChunk - 1) / kChunk;
    int64_t u0, u1;
    split_range(T * hc * n_chunks, p.ith, p.nth, u0, u1);
    const seed::SeedOps& kern = seed::kernels_for(seed::isa());
    const bool packed = x->nb[0] == sizeof(float) && res->nb[0] == sizeof(float);
    std::vector<float> cv(comb ? hc : 0);
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t c = u % n_chunks, d = (u / n_chunks) % hc, t = u / (n_chunks * hc);
        const int64_t i0 = c * kChunk, i1 = std::min(n_embd, i0 + kChunk), n = i1 - i0;
        const float pd = ld(post, d, t);
        if (comb)
            for (int64_t s = 0; s < hc; ++s) cv[s] = ld(comb, d, s, t);
        const float* cp = comb ? cv.data() : nullptr;
        float* o = (float*)dst->ptr(i0, d, t);
        if (packed) {
            const float* xr = (const float*)x->ptr(i0, t);
            const char* r0 = res->ptr(i0, 0, t);
            kern.hc_post(o, xr, pd, r0, res->nb[1], cp, hc, d, n);
        } else {
            for (int64_t i = i0; i < i1; ++i) {
                float v = ld(x, i, t) * pd;
                if (cp) {
                    for (int64_t s = 0; s < hc; ++s) v += ld(res, i, s, t) * cp[s];
                } else {
                    v += ld(res, i, d, t);
                }
                o[i - i0] = v;
            }
        }
    }
}
size_t cpu_work_size_DSV4_HC_POST(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
