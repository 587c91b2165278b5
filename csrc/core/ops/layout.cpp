// Views, reshape, permute, transpose: metadata-only ops.
#include "pyggml/ops/layout.h"

#include <cstdlib>

#include "pyggml/error.h"

namespace pyggml {

namespace {
Tensor* make_view(Context* ctx, Tensor* a, int n_dims, const int64_t* ne, size_t offset,
                  const char* opname) {
    Tensor* r = ctx->new_view(a, a->type, n_dims, ne, offset);
    r->op = Op::VIEW;
    r->src[0] = a;
    size_t off = offset;
    std::memcpy(r->op_params, &off, sizeof(off));
    r->name = a->name + " (view)";
    (void)opname;
    return r;
}

void check_view_span(const char* op, Tensor* a, const int64_t* ne, const size_t* nb, size_t offset) {
    if (!a) throw_type(OpMessage(op) << "a is required");
    for (int i = 0; i < 4; ++i)
        if (ne[i] < 0) throw_shape(OpMessage(op) << "ne[" << i << "]=" << ne[i] << " must be >= 0");
    if (ne[0] % blck_size(a->type) != 0)
        throw_shape(OpMessage(op) << "ne0=" << ne[0] << " must be a multiple of the block size "
                                  << blck_size(a->type) << " of " << type_name(a->type));
    Tensor* root = a->view_src ? a->view_src : a;
    size_t base = a->view_src ? a->view_offs : 0;
    if (ne[0] * ne[1] * ne[2] * ne[3] == 0) return;
    // long double: huge ne/nb from Python must not wrap around size_t.
    long double lastl = (long double)row_size(a->type, ne[0]);
    for (int i = 1; i < 4; ++i) lastl += (long double)(ne[i] - 1) * (long double)nb[i];
    if ((long double)base + (long double)offset + lastl > (long double)root->nbytes())
        throw_shape((OpMessage(op) << "the view (offset " << offset << ", span " << lastl
                                   << " bytes) reaches past the end of its source's "
                                   << root->nbytes() << " bytes").with("a", a));
    size_t last = (size_t)lastl;
    if (base + offset + last > root->nbytes())
        throw_shape((OpMessage(op) << "the view (offset " << offset << ", span " << last
                                   << " bytes) reaches past the end of its source's "
                                   << root->nbytes() << " bytes").with("a", a));
}
}  // namespace

Tensor* view_1d(Context* ctx, Tensor* a, int64_t ne0, size_t offset) {
    if (!a) throw_type(OpMessage("view_1d") << "a is required");
    int64_t ne[4] = {ne0, 1, 1, 1};
    size_t nb[4] = {type_size(a->type), 0, 0, 0};
    check_view_span("view_1d", a, ne, nb, offset);
    return make_view(ctx, a, 1, ne, offset, "view_1d");
}

Tensor* view_2d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
    if (!a) throw_type(OpMessage("view_2d") << "a is required");
    int64_t ne[4] = {ne0, ne1, 1, 1};
    size_t nb[4] = {type_size(a->type), nb1, nb1 * ne1, nb1 * ne1};
    check_view_span("view_2d", a, ne, nb, offset);
    Tensor* r = make_view(ctx, a, 2, ne, offset, "view_2d");
    r->nb[1] = nb1; r->nb[2] = nb1 * ne1; r->nb[3] = r->nb[2];
    return r;
}

Tensor* view_3d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1,
                size_t nb2, size_t offset) {
    if (!a) throw_type(OpMessage("view_3d") << "a is required");
    int64_t ne[4] = {ne0, ne1, ne2, 1};
    size_t nb[4] = {type_size(a->type), nb1, nb2, nb2 * ne2};
    check_view_span("view_3d", a, ne, nb, offset);
    Tensor* r = make_view(ctx, a, 3, ne, offset, "view_3d");
    r->nb[1] = nb1; r->nb[2] = nb2; r->nb[3] = nb2 * ne2;
    return r;
}

Tensor* view_4d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    if (!a) throw_type(OpMessage("view_4d") << "a is required");
    int64_t ne[4] = {ne0, ne1, ne2, ne3};
    size_t nb[4] = {type_size(a->type), nb1, nb2, nb3};
    check_view_span("view_4d", a, ne, nb, offset);
    Tensor* r = make_view(ctx, a, 4, ne, offset, "view_4d");
    r->nb[1] = nb1; r->nb[2] = nb2; r->nb[3] = nb3;
    return r;
}

namespace {
Tensor* reshape_impl(Context* ctx, Tensor* a, int n_dims, const int64_t* ne, const char* op) {
    if (!a) throw_type(OpMessage(op) << "a is required");
    int64_t n = 1;
    for (int i = 0; i < n_dims; ++i) {
        if (ne[i] < 0) throw_shape(OpMessage(op) << "ne[" << i << "]=" << ne[i] << " must be >= 0");
        n *= ne[i];
    }
    if (!a->is_contiguous())
        throw_shape((OpMessage(op) << "the source must be contiguous (use cont first)").with("a", a));
    if (n != a->nelements())
        throw_shape((OpMessage(op) << "element count " << n << " must equal the source's "
                                   << a->nelements()).with("a", a));
    if (ne[0] % blck_size(a->type) != 0)
        throw_shape(OpMessage(op) << "ne0=" << ne[0] << " must be a multiple of the block size");
    Tensor* r = ctx->new_view(a, a->type, n_dims, ne, 0);
    r->op = Op::RESHAPE;
    r->src[0] = a;
    r->name = a->name + " (reshaped)";
    return r;
}
}  // namespace

Tensor* reshape(Context* ctx, Tensor* a, Tensor* b) {
    if (!a || !b) throw_type(OpMessage("reshape") << "a and b are required");
    return reshape_impl(ctx, a, 4, b->ne, "reshape");
}
Tensor* reshape_1d(Context* ctx, Tensor* a, int64_t ne0) {
    int64_t ne[1] = {ne0};
    return reshape_impl(ctx, a, 1, ne, "reshape_1d");
}
Tensor* reshape_2d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1) {
    int64_t ne[2] = {ne0, ne1};
    return reshape_impl(ctx, a, 2, ne, "reshape_2d");
}
Tensor* reshape_3d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2) {
    int64_t ne[3] = {ne0, ne1, ne2};
    return reshape_impl(ctx, a, 3, ne, "reshape_3d");
}
Tensor* reshape_4d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return reshape_impl(ctx, a, 4, ne, "reshape_4d");
}

Tensor* permute(Context* ctx, Tensor* a, int axis0, int axis1, int axis2, int axis3) {
    if (!a) throw_type(OpMessage("permute") << "a is required");
    int ax[4] = {axis0, axis1, axis2, axis3};
    bool seen[4] = {false, false, false, false};
    for (int i = 0; i < 4; ++i) {
        if (ax[i] < 0 || ax[i] > 3 || seen[ax[i]])
            throw_shape(OpMessage("permute") << "axes (" << axis0 << ", " << axis1 << ", " << axis2
                                             << ", " << axis3 << ") must be a permutation of 0..3");
        seen[ax[i]] = true;
    }
    Tensor* r = ctx->view_tensor(a);
    for (int k = 0; k < 4; ++k) {  // source dim k moves to position ax[k]
        r->ne[ax[k]] = a->ne[k];
        r->nb[ax[k]] = a->nb[k];
    }
    r->op = Op::PERMUTE;
    r->src[0] = a;
    for (int i = 0; i < 4; ++i) r->op_params[i] = ax[i];
    r->name = a->name + " (permuted)";
    return r;
}

Tensor* transpose(Context* ctx, Tensor* a) {
    if (!a) throw_type(OpMessage("transpose") << "a is required");
    Tensor* r = ctx->view_tensor(a);
    std::swap(r->ne[0], r->ne[1]);
    std::swap(r->nb[0], r->nb[1]);
    r->op = Op::TRANSPOSE;
    r->src[0] = a;
    r->name = a->name + " (transposed)";
    return r;
}

// ---- copying layout ops: REPEAT, CONCAT, PAD ----

namespace {
// Output dims beyond this are rejected before any size arithmetic can overflow.
constexpr int64_t kMaxDimSize = int64_t(1) << 40;

void check_out_dims(const char* op, const int64_t* ne) {
    for (int i = 0; i < 4; ++i) {
        if (ne[i] < 0) throw_shape(OpMessage(op) << "ne[" << i << "]=" << ne[i] << " must be >= 0");
        if (ne[i] > kMaxDimSize) throw_shape(OpMessage(op) << "ne[" << i << "]=" << ne[i] << " is too large");
    }
}

Tensor* repeat_impl(Context* ctx, Tensor* a, const int64_t* ne, const char* op, Tensor* b) {
    check_out_dims(op, ne);
    const bool out_empty = ne[0] == 0 || ne[1] == 0 || ne[2] == 0 || ne[3] == 0;
    if (a->is_empty()) {
        PG_SHAPE_CHECK(out_empty, (OpMessage(op) << "an empty tensor can only repeat into an empty shape")
                                      .with("a", a).with("b", b));
    } else {
        for (int i = 0; i < 4; ++i)
            PG_SHAPE_CHECK(ne[i] % a->ne[i] == 0,
                           (OpMessage(op) << "target ne[" << i << "]=" << ne[i]
                                          << " must be a multiple of a.ne[" << i << "]=" << a->ne[i])
                               .with("a", a).with("b", b));
    }
    Tensor* r = ctx->new_tensor(a->type, 4, ne);
    r->op = Op::REPEAT;
    r->src[0] = a;
    return r;
}
}  // namespace

Tensor* repeat(Context* ctx, Tensor* a, Tensor* b) {
    if (!a || !b) throw_type(OpMessage("repeat") << "a and b are required");
    return repeat_impl(ctx, a, b->ne, "repeat", b);
}

Tensor* repeat_4d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    if (!a) throw_type(OpMessage("repeat_4d") << "a is required");
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return repeat_impl(ctx, a, ne, "repeat_4d", nullptr);
}

Tensor* concat(Context* ctx, Tensor* a, Tensor* b, int dim) {
    if (!a || !b) throw_type(OpMessage("concat") << "a and b are required");
    PG_SHAPE_CHECK(dim >= 0 && dim < 4, OpMessage("concat") << "dim=" << dim << " must be in 0..3");
    PG_TYPE_CHECK(a->type == b->type,
                  (OpMessage("concat") << "a and b must have the same type").with("a", a).with("b", b));
    int64_t ne[4];
    for (int d = 0; d < 4; ++d) {
        if (d == dim) {
            ne[d] = a->ne[d] + b->ne[d];
        } else {
            PG_SHAPE_CHECK(a->ne[d] == b->ne[d],
                           (OpMessage("concat") << "a.ne[" << d << "]=" << a->ne[d] << " must equal b.ne["
                                                << d << "]=" << b->ne[d] << " (only dim " << dim
                                                << " may differ)").with("a", a).with("b", b));
            ne[d] = a->ne[d];
        }
    }
    check_out_dims("concat", ne);
    Tensor* r = ctx->new_tensor(a->type, 4, ne);
    r->op = Op::CONCAT;
    r->set_param_i32(0, dim);
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

namespace {
Tensor* pad_impl(Context* ctx, Tensor* a, const int* lp, const int* rp, bool circular, const char* op) {
    if (!a) throw_type(OpMessage(op) << "a is required");
    PG_TYPE_CHECK(!is_quantized(a->type),
                  (OpMessage(op) << "block-quantized tensors cannot be padded").with("a", a));
    int64_t ne[4];
    for (int i = 0; i < 4; ++i) {
        PG_SHAPE_CHECK(lp[i] >= 0 && rp[i] >= 0,
                       (OpMessage(op) << "paddings of dim " << i << " (" << lp[i] << ", " << rp[i]
                                      << ") must be >= 0").with("a", a));
        ne[i] = a->ne[i] + lp[i] + rp[i];
    }
    check_out_dims(op, ne);
    if (circular) {
        const bool out_empty = ne[0] == 0 || ne[1] == 0 || ne[2] == 0 || ne[3] == 0;
        PG_SHAPE_CHECK(!a->is_empty() || out_empty,
                       (OpMessage(op) << "circular padding needs a non-empty source").with("a", a));
    }
    Tensor* r = ctx->new_tensor(a->type, 4, ne);
    r->op = Op::PAD;
    for (int i = 0; i < 4; ++i) {
        r->set_param_i32(2 * i, lp[i]);
        r->set_param_i32(2 * i + 1, rp[i]);
    }
    r->set_param_i32(8, circular ? 1 : 0);
    r->src[0] = a;
    return r;
}
}  // namespace

Tensor* pad(Context* ctx, Tensor* a, int p0, int p1, int p2, int p3) {
    const int lp[4] = {0, 0, 0, 0}, rp[4] = {p0, p1, p2, p3};
    return pad_impl(ctx, a, lp, rp, false, "pad");
}
Tensor* pad_ext(Context* ctx, Tensor* a, int lp0, int rp0, int lp1, int rp1, int lp2, int rp2,
                int lp3, int rp3) {
    const int lp[4] = {lp0, lp1, lp2, lp3}, rp[4] = {rp0, rp1, rp2, rp3};
    return pad_impl(ctx, a, lp, rp, false, "pad_ext");
}
Tensor* pad_circular(Context* ctx, Tensor* a, int p0, int p1, int p2, int p3) {
    const int lp[4] = {0, 0, 0, 0}, rp[4] = {p0, p1, p2, p3};
    return pad_impl(ctx, a, lp, rp, true, "pad_circular");
}
Tensor* pad_ext_circular(Context* ctx, Tensor* a, int lp0, int rp0, int lp1, int rp1, int lp2,
                         int rp2, int lp3, int rp3) {
    const int lp[4] = {lp0, lp1, lp2, lp3}, rp[4] = {rp0, rp1, rp2, rp3};
    return pad_impl(ctx, a, lp, rp, true, "pad_ext_circular");
}

Tensor* roll(Context* ctx, Tensor* a, int shift0, int shift1, int shift2, int shift3) {
    if (!a) throw_type(OpMessage("roll") << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32 || a->type == Type::F16 || a->type == Type::BF16 || a->type == Type::I32,
                  (OpMessage("roll") << "a must be f32, f16, bf16 or i32").with("a", a));
    PG_SHAPE_CHECK(a->nb[0] == type_size(a->type),
                   (OpMessage("roll") << "a's rows must be contiguous (nb[0] == element size)").with("a", a));
    const int shifts[4] = {shift0, shift1, shift2, shift3};
    for (int d = 0; d < 4; ++d)
        PG_SHAPE_CHECK((int64_t)std::abs((int64_t)shifts[d]) < a->ne[d],
                       (OpMessage("roll") << "|shift" << d << "| = " << std::abs((int64_t)shifts[d])
                                          << " must be < ne[" << d << "] = " << a->ne[d]).with("a", a));
    Tensor* r = ctx->dup_tensor(a);
    r->op = Op::ROLL;
    for (int d = 0; d < 4; ++d) r->set_param_i32(d, shifts[d]);
    r->src[0] = a;
    return r;
}

Tensor* pad_reflect_1d(Context* ctx, Tensor* a, int p0, int p1) {
    if (!a) throw_type(OpMessage("pad_reflect_1d") << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32, (OpMessage("pad_reflect_1d") << "a must be f32").with("a", a));
    PG_SHAPE_CHECK(p0 >= 0 && p1 >= 0 && p0 < a->ne[0] && p1 < a->ne[0],
                   (OpMessage("pad_reflect_1d") << "need 0 <= p0, p1 < ne[0] (got p0=" << p0 << ", p1=" << p1
                                                << ")").with("a", a));
    const int64_t ne[4] = {a->ne[0] + p0 + p1, a->ne[1], a->ne[2], a->ne[3]};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    r->op = Op::PAD_REFLECT_1D;
    r->set_param_i32(0, p0);
    r->set_param_i32(1, p1);
    r->src[0] = a;
    return r;
}

}  // namespace pyggml
