// Windowed-attention helpers of SAM-style vision transformers: window partition / merge and
// decomposed relative positions.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// a f32 [C, W, H] -> [C, w, w, npx*npy]: window py*npx + px holds a[:, px*w + x, py*w + y],
// zero where the padded grid (multiples of w) passes the image.
Tensor* win_part(Context* ctx, Tensor* a, int w);
// The inverse: a [C, w, w, n_windows] -> [C, w0, h0] (cropping the padding).
Tensor* win_unpart(Context* ctx, Tensor* a, int w0, int h0, int w);
// a [C, 2h-1] (f16 or bf16) -> [C, h (k), h (q)] of a's type: result[c, k, q] = a[c, q - k + h - 1].
Tensor* get_rel_pos(Context* ctx, Tensor* a, int qh, int kh);
// a f32 [W*W, W*qh, B], pw, ph f32 [W, W, qh, B]:
// result[kw + kh*W, r, b] = a[kw + kh*W, r, b] + pw[kw, r, b] + ph[kh, r, b] (r = i1 + W*i2 of pw).
Tensor* add_rel_pos(Context* ctx, Tensor* a, Tensor* pw, Tensor* ph);
Tensor* add_rel_pos_inplace(Context* ctx, Tensor* a, Tensor* pw, Tensor* ph);

}  // namespace pyggml
