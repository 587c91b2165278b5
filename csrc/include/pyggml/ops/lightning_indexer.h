// LIGHTNING_INDEXER: DeepSeek sparse-attention indexer scores.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// q f32 [D, n_head, n_batch, S]; k [D, 1, n_kv, S] f32/f16/bf16 or a block type (rows packed);
// weights f32 [n_head, n_batch, 1, S]; mask f16 [n_kv, >= n_batch, 1, S_m] with S % S_m == 0
// (mandatory; broadcast over dim 3 by modulo, rows past n_batch ignored).
// result f32 [n_kv, n_batch, 1, S]:
//   out[j,t,0,s] = sum_h max(0, q[:,h,t,s].k[:,0,j,s]) * weights[h,t,0,s] + mask[j,t,0,s % S_m]
Tensor* lightning_indexer(Context* ctx, Tensor* q, Tensor* k, Tensor* weights, Tensor* mask);

}  // namespace pyggml
