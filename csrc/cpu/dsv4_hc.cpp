// CPU kernels of the DeepSeek-V4 hyper-connection ops (combine, pre, post).
//  - DSV4_HC_COMB: one 4x4 Sinkhorn problem per token, tokens split across threads.
//  - DSV4_HC_PRE / DSV4_HC_POST: (token, slice of n_embd) work units split across threads; rows
//    with element-sized strides take a vectorised path (AVX-512 / AVX2 picked at run time),
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

// ------------------------------------------------------------------ comb

void hc_comb_token(const Tensor* mixes, const Tensor* base, float s2, float eps, int n_iter, int64_t hc,
                   int64_t t, float* P /* hc*hc, [d + hc*s] */) {
    const int64_t off = 2 * hc;
    for (int64_t s = 0; s < hc; ++s) {
        float* col = P + hc * s;
        float mx = -INFINITY;
        for (int64_t d = 0; d < hc; ++d) {
            const int64_t k = off + d + hc * s;
            col[d] = ld(mixes, k, t) * s2 + ld(base, k);
            mx = col[d] > mx ? col[d] : mx;
        }
        float sum = 0.0f;
        for (int64_t d = 0; d < hc; ++d) {
            col[d] = std::exp(col[d] - mx);
            sum += col[d];
        }
        for (int64_t d = 0; d < hc; ++d) col[d] = col[d] / sum + eps;
    }
    auto norm_src = [&] {  // for each dst: divide by eps + sum over src
        for (int64_t d = 0; d < hc; ++d) {
            float sum = 0.0f;
            for (int64_t s = 0; s < hc; ++s) sum += P[d + hc * s];
            const float den = eps + sum;
            for (int64_t s = 0; s < hc; ++s) P[d + hc * s] /= den;
        }
    };
    auto norm_dst = [&] {  // for each src: divide by eps + sum over dst
        for (int64_t s = 0; s < hc; ++s) {
            float sum = 0.0f;
            for (int64_t d = 0; d < hc; ++d) sum += P[d + hc * s];
            const float den = eps + sum;
            for (int64_t d = 0; d < hc; ++d) P[d + hc * s] /= den;
        }
    };
    norm_src();
    for (int it = 1; it < n_iter; ++it) {
        norm_dst();
        norm_src();
    }
}

}  // namespace

void cpu_forward_DSV4_HC_COMB(const ComputeParams& p, Tensor* dst) {
    const Tensor* mixes = dst->src[0];
    const Tensor* scale = dst->src[1];
    const Tensor* base = dst->src[2];
    const int64_t hc = dst->ne[0], T = dst->ne[2];
    if (hc <= 0 || hc > 8) return;  // the constructor only admits hc == 4
    const float eps = dst->param_f32(0);
    const int n_iter = dst->param_i32(1);
    const float s2 = ld(scale, 2);
    int64_t t0, t1;
    split_range(T, p.ith, p.nth, t0, t1);
    float P[64];
    for (int64_t t = t0; t < t1; ++t) {
        hc_comb_token(mixes, base, s2, eps, n_iter, hc, t, P);
        for (int64_t s = 0; s < hc; ++s)
            for (int64_t d = 0; d < hc; ++d) *(float*)dst->ptr(d, s, t) = P[d + hc * s];
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
    std::vector<float> wv(gated ? 0 : hc);
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t t = u / n_chunks, i0 = (u % n_chunks) * kChunk;
        const int64_t i1 = std::min(n_embd, i0 + kChunk), n = i1 - i0;
        float* o = (float*)dst->ptr(i0, t);
        if (gated) {
            // scale * sum_h x*sigmoid(gate), h increasing (plain loop: expf dominates)
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
