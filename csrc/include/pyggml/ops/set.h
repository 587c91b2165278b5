// ACC and SET: write b into a strided view of (a copy of) a, ggml's byte-offset views.
#pragma once
#include <cstddef>

#include "pyggml/context.h"

namespace pyggml {

// result = a, then view(result, b.ne, strides nb1/nb2/nb3 bytes, byte offset) += b.
// a and b f32, a contiguous, b's rows contiguous; the view must lie inside a and be aligned
// to 4 bytes. The _inplace form returns a view of a.
Tensor* acc(Context* ctx, Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
Tensor* acc_inplace(Context* ctx, Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset);

// Same view, but b is written instead of added (a and b both f32 or both i32).
// set_1d / set_2d take a's own strides for the ones they do not name.
Tensor* set(Context* ctx, Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
Tensor* set_inplace(Context* ctx, Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
Tensor* set_1d(Context* ctx, Tensor* a, Tensor* b, size_t offset);
Tensor* set_1d_inplace(Context* ctx, Tensor* a, Tensor* b, size_t offset);
Tensor* set_2d(Context* ctx, Tensor* a, Tensor* b, size_t nb1, size_t offset);
Tensor* set_2d_inplace(Context* ctx, Tensor* a, Tensor* b, size_t nb1, size_t offset);

}  // namespace pyggml
