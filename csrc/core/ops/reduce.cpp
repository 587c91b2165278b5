// SUM_ROWS, MEAN, CUMSUM, SUM, ARGMAX and COUNT_EQUAL constructors. Unlike ggml, a dim 0 that is not
// packed (e.g. a permute that moves dim 0) is rejected here instead of being misread.
#include "pyggml/ops/reduce.h"

#include <cstdint>

#include "pyggml/error.h"

namespace pyggml {

namespace {
void check_reduce_input(Tensor* a, const char* name) {
    if (!a) throw_type(OpMessage(name) << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32 || a->type == Type::F16 || a->type == Type::BF16,
                  (OpMessage(name) << "a must be f32, f16 or bf16").with("a", a));
    PG_SHAPE_CHECK(a->nb[0] == type_size(a->type),
                   (OpMessage(name) << "dim 0 of a must be packed (nb[0] == element size " << type_size(a->type)
                                    << ", got " << a->nb[0] << "); use cont() on permuted inputs").with("a", a));
}

Tensor* reduce_rows(Context* ctx, Tensor* a, Op op, Type out_type, const char* name) {
    check_reduce_input(a, name);
    int64_t ne[4] = {1, a->ne[1], a->ne[2], a->ne[3]};
    Tensor* r = ctx->new_tensor(out_type, 4, ne);
    r->op = op;
    r->src[0] = a;
    return r;
}
}  // namespace

Tensor* sum_rows(Context* ctx, Tensor* a) {
    return reduce_rows(ctx, a, Op::SUM_ROWS, a ? a->type : Type::F32, "sum_rows");
}

Tensor* mean(Context* ctx, Tensor* a) { return reduce_rows(ctx, a, Op::MEAN, Type::F32, "mean"); }

Tensor* cumsum(Context* ctx, Tensor* a) {
    check_reduce_input(a, "cumsum");
    Tensor* r = ctx->dup_tensor(a);
    r->op = Op::CUMSUM;
    r->src[0] = a;
    return r;
}

Tensor* sum(Context* ctx, Tensor* a) {
    if (!a) throw_type(OpMessage("sum") << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32 || a->type == Type::F16 || a->type == Type::BF16,
                  (OpMessage("sum") << "a must be f32, f16 or bf16").with("a", a));
    const int64_t ne[1] = {1};
    Tensor* r = ctx->new_tensor(a->type, 1, ne);
    r->op = Op::SUM;
    r->src[0] = a;
    return r;
}

Tensor* argmax(Context* ctx, Tensor* a) {
    if (!a) throw_type(OpMessage("argmax") << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32, (OpMessage("argmax") << "a must be f32").with("a", a));
    PG_SHAPE_CHECK(a->ne[2] == 1 && a->ne[3] == 1,
                   (OpMessage("argmax") << "a must be a matrix (ne[2] == ne[3] == 1)").with("a", a));
    PG_SHAPE_CHECK(a->ne[0] <= INT32_MAX, (OpMessage("argmax") << "rows longer than INT32_MAX").with("a", a));
    const int64_t ne[1] = {a->ne[1]};
    Tensor* r = ctx->new_tensor(Type::I32, 1, ne);
    r->op = Op::ARGMAX;
    r->src[0] = a;
    return r;
}

Tensor* count_equal(Context* ctx, Tensor* a, Tensor* b) {
    if (!a || !b) throw_type(OpMessage("count_equal") << "a and b are required");
    PG_TYPE_CHECK(a->type == Type::I32 && b->type == Type::I32,
                  (OpMessage("count_equal") << "a and b must be i32").with("a", a).with("b", b));
    PG_SHAPE_CHECK(a->same_shape(b), (OpMessage("count_equal") << "a and b must have the same shape")
                                         .with("a", a).with("b", b));
    const int64_t ne[1] = {1};
    Tensor* r = ctx->new_tensor(Type::I64, 1, ne);
    r->op = Op::COUNT_EQUAL;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

}  // namespace pyggml
