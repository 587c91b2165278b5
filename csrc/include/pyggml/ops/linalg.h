// Matrix ops besides mul_mat: OUT_PROD (sum of outer products) and SOLVE_TRI (triangular solve).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// a [m, k, ne2a, ne3a] (any float or block type, not transposed), b f32 [n, k, ne2, ne3]:
// F32 [m, n, ne2, ne3] with result[i, j] = sum_k a[i, k] * b[j, k]. a broadcasts over b's dims
// 2 and 3 by consecutive repeats (a slice i2 / (ne2 / ne2a)); b may have any strides.
Tensor* out_prod(Context* ctx, Tensor* a, Tensor* b);
// Solves A X = B per batch: a f32 [n, n, ne2, ne3] lower triangular (row i1, column i0; the
// upper triangle is never read), b f32 [k, n, ne2, ne3]; result F32 [k, n, ne2, ne3]. Only
// left = true, lower = true, uni = false exists (as in ggml); other variants raise
// NotImplementedError.
Tensor* solve_tri(Context* ctx, Tensor* a, Tensor* b, bool left, bool lower, bool uni);

}  // namespace pyggml
