// Element-wise binary ops with tiling broadcast of b into a (spec 4.5).
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

}  // namespace pyggml
