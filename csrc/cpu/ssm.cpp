// CPU kernels of SSM_CONV and SSM_SCAN (Mamba-1/2 convolution and selective scan).
//  - SSM_CONV: channels (or blocks of 64) split across threads; f32 sums in increasing tap
//    order. sx may be packed along time (ggml's layout) or along channels (the transposed view
//    the recurrent models use: their conv state then joins the new inputs with whole-row copies).
//  - SSM_SCAN: heads split across threads. Each (sequence, head) state is read from the pool
//    slot ids[q] by the first token's update, written to plane 0 of the result and updated there
//    token by token (no separate copy pass); snapshots copy it
//    into plane j after token n_tokens-1-j. Mamba-2 fuses the state update with the y dot product
//    one state row at a time (cpu/recurrent_simd.h, a table per SIMD level): two memory streams,
//    which stay near copy speed when the state comes cold from DRAM.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/recurrent_simd.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {

inline float softplus(float z) { return z > 20.0f ? z : std::log1p(std::exp(z)); }

// One channel whose inputs are contiguous in time (sx [d_conv-1+n_t, d_inner] rows): taps summed
// in increasing order, outputs strided by d_inner. d_conv = 4 (every Mamba and Qwen3.5 file) is
// unrolled; the sum order is the same in both forms.
void conv_channel_time_packed(const float* x, const float* w, int64_t d_conv, int64_t n_t, float* out,
                              int64_t out_stride) {
    if (d_conv == 4) {
        const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
        for (int64_t t = 0; t < n_t; ++t) {
            float a = x[t] * w0;
            a += x[t + 1] * w1;
            a += x[t + 2] * w2;
            a += x[t + 3] * w3;
            out[t * out_stride] = a;
        }
        return;
    }
    for (int64_t t = 0; t < n_t; ++t) {
        float a = x[t] * w[0];
        for (int64_t k = 1; k < d_conv; ++k) a += x[t + k] * w[k];
        out[t * out_stride] = a;
    }
}

// A block of channels whose inputs are contiguous across channels (sx a transposed view of a
// [d_inner, d_conv-1+n_t] buffer): the block's taps are transposed once into wt [d_conv][n],
// then each output row is a few vector multiply-adds over the channels, in the same tap order.
constexpr int64_t kConvBlock = 64;
void conv_block_channel_packed(const char* x0, size_t x_time_stride, const float* w, size_t w_row_stride,
                               int64_t d_conv, int64_t n_t, int64_t n, float* out, size_t out_time_stride,
                               float* wt) {
    for (int64_t c = 0; c < n; ++c) {
        const float* wr = (const float*)((const char*)w + c * w_row_stride);
        for (int64_t k = 0; k < d_conv; ++k) wt[k * kConvBlock + c] = wr[k];
    }
    for (int64_t t = 0; t < n_t; ++t) {
        float* o = (float*)((char*)out + t * out_time_stride);
        const float* xk = (const float*)(x0 + t * x_time_stride);
        for (int64_t c = 0; c < n; ++c) o[c] = xk[c] * wt[c];
        for (int64_t k = 1; k < d_conv; ++k) {
            xk = (const float*)(x0 + (t + k) * x_time_stride);
            const float* wk = wt + k * kConvBlock;
            for (int64_t c = 0; c < n; ++c) o[c] += xk[c] * wk[c];
        }
    }
}

}  // namespace

// dst[i, t, s] = sum_k sx[t+k, i, s] * c[k, i]. sx is either packed along time (ggml's layout) or
// packed along channels (a transposed view); other strides take the channel-packed loop too.
void cpu_forward_SSM_CONV(const ComputeParams& p, Tensor* dst) {
    const Tensor* sx = dst->src[0];
    const Tensor* c = dst->src[1];
    const int64_t d_conv = c->ne[0], d_inner = dst->ne[0], n_t = dst->ne[1], n_s = dst->ne[2];
    if (dst->is_empty()) return;
    const char* xb = (const char*)sx->data;
    float* out = (float*)dst->data;  // [d_inner, n_t, n_s], contiguous
    if (sx->nb[0] == sizeof(float)) {
        int64_t r0, r1;
        split_range(d_inner * n_s, p.ith, p.nth, r0, r1);
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i = r % d_inner, s = r / d_inner;
            conv_channel_time_packed((const float*)(xb + i * sx->nb[1] + s * sx->nb[2]),
                                     (const float*)c->row(i), d_conv, n_t, out + s * n_t * d_inner + i, d_inner);
        }
        return;
    }
    const int64_t n_blocks = (d_inner + kConvBlock - 1) / kConvBlock;
    std::vector<float> wt_heap;
    float wt_stack[8 * kConvBlock];
    float* wt = wt_stack;
    if (d_conv > 8) {
        wt_heap.resize(d_conv * kConvBlock);
        wt = wt_heap.data();
    }
    int64_t b0, b1;
    split_range(n_blocks * n_s, p.ith, p.nth, b0, b1);
    for (int64_t b = b0; b < b1; ++b) {
        const int64_t i0 = (b % n_blocks) * kConvBlock, s = b / n_blocks;
        const int64_t n = std::min(kConvBlock, d_inner - i0);
        if (sx->nb[1] == sizeof(float)) {
            conv_block_channel_packed(xb + i0 * sx->nb[1] + s * sx->nb[2], sx->nb[0], (const float*)c->row(i0),
                                      c->nb[1], d_conv, n_t, n, out + s * n_t * d_inner + i0,
                                      d_inner * sizeof(float), wt);
        } else {  // any other layout: one channel at a time, strided reads
            for (int64_t i = i0; i < i0 + n; ++i) {
                const float* w = (const float*)c->row(i);
                for (int64_t t = 0; t < n_t; ++t) {
                    const char* x = xb + i * sx->nb[1] + s * sx->nb[2] + t * sx->nb[0];
                    float a = *(const float*)x * w[0];
                    for (int64_t k = 1; k < d_conv; ++k) a += *(const float*)(x + k * sx->nb[0]) * w[k];
                    out[(s * n_t + t) * d_inner + i] = a;
                }
            }
        }
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
    const recurrent::RecurrentOps& rops = recurrent::kernels();
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
                    for (int64_t pp = 0; pp < head_dim; ++pp)
                        yr[pp] = rops.ssm_row(st + pp * d_state, src + pp * d_state, Br, Cr, a, xr[pp] * dl, d_state);
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
