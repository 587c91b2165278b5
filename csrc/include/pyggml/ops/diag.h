// DIAG and the causal masks DIAG_MASK_INF / DIAG_MASK_ZERO.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// a [n, 1, ne2, ne3] f32 -> [n, n, ne2, ne3]: each vector placed on the diagonal of a matrix.
Tensor* diag(Context* ctx, Tensor* a);
// Entries (i0, i1) with i0 > n_past + i1 become -inf (or 0); a f32, rows packed, n_past >= 0.
Tensor* diag_mask_inf(Context* ctx, Tensor* a, int n_past);
Tensor* diag_mask_inf_inplace(Context* ctx, Tensor* a, int n_past);
Tensor* diag_mask_zero(Context* ctx, Tensor* a, int n_past);
Tensor* diag_mask_zero_inplace(Context* ctx, Tensor* a, int n_past);

}  // namespace pyggml
