// Pooling over the innermost one or two dims (ggml's pool_1d / pool_2d).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// op: 0 = max, 1 = avg (ggml_op_pool). Output size (in + 2p - k) / s + 1 per pooled dim.
// pool_1d: a [L, ...] -> f32 [OL, ...]; avg divides by the number of in-bounds inputs.
Tensor* pool_1d(Context* ctx, Tensor* a, int op, int k0, int s0, int p0);
// pool_2d: a [W, H, ...] -> f32 [OW, OH, ...]; avg always divides by k0*k1 (padding counts as
// zeros); the paddings are float for the output size and truncated to int for the windows.
Tensor* pool_2d(Context* ctx, Tensor* a, int op, int k0, int k1, int s0, int s1, float p0, float p1);

}  // namespace pyggml
