// OUT_PROD and SOLVE_TRI constructors.
#include "pyggml/ops/linalg.h"

#include "pyggml/error.h"

namespace pyggml {

Tensor* out_prod(Context* ctx, Tensor* a, Tensor* b) {
    if (!a || !b) throw_type(OpMessage("out_prod") << "a and b are required");
    PG_TYPE_CHECK(has_to_float(a->type) && a->type != Type::I32 && a->type != Type::I64,
                  (OpMessage("out_prod") << "a must be a float or block type").with("a", a));
    PG_TYPE_CHECK(b->type == Type::F32, (OpMessage("out_prod") << "b must be f32").with("b", b));
    PG_SHAPE_CHECK(a->nb[0] == type_size(a->type) && !a->is_transposed(),
                   (OpMessage("out_prod") << "a's rows must be contiguous (a may not be transposed)").with("a", a));
    PG_SHAPE_CHECK(a->ne[1] == b->ne[1],
                   (OpMessage("out_prod") << "a.ne[1] must equal b.ne[1]").with("a", a).with("b", b));
    PG_SHAPE_CHECK(a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0,
                   (OpMessage("out_prod") << "a must broadcast over b's dims 2, 3 (b.ne[i] % a.ne[i] == 0)")
                       .with("a", a).with("b", b));
    const int64_t ne[4] = {a->ne[0], b->ne[0], b->ne[2], b->ne[3]};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    r->op = Op::OUT_PROD;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

Tensor* solve_tri(Context* ctx, Tensor* a, Tensor* b, bool left, bool lower, bool uni) {
    if (!a || !b) throw_type(OpMessage("solve_tri") << "a and b are required");
    if (!(left && lower && !uni))
        throw_unsupported(OpMessage("solve_tri") << "only left=true, lower=true, uni=false is implemented (got left="
                                                 << left << ", lower=" << lower << ", uni=" << uni << ")");
    PG_TYPE_CHECK(a->type == Type::F32 && b->type == Type::F32,
                  (OpMessage("solve_tri") << "a and b must be f32").with("a", a).with("b", b));
    PG_SHAPE_CHECK(a->ne[0] == a->ne[1], (OpMessage("solve_tri") << "a must be square (ne[0] == ne[1])").with("a", a));
    PG_SHAPE_CHECK(b->ne[1] == a->ne[1] && b->ne[2] == a->ne[2] && b->ne[3] == a->ne[3],
                   (OpMessage("solve_tri") << "b must be [k, n, ne2, ne3] for a [n, n, ne2, ne3]").with("a", a).with("b", b));
    PG_SHAPE_CHECK(a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float),
                   (OpMessage("solve_tri") << "the rows of a and b must be contiguous").with("a", a).with("b", b));
    Tensor* r = ctx->new_tensor(Type::F32, 4, b->ne);
    r->op = Op::SOLVE_TRI;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

}  // namespace pyggml
