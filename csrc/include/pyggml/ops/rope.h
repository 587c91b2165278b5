// Op constructors of the 'rope' family: shape inference and validation only.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// Modes (ggml values).
constexpr int kRopeNormal = 0;
constexpr int kRopeNeox = 2;
constexpr int kRopeMrope = 8;
constexpr int kRopeVision = 24;
constexpr int kRopeImrope = 40;

// op_params of a ROPE node, exactly as ggml's:
//   [0] direction: 0 = forward (ggml's legacy n_past, always 0 there), 1 = backward
//       (pyggml folds ggml's ROPE_BACK into ROPE: same params, sin negated)
//   [1] n_dims  [2] mode  [3] 0 (legacy n_ctx)  [4] n_ctx_orig
//   [5] freq_base  [6] freq_scale  [7] ext_factor  [8] attn_factor  [9] beta_fast
//   [10] beta_slow (f32)  [11..14] sections (multi modes, else 0)  [15] n_offs
// a: [ne0 = head_dim, ne1 = heads, ne2 = tokens, ne3], F32 or F16, rows contiguous.
// b: I32 positions, length ne2 (NORMAL/NEOX) or 4*ne2 (MROPE/IMROPE/VISION).
// c: optional F32 freq_factors with c.ne0 >= n_dims/2.
Tensor* rope(Context* ctx, Tensor* a, Tensor* b, int n_dims, int mode);
Tensor* rope_inplace(Context* ctx, Tensor* a, Tensor* b, int n_dims, int mode);
Tensor* rope_ext(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims, int mode, int n_ctx_orig,
                 float freq_base, float freq_scale, float ext_factor, float attn_factor,
                 float beta_fast, float beta_slow);
Tensor* rope_ext_inplace(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims, int mode,
                         int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                         float attn_factor, float beta_fast, float beta_slow);
Tensor* rope_multi(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims, const int sections[4],
                   int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                   float attn_factor, float beta_fast, float beta_slow);
Tensor* rope_multi_inplace(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims,
                           const int sections[4], int mode, int n_ctx_orig, float freq_base,
                           float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                           float beta_slow);
// Inverse rotation (sin negated): ggml's ROPE_BACK, here a ROPE node with op_params[0] = 1.
Tensor* rope_ext_back(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims, int mode,
                      int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                      float attn_factor, float beta_fast, float beta_slow);
Tensor* rope_multi_back(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims,
                        const int sections[4], int mode, int n_ctx_orig, float freq_base,
                        float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                        float beta_slow);
// Moves the rotation window of an existing ROPE node to [n_offs, n_offs + n_dims) (slot 15).
// n_offs >= 0, even, n_offs + n_dims <= ne0; not for VISION. Returns node.
Tensor* rope_set_offset(Tensor* node, int n_offs);

}  // namespace pyggml
