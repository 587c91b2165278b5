// Op constructors of the 'norm' family: shape inference and validation only.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// Per row: (x - mean) / sqrt(var + eps). a: F32, any strides. eps >= 0 (op_params slot 0).
Tensor* norm(Context* ctx, Tensor* a, float eps);
Tensor* norm_inplace(Context* ctx, Tensor* a, float eps);
// Per row: x / sqrt(mean(x^2) + eps). a: F32, any strides. eps >= 0 (slot 0).
Tensor* rms_norm(Context* ctx, Tensor* a, float eps);
Tensor* rms_norm_inplace(Context* ctx, Tensor* a, float eps);

}  // namespace pyggml
