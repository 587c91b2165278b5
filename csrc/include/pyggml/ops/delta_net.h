// The gated delta rule (Qwen3.5 / Kimi linear attention) with state snapshots.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// q, k f32 [S, H_k, T, B_k] (rows contiguous; value head h uses q/k head h % H_k and batch
// b / (B/B_k)), v f32 [S, H, T, B], g f32 [1 or S, H, T, B] (log decay; per key channel when S:
// KDA), beta f32 [1, H, T, B], state f32 [S, S, H, B] contiguous (element (i, j) = S[i][j],
// i the key index), K >= 1 snapshots. Per token, with M = S^T:
//   S *= exp(g) (row i by exp(g[i]) for KDA);  delta = (v - S^T k) * beta;  S += k delta^T;
//   out = S^T q / sqrt(S)
// Result f32 [S*H, T*B + K*S*B]: the outputs [S, H, T, B], then K states [S, S, H, B]: slot 0
// the final state, slot j the state j tokens earlier. Slots j >= T are zero-filled by pyggml
// (ggml leaves them as they were), so the output is deterministic.
Tensor* gated_delta_net(Context* ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* g, Tensor* beta, Tensor* state,
                        int64_t K = 1);

}  // namespace pyggml
