// Views, reshape, permute, transpose: metadata-only ops (spec 1.7).
#include "pyggml/ops/layout.h"

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
    for (int i = 0; i < 4; ++i)
        if (ne[i] < 0) throw_shape(OpMessage(op) << "ne[" << i << "]=" << ne[i] << " must be >= 0");
    if (ne[0] % blck_size(a->type) != 0)
        throw_shape(OpMessage(op) << "ne0=" << ne[0] << " must be a multiple of the block size "
                                  << blck_size(a->type) << " of " << type_name(a->type));
    Tensor* root = a->view_src ? a->view_src : a;
    size_t base = a->view_src ? a->view_offs : 0;
    if (ne[0] * ne[1] * ne[2] * ne[3] == 0) return;
    size_t last = row_size(a->type, ne[0]);
    for (int i = 1; i < 4; ++i) last += (ne[i] - 1) * nb[i];
    if (base + offset + last > root->nbytes())
        throw_shape((OpMessage(op) << "the view (offset " << offset << ", span " << last
                                   << " bytes) reaches past the end of its source's "
                                   << root->nbytes() << " bytes").with("a", a));
}
}  // namespace

Tensor* view_1d(Context* ctx, Tensor* a, int64_t ne0, size_t offset) {
    int64_t ne[4] = {ne0, 1, 1, 1};
    size_t nb[4] = {type_size(a->type), 0, 0, 0};
    check_view_span("view_1d", a, ne, nb, offset);
    return make_view(ctx, a, 1, ne, offset, "view_1d");
}

Tensor* view_2d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
    int64_t ne[4] = {ne0, ne1, 1, 1};
    size_t nb[4] = {type_size(a->type), nb1, nb1 * ne1, nb1 * ne1};
    check_view_span("view_2d", a, ne, nb, offset);
    Tensor* r = make_view(ctx, a, 2, ne, offset, "view_2d");
    r->nb[1] = nb1; r->nb[2] = nb1 * ne1; r->nb[3] = r->nb[2];
    return r;
}

Tensor* view_3d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1,
                size_t nb2, size_t offset) {
    int64_t ne[4] = {ne0, ne1, ne2, 1};
    size_t nb[4] = {type_size(a->type), nb1, nb2, nb2 * ne2};
    check_view_span("view_3d", a, ne, nb, offset);
    Tensor* r = make_view(ctx, a, 3, ne, offset, "view_3d");
    r->nb[1] = nb1; r->nb[2] = nb2; r->nb[3] = nb2 * ne2;
    return r;
}

Tensor* view_4d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    int64_t ne[4] = {ne0, ne1, ne2, ne3};
    size_t nb[4] = {type_size(a->type), nb1, nb2, nb3};
    check_view_span("view_4d", a, ne, nb, offset);
    Tensor* r = make_view(ctx, a, 4, ne, offset, "view_4d");
    r->nb[1] = nb1; r->nb[2] = nb2; r->nb[3] = nb3;
    return r;
}

namespace {
Tensor* reshape_impl(Context* ctx, Tensor* a, int n_dims, const int64_t* ne, const char* op) {
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
    Tensor* r = ctx->view_tensor(a);
    std::swap(r->ne[0], r->ne[1]);
    std::swap(r->nb[0], r->nb[1]);
    r->op = Op::TRANSPOSE;
    r->src[0] = a;
    r->name = a->name + " (transposed)";
    return r;
}

}  // namespace pyggml
