// ARGSORT and TOP_K constructors.
#include "pyggml/ops/sort.h"

#include <cstdint>

#include "pyggml/error.h"
#include "pyggml/ops/layout.h"

namespace pyggml {

namespace {
void check_sort_input(Tensor* a, const char* name) {
    if (!a) throw_type(OpMessage(name) << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32, (OpMessage(name) << "a must be f32").with("a", a));
    PG_SHAPE_CHECK(a->nb[0] == type_size(a->type),
                   (OpMessage(name) << "dim 0 of a must be packed (nb[0] == 4)").with("a", a));
    PG_SHAPE_CHECK(a->ne[0] <= INT32_MAX,
                   (OpMessage(name) << "rows longer than INT32_MAX cannot be indexed by i32").with("a", a));
}

void check_k(Tensor* a, int64_t k, const char* name) {
    PG_SHAPE_CHECK(k >= 0 && k <= a->ne[0],
                   (OpMessage(name) << "k=" << k << " must be in 0..a.ne[0]=" << a->ne[0]).with("a", a));
}
}  // namespace

Tensor* argsort(Context* ctx, Tensor* a, SortOrder order) {
    check_sort_input(a, "argsort");
    PG_SHAPE_CHECK(order == SortOrder::ASC || order == SortOrder::DESC,
                   OpMessage("argsort") << "order=" << (int)order << " must be 0 (ASC) or 1 (DESC)");
    Tensor* r = ctx->new_tensor(Type::I32, 4, a->ne);
    r->op = Op::ARGSORT;
    r->set_param_i32(0, (int32_t)order);
    r->src[0] = a;
    return r;
}

Tensor* argsort_top_k(Context* ctx, Tensor* a, int64_t k) {
    check_sort_input(a, "argsort_top_k");
    check_k(a, k, "argsort_top_k");
    Tensor* s = argsort(ctx, a, SortOrder::DESC);
    return view_4d(ctx, s, k, s->ne[1], s->ne[2], s->ne[3], s->nb[1], s->nb[2], s->nb[3], 0);
}

Tensor* top_k(Context* ctx, Tensor* a, int64_t k) {
    check_sort_input(a, "top_k");
    check_k(a, k, "top_k");
    int64_t ne[4] = {k, a->ne[1], a->ne[2], a->ne[3]};
    Tensor* r = ctx->new_tensor(Type::I32, 4, ne);
    r->op = Op::TOP_K;
    r->set_param_i32(0, (int32_t)k);
    r->src[0] = a;
    return r;
}

}  // namespace pyggml
