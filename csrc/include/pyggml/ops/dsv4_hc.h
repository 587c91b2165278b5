// DeepSeek-V4 hyper-connection ops: stream-mixing matrix with Sinkhorn
// normalisation, the weighted stream reduction (pre) and the stream expansion (post).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// mixes f32 [(2+hc)*hc, T] with hc == 4, scale f32 [>= 3], base f32 [(2+hc)*hc];
// result f32 [hc, hc, T] = [dst, src, t]. Uses only scale[2] and the last hc*hc entries.
Tensor* dsv4_hc_comb(Context* ctx, Tensor* mixes, Tensor* scale, Tensor* base, float eps, int n_iter);
// x f32 [n_embd, hc, T], weights f32 [hc, T] -> f32 [n_embd, T]: sum_h x[i,h,t]*weights[h,t].
Tensor* dsv4_hc_pre(Context* ctx, Tensor* x, Tensor* weights);
// gate f32 shaped like x -> scale * sum_h x[i,h,t]*sigmoid(gate[i,h,t]).
Tensor* dsv4_hc_pre_gated(Context* ctx, Tensor* x, Tensor* gate, float scale);
// x f32 [n_embd, T], residual f32 [n_embd, hc, T], post f32 [hc, T], comb f32 [hc, hc, T] or
// nullptr (identity) -> f32 [n_embd, hc, T].
Tensor* dsv4_hc_post(Context* ctx, Tensor* x, Tensor* residual, Tensor* post, Tensor* comb);

}  // namespace pyggml
