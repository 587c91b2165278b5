// SCALE, CLAMP, ARANGE, TRI and TIMESTEP_EMBEDDING constructors.
#include "pyggml/ops/misc.h"

#include <cmath>

#include "pyggml/error.h"

namespace pyggml {

namespace {
Tensor* scale_impl(Context* ctx, Tensor* a, float s, float b, bool inplace, const char* op) {
    if (!a) throw_type(OpMessage(op) << "tensor a is required (got None)");
    PG_TYPE_CHECK(a->type == Type::F32 || a->type == Type::BF16,
                  (OpMessage(op) << "a must be f32 or bf16, got " << type_name(a->type)).with("a", a));
    PG_SHAPE_CHECK(a->is_contiguous_rows(),
                   (OpMessage(op) << "a's rows must be contiguous (nb[0] == element size)").with("a", a));
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = Op::SCALE;
    r->set_param_f32(0, s);
    r->set_param_f32(1, b);
    r->src[0] = a;
    return r;
}

Tensor* clamp_impl(Context* ctx, Tensor* a, float lo, float hi, bool inplace, const char* op) {
    if (!a) throw_type(OpMessage(op) << "tensor a is required (got None)");
    PG_TYPE_CHECK(a->type == Type::F32 || a->type == Type::F16,
                  (OpMessage(op) << "a must be f32 or f16, got " << type_name(a->type)).with("a", a));
    PG_SHAPE_CHECK(a->is_contiguous_rows(),
                   (OpMessage(op) << "a's rows must be contiguous (nb[0] == element size)").with("a", a));
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = Op::CLAMP;
    r->set_param_f32(0, lo);
    r->set_param_f32(1, hi);
    r->src[0] = a;
    return r;
}
}  // namespace

Tensor* scale(Context* c, Tensor* a, float s) { return scale_impl(c, a, s, 0.0f, false, "scale"); }
Tensor* scale_inplace(Context* c, Tensor* a, float s) { return scale_impl(c, a, s, 0.0f, true, "scale_inplace"); }
Tensor* scale_bias(Context* c, Tensor* a, float s, float b) { return scale_impl(c, a, s, b, false, "scale_bias"); }
Tensor* scale_bias_inplace(Context* c, Tensor* a, float s, float b) {
    return scale_impl(c, a, s, b, true, "scale_bias_inplace");
}

Tensor* clamp(Context* c, Tensor* a, float lo, float hi) { return clamp_impl(c, a, lo, hi, false, "clamp"); }
Tensor* clamp_inplace(Context* c, Tensor* a, float lo, float hi) {
    return clamp_impl(c, a, lo, hi, true, "clamp_inplace");
}

Tensor* arange(Context* ctx, float start, float stop, float step) {
    PG_SHAPE_CHECK(std::isfinite(start) && std::isfinite(stop) && std::isfinite(step),
                   OpMessage("arange") << "start, stop and step must be finite (got " << start << ", "
                                       << stop << ", " << step << ")");
    PG_SHAPE_CHECK(stop > start, OpMessage("arange") << "stop=" << stop << " must be > start=" << start);
    PG_SHAPE_CHECK(step > 0.0f, OpMessage("arange") << "step=" << step << " must be > 0");
    const float steps = std::ceil((stop - start) / step);
    PG_SHAPE_CHECK(steps <= 9.0e15f, OpMessage("arange") << "too many steps: " << steps);
    const int64_t ne[1] = {(int64_t)steps};
    Tensor* r = ctx->new_tensor(Type::F32, 1, ne);
    r->op = Op::ARANGE;
    r->set_param_f32(0, start);
    r->set_param_f32(1, stop);
    r->set_param_f32(2, step);
    return r;
}

Tensor* tri(Context* ctx, Tensor* a, int32_t type) {
    if (!a) throw_type(OpMessage("tri") << "tensor a is required (got None)");
    PG_SHAPE_CHECK(type >= 0 && type <= 3,
                   (OpMessage("tri") << "type must be 0..3 (UPPER_DIAG, UPPER, LOWER_DIAG, LOWER), got "
                                     << type).with("a", a));
    PG_TYPE_CHECK(a->type == Type::F32, (OpMessage("tri") << "a must be f32, got " << type_name(a->type)).with("a", a));
    PG_SHAPE_CHECK(a->is_contiguous(), (OpMessage("tri") << "a must be contiguous").with("a", a));
    PG_SHAPE_CHECK(a->ne[0] == a->ne[1],
                   (OpMessage("tri") << "a must be square in dims 0/1 (ne[0]=" << a->ne[0] << ", ne[1]="
                                     << a->ne[1] << ")").with("a", a));
    Tensor* r = ctx->dup_tensor(a);
    r->op = Op::TRI;
    r->set_param_i32(0, type);
    r->src[0] = a;
    return r;
}

Tensor* timestep_embedding(Context* ctx, Tensor* timesteps, int dim, int max_period) {
    const char* name = "timestep_embedding";
    if (!timesteps) throw_type(OpMessage(name) << "timesteps is required");
    PG_TYPE_CHECK(timesteps->type == Type::F32, (OpMessage(name) << "timesteps must be f32").with("timesteps", timesteps));
    PG_SHAPE_CHECK(timesteps->ne[1] == 1 && timesteps->ne[2] == 1 && timesteps->ne[3] == 1,
                   (OpMessage(name) << "timesteps must be a vector [N]").with("timesteps", timesteps));
    PG_SHAPE_CHECK(dim > 0 && max_period > 0,
                   (OpMessage(name) << "dim and max_period must be > 0 (got dim=" << dim << ", max_period="
                                    << max_period << ")"));
    const int64_t ne[2] = {dim, timesteps->ne[0]};
    Tensor* r = ctx->new_tensor(Type::F32, 2, ne);
    r->op = Op::TIMESTEP_EMBEDDING;
    r->set_param_i32(0, dim);
    r->set_param_i32(1, max_period);
    r->src[0] = timesteps;
    return r;
}

}  // namespace pyggml
