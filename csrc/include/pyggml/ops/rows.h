// Row gather/scatter: GET_ROWS and SET_ROWS.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// out[:, r, j, k] = to_f32(a[:, b[r, j, k], j, k]); output F32 (I32 when a is I32).
// b: I32 [n_idx, a.ne2, a.ne3, 1]. Indices outside [0, a.ne1) raise ValueError at compute time.
Tensor* get_rows(Context* ctx, Tensor* a, Tensor* b);
// a[:, c[i, j % c.ne1, k % c.ne2], j, k] = convert(b[:, i, j, k]); the result is a view of a
// (op SET_ROWS, src[0] = b, src[1] = c, src[2] = a). b F32/F16, c I32/I64.
// Indices outside [0, a.ne1) raise ValueError at compute time.
Tensor* set_rows(Context* ctx, Tensor* a, Tensor* b, Tensor* c);

}  // namespace pyggml
