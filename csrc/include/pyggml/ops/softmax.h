// Op constructors of the 'softmax' family: shape inference and validation only.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// softmax over dim 0 of a (F32, contiguous). op_params: slot 0 scale (f32), slot 1 max_bias (f32).
Tensor* soft_max(Context* ctx, Tensor* a);
Tensor* soft_max_inplace(Context* ctx, Tensor* a);
// softmax(a*scale + slope(i2)*mask). mask optional (nullptr), F16 or F32, contiguous,
// [a.ne0, >= a.ne1, divides a.ne2, divides a.ne3] (broadcast over dims 2/3 by modulo).
// max_bias > 0 (ALiBi) requires a mask.
Tensor* soft_max_ext(Context* ctx, Tensor* a, Tensor* mask, float scale, float max_bias);
Tensor* soft_max_ext_inplace(Context* ctx, Tensor* a, Tensor* mask, float scale, float max_bias);
// Sets (or clears with nullptr) src[2] = sinks (F32, [a.ne2]) on an existing SOFT_MAX node.
void soft_max_add_sinks(Tensor* node, Tensor* sinks);
// Gradient of soft_max_ext (ggml's SOFT_MAX_BACK): per row, scale * y * (dy - dot(y, dy)) for
// dy (the output gradient) and y (the softmax output), both F32 of one shape with packed rows.
// Only max_bias == 0 is supported (as on ggml's CPU).
Tensor* soft_max_ext_back(Context* ctx, Tensor* dy, Tensor* y, float scale, float max_bias);
Tensor* soft_max_ext_back_inplace(Context* ctx, Tensor* dy, Tensor* y, float scale, float max_bias);

}  // namespace pyggml
