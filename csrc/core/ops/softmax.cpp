// SOFT_MAX and SOFT_MAX_BACK constructors: validation and shape inference only.
#include "pyggml/ops/softmax.h"

#include "pyggml/error.h"

namespace pyggml {

namespace {
Tensor* soft_max_impl(Context* ctx, Tensor* a, Tensor* mask, float scale, float max_bias, bool inplace,
                      const char* name) {
    if (!a) throw_type(OpMessage(name) << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32, (OpMessage(name) << "a must be f32").with("a", a));
    PG_SHAPE_CHECK(a->is_contiguous(), (OpMessage(name) << "a must be contiguous").with("a", a));
    if (mask) {
        PG_TYPE_CHECK(mask->type == Type::F16 || mask->type == Type::F32,
                      (OpMessage(name) << "mask must be f16 or f32").with("mask", mask));
        PG_SHAPE_CHECK(mask->is_contiguous(), (OpMessage(name) << "mask must be contiguous").with("mask", mask));
        PG_SHAPE_CHECK(mask->ne[0] == a->ne[0],
                       (OpMessage(name) << "mask.ne[0]=" << mask->ne[0] << " must equal a.ne[0]=" << a->ne[0])
                           .with("a", a).with("mask", mask));
        PG_SHAPE_CHECK(mask->ne[1] >= a->ne[1],
                       (OpMessage(name) << "mask.ne[1]=" << mask->ne[1] << " must be >= a.ne[1]=" << a->ne[1])
                           .with("a", a).with("mask", mask));
        PG_SHAPE_CHECK(mask->ne[2] > 0 && mask->ne[3] > 0 && a->ne[2] % mask->ne[2] == 0 &&
                           a->ne[3] % mask->ne[3] == 0,
                       (OpMessage(name) << "mask must broadcast over dims 2/3: a.ne[2] % mask.ne[2] and "
                                           "a.ne[3] % mask.ne[3] must be 0")
                           .with("a", a).with("mask", mask));
    }
    PG_SHAPE_CHECK(!(max_bias > 0.0f) || mask,
                   (OpMessage(name) << "max_bias > 0 (ALiBi) requires a mask (max_bias=" << max_bias << ")").with("a", a));
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = Op::SOFT_MAX;
    r->set_param_f32(0, scale);
    r->set_param_f32(1, max_bias);
    r->src[0] = a;
    r->src[1] = mask;
    return r;
}
}  // namespace

Tensor* soft_max(Context* c, Tensor* a) { return soft_max_impl(c, a, nullptr, 1.0f, 0.0f, false, "soft_max"); }
Tensor* soft_max_inplace(Context* c, Tensor* a) {
    return soft_max_impl(c, a, nullptr, 1.0f, 0.0f, true, "soft_max_inplace");
}
Tensor* soft_max_ext(Context* c, Tensor* a, Tensor* mask, float scale, float max_bias) {
    return soft_max_impl(c, a, mask, scale, max_bias, false, "soft_max_ext");
}
Tensor* soft_max_ext_inplace(Context* c, Tensor* a, Tensor* mask, float scale, float max_bias) {
    return soft_max_impl(c, a, mask, scale, max_bias, true, "soft_max_ext_inplace");
}

void soft_max_add_sinks(Tensor* node, Tensor* sinks) {
    const char* name = "soft_max_add_sinks";
    if (!node) throw_type(OpMessage(name) << "node is required");
    PG_TYPE_CHECK(node->op == Op::SOFT_MAX,
                  (OpMessage(name) << "node must be a SOFT_MAX node (got " << op_name(node->op) << ")").with("node", node));
    if (!sinks) { node->src[2] = nullptr; note_tensor_edit(); return; }
    PG_SHAPE_CHECK(node->src[2] == nullptr, (OpMessage(name) << "sinks already set").with("node", node));
    PG_TYPE_CHECK(sinks->type == Type::F32, (OpMessage(name) << "sinks must be f32").with("sinks", sinks));
    const Tensor* a = node->src[0];
    PG_SHAPE_CHECK(sinks->ne[0] == a->ne[2] && sinks->ne[1] == 1 && sinks->ne[2] == 1 && sinks->ne[3] == 1,
                   (OpMessage(name) << "sinks must be a vector of a.ne[2]=" << a->ne[2] << " entries")
                       .with("a", a).with("sinks", sinks));
    node->src[2] = sinks;
    note_tensor_edit();
}

namespace {
Tensor* soft_max_back_impl(Context* ctx, Tensor* dy, Tensor* y, float scale, float max_bias, bool inplace,
                           const char* name) {
    if (!dy || !y) throw_type(OpMessage(name) << "dy and y are required");
    PG_TYPE_CHECK(dy->type == Type::F32 && y->type == Type::F32,
                  (OpMessage(name) << "dy and y must be f32").with("dy", dy).with("y", y));
    PG_SHAPE_CHECK(dy->same_shape(y), (OpMessage(name) << "dy and y must have the same shape").with("dy", dy).with("y", y));
    PG_SHAPE_CHECK(dy->nb[0] == sizeof(float) && y->nb[0] == sizeof(float),
                   (OpMessage(name) << "the rows of dy and y must be contiguous").with("dy", dy).with("y", y));
    if (max_bias != 0.0f)
        throw_unsupported(OpMessage(name) << "only max_bias == 0 is supported (got " << max_bias << ")");
    Tensor* r = inplace ? ctx->view_tensor(dy) : ctx->dup_tensor(dy);
    r->op = Op::SOFT_MAX_BACK;
    r->set_param_f32(0, scale);
    r->set_param_f32(1, max_bias);
    r->src[0] = dy;
    r->src[1] = y;
    return r;
}
}  // namespace

Tensor* soft_max_ext_back(Context* c, Tensor* dy, Tensor* y, float scale, float max_bias) {
    return soft_max_back_impl(c, dy, y, scale, max_bias, false, "soft_max_ext_back");
}
Tensor* soft_max_ext_back_inplace(Context* c, Tensor* dy, Tensor* y, float scale, float max_bias) {
    return soft_max_back_impl(c, dy, y, scale, max_bias, true, "soft_max_ext_back_inplace");
}

}  // namespace pyggml
