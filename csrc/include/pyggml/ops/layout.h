// Layout ops: views, reshape, permute, transpose (metadata only) and the copying layout
// ops repeat, concat and pad.
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

// ---- copying layout ops (new contiguous results) ----
// Tile a to b's shape (each b.ne[i] a multiple of a.ne[i]); result type = a's.
Tensor* repeat(Context* ctx, Tensor* a, Tensor* b);
Tensor* repeat_4d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
// a and b joined along dim (all other dims equal, same type).
Tensor* concat(Context* ctx, Tensor* a, Tensor* b, int dim);
// Zero padding: pad appends p_i zeros at the end of dim i; pad_ext pads lp_i before and rp_i
// after. The circular forms wrap around instead of writing zeros.
Tensor* pad(Context* ctx, Tensor* a, int p0, int p1, int p2, int p3);
Tensor* pad_ext(Context* ctx, Tensor* a, int lp0, int rp0, int lp1, int rp1, int lp2, int rp2,
                int lp3, int rp3);
Tensor* pad_circular(Context* ctx, Tensor* a, int p0, int p1, int p2, int p3);
Tensor* pad_ext_circular(Context* ctx, Tensor* a, int lp0, int rp0, int lp1, int rp1, int lp2,
                         int rp2, int lp3, int rp3);
// numpy.roll per dim: out[i] = a[(i - shift) mod ne] in each dim, |shift_i| < ne_i; a's rows
// packed, any float or i32 type.
Tensor* roll(Context* ctx, Tensor* a, int shift0, int shift1, int shift2, int shift3);
// Reflection padding of dim 0 without repeating the edge ([a b c d], 2, 1 -> [c b a b c d c]);
// a f32, 0 <= p0, p1 < ne0.
Tensor* pad_reflect_1d(Context* ctx, Tensor* a, int p0, int p1);

}  // namespace pyggml
