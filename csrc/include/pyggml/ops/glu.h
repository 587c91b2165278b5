// Gated linear units: out = act(gate) * up. Fused form (gate and up are the two
// halves of each row of a) or split form (gate = a, up = b).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// Generic constructors (ggml_glu / ggml_glu_split). SWIGLU_OAI and SWIGLU_CLAMP built through
// them get alpha = limit = 0, like ggml.
Tensor* glu(Context* ctx, Tensor* a, GluOp op, bool swapped);
Tensor* glu_split(Context* ctx, Tensor* a, Tensor* b, GluOp op);

// Named wrappers.
Tensor* reglu(Context* ctx, Tensor* a);
Tensor* reglu_swapped(Context* ctx, Tensor* a);
Tensor* reglu_split(Context* ctx, Tensor* a, Tensor* b);
Tensor* geglu(Context* ctx, Tensor* a);
Tensor* geglu_swapped(Context* ctx, Tensor* a);
Tensor* geglu_split(Context* ctx, Tensor* a, Tensor* b);
Tensor* swiglu(Context* ctx, Tensor* a);
Tensor* swiglu_swapped(Context* ctx, Tensor* a);
Tensor* swiglu_split(Context* ctx, Tensor* a, Tensor* b);
Tensor* geglu_erf(Context* ctx, Tensor* a);
Tensor* geglu_erf_swapped(Context* ctx, Tensor* a);
Tensor* geglu_erf_split(Context* ctx, Tensor* a, Tensor* b);
Tensor* geglu_quick(Context* ctx, Tensor* a);
Tensor* geglu_quick_swapped(Context* ctx, Tensor* a);
Tensor* geglu_quick_split(Context* ctx, Tensor* a, Tensor* b);

// x = min(gate, limit), y = clamp(up, -limit, limit), out = x*sigmoid(alpha*x)*(y + 1).
// b == nullptr: fused halves of a.
Tensor* swiglu_oai(Context* ctx, Tensor* a, Tensor* b, float alpha, float limit);
// g = min(gate, limit) (clamped BEFORE SiLU), u = clamp(up, -limit, limit), out = silu(g)*u.
Tensor* swiglu_clamp(Context* ctx, Tensor* a, Tensor* b, float limit);

}  // namespace pyggml
