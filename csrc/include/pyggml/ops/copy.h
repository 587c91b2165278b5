// Copy ops: DUP, CPY (cpy, cast), CONT.
// Elements are enumerated in the logical order of the source (i0 fastest .. i3 slowest) and
// written in the logical order of the destination, so copies between different shapes with
// equal element counts are "reshapes through a copy". For block types the unit is a block.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// Same type and shape copy: a new packed tensor (op DUP), or a view of `a` (in place).
Tensor* dup(Context* ctx, Tensor* a);
Tensor* dup_inplace(Context* ctx, Tensor* a);
// Copy a into b (equal element counts, any shapes); the result is a view of b (op CPY,
// src[0] = a, src[1] = b). Computing it overwrites b's storage.
Tensor* cpy(Context* ctx, Tensor* a, Tensor* b);
// A new tensor of `type` with a's shape holding a converted (op CPY). Conversions:
// f32/f16/bf16 any direction (round to nearest even), same type raw bytes (bit exact),
// f32 -> i32 truncating toward zero, i32 -> f32 nearest, f32/f16/bf16 -> any block type,
// block type -> f32; other pairs throw TypeMismatchError naming both types.
// f32 -> i32 where ggml is undefined (pyggml's choice, CUDA-like): NaN -> 0, values >= 2^31
// and +inf -> INT32_MAX, values < -2^31 and -inf -> INT32_MIN.
// As in ggml, src[0] = a and src[1] = the result itself.
Tensor* cast(Context* ctx, Tensor* a, Type type);
// Packed copy, same shape (cont) or a new shape of equal element count (cont_Nd).
Tensor* cont(Context* ctx, Tensor* a);
Tensor* cont_1d(Context* ctx, Tensor* a, int64_t ne0);
Tensor* cont_2d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1);
Tensor* cont_3d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2);
Tensor* cont_4d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

// The CPU conversion matrix of: true when a src -> dst copy is supported.
bool cpy_supported(Type src, Type dst);

}  // namespace pyggml
