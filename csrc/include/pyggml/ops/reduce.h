// Reductions: row sums and scans along dim 0, whole-tensor sum, argmax and
// count_equal.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// [1, ne1, ne2, ne3], same type as a; row sums accumulated in double.
Tensor* sum_rows(Context* ctx, Tensor* a);
// [1, ne1, ne2, ne3] f32: row sum / ne0.
Tensor* mean(Context* ctx, Tensor* a);
// Same shape and type as a: inclusive prefix sum along dim 0 (sequential f32 accumulation).
Tensor* cumsum(Context* ctx, Tensor* a);
// [1] of a's type (f32/f16/bf16, any strides): the sum of every element, accumulated in double.
Tensor* sum(Context* ctx, Tensor* a);
// I32 [ne1] for an f32 matrix a: per row the index of the maximum (the last one among equals).
Tensor* argmax(Context* ctx, Tensor* a);
// I64 [1]: how many elements of the i32 tensors a and b (same shape) are equal.
Tensor* count_equal(Context* ctx, Tensor* a, Tensor* b);

}  // namespace pyggml
