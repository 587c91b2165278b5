// ADD/SUB/MUL/DIV constructors: b tiles into a; ADD1 and ADD_ID.
#include "pyggml/ops/binary.h"

#include "pyggml/error.h"

namespace pyggml {

namespace {
bool type_combo_ok(Type a, Type b) {
    if (a == b) return a == Type::F32 || a == Type::F16 || a == Type::BF16;
    return (a == Type::F16 || a == Type::BF16) && b == Type::F32;
}

Tensor* binary_impl(Context* ctx, Tensor* a, Tensor* b, Op op, bool inplace, const char* name) {
    if (!a || !b) throw_type(OpMessage(name) << "a and b are required");
    PG_TYPE_CHECK(type_combo_ok(a->type, b->type),
                  (OpMessage(name) << "unsupported types: a must be f32/f16/bf16 and b the same "
                                      "type or f32").with("a", a).with("b", b));
    PG_SHAPE_CHECK(can_repeat(b, a),
                   (OpMessage(name) << "b must tile into a: every a.ne[i] must be a multiple of "
                                       "b.ne[i]").with("a", a).with("b", b));
    PG_SHAPE_CHECK(a->nb[0] == type_size(a->type),
                   (OpMessage(name) << "a's rows must be contiguous (nb[0] == element size)").with("a", a));
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = op;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}
}  // namespace

Tensor* add(Context* c, Tensor* a, Tensor* b) { return binary_impl(c, a, b, Op::ADD, false, "add"); }
Tensor* sub(Context* c, Tensor* a, Tensor* b) { return binary_impl(c, a, b, Op::SUB, false, "sub"); }
Tensor* mul(Context* c, Tensor* a, Tensor* b) { return binary_impl(c, a, b, Op::MUL, false, "mul"); }
Tensor* div(Context* c, Tensor* a, Tensor* b) { return binary_impl(c, a, b, Op::DIV, false, "div"); }
Tensor* add_inplace(Context* c, Tensor* a, Tensor* b) { return binary_impl(c, a, b, Op::ADD, true, "add_inplace"); }
Tensor* sub_inplace(Context* c, Tensor* a, Tensor* b) { return binary_impl(c, a, b, Op::SUB, true, "sub_inplace"); }
Tensor* mul_inplace(Context* c, Tensor* a, Tensor* b) { return binary_impl(c, a, b, Op::MUL, true, "mul_inplace"); }
Tensor* div_inplace(Context* c, Tensor* a, Tensor* b) { return binary_impl(c, a, b, Op::DIV, true, "div_inplace"); }

namespace {
Tensor* add1_impl(Context* ctx, Tensor* a, Tensor* b, bool inplace, const char* name) {
    if (!a || !b) throw_type(OpMessage(name) << "a and b are required");
    PG_TYPE_CHECK(type_combo_ok(a->type, b->type),
                  (OpMessage(name) << "unsupported types: a must be f32/f16/bf16 and b the same "
                                      "type or f32").with("a", a).with("b", b));
    PG_SHAPE_CHECK(b->nelements() == 1 && b->ne[0] == 1,
                   (OpMessage(name) << "b must hold exactly one element").with("b", b));
    PG_SHAPE_CHECK(a->nb[0] == type_size(a->type),
                   (OpMessage(name) << "a's rows must be contiguous (nb[0] == element size)").with("a", a));
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = Op::ADD1;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}
}  // namespace

Tensor* add1(Context* c, Tensor* a, Tensor* b) { return add1_impl(c, a, b, false, "add1"); }
Tensor* add1_inplace(Context* c, Tensor* a, Tensor* b) { return add1_impl(c, a, b, true, "add1_inplace"); }

Tensor* add_id(Context* ctx, Tensor* a, Tensor* b, Tensor* ids) {
    if (!a || !b || !ids) throw_type(OpMessage("add_id") << "a, b and ids are required");
    PG_TYPE_CHECK(a->type == Type::F32 && b->type == Type::F32,
                  (OpMessage("add_id") << "a and b must be f32").with("a", a).with("b", b));
    PG_TYPE_CHECK(ids->type == Type::I32, (OpMessage("add_id") << "ids must be i32").with("ids", ids));
    PG_SHAPE_CHECK(a->ne[0] == b->ne[0] && a->ne[1] == ids->ne[0] && a->ne[2] == ids->ne[1],
                   (OpMessage("add_id") << "need a.ne[0] == b.ne[0], a.ne[1] == ids.ne[0] and "
                                           "a.ne[2] == ids.ne[1]").with("a", a).with("b", b).with("ids", ids));
    PG_SHAPE_CHECK(ids->ne[2] == 1 && ids->ne[3] == 1,
                   (OpMessage("add_id") << "ids must be a matrix [a.ne[1], a.ne[2]]").with("ids", ids));
    PG_SHAPE_CHECK(a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float),
                   (OpMessage("add_id") << "the rows of a and b must be contiguous").with("a", a).with("b", b));
    Tensor* r = ctx->dup_tensor(a);
    r->op = Op::ADD_ID;
    r->src[0] = a;
    r->src[1] = b;
    r->src[2] = ids;
    return r;
}

}  // namespace pyggml
