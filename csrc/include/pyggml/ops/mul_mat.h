// Op constructors of the 'mul_mat' family (shape inference and validation only).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// ggml_mul_mat: a [K, M, A2, A3] (weights: f32/f16/bf16 or a block weight type, rows
// contiguous, not transposed), b [K, N, B2, B3] (f32/f16/bf16, rows contiguous) with
// B2 % A2 == 0 and B3 % A3 == 0. Result f32 [M, N, B2, B3]; batch i of b uses batch
// i // (B/A) of a (interleaved broadcast).
Tensor* mul_mat(Context* ctx, Tensor* a, Tensor* b);

// ggml_mul_mat_id: as [K, M, n_expert], b [K, Nb, n_tokens], ids i32
// [n_used, n_tokens] with n_used % Nb == 0. Result f32 [M, n_used, n_tokens]:
// out[:, e, t] = as[:, :, ids[e, t]] . b[:, e % Nb, t]. ids outside [0, n_expert) raise
// ValueError at compute time.
Tensor* mul_mat_id(Context* ctx, Tensor* as, Tensor* b, Tensor* ids);

}  // namespace pyggml
