// UNARY (sub-op in slot 0), SQR and SQRT constructors (spec 4.13).
#include "pyggml/ops/unary.h"

#include "pyggml/error.h"

namespace pyggml {

namespace {
Tensor* unary_like(Context* ctx, Tensor* a, Op op, int32_t sub, bool inplace, const char* name) {
    if (!a) throw_type(OpMessage(name) << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32 || a->type == Type::F16 || a->type == Type::BF16,
                  (OpMessage(name) << "a must be f32, f16 or bf16").with("a", a));
    PG_SHAPE_CHECK(a->nb[0] == type_size(a->type),
                   (OpMessage(name) << "a's rows must be contiguous (nb[0] == element size)").with("a", a));
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = op;
    r->op_params[0] = sub;
    r->src[0] = a;
    return r;
}
}  // namespace

Tensor* unary(Context* ctx, Tensor* a, UnaryOp op) {
    if ((int)op < 0 || op >= UnaryOp::COUNT || op == UnaryOp::XIELU)
        throw_unsupported(OpMessage("unary") << "unsupported unary op id " << (int)op);
    return unary_like(ctx, a, Op::UNARY, (int32_t)op, false, "unary");
}
Tensor* unary_inplace(Context* ctx, Tensor* a, UnaryOp op) {
    if ((int)op < 0 || op >= UnaryOp::COUNT || op == UnaryOp::XIELU)
        throw_unsupported(OpMessage("unary") << "unsupported unary op id " << (int)op);
    return unary_like(ctx, a, Op::UNARY, (int32_t)op, true, "unary_inplace");
}
Tensor* sqr(Context* c, Tensor* a) { return unary_like(c, a, Op::SQR, 0, false, "sqr"); }
Tensor* sqr_inplace(Context* c, Tensor* a) { return unary_like(c, a, Op::SQR, 0, true, "sqr_inplace"); }
Tensor* sqrt(Context* c, Tensor* a) { return unary_like(c, a, Op::SQRT, 0, false, "sqrt"); }
Tensor* sqrt_inplace(Context* c, Tensor* a) { return unary_like(c, a, Op::SQRT, 0, true, "sqrt_inplace"); }

}  // namespace pyggml
