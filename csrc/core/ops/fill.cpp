// FILL constructors: op_params slot 0 = c (f32).
#include "pyggml/ops/fill.h"

#include "pyggml/error.h"

namespace pyggml {

namespace {
Tensor* fill_impl(Context* ctx, Tensor* a, float c, bool inplace, const char* op) {
    if (!a) throw_type(OpMessage(op) << "tensor a is required (got None)");
    PG_TYPE_CHECK(a->type == Type::F32 || a->type == Type::F16,
                  (OpMessage(op) << "a must be f32 or f16, got " << type_name(a->type)).with("a", a));
    PG_SHAPE_CHECK(a->is_contiguous(), (OpMessage(op) << "a must be contiguous").with("a", a));
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = Op::FILL;
    r->set_param_f32(0, c);
    r->src[0] = a;
    return r;
}
}  // namespace

Tensor* fill(Context* ctx, Tensor* a, float c) { return fill_impl(ctx, a, c, false, "fill"); }
Tensor* fill_inplace(Context* ctx, Tensor* a, float c) { return fill_impl(ctx, a, c, true, "fill_inplace"); }

}  // namespace pyggml
