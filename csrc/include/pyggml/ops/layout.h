// Layout ops: views, reshape, permute, transpose (metadata only) and the copying layout
// ops repeat, concat and pad (spec 1.7, 4.14, 4.21, 4.22).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

Tensor* view_1d(Context* ctx, Tensor* a, int64_t ne0, size_t offset);
Tensor* view_2d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
Tensor* view_3d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1,
                size_t nb2, size_t offset);
Tensor* view_4d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                size_t nb1, size_t nb2, size_t nb3, size_t offset);
Tensor* reshape(Context* ctx, Tensor* a, Tensor* b);
Tensor* reshape_1d(Context* ctx, Tensor* a, int64_t ne0);
Tensor* reshape_2d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1);
Tensor* reshape_3d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2);
Tensor* reshape_4d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
Tensor* permute(Context* ctx, Tensor* a, int axis0, int axis1, int axis2, int axis3);
Tensor* transpose(Context* ctx, Tensor* a);

}  // namespace pyggml
