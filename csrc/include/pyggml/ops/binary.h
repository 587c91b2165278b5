// Element-wise binary ops with tiling broadcast of b into a, ADD1 and ADD_ID.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

Tensor* add(Context* ctx, Tensor* a, Tensor* b);
Tensor* sub(Context* ctx, Tensor* a, Tensor* b);
Tensor* mul(Context* ctx, Tensor* a, Tensor* b);
Tensor* div(Context* ctx, Tensor* a, Tensor* b);
Tensor* add_inplace(Context* ctx, Tensor* a, Tensor* b);
Tensor* sub_inplace(Context* ctx, Tensor* a, Tensor* b);
Tensor* mul_inplace(Context* ctx, Tensor* a, Tensor* b);
Tensor* div_inplace(Context* ctx, Tensor* a, Tensor* b);

// a + b for a 1-element b (f32, or a's own 16-bit type); the result has a's type.
Tensor* add1(Context* ctx, Tensor* a, Tensor* b);
Tensor* add1_inplace(Context* ctx, Tensor* a, Tensor* b);
// result[i0, i1, i2, i3] = a[i0, i1, i2, i3] + b[i0, ids[i1, i2]] (a, b f32; ids i32 [ne1, ne2]).
// An id outside [0, b.ne[1]) raises ShapeError at compute time.
Tensor* add_id(Context* ctx, Tensor* a, Tensor* b, Tensor* ids);

}  // namespace pyggml
