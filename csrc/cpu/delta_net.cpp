// CPU kernel of GATED_DELTA_NET. (head, sequence) pairs are split across threads. The state of a
// pair is held as M = S^T (row j = value channel j, contiguous over key channels i), in the
// result's slot 0, updated in place token by token (the first token reads the input state and
// writes slot 0: no copy pass). Each row is independent within a token, so one row does all
// four steps in two passes over its S values while it sits in L1:
//   pass 1: decay (scalar or per-key exp(g)) and dot with k -> delta_j = (v_j - M_j . k) * beta
//   pass 2: M_j += delta_j * k and dot with q -> out_j = M_j . q / sqrt(S)
// (ggml makes four passes over the whole matrix; the arithmetic per element is the same.)
// Where the SIMD table has them and S % 8 == 0 (cpu/recurrent_simd.h): the first token, which
// reads a large state (S >= 64) cold, takes one row a call with four accumulators a pass (two
// memory streams, near copy speed); later tokens, and small states, which are cached, take
// four rows a call, sharing the loads of k, q and the decay.
// Snapshot slot j (1 <= j < K) receives a copy after token T-1-j; slots j >= T are zeroed.

#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/recurrent_simd.h"

namespace pyggml::cpu {

void cpu_forward_GATED_DELTA_NET(const ComputeParams& p, Tensor* dst) {
    const Tensor* q = dst->src[0];
    const Tensor* k = dst->src[1];
    const Tensor* v = dst->src[2];
    const Tensor* g = dst->src[3];
    const Tensor* beta = dst->src[4];
    const Tensor* state = dst->src[5];
    const int64_t K = dst->param_i32(0);
    const int64_t S = v->ne[0], H = v->ne[1], T = v->ne[2], B = v->ne[3];
    const int64_t Hk = q->ne[1], rb = B / q->ne[3];
    const bool kda = g->ne[0] == S && S > 1;
    const int64_t SS = S * S;
    float* out = (float*)dst->data;
    float* slots = out + S * H * T * B;
    const int64_t slot_floats = SS * H * B;
    const float scale = 1.0f / std::sqrt((float)S);
    const recurrent::RecurrentOps& ops = recurrent::kernels();
    std::vector<float> decay(kda ? S : 0);
    int64_t r0, r1;
    split_range(H * B, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t h = r % H, b = r / H, hk = h % Hk, bk = b / rb;
        float* M = slots + (b * H + h) * SS;
        const float* M0 = (const float*)state->ptr(0, 0, h, b);  // read by the first token's pass 1
        // a small state (under 16 KiB a head) is cached anyway: copy it and take the blocks
        const bool by_rows = ops.delta_row && S % 8 == 0 && S >= 64;
        if (T == 0 || !by_rows) std::memcpy(M, M0, SS * sizeof(float));
        for (int64_t t = 0; t < T; ++t) {
            const float* src = t == 0 && by_rows ? M0 : M;
            const float* qt = (const float*)q->ptr(0, hk, t, bk);
            const float* kt = (const float*)k->ptr(0, hk, t, bk);
            const float* vt = (const float*)v->ptr(0, h, t, b);
            const float* gt = (const float*)g->ptr(0, h, t, b);
            const float bt = *(const float*)beta->ptr(0, h, t, b);
            float ds = 0.0f;
            if (kda) for (int64_t i = 0; i < S; ++i) decay[i] = std::exp(gt[i]);
            else ds = std::exp(gt[0]);
            const float* dv = kda ? decay.data() : nullptr;
            float* ot = out + ((b * T + t) * H + h) * S;
            if ((t > 0 || !by_rows) && ops.delta_rows4 && S % 8 == 0) {
                for (int64_t j = 0; j < S; j += 4) ops.delta_rows4(M + j * S, S, dv, ds, kt, qt, vt + j, bt, scale, ot + j);
            } else if (ops.delta_row && S % 8 == 0) {
                for (int64_t j = 0; j < S; ++j)
                    ot[j] = ops.delta_row(M + j * S, src + j * S, S, dv, ds, kt, qt, vt[j], bt, scale);
            } else {
                for (int64_t j = 0; j < S; ++j) {
                    float* mj = M + j * S;
                    const float d = (vt[j] - ops.decay_dot(mj, src + j * S, dv, ds, kt, S)) * bt;
                    ot[j] = ops.update_dot(mj, d, kt, qt, S) * scale;
                }
            }
            const int64_t slot = T - 1 - t;
            if (slot >= 1 && slot < K) std::memcpy(slots + slot * slot_floats + (b * H + h) * SS, M, SS * sizeof(float));
        }
        for (int64_t slot = std::max<int64_t>(1, T); slot < K; ++slot)
            std::memset(slots + slot * slot_floats + (b * H + h) * SS, 0, SS * sizeof(float));
    }
}
size_t cpu_work_size_GATED_DELTA_NET(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
