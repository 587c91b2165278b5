// GET_ROWS / SET_ROWS constructors. Index ranges are checked by the kernels.
#include "pyggml/ops/rows.h"

#include "pyggml/error.h"

namespace pyggml {

Tensor* get_rows(Context* ctx, Tensor* a, Tensor* b) {
    if (!a || !b) throw_type(OpMessage("get_rows") << "tensors a and b are required (got None)");
    PG_TYPE_CHECK(a->type == Type::I32 || has_to_float(a->type),
                  (OpMessage("get_rows") << "a must be f32/f16/bf16/i32 or a block type, got "
                                         << type_name(a->type)).with("a", a));
    PG_TYPE_CHECK(b->type == Type::I32,
                  (OpMessage("get_rows") << "indices b must be i32, got " << type_name(b->type)).with("b", b));
    PG_SHAPE_CHECK(a->ne[2] == b->ne[1] && a->ne[3] == b->ne[2] && b->ne[3] == 1,
                   (OpMessage("get_rows") << "b must be [n_idx, a.ne[2]=" << a->ne[2] << ", a.ne[3]="
                                          << a->ne[3] << ", 1] (no broadcast)").with("a", a).with("b", b));
    PG_SHAPE_CHECK(a->is_contiguous_rows(),
                   (OpMessage("get_rows") << "a's rows must be contiguous (nb[0] == element size)").with("a", a));
    const int64_t ne[4] = {a->ne[0], b->ne[0], b->ne[1], b->ne[2]};
    Tensor* r = ctx->new_tensor(a->type == Type::I32 ? Type::I32 : Type::F32, 4, ne);
    r->op = Op::GET_ROWS;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

Tensor* set_rows(Context* ctx, Tensor* a, Tensor* b, Tensor* c) {
    if (!a || !b || !c)
        throw_type(OpMessage("set_rows") << "tensors a, b and c are required (got None)");
    PG_TYPE_CHECK(b->type == Type::F32 || b->type == Type::F16,
                  (OpMessage("set_rows") << "source b must be f32 or f16, got " << type_name(b->type)).with("b", b));
    PG_TYPE_CHECK(c->type == Type::I32 || c->type == Type::I64,
                  (OpMessage("set_rows") << "indices c must be i32 or i64, got " << type_name(c->type)).with("c", c));
    PG_TYPE_CHECK(has_from_float(a->type),
                  (OpMessage("set_rows") << "destination a must be f32/f16/bf16 or a block type with a quantizer, got "
                                         << type_name(a->type)).with("a", a));
    PG_SHAPE_CHECK(a->ne[0] == b->ne[0],
                   (OpMessage("set_rows") << "a.ne[0]=" << a->ne[0] << " must equal b.ne[0]=" << b->ne[0])
                       .with("a", a).with("b", b));
    PG_SHAPE_CHECK(a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3],
                   (OpMessage("set_rows") << "a and b must agree on dims 2 and 3").with("a", a).with("b", b));
    PG_SHAPE_CHECK(c->ne[0] == b->ne[1],
                   (OpMessage("set_rows") << "c.ne[0]=" << c->ne[0] << " must equal the number of source rows b.ne[1]="
                                          << b->ne[1]).with("b", b).with("c", c));
    PG_SHAPE_CHECK(c->ne[1] > 0 && c->ne[2] > 0 && b->ne[2] % c->ne[1] == 0 && b->ne[3] % c->ne[2] == 0 &&
                       c->ne[3] == 1,
                   (OpMessage("set_rows") << "c must be [b.ne[1], d1, d2, 1] with b.ne[2] % d1 == 0 and "
                                             "b.ne[3] % d2 == 0").with("b", b).with("c", c));
    PG_SHAPE_CHECK(a->is_contiguous_rows() && b->is_contiguous_rows(),
                   (OpMessage("set_rows") << "a and b must have contiguous rows (nb[0] == element size)")
                       .with("a", a).with("b", b));
    Tensor* r = ctx->view_tensor(a);
    r->op = Op::SET_ROWS;
    r->src[0] = b;
    r->src[1] = c;
    r->src[2] = a;
    return r;
}

}  // namespace pyggml
