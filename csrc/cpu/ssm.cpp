// CPU kernels of SSM_CONV and SSM_SCAN (Mamba-1/2 convolution and selective scan).
//  - SSM_CONV: channels split across threads; f32 accumulation in increasing tap order.
//  - SSM_SCAN: heads split across threads. Each (sequence, head) state is read from the pool
//    slot ids[q] by the first token's update, written to plane 0 of the result and updated there
//    token by token (no separate copy pass); snapshots copy it
//    into plane j after token n_tokens-1-j. Mamba-2 fuses the state update with the y dot product
//    (a function table per SIMD level, cpu/seed_simd.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/seed_simd.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {

inline float softplus(float z) { return z > 20.0f ? z : std::log1p(std::exp(z)); }

}  // namespace

void cpu_forward_SSM_CONV(const ComputeParams& p, Tensor* dst) {
    const Tensor* sx = dst->src[0];
    const Tensor* c = dst->src[1];
    const int64_t d_conv = c->ne[0], d_inner = dst->ne[0], n_t = dst->ne[1], n_s = dst->ne[2];
    if (dst->is_empty()) return;
    int64_t r0, r1;
    split_range(d_inner * n_s, p.ith, p.nth, r0, r1);
    std::vector<float> acc(n_t);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i = r % d_inner, s = r / d_inner;
        const float* xr = (const float*)sx->row(i, s);
        const float* cr = (const float*)c->row(i);
        const float c0 = cr[0];
        for (int64_t t = 0; t < n_t; ++t) acc[t] = xr[t] * c0;
        for (int64_t k = 1; k < d_conv; ++k) {
            const float ck = cr[k];
            const float* xk = xr + k;
            for (int64_t t = 0; t < n_t; ++t) acc[t] += xk[t] * ck;
        }
        for (int64_t t = 0; t < n_t; ++t) *(float*)dst->ptr(i, t, s) = acc[t];
    }
}
size_t cpu_work_size_SSM_CONV(const Tensor*, int) { return 0; }

void cpu_forward_SSM_SCAN(const ComputeParams& p, Tensor* dst) {
    const Tensor* s = dst->src[0];
    const Tensor* x = dst->src[1];
    const Tensor* dt = dst->src[2];
    const Tensor* A = dst->src[3];
    const Tensor* B = dst->src[4];
    const Tensor* C = dst->src[5];
    const Tensor* ids = dst->src[6];
    const int64_t K = dst->param_i32(0);
    const int64_t d_state = s->ne[0], head_dim = x->ne[0], n_head = x->ne[1], n_tokens = x->ne[2],
                  n_seqs = x->ne[3], n_slots = s->ne[3];
    const int64_t n_group = B->ne[1];
    const bool mamba1 = A->ne[0] != 1;
    const int64_t Ny = head_dim * n_head * n_tokens * n_seqs;
    const int64_t Ns = d_state * head_dim * n_head * n_seqs;
    const int64_t head_state = d_state * head_dim;  // floats of one head's state
    // ids are data: check them before touching anything (every thread sees the same values).
    const int32_t* idv = (const int32_t*)ids->data;
    for (int64_t q = 0; q < n_seqs; ++q)
        if (idv[q] < 0 || idv[q] >= n_slots)
            throw ShapeError("[ssm_scan] ids[" + std::to_string(q) + "]=" + std::to_string(idv[q]) +
                             " is outside the state pool [0, " + std::to_string(n_slots) + ")");
    if (n_head == 0 || n_seqs == 0) return;
    float* y = (float*)dst->data;
    float* planes = y + Ny;
    const int64_t heads_per_group = n_head / n_group;
    const seed::SeedOps& kern = seed::kernels_for(seed::isa());
    int64_t h0, h1;
    split_range(n_head, p.ith, p.nth, h0, h1);
    std::vector<float> dA(mamba1 ? d_state : 0);
    for (int64_t q = 0; q < n_seqs; ++q) {
        for (int64_t h = h0; h < h1; ++h) {
            const int64_t g = h / heads_per_group;
            float* st = planes + (q * n_head + h) * head_state;  // plane 0, updated in place
            const float* slot = (const float*)((const char*)s->data + h * s->nb[2] + idv[q] * s->nb[3]);
            if (n_tokens == 0) std::memcpy(st, slot, head_state * sizeof(float));
            for (int64_t t = 0; t < n_tokens; ++t) {
                const float* src = t == 0 ? slot : st;  // state before this token
                const float dl = softplus(*(const float*)((const char*)dt->data + h * dt->nb[0] + t * dt->nb[1] + q * dt->nb[2]));
                const float* xr = (const float*)x->ptr(0, h, t, q);
                const float* Br = (const float*)B->ptr(0, g, t, q);
                const float* Cr = (const float*)C->ptr(0, g, t, q);
                float* yr = y + ((q * n_tokens + t) * n_head + h) * head_dim;
                if (!mamba1) {
                    const float a = std::exp(dl * *(const float*)A->ptr(0, h));
                    int64_t pp = 0;
                    if (kern.ssm_update_dot4) {
                        for (; pp + 4 <= head_dim; pp += 4) {
                            const float xdt[4] = {xr[pp] * dl, xr[pp + 1] * dl, xr[pp + 2] * dl, xr[pp + 3] * dl};
                            kern.ssm_update_dot4(st + pp * d_state, src + pp * d_state, Br, Cr, a, xdt, d_state, yr + pp);
                        }
                    }
                    for (; pp < head_dim; ++pp)
                        yr[pp] = kern.ssm_update_dot(st + pp * d_state, src + pp * d_state, Br, Cr, a, xr[pp] * dl, d_state);
                } else {
                    const float* Ar = (const float*)A->ptr(0, h);
                    for (int64_t n = 0; n < d_state; ++n) dA[n] = std::exp(dl * Ar[n]);
                    for (int64_t pp = 0; pp < head_dim; ++pp) {
                        float* sp = st + pp * d_state;
                        const float* in = src + pp * d_state;
                        const float xdt = xr[pp] * dl;
                        float sum = 0.0f;
                        for (int64_t n = 0; n < d_state; ++n) {
                            const float v = in[n] * dA[n] + Br[n] * xdt;
                            sp[n] = v;
                            sum += v * Cr[n];
                        }
                        yr[pp] = sum;
                    }
                }
                const int64_t j = n_tokens - 1 - t;
                if (K > 1 && j >= 1 && j < K)
                    std::memcpy(planes + j * Ns + (q * n_head + h) * head_state, st, head_state * sizeof(float));
            }
            // planes never reached (j >= n_tokens) are zero-filled: pyggml's documented choice
            for (int64_t j = std::max<int64_t>(1, n_tokens); j < K; ++j)
                std::memset(planes + j * Ns + (q * n_head + h) * head_state, 0, head_state * sizeof(float));
        }
    }
}
size_t cpu_work_size_SSM_SCAN(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
