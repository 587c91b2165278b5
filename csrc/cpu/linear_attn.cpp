// CPU kernels of the 'linear_attn' family (GLA, RWKV-6, RWKV-7). Heads are split across
// threads; each head walks its tokens in order, reading the previous state (the input state
// for a sequence's first token) and writing the new one into the result's state block, which
// then holds the final state. Rows of the S x S state are updated through the SIMD table of
// cpu/recurrent_simd.h (run-time pick); its plain loops are the reference path.

#include <vector>

#include "cpu/kernels.h"
#include "cpu/recurrent_simd.h"

namespace pyggml::cpu {

namespace {

struct Recurrence {
    int64_t S, H, T, n_seqs, C;
    const float* state_in;
    float* y;       // [C, T]
    float* states;  // [S*S*H, n_seqs]
    // pointers of head h's S x S state for token t: (prev, cur)
    void head_state(int64_t t, int64_t h, const float*& prev, float*& cur) const {
        const int64_t per_seq = T / n_seqs, seq = t / per_seq;
        cur = states + seq * S * C + h * S * S;
        prev = t % per_seq ? cur : state_in + seq * S * C + h * S * S;
    }
};

Recurrence recurrence(Tensor* dst, const Tensor* v, const Tensor* state) {
    Recurrence r;
    r.S = v->ne[0];
    r.H = v->ne[1];
    r.T = v->ne[2];
    r.n_seqs = state->ne[1];
    r.C = r.S * r.H;
    r.state_in = (const float*)state->data;
    r.y = (float*)dst->data;
    r.states = r.y + r.C * r.T;
    return r;
}

}  // namespace

void cpu_forward_GATED_LINEAR_ATTN(const ComputeParams& p, Tensor* dst) {
    const float* k = (const float*)dst->src[0]->data;
    const float* v = (const float*)dst->src[1]->data;
    const float* q = (const float*)dst->src[2]->data;
    const float* g = (const float*)dst->src[3]->data;
    const float scale = dst->param_f32(0);
    const Recurrence R = recurrence(dst, dst->src[1], dst->src[4]);
    const recurrent::RecurrentOps& ops = recurrent::kernels();
    int64_t h0, h1;
    split_range(R.H, p.ith, p.nth, h0, h1);
    for (int64_t t = 0; t < R.T; ++t)
        for (int64_t h = h0; h < h1; ++h) {
            const float* prev;
            float* cur;
            R.head_state(t, h, prev, cur);
            const int64_t o = t * R.C + h * R.S;
            float* y = R.y + o;
            if (ops.cols8 && R.S % 8 == 0) {
                ops.cols8(false, cur, prev, g + o, k + o, q + o, nullptr, scale, v + o, y, R.S);
                continue;
            }
            for (int64_t j = 0; j < R.S; ++j) y[j] = 0.0f;
            for (int64_t i = 0; i < R.S; ++i) {
                float* row = cur + i * R.S;
                ops.row_decay_update(row, prev + i * R.S, g[o + i], k[o + i], v + o, R.S);
                ops.axpy(y, q[o + i] * scale, row, R.S);
            }
        }
}
size_t cpu_work_size_GATED_LINEAR_ATTN(const Tensor*, int) { return 0; }

void cpu_forward_RWKV_WKV6(const ComputeParams& p, Tensor* dst) {
    const float* k = (const float*)dst->src[0]->data;
    const float* v = (const float*)dst->src[1]->data;
    const float* r = (const float*)dst->src[2]->data;
    const float* tf = (const float*)dst->src[3]->data;
    const float* td = (const float*)dst->src[4]->data;
    const Recurrence R = recurrence(dst, dst->src[1], dst->src[5]);
    const recurrent::RecurrentOps& ops = recurrent::kernels();
    int64_t h0, h1;
    split_range(R.H, p.ith, p.nth, h0, h1);
    for (int64_t t = 0; t < R.T; ++t)
        for (int64_t h = h0; h < h1; ++h) {
            const float* prev;
            float* cur;
            R.head_state(t, h, prev, cur);
            const int64_t o = t * R.C + h * R.S;
            float* y = R.y + o;
            if (ops.cols8 && R.S % 8 == 0) {
                ops.cols8(true, cur, prev, td + o, k + o, r + o, tf + h * R.S, 1.0f, v + o, y, R.S);
                continue;
            }
            for (int64_t j = 0; j < R.S; ++j) y[j] = 0.0f;
            for (int64_t i = 0; i < R.S; ++i) {
                const float ki = k[o + i], kt = ki * tf[h * R.S + i];
                // the output reads the previous row before the update overwrites it (in place)
                ops.wkv6_out(y, r[o + i], kt, v + o, prev + i * R.S, R.S);
                ops.row_decay_update(cur + i * R.S, prev + i * R.S, td[o + i], ki, v + o, R.S);
            }
        }
}
size_t cpu_work_size_RWKV_WKV6(const Tensor*, int) { return 0; }

void cpu_forward_RWKV_WKV7(const ComputeParams& p, Tensor* dst) {
    const float* r = (const float*)dst->src[0]->data;
    const float* w = (const float*)dst->src[1]->data;
    const float* k = (const float*)dst->src[2]->data;
    const float* v = (const float*)dst->src[3]->data;
    const float* a = (const float*)dst->src[4]->data;
    const float* b = (const float*)dst->src[5]->data;
    const Recurrence R = recurrence(dst, dst->src[3], dst->src[6]);
    const recurrent::RecurrentOps& ops = recurrent::kernels();
    int64_t h0, h1;
    split_range(R.H, p.ith, p.nth, h0, h1);
    for (int64_t t = 0; t < R.T; ++t)
        for (int64_t h = h0; h < h1; ++h) {
            const float* prev;
            float* cur;
            R.head_state(t, h, prev, cur);
            const int64_t o = t * R.C + h * R.S;
            int64_t i0 = 0;
            if (ops.wkv7_rows4 && R.S % 8 == 0)
                for (; i0 + 4 <= R.S; i0 += 4)
                    ops.wkv7_rows4(cur + i0 * R.S, prev + i0 * R.S, w + o, k + o, v + o + i0, a + o, b + o, r + o,
                                    R.y + o + i0, R.S);
            for (int64_t i = i0; i < R.S; ++i) {
                const float* pr = prev + i * R.S;
                float* row = cur + i * R.S;
                const float sa = ops.dot(a + o, pr, R.S);
                R.y[o + i] = ops.wkv7_row(row, pr, w + o, v[o + i], k + o, sa, b + o, r + o, R.S);
            }
        }
}
size_t cpu_work_size_RWKV_WKV7(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
