// DIAG, DIAG_MASK_INF and DIAG_MASK_ZERO constructors.
#include "pyggml/ops/diag.h"

#include "pyggml/error.h"

namespace pyggml {

Tensor* diag(Context* ctx, Tensor* a) {
    if (!a) throw_type(OpMessage("diag") << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32, (OpMessage("diag") << "a must be f32").with("a", a));
    PG_SHAPE_CHECK(a->ne[1] == 1, (OpMessage("diag") << "a must be a row vector per matrix (ne[1] == 1)").with("a", a));
    const int64_t ne[4] = {a->ne[0], a->ne[0], a->ne[2], a->ne[3]};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    r->op = Op::DIAG;
    r->src[0] = a;
    return r;
}

namespace {
Tensor* diag_mask(Context* ctx, Tensor* a, int n_past, bool inplace, Op op, const char* name) {
    if (!a) throw_type(OpMessage(name) << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32, (OpMessage(name) << "a must be f32").with("a", a));
    PG_SHAPE_CHECK(a->nb[0] == sizeof(float),
                   (OpMessage(name) << "a's rows must be contiguous (nb[0] == 4)").with("a", a));
    PG_SHAPE_CHECK(n_past >= 0, (OpMessage(name) << "n_past must be >= 0 (got " << n_past << ")").with("a", a));
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = op;
    r->set_param_i32(0, n_past);
    r->src[0] = a;
    return r;
}
}  // namespace

Tensor* diag_mask_inf(Context* c, Tensor* a, int n_past) {
    return diag_mask(c, a, n_past, false, Op::DIAG_MASK_INF, "diag_mask_inf");
}
Tensor* diag_mask_inf_inplace(Context* c, Tensor* a, int n_past) {
    return diag_mask(c, a, n_past, true, Op::DIAG_MASK_INF, "diag_mask_inf_inplace");
}
Tensor* diag_mask_zero(Context* c, Tensor* a, int n_past) {
    return diag_mask(c, a, n_past, false, Op::DIAG_MASK_ZERO, "diag_mask_zero");
}
Tensor* diag_mask_zero_inplace(Context* c, Tensor* a, int n_past) {
    return diag_mask(c, a, n_past, true, Op::DIAG_MASK_ZERO, "diag_mask_zero_inplace");
}

}  // namespace pyggml
