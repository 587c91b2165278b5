// Unary element-wise ops (UNARY with a sub-op id, plus SQR and SQRT) (spec 4.13).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

Tensor* unary(Context* ctx, Tensor* a, UnaryOp op);
Tensor* unary_inplace(Context* ctx, Tensor* a, UnaryOp op);
Tensor* sqr(Context* ctx, Tensor* a);
Tensor* sqr_inplace(Context* ctx, Tensor* a);
Tensor* sqrt(Context* ctx, Tensor* a);
Tensor* sqrt_inplace(Context* ctx, Tensor* a);

}  // namespace pyggml
