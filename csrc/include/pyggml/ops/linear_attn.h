// Recurrent linear attention of RWKV-6, RWKV-7 and GLA. Shared layout:
//   per-token inputs f32 [S, H, n_tokens] contiguous (head size S, H heads), the tokens split
//   evenly over n_seqs sequences (n_tokens % n_seqs == 0); state f32 with S*S*H*n_seqs values
//   (per sequence, per head an S x S matrix, row-major);
//   result f32 [S*H, n_tokens + S*n_seqs]: the outputs per token, then the final states.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// state[i][j] = state[i][j]*g[i] + k[i]*v[j];  y[j] = sum_i (q[i]*scale) * state[i][j]
Tensor* gated_linear_attn(Context* ctx, Tensor* k, Tensor* v, Tensor* q, Tensor* g, Tensor* state, float scale);
// y[j] = sum_i r[i] * (tf[i]*k[i]*v[j] + state[i][j]);  state[i][j] = state[i][j]*td[i] + k[i]*v[j]
// (tf f32 [S, H], time-invariant)
Tensor* rwkv_wkv6(Context* ctx, Tensor* k, Tensor* v, Tensor* r, Tensor* tf, Tensor* td, Tensor* state);
// sa = state[i] . a;  state[i][j] = state[i][j]*w[j] + v[i]*k[j] + sa*b[j];  y[i] = state[i] . r
Tensor* rwkv_wkv7(Context* ctx, Tensor* r, Tensor* w, Tensor* k, Tensor* v, Tensor* a, Tensor* b, Tensor* state);

}  // namespace pyggml
