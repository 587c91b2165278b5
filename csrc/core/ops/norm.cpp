// NORM / RMS_NORM, L2_NORM and GROUP_NORM constructors: validation and shape
// inference only.
#include "pyggml/ops/norm.h"

#include <cmath>

#include "pyggml/error.h"

namespace pyggml {

namespace {
Tensor* norm_impl(Context* ctx, Tensor* a, float eps, Op op, bool inplace, const char* name) {
    if (!a) throw_type(OpMessage(name) << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32, (OpMessage(name) << "a must be f32").with("a", a));
    PG_SHAPE_CHECK(eps >= 0.0f, (OpMessage(name) << "eps must be >= 0 (got " << eps << ")"));
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = op;
    r->set_param_f32(0, eps);
    r->src[0] = a;
    return r;
}
}  // namespace

Tensor* norm(Context* c, Tensor* a, float eps) { return norm_impl(c, a, eps, Op::NORM, false, "norm"); }
Tensor* norm_inplace(Context* c, Tensor* a, float eps) {
    return norm_impl(c, a, eps, Op::NORM, true, "norm_inplace");
}
Tensor* rms_norm(Context* c, Tensor* a, float eps) {
    return norm_impl(c, a, eps, Op::RMS_NORM, false, "rms_norm");
}
Tensor* rms_norm_inplace(Context* c, Tensor* a, float eps) {
    return norm_impl(c, a, eps, Op::RMS_NORM, true, "rms_norm_inplace");
}

Tensor* l2_norm(Context* c, Tensor* a, float eps) { return norm_impl(c, a, eps, Op::L2_NORM, false, "l2_norm"); }
Tensor* l2_norm_inplace(Context* c, Tensor* a, float eps) {
    return norm_impl(c, a, eps, Op::L2_NORM, true, "l2_norm_inplace");
}

namespace {
Tensor* group_norm_impl(Context* ctx, Tensor* a, int n_groups, float eps, bool inplace, const char* name) {
    if (!a) throw_type(OpMessage(name) << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32, (OpMessage(name) << "a must be f32").with("a", a));
    PG_SHAPE_CHECK(a->nb[0] == sizeof(float),
                   (OpMessage(name) << "a's rows must be contiguous (nb[0] == 4)").with("a", a));
    PG_SHAPE_CHECK(n_groups >= 1, (OpMessage(name) << "n_groups must be >= 1 (got " << n_groups << ")").with("a", a));
    PG_SHAPE_CHECK(eps >= 0.0f, (OpMessage(name) << "eps must be >= 0 (got " << eps << ")"));
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = Op::GROUP_NORM;
    r->set_param_i32(0, n_groups);
    r->set_param_f32(1, eps);
    r->src[0] = a;
    return r;
}
}  // namespace

Tensor* group_norm(Context* c, Tensor* a, int n_groups, float eps) {
    return group_norm_impl(c, a, n_groups, eps, false, "group_norm");
}
Tensor* group_norm_inplace(Context* c, Tensor* a, int n_groups, float eps) {
    return group_norm_impl(c, a, n_groups, eps, true, "group_norm_inplace");
}

}  // namespace pyggml
