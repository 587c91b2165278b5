// GLU constructors: validation and shape inference only.
#include "pyggml/ops/glu.h"

#include <cmath>

#include "pyggml/error.h"

namespace pyggml {

namespace {
bool glu_type_ok(Type t) { return t == Type::F32 || t == Type::F16 || t == Type::BF16; }

// op_params: slot 0 = glu op, 1 = swapped, 2 = alpha (f32), 3 = limit (f32).
Tensor* glu_impl(Context* ctx, Tensor* a, Tensor* b, GluOp op, bool swapped, float alpha,
                 float limit, const char* name) {
    if (!a) throw_type(OpMessage(name) << "a is required");
    if ((int)op < 0 || op >= GluOp::COUNT)
        throw_shape(OpMessage(name) << "unknown glu op id " << (int)op << " (valid: 0.."
                                    << (int)GluOp::COUNT - 1 << ")");
    PG_TYPE_CHECK(glu_type_ok(a->type), (OpMessage(name) << "a must be f32, f16 or bf16").with("a", a));
    PG_SHAPE_CHECK(a->is_contiguous_1(),
                   (OpMessage(name) << "a's rows must be packed (is_contiguous_1: padded rows are "
                                       "fine, permuted or strided elements are not)").with("a", a));
    if (b) {
        PG_TYPE_CHECK(b->type == a->type,
                      (OpMessage(name) << "a and b must have the same type").with("a", a).with("b", b));
        PG_SHAPE_CHECK(a->same_shape(b),
                       (OpMessage(name) << "a and b must have the same shape").with("a", a).with("b", b));
        PG_SHAPE_CHECK(b->is_contiguous_1(),
                       (OpMessage(name) << "b's rows must be packed (is_contiguous_1)").with("b", b));
    }
    if (op == GluOp::SWIGLU_OAI || op == GluOp::SWIGLU_CLAMP) {
        PG_SHAPE_CHECK(!(limit < 0.0f) && !std::isnan(limit),
                       OpMessage(name) << "limit=" << limit << " must be >= 0");
    }
    int64_t ne[4] = {b ? a->ne[0] : a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3]};
    Tensor* r = ctx->new_tensor(a->type, 4, ne);
    r->op = Op::GLU;
    r->set_param_i32(0, (int32_t)op);
    r->set_param_i32(1, swapped ? 1 : 0);
    r->set_param_f32(2, alpha);
    r->set_param_f32(3, limit);
    r->src[0] = a;
    r->src[1] = b;
    return r;
}
}  // namespace

Tensor* glu(Context* c, Tensor* a, GluOp op, bool swapped) {
    return glu_impl(c, a, nullptr, op, swapped, 0.0f, 0.0f, "glu");
}
Tensor* glu_split(Context* c, Tensor* a, Tensor* b, GluOp op) {
    if (!b) throw_type(OpMessage("glu_split") << "b is required");
    return glu_impl(c, a, b, op, false, 0.0f, 0.0f, "glu_split");
}

#define PYGGML_GLU_NAMED(fn, OP)                                                                  \
    Tensor* fn(Context* c, Tensor* a) { return glu_impl(c, a, nullptr, GluOp::OP, false, 0, 0, #fn); } \
    Tensor* fn##_swapped(Context* c, Tensor* a) {                                                 \
        return glu_impl(c, a, nullptr, GluOp::OP, true, 0, 0, #fn "_swapped");                    \
    }                                                                                             \
    Tensor* fn##_split(Context* c, Tensor* a, Tensor* b) {                                        \
        if (!b) throw_type(OpMessage(#fn "_split") << "b is required");                           \
        return glu_impl(c, a, b, GluOp::OP, false, 0, 0, #fn "_split");                           \
    }
PYGGML_GLU_NAMED(reglu, REGLU)
PYGGML_GLU_NAMED(geglu, GEGLU)
PYGGML_GLU_NAMED(swiglu, SWIGLU)
PYGGML_GLU_NAMED(geglu_erf, GEGLU_ERF)
PYGGML_GLU_NAMED(geglu_quick, GEGLU_QUICK)
#undef PYGGML_GLU_NAMED

Tensor* swiglu_oai(Context* c, Tensor* a, Tensor* b, float alpha, float limit) {
    return glu_impl(c, a, b, GluOp::SWIGLU_OAI, false, alpha, limit, "swiglu_oai");
}
Tensor* swiglu_clamp(Context* c, Tensor* a, Tensor* b, float limit) {
    return glu_impl(c, a, b, GluOp::SWIGLU_CLAMP, false, 0.0f, limit, "swiglu_clamp");
}

}  // namespace pyggml
