// Op constructors of the 'mul_mat' family: validation and shape inference only.
#include "pyggml/ops/mul_mat.h"

#include "pyggml/error.h"

namespace pyggml {

namespace {
// Float types and every block type the table marks as a weight type (not q8_1 / q8_K).
bool weight_type_ok(Type t) { return type_traits(t).is_weight && has_to_float(t); }
bool act_type_ok(Type t) { return t == Type::F32 || t == Type::F16 || t == Type::BF16; }

// Checks shared by mul_mat and mul_mat_id on the weights `a` and activations `b`.
void check_operands(const char* op, const char* aname, const Tensor* a, const Tensor* b) {
    PG_TYPE_CHECK(weight_type_ok(a->type),
                  (OpMessage(op) << aname << " must be f32, f16, bf16 or a block weight type (gg.type_traits()), got "
                                 << type_name(a->type)).with(aname, a).with("b", b));
    PG_TYPE_CHECK(act_type_ok(b->type),
                  (OpMessage(op) << "b must be f32, f16 or bf16, got " << type_name(b->type))
                      .with(aname, a).with("b", b));
    PG_SHAPE_CHECK(a->ne[0] == b->ne[0],
                   (OpMessage(op) << aname << ".ne[0]=" << a->ne[0] << " must equal b.ne[0]=" << b->ne[0])
                       .with(aname, a).with("b", b));
    PG_SHAPE_CHECK(!a->is_transposed(),
                   (OpMessage(op) << aname << " must not be transposed (nb[0] <= nb[1])").with(aname, a));
    PG_SHAPE_CHECK(a->nb[0] == type_size(a->type),
                   (OpMessage(op) << aname << "'s rows must be contiguous (nb[0] == type size "
                                  << type_size(a->type) << ", got " << a->nb[0] << ")").with(aname, a));
    PG_SHAPE_CHECK(b->nb[0] == type_size(b->type),
                   (OpMessage(op) << "b's rows must be contiguous (nb[0] == type size " << type_size(b->type)
                                  << ", got " << b->nb[0] << ")").with("b", b));
}
}  // namespace

Tensor* mul_mat(Context* ctx, Tensor* a, Tensor* b) {
    if (!a || !b) throw_type(OpMessage("mul_mat") << "a and b are required (got None)");
    check_operands("mul_mat", "a", a, b);
    PG_SHAPE_CHECK(a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0,
                   (OpMessage("mul_mat") << "b.ne[2]=" << b->ne[2] << " and b.ne[3]=" << b->ne[3]
                                         << " must be multiples of a.ne[2]=" << a->ne[2] << " and a.ne[3]="
                                         << a->ne[3] << " (batch broadcast)").with("a", a).with("b", b));
    const int64_t ne[4] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    r->op = Op::MUL_MAT;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

Tensor* mul_mat_id(Context* ctx, Tensor* as, Tensor* b, Tensor* ids) {
    if (!as || !b || !ids) throw_type(OpMessage("mul_mat_id") << "as, b and ids are required (got None)");
    check_operands("mul_mat_id", "as", as, b);
    PG_TYPE_CHECK(ids->type == Type::I32,
                  (OpMessage("mul_mat_id") << "ids must be i32, got " << type_name(ids->type)).with("ids", ids));
    PG_SHAPE_CHECK(as->ne[3] == 1,
                   (OpMessage("mul_mat_id") << "as must be 3-D [K, M, n_expert], got as.ne[3]=" << as->ne[3])
                       .with("as", as));
    PG_SHAPE_CHECK(b->ne[3] == 1,
                   (OpMessage("mul_mat_id") << "b must be 3-D [K, Nb, n_tokens], got b.ne[3]=" << b->ne[3])
                       .with("b", b));
    PG_SHAPE_CHECK(ids->ne[2] == 1 && ids->ne[3] == 1,
                   (OpMessage("mul_mat_id") << "ids must be 2-D [n_used, n_tokens]").with("ids", ids));
    PG_SHAPE_CHECK(ids->ne[1] == b->ne[2],
                   (OpMessage("mul_mat_id") << "ids.ne[1]=" << ids->ne[1] << " must equal b.ne[2]=" << b->ne[2]
                                            << " (n_tokens)").with("b", b).with("ids", ids));
    PG_SHAPE_CHECK(b->ne[1] > 0 && ids->ne[0] % b->ne[1] == 0,
                   (OpMessage("mul_mat_id") << "ids.ne[0]=" << ids->ne[0] << " (n_used) must be a multiple of b.ne[1]="
                                            << b->ne[1]).with("b", b).with("ids", ids));
    PG_SHAPE_CHECK(ids->nb[0] == sizeof(int32_t),
                   (OpMessage("mul_mat_id") << "ids' rows must be contiguous").with("ids", ids));
    const int64_t ne[4] = {as->ne[1], ids->ne[0], b->ne[2], 1};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    r->op = Op::MUL_MAT_ID;
    r->src[0] = as;
    r->src[1] = b;
    r->src[2] = ids;
    return r;
}

}  // namespace pyggml
