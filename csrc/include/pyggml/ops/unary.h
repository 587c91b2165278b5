// Unary element-wise ops (UNARY with a sub-op id, plus SQR and SQRT).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

Tensor* unary(Context* ctx, Tensor* a, UnaryOp op);
Tensor* unary_inplace(Context* ctx, Tensor* a, UnaryOp op);
Tensor* sqr(Context* ctx, Tensor* a);
Tensor* sqr_inplace(Context* ctx, Tensor* a);
Tensor* sqrt(Context* ctx, Tensor* a);
Tensor* sqrt_inplace(Context* ctx, Tensor* a);

// LOG, SIN, COS: their own ops in ggml (not UNARY sub-ops); f32/f16/bf16, rows packed.
Tensor* log(Context* ctx, Tensor* a);
Tensor* log_inplace(Context* ctx, Tensor* a);
Tensor* sin(Context* ctx, Tensor* a);
Tensor* sin_inplace(Context* ctx, Tensor* a);
Tensor* cos(Context* ctx, Tensor* a);
Tensor* cos_inplace(Context* ctx, Tensor* a);
// x > 0 ? x : negative_slope * x (slot 0, f32); ggml's one constructor takes `inplace`.
Tensor* leaky_relu(Context* ctx, Tensor* a, float negative_slope, bool inplace);
// UNARY sub-op XIELU: with an = beta + softplus(alpha_n), ap = softplus(alpha_p) (slots 1, 2),
// x > 0 ? ap*x*x + beta*x : (expm1(min(x, eps)) - x)*an + beta*x (beta, eps in slots 3, 4).
Tensor* xielu(Context* ctx, Tensor* a, float alpha_n, float alpha_p, float beta, float eps);

}  // namespace pyggml
