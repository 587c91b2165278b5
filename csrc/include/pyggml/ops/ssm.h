// Mamba ops: depth-wise causal convolution and the selective state-space scan.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// sx f32 [d_conv-1+n_t, d_inner, n_s] (dim 0 is time; dims 0/1 packed), c f32 [d_conv, d_inner]
// -> f32 [d_inner, n_t, n_s]: out[i,t,s] = sum_k sx[t+k,i,s] * c[k,i] (correlation, no flip).
Tensor* ssm_conv(Context* ctx, Tensor* sx, Tensor* c);

// Selective scan (Mamba-1: A f32 [d_state, n_head]; Mamba-2: A f32 [1, n_head]).
//   s   f32 [d_state, head_dim, n_head, n_slots] contiguous (state pool, read at ids[q])
//   x   f32 [head_dim, n_head, n_tokens, n_seqs] (dims 0/1 packed, dims 2/3 any stride)
//   dt  f32 [n_head, n_tokens, n_seqs] contiguous (softplus applied inside, > 20 passes through)
//   B,C f32 [d_state, n_group, n_tokens, n_seqs] (dims 0/1 packed), n_head % n_group == 0
//   ids i32 [n_seqs]; K >= 1 snapshots (K > 1 refused for Mamba-1)
// Result: 1-D f32 of Ny + K*Ns values: y packed [head_dim, n_head, n_tokens, n_seqs], then K state
// planes [d_state, head_dim, n_head, n_seqs] (plane 0 the final state, plane j the state j tokens
// back, sequence q at position q). pyggml zero-fills planes j >= n_tokens (ggml leaves them as
// they were), so the output is deterministic.
Tensor* ssm_scan(Context* ctx, Tensor* s, Tensor* x, Tensor* dt, Tensor* A, Tensor* B, Tensor* C, Tensor* ids,
                 int64_t K = 1);

}  // namespace pyggml
