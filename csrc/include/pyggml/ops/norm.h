// Op constructors of the 'norm' family (NORM, RMS_NORM, L2_NORM, GROUP_NORM): shape inference and
// validation only.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// Per row: (x - mean) / sqrt(var + eps). a: F32, any strides. eps >= 0 (op_params slot 0).
Tensor* norm(Context* ctx, Tensor* a, float eps);
Tensor* norm_inplace(Context* ctx, Tensor* a, float eps);
// Per row: x / sqrt(mean(x^2) + eps). a: F32, any strides. eps >= 0 (slot 0).
Tensor* rms_norm(Context* ctx, Tensor* a, float eps);
Tensor* rms_norm_inplace(Context* ctx, Tensor* a, float eps);
// Per row: x / max(||x||_2, eps). a: F32, any strides. eps >= 0 (slot 0).
Tensor* l2_norm(Context* ctx, Tensor* a, float eps);
Tensor* l2_norm_inplace(Context* ctx, Tensor* a, float eps);
// Channels (dim 2) in n_groups groups of ceil(ne2 / n_groups) (the last may be smaller); each
// group of each ne3 slice normalised over (ne0, ne1, its channels): (x - mean) / sqrt(var + eps).
// a: F32 with contiguous rows; n_groups >= 1 (slot 0), eps >= 0 (slot 1). No affine part.
Tensor* group_norm(Context* ctx, Tensor* a, int n_groups, float eps);
Tensor* group_norm_inplace(Context* ctx, Tensor* a, int n_groups, float eps);

}  // namespace pyggml
