// Constructors of the 'pool' family (POOL_1D, POOL_2D): validation and shape inference only.
#include "pyggml/ops/pool.h"

#include <cmath>
#include <cstdint>

#include "pyggml/error.h"

namespace pyggml {

namespace {

void check_common(const char* name, const Tensor* a, int op) {
    if (!a) throw_type(OpMessage(name) << "a is required (got None)");
    PG_TYPE_CHECK(a->type == Type::F32 || a->type == Type::F16, (OpMessage(name) << "a must be f32 or f16").with("a", a));
    PG_SHAPE_CHECK(op == 0 || op == 1, (OpMessage(name) << "op must be 0 (max) or 1 (avg), got " << op));
    PG_SHAPE_CHECK(a->nb[0] == type_size(a->type), (OpMessage(name) << "a's rows must be contiguous").with("a", a));
}

void check_window(const char* name, const char* axis, int k, int s) {
    PG_SHAPE_CHECK(k >= 1 && s >= 1,
                   (OpMessage(name) << "k" << axis << "=" << k << " and s" << axis << "=" << s << " must be >= 1"));
}

// ggml's (in + 2p - k) / s + 1 computed in float and truncated; must be >= 1.
int64_t pool_out(const char* name, const char* axis, const Tensor* a, int64_t in, int k, int s, float p) {
    PG_SHAPE_CHECK(std::isfinite(p) && p >= 0.0f && p < 1e9f,
                   (OpMessage(name) << "padding p" << axis << "=" << p << " must be finite and >= 0"));
    const float o = (float(in) + 2.0f * p - float(k)) / float(s) + 1.0f;
    PG_SHAPE_CHECK(o >= 1.0f, (OpMessage(name) << "window k" << axis << "=" << k << " does not fit the input along dim "
                                               << axis << " (size " << in << ", padding " << p << ")").with("a", a));
    return (int64_t)o;
}

}  // namespace

Tensor* pool_1d(Context* ctx, Tensor* a, int op, int k0, int s0, int p0) {
    const char* name = "pool_1d";
    check_common(name, a, op);
    check_window(name, "0", k0, s0);
    const int64_t ne[4] = {pool_out(name, "0", a, a->ne[0], k0, s0, (float)p0), a->ne[1], a->ne[2], a->ne[3]};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    const int32_t params[4] = {op, k0, s0, p0};
    for (int i = 0; i < 4; ++i) r->set_param_i32(i, params[i]);
    r->op = Op::POOL_1D;
    r->src[0] = a;
    return r;
}

Tensor* pool_2d(Context* ctx, Tensor* a, int op, int k0, int k1, int s0, int s1, float p0, float p1) {
    const char* name = "pool_2d";
    check_common(name, a, op);
    check_window(name, "0", k0, s0);
    check_window(name, "1", k1, s1);
    const int64_t ne[4] = {pool_out(name, "0", a, a->ne[0], k0, s0, p0), pool_out(name, "1", a, a->ne[1], k1, s1, p1),
                           a->ne[2], a->ne[3]};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    const int32_t params[7] = {op, k0, k1, s0, s1, (int32_t)p0, (int32_t)p1};
    for (int i = 0; i < 7; ++i) r->set_param_i32(i, params[i]);
    r->op = Op::POOL_2D;
    r->src[0] = a;
    return r;
}

}  // namespace pyggml
