// Small ops: SCALE (4.6), CLAMP (4.20), ARANGE (4.17), TRI (4.19), TIMESTEP_EMBEDDING.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// out = s*x (+ b); a F32 or BF16 with contiguous rows.
Tensor* scale(Context* ctx, Tensor* a, float s);
Tensor* scale_inplace(Context* ctx, Tensor* a, float s);
Tensor* scale_bias(Context* ctx, Tensor* a, float s, float b);
Tensor* scale_bias_inplace(Context* ctx, Tensor* a, float s, float b);

// out = max(min(x, max_v), min_v) as comparisons (NaN input yields max_v, like ggml).
// clamp returns a new tensor, clamp_inplace a view of a.
Tensor* clamp(Context* ctx, Tensor* a, float min_v, float max_v);
Tensor* clamp_inplace(Context* ctx, Tensor* a, float min_v, float max_v);

// F32 [ceil((stop - start) / step)] with out[i] = start + step*i.
Tensor* arange(Context* ctx, float start, float stop, float step);

// Triangle types, numbered as ggml numbers them.
enum class TriType : int32_t { UPPER_DIAG = 0, UPPER = 1, LOWER_DIAG = 2, LOWER = 3 };
// Keeps a[i0, i1] where the triangle predicate holds (i0 column, i1 row), else 0.
Tensor* tri(Context* ctx, Tensor* a, int32_t type);

// Sinusoidal embedding F32 [dim, N] of the f32 vector timesteps [N]: cos(t*f_j) then sin(t*f_j),
// f_j = exp(-ln(max_period) * j / (dim/2)), j < dim/2; an odd dim ends in 0. dim, max_period > 0.
Tensor* timestep_embedding(Context* ctx, Tensor* timesteps, int dim, int max_period);

}  // namespace pyggml
