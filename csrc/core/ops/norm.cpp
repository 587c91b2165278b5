// NORM / RMS_NORM constructors (spec 4.9, 4.10): validation and shape inference only.
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

}  // namespace pyggml
