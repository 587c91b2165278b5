// Python bindings of the 'conv' family: im2col, convolutions (composite and direct), transposed
// convolutions, col2im_1d.
#include "bind_common.h"

namespace pyggml::python {

void bind_conv(py::module_& m) {
    using py::arg;
    def_op(m, "im2col", &im2col, arg("ctx"), arg("a"), arg("b"), arg("s0"), arg("s1"), arg("p0"), arg("p1"),
           arg("d0"), arg("d1"), arg("is_2D"), arg("dst_type"),
           "Unfolds image b for a GEMM; the kernel a gives only its shape. 2-D: a [KW, KH, IC, OC], b [W, H, IC, N] "
           "-> [IC*KH*KW, OW, OH, N], column ic*KH*KW + kh*KW + kw; 1-D: a [K, IC], b [L, IC, N] -> [IC*K, OW, N]. "
           "O = (in + 2p - d(k-1) - 1) // s + 1, zero padding; dst_type f32, f16 or bf16.");
    def_op(m, "im2col_3d", &im2col_3d, arg("ctx"), arg("a"), arg("b"), arg("IC"), arg("s0"), arg("s1"), arg("s2"),
           arg("p0"), arg("p1"), arg("p2"), arg("d0"), arg("d1"), arg("d2"), arg("dst_type"),
           "3-D unfold: a [KW, KH, KD, IC*OC], b [W, H, D, IC*N] -> [IC*KD*KH*KW, OW, OH, OD*N].");
    def_op(m, "conv_1d", &conv_1d, arg("ctx"), arg("a"), arg("b"), arg("s0"), arg("p0"), arg("d0"),
           "a [K, IC, OC], b [L, IC, N] -> [OL, OC, N] as im2col (f16) + mul_mat. Like ggml, the [N*OL, OC] "
           "product is read as [OL, OC, N] (exact for N == 1).");
    def_op(m, "conv_1d_ph", &conv_1d_ph, arg("ctx"), arg("a"), arg("b"), arg("s"), arg("d"),
           "conv_1d with padding K // 2.");
    def_op(m, "conv_1d_dw", &conv_1d_dw, arg("ctx"), arg("a"), arg("b"), arg("s0"), arg("p0"), arg("d0"),
           "Depth-wise 1-D: a [K, 1, C], b [L, C] -> [OL, C, 1] (im2col + mul_mat).");
    def_op(m, "conv_1d_dw_ph", &conv_1d_dw_ph, arg("ctx"), arg("a"), arg("b"), arg("s0"), arg("d0"),
           "conv_1d_dw with padding K // 2.");
    def_op(m, "conv_2d", &conv_2d, arg("ctx"), arg("a"), arg("b"), arg("s0"), arg("s1"), arg("p0"), arg("p1"),
           arg("d0"), arg("d1"),
           "a [KW, KH, IC, OC], b [W, H, IC, N] -> f32 [OW, OH, OC, N]: im2col (f16 columns; f32 for a bf16 "
           "kernel) + mul_mat + permute, as ggml builds it.");
    def_op(m, "conv_2d_sk_p0", &conv_2d_sk_p0, arg("ctx"), arg("a"), arg("b"),
           "conv_2d with stride = kernel size and no padding.");
    def_op(m, "conv_2d_s1_ph", &conv_2d_s1_ph, arg("ctx"), arg("a"), arg("b"),
           "conv_2d with stride 1 and half padding.");
    def_op(m, "conv_2d_dw", &conv_2d_dw, arg("ctx"), arg("a"), arg("b"), arg("s0"), arg("s1"), arg("p0"), arg("p1"),
           arg("d0"), arg("d1"), "Depth-wise: a [KW, KH, 1, C], b [W, H, C, N] -> [OW, OH, C, N] (im2col + mul_mat).");
    def_op(m, "conv_3d", &conv_3d, arg("ctx"), arg("a"), arg("b"), arg("IC"), arg("s0"), arg("s1"), arg("s2"),
           arg("p0"), arg("p1"), arg("p2"), arg("d0"), arg("d1"), arg("d2"),
           "a [KW, KH, KD, IC*OC], b [W, H, D, IC*N] -> [OW, OH, OD, OC*N] (im2col_3d + mul_mat).");
    def_op(m, "conv_2d_direct", &conv_2d_direct, arg("ctx"), arg("a"), arg("b"), arg("s0"), arg("s1"), arg("p0"),
           arg("p1"), arg("d0"), arg("d1"),
           "conv_2d as one op: a f32/f16 [KW, KH, IC, OC] contiguous, b f32 [W, H, IC, N] -> f32 [OW, OH, OC, N]. "
           "An f16 kernel rounds the image to f16, as ggml does.");
    def_op(m, "conv_3d_direct", &conv_3d_direct, arg("ctx"), arg("a"), arg("b"), arg("s0"), arg("s1"), arg("s2"),
           arg("p0"), arg("p1"), arg("p2"), arg("d0"), arg("d1"), arg("d2"), arg("n_channels"), arg("n_batch"),
           arg("n_channels_out"),
           "a f32/f16 [KW, KH, KD, c*oc], b f32 [W, H, D, c*n] -> f32 [OW, OH, OD, oc*n]; output channel o of "
           "image i is ne3 index i*oc + o and uses kernel slices o*c .. o*c + c-1.");
    def_op(m, "conv_2d_dw_direct", &conv_2d_dw_direct, arg("ctx"), arg("a"), arg("b"), arg("s0"), arg("s1"),
           arg("p0"), arg("p1"), arg("d0"), arg("d1"),
           "Depth-wise as one op: a f32/f16 [KW, KH, 1, C], b f32 [W, H, C, N] -> f32 [OW, OH, C, N]. A "
           "channel-innermost (CWHN) b gives a CWHN result in memory.");
    def_op(m, "conv_transpose_1d", &conv_transpose_1d, arg("ctx"), arg("a"), arg("b"), arg("s0"), arg("p0"), arg("d0"),
           "a f32/f16 [K, OC, IC], b f32 [L, IC] -> f32 [(L-1)*s0 + K, OC]; p0 must be 0 and d0 1 (as in ggml).");
    def_op(m, "conv_transpose_2d_p0", &conv_transpose_2d_p0, arg("ctx"), arg("a"), arg("b"), arg("stride"),
           "a f32/f16 [KW, KH, OC, IC], b f32 [W, H, IC, N] -> f32 [(W-1)*s + KW, (H-1)*s + KH, OC, N].");
    def_op(m, "col2im_1d", &col2im_1d, arg("ctx"), arg("a"), arg("s0"), arg("oc"), arg("p0"),
           "Scatter-add of GEMM columns a [K*oc, T_in] (column (t, o*K + k)) into [(T_in-1)*s0 + K - 2*p0, oc]; "
           "a's type (f32, f16, bf16).");
}

}  // namespace pyggml::python
