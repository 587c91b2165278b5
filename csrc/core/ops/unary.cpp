// UNARY (sub-op in slot 0), SQR, SQRT, LOG, SIN, COS and LEAKY_RELU constructors.
#include "pyggml/ops/unary.h"

#include <cmath>

#include "pyggml/error.h"

namespace pyggml {

namespace {
Tensor* unary_like(Context* ctx, Tensor* a, Op op, int32_t sub, bool inplace, const char* name) {
    if (!a) throw_type(OpMessage(name) << "a is required");
    PG_TYPE_CHECK(a->type == Type::F32 || a->type == Type::F16 || a->type == Type::BF16,
                  (OpMessage(name) << "a must be f32, f16 or bf16").with("a", a));
    PG_SHAPE_CHECK(a->nb[0] == type_size(a->type),
                   (OpMessage(name) << "a's rows must be contiguous (nb[0] == element size)").with("a", a));
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = op;
    r->op_params[0] = sub;
    r->src[0] = a;
    return r;
}
}  // namespace

// Error messages name the sub-op, e.g. "[silu (unary)]" or "[relu_inplace (unary_inplace)]".
static const char* unary_msg_name(UnaryOp op, bool inplace) {
    static const char* const names[2][(int)UnaryOp::COUNT] = {
        {"abs (unary)", "sgn (unary)", "neg (unary)", "step (unary)", "tanh (unary)", "elu (unary)",
         "relu (unary)", "sigmoid (unary)", "gelu (unary)", "gelu_quick (unary)", "silu (unary)",
         "hardswish (unary)", "hardsigmoid (unary)", "exp (unary)", "expm1 (unary)",
         "softplus (unary)", "gelu_erf (unary)", "xielu (unary)", "floor (unary)", "ceil (unary)",
         "round (unary)", "trunc (unary)"},
        {"abs_inplace (unary_inplace)", "sgn_inplace (unary_inplace)", "neg_inplace (unary_inplace)",
         "step_inplace (unary_inplace)", "tanh_inplace (unary_inplace)", "elu_inplace (unary_inplace)",
         "relu_inplace (unary_inplace)", "sigmoid_inplace (unary_inplace)",
         "gelu_inplace (unary_inplace)", "gelu_quick_inplace (unary_inplace)",
         "silu_inplace (unary_inplace)", "hardswish_inplace (unary_inplace)",
         "hardsigmoid_inplace (unary_inplace)", "exp_inplace (unary_inplace)",
         "expm1_inplace (unary_inplace)", "softplus_inplace (unary_inplace)",
         "gelu_erf_inplace (unary_inplace)", "xielu_inplace (unary_inplace)",
         "floor_inplace (unary_inplace)", "ceil_inplace (unary_inplace)",
         "round_inplace (unary_inplace)", "trunc_inplace (unary_inplace)"}};
    return names[inplace ? 1 : 0][(int)op];
}

Tensor* unary(Context* ctx, Tensor* a, UnaryOp op) {
    if ((int)op < 0 || op >= UnaryOp::COUNT || op == UnaryOp::XIELU)
        throw_unsupported(OpMessage("unary") << "unsupported unary op id " << (int)op
                                             << (op == UnaryOp::XIELU ? " (xielu needs its parameters: use xielu())" : ""));
    return unary_like(ctx, a, Op::UNARY, (int32_t)op, false, unary_msg_name(op, false));
}
Tensor* unary_inplace(Context* ctx, Tensor* a, UnaryOp op) {
    if ((int)op < 0 || op >= UnaryOp::COUNT || op == UnaryOp::XIELU)
        throw_unsupported(OpMessage("unary_inplace") << "unsupported unary op id " << (int)op);
    return unary_like(ctx, a, Op::UNARY, (int32_t)op, true, unary_msg_name(op, true));
}
Tensor* sqr(Context* c, Tensor* a) { return unary_like(c, a, Op::SQR, 0, false, "sqr"); }
Tensor* sqr_inplace(Context* c, Tensor* a) { return unary_like(c, a, Op::SQR, 0, true, "sqr_inplace"); }
Tensor* sqrt(Context* c, Tensor* a) { return unary_like(c, a, Op::SQRT, 0, false, "sqrt"); }
Tensor* sqrt_inplace(Context* c, Tensor* a) { return unary_like(c, a, Op::SQRT, 0, true, "sqrt_inplace"); }
Tensor* log(Context* c, Tensor* a) { return unary_like(c, a, Op::LOG, 0, false, "log"); }
Tensor* log_inplace(Context* c, Tensor* a) { return unary_like(c, a, Op::LOG, 0, true, "log_inplace"); }
Tensor* sin(Context* c, Tensor* a) { return unary_like(c, a, Op::SIN, 0, false, "sin"); }
Tensor* sin_inplace(Context* c, Tensor* a) { return unary_like(c, a, Op::SIN, 0, true, "sin_inplace"); }
Tensor* cos(Context* c, Tensor* a) { return unary_like(c, a, Op::COS, 0, false, "cos"); }
Tensor* cos_inplace(Context* c, Tensor* a) { return unary_like(c, a, Op::COS, 0, true, "cos_inplace"); }

Tensor* leaky_relu(Context* c, Tensor* a, float negative_slope, bool inplace) {
    Tensor* r = unary_like(c, a, Op::LEAKY_RELU, 0, inplace, "leaky_relu");
    r->set_param_f32(0, negative_slope);
    return r;
}

namespace {
// softplus as ggml's constructor evaluates it (in f32, passing x through above 20).
float softplus_param(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }
}  // namespace

Tensor* xielu(Context* c, Tensor* a, float alpha_n, float alpha_p, float beta, float eps) {
    Tensor* r = unary_like(c, a, Op::UNARY, (int32_t)UnaryOp::XIELU, false, "xielu (unary)");
    r->set_param_f32(1, beta + softplus_param(alpha_n));
    r->set_param_f32(2, softplus_param(alpha_p));
    r->set_param_f32(3, beta);
    r->set_param_f32(4, eps);
    return r;
}

}  // namespace pyggml
