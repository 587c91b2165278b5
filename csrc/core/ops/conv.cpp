// Constructors of the 'conv' family: IM2COL, IM2COL_3D, CONV_2D, CONV_3D, CONV_2D_DW,
// CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D, COL2IM_1D, and the im2col + mul_mat composites.
// Validation and shape inference only.
#include "pyggml/ops/conv.h"

#include <cstdint>

#include "pyggml/error.h"
#include "pyggml/ops/copy.h"
#include "pyggml/ops/layout.h"
#include "pyggml/ops/mul_mat.h"

namespace pyggml {

namespace {

void require(const char* op, const char* what, const Tensor* t) {
    if (!t) throw_type(OpMessage(op) << what << " is required (got None)");
}

bool float_type(Type t) { return t == Type::F32 || t == Type::F16 || t == Type::BF16; }

// Stride >= 1, padding >= 0, dilation >= 1 for one spatial axis.
void check_axis(const char* op, const char* axis, int s, int p, int d) {
    PG_SHAPE_CHECK(s >= 1, (OpMessage(op) << "stride s" << axis << "=" << s << " must be >= 1"));
    PG_SHAPE_CHECK(p >= 0, (OpMessage(op) << "padding p" << axis << "=" << p << " must be >= 0"));
    PG_SHAPE_CHECK(d >= 1, (OpMessage(op) << "dilation d" << axis << "=" << d << " must be >= 1"));
}

// (in + 2p - d(k-1) - 1) / s + 1, in 64 bits; must be >= 1.
int64_t conv_out(const char* op, const char* axis, int64_t in, int64_t k, int s, int p, int d, const Tensor* a,
                 const Tensor* b) {
    PG_SHAPE_CHECK(k >= 1, (OpMessage(op) << "kernel size along " << axis << " must be >= 1").with("a", a));
    const int64_t span = in + 2 * int64_t(p) - int64_t(d) * (k - 1) - 1;
    PG_SHAPE_CHECK(span >= 0, (OpMessage(op) << "input too small along " << axis << ": in=" << in << " + 2*p=" << p
                                             << " is shorter than the dilated kernel d*(k-1)+1 with k=" << k
                                             << ", d=" << d).with("a", a).with("b", b));
    return span / s + 1;
}

void check_dst_type(const char* op, Type t) {
    PG_TYPE_CHECK(t == Type::F32 || t == Type::F16 || t == Type::BF16,
                  (OpMessage(op) << "dst_type must be f32, f16 or bf16, got " << type_name(t)));
}

void check_image(const char* op, const Tensor* b, bool f32_only) {
    if (f32_only)
        PG_TYPE_CHECK(b->type == Type::F32, (OpMessage(op) << "b (the image) must be f32").with("b", b));
    else
        PG_TYPE_CHECK(float_type(b->type), (OpMessage(op) << "b (the image) must be f32, f16 or bf16").with("b", b));
}

void check_kernel(const char* op, const Tensor* a, bool contiguous) {
    PG_TYPE_CHECK(a->type == Type::F32 || a->type == Type::F16,
                  (OpMessage(op) << "a (the kernel) must be f32 or f16").with("a", a));
    if (contiguous) PG_SHAPE_CHECK(a->is_contiguous(), (OpMessage(op) << "a (the kernel) must be contiguous").with("a", a));
}

// The columns type ggml's composites use: f16, or f32 for a bf16 kernel.
Type columns_type(const Tensor* a) { return a->type == Type::BF16 ? Type::F32 : Type::F16; }

}  // namespace

Tensor* im2col(Context* ctx, Tensor* a, Tensor* b, int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D,
               Type dst_type) {
    const char* op = "im2col";
    require(op, "a", a);
    require(op, "b", b);
    check_image(op, b, false);
    check_dst_type(op, dst_type);
    check_axis(op, "0", s0, p0, d0);
    int64_t OH = 1, ne[4];
    if (is_2D) {
        check_axis(op, "1", s1, p1, d1);
        PG_SHAPE_CHECK(a->ne[2] == b->ne[2], (OpMessage(op) << "a.ne[2]=" << a->ne[2] << " (IC) must equal b.ne[2]="
                                                           << b->ne[2]).with("a", a).with("b", b));
        OH = conv_out(op, "dim 1", b->ne[1], a->ne[1], s1, p1, d1, a, b);
    } else {
        PG_SHAPE_CHECK(a->ne[1] == b->ne[1], (OpMessage(op) << "1-D: a.ne[1]=" << a->ne[1] << " (IC) must equal b.ne[1]="
                                                           << b->ne[1]).with("a", a).with("b", b));
        PG_SHAPE_CHECK(b->ne[3] == 1, (OpMessage(op) << "1-D: b must be 3-D [L, IC, N]").with("b", b));
    }
    const int64_t OW = conv_out(op, "dim 0", b->ne[0], a->ne[0], s0, p0, d0, a, b);
    ne[0] = is_2D ? a->ne[2] * a->ne[1] * a->ne[0] : a->ne[1] * a->ne[0];
    ne[1] = OW;
    ne[2] = is_2D ? OH : b->ne[2];
    ne[3] = is_2D ? b->ne[3] : 1;
    Tensor* r = ctx->new_tensor(dst_type, 4, ne);
    const int32_t params[7] = {s0, s1, p0, p1, d0, d1, is_2D ? 1 : 0};
    for (int i = 0; i < 7; ++i) r->set_param_i32(i, params[i]);
    r->op = Op::IM2COL;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

Tensor* im2col_3d(Context* ctx, Tensor* a, Tensor* b, int64_t IC, int s0, int s1, int s2, int p0, int p1, int p2,
                  int d0, int d1, int d2, Type dst_type) {
    const char* op = "im2col_3d";
    require(op, "a", a);
    require(op, "b", b);
    check_image(op, b, false);
    check_dst_type(op, dst_type);
    check_axis(op, "0", s0, p0, d0);
    check_axis(op, "1", s1, p1, d1);
    check_axis(op, "2", s2, p2, d2);
    PG_SHAPE_CHECK(IC >= 1 && IC <= INT32_MAX, (OpMessage(op) << "IC=" << IC << " must be in [1, INT32_MAX]"));
    PG_SHAPE_CHECK(b->ne[3] % IC == 0, (OpMessage(op) << "b.ne[3]=" << b->ne[3] << " must be a multiple of IC=" << IC
                                                       << " (b is [W, H, D, IC*N])").with("b", b));
    PG_SHAPE_CHECK(a->ne[3] % IC == 0 && a->ne[3] > 0,
                   (OpMessage(op) << "a.ne[3]=" << a->ne[3] << " must be a positive multiple of IC=" << IC
                                  << " (a is [KW, KH, KD, IC*OC])").with("a", a));
    const int64_t OW = conv_out(op, "dim 0", b->ne[0], a->ne[0], s0, p0, d0, a, b);
    const int64_t OH = conv_out(op, "dim 1", b->ne[1], a->ne[1], s1, p1, d1, a, b);
    const int64_t OD = conv_out(op, "dim 2", b->ne[2], a->ne[2], s2, p2, d2, a, b);
    const int64_t N = b->ne[3] / IC;
    const int64_t ne[4] = {a->ne[0] * a->ne[1] * a->ne[2] * IC, OW, OH, OD * N};
    Tensor* r = ctx->new_tensor(dst_type, 4, ne);
    const int32_t params[10] = {s0, s1, s2, p0, p1, p2, d0, d1, d2, (int32_t)IC};
    for (int i = 0; i < 10; ++i) r->set_param_i32(i, params[i]);
    r->op = Op::IM2COL_3D;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

// ---- composites (the graph ggml builds) ----

Tensor* conv_1d(Context* ctx, Tensor* a, Tensor* b, int s0, int p0, int d0) {
    require("conv_1d", "a", a);
    require("conv_1d", "b", b);
    Tensor* cols = im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, columns_type(a));  // [IC*K, OL, N]
    Tensor* r = mul_mat(ctx, reshape_2d(ctx, cols, cols->ne[0], cols->ne[2] * cols->ne[1]),
                        reshape_2d(ctx, a, a->ne[0] * a->ne[1], a->ne[2]));  // [N*OL, OC]
    // ggml reads this [N*OL, OC] result as [OL, OC, N] (exact for N == 1).
    return reshape_3d(ctx, r, cols->ne[1], a->ne[2], cols->ne[2]);
}

Tensor* conv_1d_ph(Context* ctx, Tensor* a, Tensor* b, int s, int d) {
    require("conv_1d_ph", "a", a);
    return conv_1d(ctx, a, b, s, (int)(a->ne[0] / 2), d);
}

Tensor* conv_1d_dw(Context* ctx, Tensor* a, Tensor* b, int s0, int p0, int d0) {
    require("conv_1d_dw", "a", a);
    require("conv_1d_dw", "b", b);
    Tensor* nb = reshape_4d(ctx, b, b->ne[0], 1, b->ne[1], b->ne[2]);
    Tensor* cols = im2col(ctx, a, nb, s0, 0, p0, 0, d0, 0, false, columns_type(a));  // [K, OL, C]
    Tensor* r = mul_mat(ctx, cols, a);                                             // [OL, 1, C]
    return reshape_3d(ctx, r, r->ne[0], r->ne[2], 1);
}

Tensor* conv_1d_dw_ph(Context* ctx, Tensor* a, Tensor* b, int s0, int d0) {
    require("conv_1d_dw_ph", "a", a);
    return conv_1d_dw(ctx, a, b, s0, (int)(a->ne[0] / 2), d0);
}

Tensor* conv_2d(Context* ctx, Tensor* a, Tensor* b, int s0, int s1, int p0, int p1, int d0, int d1) {
    require("conv_2d", "a", a);
    require("conv_2d", "b", b);
    Tensor* cols = im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, true, columns_type(a));  // [IC*KH*KW, OW, OH, N]
    Tensor* r = mul_mat(ctx, reshape_2d(ctx, cols, cols->ne[0], cols->ne[3] * cols->ne[2] * cols->ne[1]),
                        reshape_2d(ctx, a, a->ne[0] * a->ne[1] * a->ne[2], a->ne[3]));  // [N*OH*OW, OC]
    r = reshape_4d(ctx, r, cols->ne[1], cols->ne[2], cols->ne[3], a->ne[3]);          // [OW, OH, N, OC]
    return cont(ctx, permute(ctx, r, 0, 1, 3, 2));                                    // [OW, OH, OC, N]
}

Tensor* conv_2d_sk_p0(Context* ctx, Tensor* a, Tensor* b) {
    require("conv_2d_sk_p0", "a", a);
    PG_SHAPE_CHECK(a->ne[0] <= INT32_MAX && a->ne[1] <= INT32_MAX,
                   (OpMessage("conv_2d_sk_p0") << "kernel too large").with("a", a));
    return conv_2d(ctx, a, b, (int)a->ne[0], (int)a->ne[1], 0, 0, 1, 1);
}

Tensor* conv_2d_s1_ph(Context* ctx, Tensor* a, Tensor* b) {
    require("conv_2d_s1_ph", "a", a);
    return conv_2d(ctx, a, b, 1, 1, (int)(a->ne[0] / 2), (int)(a->ne[1] / 2), 1, 1);
}

Tensor* conv_2d_dw(Context* ctx, Tensor* a, Tensor* b, int s0, int s1, int p0, int p1, int d0, int d1) {
    require("conv_2d_dw", "a", a);
    require("conv_2d_dw", "b", b);
    Tensor* na = reshape_4d(ctx, a, a->ne[0], a->ne[1], 1, a->ne[2] * a->ne[3]);
    Tensor* cols = im2col(ctx, na, reshape_4d(ctx, b, b->ne[0], b->ne[1], 1, b->ne[2] * b->ne[3]), s0, s1, p0, p1,
                          d0, d1, true, columns_type(a));  // [KH*KW, OW, OH, C*N]
    Tensor* nbt = reshape_4d(ctx, cols, cols->ne[0], cols->ne[2] * cols->ne[1], b->ne[2], b->ne[3]);
    na = reshape_4d(ctx, na, na->ne[0] * na->ne[1], na->ne[2], na->ne[3], 1);  // [KH*KW, 1, C, 1]
    Tensor* r = mul_mat(ctx, na, nbt);                                          // [1, OH*OW, C, N]
    return reshape_4d(ctx, r, cols->ne[1], cols->ne[2], b->ne[2], b->ne[3]);
}

Tensor* conv_3d(Context* ctx, Tensor* a, Tensor* b, int64_t IC, int s0, int s1, int s2, int p0, int p1, int p2,
                int d0, int d1, int d2) {
    require("conv_3d", "a", a);
    require("conv_3d", "b", b);
    Tensor* cols = im2col_3d(ctx, a, b, IC, s0, s1, s2, p0, p1, p2, d0, d1, d2, columns_type(a));
    const int64_t OC = a->ne[3] / IC, N = b->ne[3] / IC;
    Tensor* r = mul_mat(ctx, reshape_2d(ctx, cols, cols->ne[0], cols->ne[3] * cols->ne[2] * cols->ne[1]),
                        reshape_2d(ctx, a, a->ne[0] * a->ne[1] * a->ne[2] * IC, OC));  // [N*OD*OH*OW, OC]
    const int64_t OD = cols->ne[3] / N;
    r = reshape_4d(ctx, r, cols->ne[1] * cols->ne[2], OD, N, OC);
    r = cont(ctx, permute(ctx, r, 0, 1, 3, 2));  // [OH*OW, OD, OC, N]
    return reshape_4d(ctx, r, cols->ne[1], cols->ne[2], OD, OC * N);
}

// ---- direct ops ----

Tensor* conv_2d_direct(Context* ctx, Tensor* a, Tensor* b, int s0, int s1, int p0, int p1, int d0, int d1) {
    const char* op = "conv_2d_direct";
    require(op, "a", a);
    require(op, "b", b);
    check_kernel(op, a, true);
    check_image(op, b, true);
    check_axis(op, "0", s0, p0, d0);
    check_axis(op, "1", s1, p1, d1);
    PG_SHAPE_CHECK(a->ne[2] == b->ne[2], (OpMessage(op) << "a.ne[2]=" << a->ne[2] << " (IC) must equal b.ne[2]="
                                                       << b->ne[2]).with("a", a).with("b", b));
    const int64_t ne[4] = {conv_out(op, "dim 0", b->ne[0], a->ne[0], s0, p0, d0, a, b),
                           conv_out(op, "dim 1", b->ne[1], a->ne[1], s1, p1, d1, a, b), a->ne[3], b->ne[3]};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    const int32_t params[6] = {s0, s1, p0, p1, d0, d1};
    for (int i = 0; i < 6; ++i) r->set_param_i32(i, params[i]);
    r->op = Op::CONV_2D;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

Tensor* conv_3d_direct(Context* ctx, Tensor* a, Tensor* b, int s0, int s1, int s2, int p0, int p1, int p2, int d0,
                       int d1, int d2, int c, int n, int oc) {
    const char* op = "conv_3d_direct";
    require(op, "a", a);
    require(op, "b", b);
    check_kernel(op, a, true);
    check_image(op, b, true);
    check_axis(op, "0", s0, p0, d0);
    check_axis(op, "1", s1, p1, d1);
    check_axis(op, "2", s2, p2, d2);
    PG_SHAPE_CHECK(c >= 1 && n >= 0 && oc >= 1,
                   (OpMessage(op) << "n_channels=" << c << ", n_batch=" << n << ", n_channels_out=" << oc
                                  << " must be >= 1, >= 0, >= 1"));
    PG_SHAPE_CHECK(a->ne[3] == int64_t(c) * oc, (OpMessage(op) << "a.ne[3]=" << a->ne[3] << " must equal c*oc="
                                                              << int64_t(c) * oc).with("a", a));
    PG_SHAPE_CHECK(b->ne[3] == int64_t(c) * n, (OpMessage(op) << "b.ne[3]=" << b->ne[3] << " must equal c*n="
                                                             << int64_t(c) * n).with("b", b));
    const int64_t ne[4] = {conv_out(op, "dim 0", b->ne[0], a->ne[0], s0, p0, d0, a, b),
                           conv_out(op, "dim 1", b->ne[1], a->ne[1], s1, p1, d1, a, b),
                           conv_out(op, "dim 2", b->ne[2], a->ne[2], s2, p2, d2, a, b), int64_t(oc) * n};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    const int32_t params[12] = {s0, s1, s2, p0, p1, p2, d0, d1, d2, c, n, oc};
    for (int i = 0; i < 12; ++i) r->set_param_i32(i, params[i]);
    r->op = Op::CONV_3D;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

Tensor* conv_2d_dw_direct(Context* ctx, Tensor* a, Tensor* b, int s0, int s1, int p0, int p1, int d0, int d1) {
    const char* op = "conv_2d_dw_direct";
    require(op, "a", a);
    require(op, "b", b);
    check_kernel(op, a, false);
    check_image(op, b, true);
    check_axis(op, "0", s0, p0, d0);
    check_axis(op, "1", s1, p1, d1);
    PG_SHAPE_CHECK(a->ne[2] == 1 && a->ne[3] == b->ne[2],
                   (OpMessage(op) << "a must be [KW, KH, 1, C] with C = b.ne[2]=" << b->ne[2]).with("a", a).with("b", b));
    const int64_t ne[4] = {conv_out(op, "dim 0", b->ne[0], a->ne[0], s0, p0, d0, a, b),
                           conv_out(op, "dim 1", b->ne[1], a->ne[1], s1, p1, d1, a, b), b->ne[2], b->ne[3]};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    // Channel-innermost input (CWHN): the result is laid out the same way, as ggml does.
    const bool cwhn = b->nb[0] > b->nb[2] && b->nb[1] > b->nb[0] && b->nb[2] == type_size(b->type);
    if (cwhn) {
        r->nb[2] = sizeof(float);
        r->nb[0] = r->ne[2] * sizeof(float);
        r->nb[1] = r->ne[0] * r->nb[0];
        r->nb[3] = r->ne[1] * r->nb[1];
    }
    const int32_t params[6] = {s0, s1, p0, p1, d0, d1};
    for (int i = 0; i < 6; ++i) r->set_param_i32(i, params[i]);
    r->op = Op::CONV_2D_DW;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

Tensor* conv_transpose_1d(Context* ctx, Tensor* a, Tensor* b, int s0, int p0, int d0) {
    const char* op = "conv_transpose_1d";
    require(op, "a", a);
    require(op, "b", b);
    check_kernel(op, a, false);
    check_image(op, b, true);
    PG_SHAPE_CHECK(s0 >= 1, (OpMessage(op) << "stride s0=" << s0 << " must be >= 1"));
    PG_SHAPE_CHECK(p0 == 0 && d0 == 1, (OpMessage(op) << "only p0 == 0 and d0 == 1 are supported (as in ggml), got p0="
                                                      << p0 << ", d0=" << d0));
    PG_SHAPE_CHECK(b->ne[2] == 1 && b->ne[3] == 1, (OpMessage(op) << "b must be a matrix [L, IC]").with("b", b));
    PG_SHAPE_CHECK(a->ne[3] == 1 && a->ne[2] == b->ne[1],
                   (OpMessage(op) << "a must be [K, OC, IC] with IC = b.ne[1]=" << b->ne[1]).with("a", a).with("b", b));
    PG_SHAPE_CHECK(a->ne[0] >= 1 && b->ne[0] >= 1,
                   (OpMessage(op) << "kernel and input lengths must be >= 1").with("a", a).with("b", b));
    const int64_t ne[4] = {(b->ne[0] - 1) * s0 + a->ne[0], a->ne[1], 1, 1};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    r->set_param_i32(0, s0);
    r->set_param_i32(1, p0);
    r->set_param_i32(2, d0);
    r->op = Op::CONV_TRANSPOSE_1D;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

Tensor* conv_transpose_2d_p0(Context* ctx, Tensor* a, Tensor* b, int stride) {
    const char* op = "conv_transpose_2d_p0";
    require(op, "a", a);
    require(op, "b", b);
    check_kernel(op, a, false);
    check_image(op, b, true);
    PG_SHAPE_CHECK(stride >= 1, (OpMessage(op) << "stride=" << stride << " must be >= 1"));
    PG_SHAPE_CHECK(a->ne[3] == b->ne[2],
                   (OpMessage(op) << "a must be [KW, KH, OC, IC] with IC = b.ne[2]=" << b->ne[2]).with("a", a).with("b", b));
    PG_SHAPE_CHECK(a->ne[0] >= 1 && a->ne[1] >= 1 && b->ne[0] >= 1 && b->ne[1] >= 1,
                   (OpMessage(op) << "kernel and input sizes must be >= 1").with("a", a).with("b", b));
    const int64_t ne[4] = {(b->ne[0] - 1) * stride + a->ne[0], (b->ne[1] - 1) * stride + a->ne[1], a->ne[2], b->ne[3]};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    r->set_param_i32(0, stride);
    r->op = Op::CONV_TRANSPOSE_2D;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

Tensor* col2im_1d(Context* ctx, Tensor* a, int s0, int oc, int p0) {
    const char* op = "col2im_1d";
    require(op, "a", a);
    PG_TYPE_CHECK(float_type(a->type), (OpMessage(op) << "a must be f32, f16 or bf16").with("a", a));
    PG_SHAPE_CHECK(a->ne[2] == 1 && a->ne[3] == 1 && a->is_contiguous(),
                   (OpMessage(op) << "a must be a contiguous matrix [K*oc, T_in]").with("a", a));
    PG_SHAPE_CHECK(s0 >= 1 && oc >= 1 && p0 >= 0,
                   (OpMessage(op) << "need s0 >= 1, oc >= 1, p0 >= 0; got s0=" << s0 << ", oc=" << oc << ", p0=" << p0));
    const int64_t K = a->ne[0] / oc;
    PG_SHAPE_CHECK(K >= 1 && K * oc == a->ne[0],
                   (OpMessage(op) << "a.ne[0]=" << a->ne[0] << " must be a positive multiple of oc=" << oc).with("a", a));
    const int64_t T_out = (a->ne[1] - 1) * s0 + K - 2 * int64_t(p0);
    PG_SHAPE_CHECK(a->ne[1] >= 1 && T_out >= 1,
                   (OpMessage(op) << "output length (T_in-1)*s0 + K - 2*p0 = " << T_out << " must be >= 1").with("a", a));
    const int64_t ne[4] = {T_out, oc, 1, 1};
    Tensor* r = ctx->new_tensor(a->type, 4, ne);
    r->set_param_i32(0, s0);
    r->set_param_i32(1, oc);
    r->set_param_i32(2, p0);
    r->op = Op::COL2IM_1D;
    r->src[0] = a;
    return r;
}

}  // namespace pyggml
