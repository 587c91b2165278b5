// FILL: every element := c.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// a: F32 or F16, contiguous (only its shape and type matter). c may be +-inf or NaN.
Tensor* fill(Context* ctx, Tensor* a, float c);
Tensor* fill_inplace(Context* ctx, Tensor* a, float c);

}  // namespace pyggml
