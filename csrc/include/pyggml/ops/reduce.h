// Row reductions and scans along dim 0 (spec 4.15, 4.18).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// [1, ne1, ne2, ne3], same type as a; row sums accumulated in double.
Tensor* sum_rows(Context* ctx, Tensor* a);
// [1, ne1, ne2, ne3] f32: row sum / ne0.
Tensor* mean(Context* ctx, Tensor* a);
// Same shape and type as a: inclusive prefix sum along dim 0 (sequential f32 accumulation).
Tensor* cumsum(Context* ctx, Tensor* a);

}  // namespace pyggml
