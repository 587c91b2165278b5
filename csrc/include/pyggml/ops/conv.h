// Convolutions (ggml order: ne0 = width innermost).
//   kernel a [KW, KH, IC, OC], image b [W, H, IC, N], result [OW, OH, OC, N]
//   output size (in + 2p - d(k-1) - 1) / s + 1, zero padding.
// The plain names (conv_1d, conv_2d, conv_2d_dw, conv_3d and their aliases) are composites, as in
// ggml: an IM2COL node (f16 columns, f32 for a bf16 kernel) feeding MUL_MAT, then a reshape or
// permute. The *_direct forms and the transposed convolutions are ops of their own.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// Columns of the image for a GEMM. 2-D: [IC*KH*KW, OW, OH, N] with column index
// ic*KH*KW + kh*KW + kw; 1-D (is_2D false, a [K, IC], b [L, IC, N]): [IC*K, OW, N].
// The kernel a supplies only its shape. dst_type f32 or f16.
Tensor* im2col(Context* ctx, Tensor* a, Tensor* b, int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D,
               Type dst_type);
// 3-D columns: a [KW, KH, KD, IC*OC], b [W, H, D, IC*N] -> [IC*KD*KH*KW, OW, OH, OD*N].
Tensor* im2col_3d(Context* ctx, Tensor* a, Tensor* b, int64_t IC, int s0, int s1, int s2, int p0, int p1, int p2,
                  int d0, int d1, int d2, Type dst_type);

// Composites: a [K, IC, OC], b [L, IC, N] -> [OL, OC, N].
Tensor* conv_1d(Context* ctx, Tensor* a, Tensor* b, int s0, int p0, int d0);
Tensor* conv_1d_ph(Context* ctx, Tensor* a, Tensor* b, int s, int d);  // p = K/2
// Depth-wise 1-D: a [K, 1, C], b [L, C] -> [OL, C, 1].
Tensor* conv_1d_dw(Context* ctx, Tensor* a, Tensor* b, int s0, int p0, int d0);
Tensor* conv_1d_dw_ph(Context* ctx, Tensor* a, Tensor* b, int s0, int d0);
Tensor* conv_2d(Context* ctx, Tensor* a, Tensor* b, int s0, int s1, int p0, int p1, int d0, int d1);
Tensor* conv_2d_sk_p0(Context* ctx, Tensor* a, Tensor* b);  // stride = kernel size, no padding
Tensor* conv_2d_s1_ph(Context* ctx, Tensor* a, Tensor* b);  // stride 1, half padding
// Depth-wise 2-D: a [KW, KH, 1, C], b [W, H, C, N] -> [OW, OH, C, N].
Tensor* conv_2d_dw(Context* ctx, Tensor* a, Tensor* b, int s0, int s1, int p0, int p1, int d0, int d1);
// 3-D: a [KW, KH, KD, IC*OC], b [W, H, D, IC*N] -> [OW, OH, OD, OC*N].
Tensor* conv_3d(Context* ctx, Tensor* a, Tensor* b, int64_t IC, int s0, int s1, int s2, int p0, int p1, int p2,
                int d0, int d1, int d2);

// Direct ops (CONV_2D, CONV_2D_DW, CONV_3D): same results, no IM2COL tensor in the graph.
Tensor* conv_2d_direct(Context* ctx, Tensor* a, Tensor* b, int s0, int s1, int p0, int p1, int d0, int d1);
// Also takes channel-innermost (CWHN) b with a CWHN kernel; the result then is CWHN in memory.
Tensor* conv_2d_dw_direct(Context* ctx, Tensor* a, Tensor* b, int s0, int s1, int p0, int p1, int d0, int d1);
// a [KW, KH, KD, c*oc], b [W, H, D, c*n] -> [OW, OH, OD, oc*n].
Tensor* conv_3d_direct(Context* ctx, Tensor* a, Tensor* b, int s0, int s1, int s2, int p0, int p1, int p2, int d0,
                       int d1, int d2, int c, int n, int oc);

// Transposed convolutions (ggml supports no padding and no dilation):
// a [K, OC, IC], b [L, IC] -> [(L-1)*s0 + K, OC] (p0 must be 0, d0 must be 1).
Tensor* conv_transpose_1d(Context* ctx, Tensor* a, Tensor* b, int s0, int p0, int d0);
// a [KW, KH, OC, IC], b [W, H, IC, N] -> [(W-1)*s + KW, (H-1)*s + KH, OC, N].
Tensor* conv_transpose_2d_p0(Context* ctx, Tensor* a, Tensor* b, int stride);
// Scatter-add of GEMM columns a [K*oc, T_in] to a signal [(T_in-1)*s0 + K - 2*p0, oc].
Tensor* col2im_1d(Context* ctx, Tensor* a, int s0, int oc, int p0);

}  // namespace pyggml
