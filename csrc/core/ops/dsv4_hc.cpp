// DSV4_HC_COMB / DSV4_HC_PRE / DSV4_HC_POST constructors: validation and shape
// inference only. Inputs are indexed through their strides, so views are accepted.
#include "pyggml/ops/dsv4_hc.h"

#include <cmath>

#include "pyggml/error.h"

namespace pyggml {

namespace {

void require_f32(const char* op, const char* what, const Tensor* t) {
    if (!t) throw_type(OpMessage(op) << what << " is required (got None)");
    PG_TYPE_CHECK(t->type == Type::F32, (OpMessage(op) << what << " must be f32").with(what, t));
}

}  // namespace

Tensor* dsv4_hc_comb(Context* ctx, Tensor* mixes, Tensor* scale, Tensor* base, float eps, int n_iter) {
    const char* op = "dsv4_hc_comb";
    require_f32(op, "mixes", mixes);
    require_f32(op, "scale", scale);
    require_f32(op, "base", base);
    PG_SHAPE_CHECK(mixes->ne[2] == 1 && mixes->ne[3] == 1,
                   (OpMessage(op) << "mixes must be 2-D [(2+hc)*hc, n_tokens]").with("mixes", mixes));
    const int64_t n = mixes->ne[0];
    int64_t hc = (int64_t)std::llround(std::sqrt(double(n) + 1.0)) - 1;
    if (hc < 0 || (2 + hc) * hc != n) hc = -1;
    PG_SHAPE_CHECK(hc > 0, (OpMessage(op) << "mixes.ne[0]=" << n << " is not of the form (2+hc)*hc")
                               .with("mixes", mixes));
    PG_SHAPE_CHECK(hc == 4, (OpMessage(op) << "hc must be 4 (mixes.ne[0] == 24), got hc=" << hc)
                                .with("mixes", mixes));
    PG_SHAPE_CHECK(scale->ne[0] >= 3 && scale->ne[1] == 1 && scale->ne[2] == 1 && scale->ne[3] == 1,
                   (OpMessage(op) << "scale must be 1-D with at least 3 entries").with("scale", scale));
    PG_SHAPE_CHECK(base->ne[0] == n && base->ne[1] == 1 && base->ne[2] == 1 && base->ne[3] == 1,
                   (OpMessage(op) << "base must be 1-D with mixes.ne[0]=" << n << " entries").with("base", base));
    PG_SHAPE_CHECK(n_iter > 0, (OpMessage(op) << "n_iter must be > 0, got " << n_iter));
    const int64_t ne[3] = {hc, hc, mixes->ne[1]};
    Tensor* r = ctx->new_tensor(Type::F32, 3, ne);
    r->op = Op::DSV4_HC_COMB;
    r->set_param_f32(0, eps);
    r->set_param_i32(1, n_iter);
    r->src[0] = mixes;
    r->src[1] = scale;
    r->src[2] = base;
    return r;
}

namespace {

Tensor* hc_pre_impl(Context* ctx, Tensor* x, Tensor* w, float scale, bool gated, const char* op) {
    require_f32(op, "x", x);
    require_f32(op, gated ? "gate" : "weights", w);
    PG_SHAPE_CHECK(x->ne[3] == 1, (OpMessage(op) << "x must be 3-D [n_embd, hc, n_tokens]").with("x", x));
    if (gated) {
        PG_SHAPE_CHECK(w->ne[0] == x->ne[0] && w->ne[1] == x->ne[1] && w->ne[2] == x->ne[2] && w->ne[3] == 1,
                       (OpMessage(op) << "gate must have x's shape").with("x", x).with("gate", w));
    } else {
        PG_SHAPE_CHECK(w->ne[0] == x->ne[1] && w->ne[1] == x->ne[2] && w->ne[2] == 1 && w->ne[3] == 1,
                       (OpMessage(op) << "weights must be [hc, n_tokens] = [" << x->ne[1] << ", " << x->ne[2]
                                      << "]").with("x", x).with("weights", w));
    }
    const int64_t ne[2] = {x->ne[0], x->ne[2]};
    Tensor* r = ctx->new_tensor(Type::F32, 2, ne);
    r->op = Op::DSV4_HC_PRE;
    r->set_param_f32(0, scale);
    r->set_param_i32(1, gated ? 1 : 0);
    r->src[0] = x;
    r->src[1] = w;
    return r;
}

}  // namespace

Tensor* dsv4_hc_pre(Context* ctx, Tensor* x, Tensor* weights) {
    return hc_pre_impl(ctx, x, weights, 1.0f, false, "dsv4_hc_pre");
}

Tensor* dsv4_hc_pre_gated(Context* ctx, Tensor* x, Tensor* gate, float scale) {
    return hc_pre_impl(ctx, x, gate, scale, true, "dsv4_hc_pre_gated");
}

Tensor* dsv4_hc_post(Context* ctx, Tensor* x, Tensor* residual, Tensor* post, Tensor* comb) {
    const char* op = "dsv4_hc_post";
    require_f32(op, "x", x);
    require_f32(op, "residual", residual);
    require_f32(op, "post", post);
    if (comb) require_f32(op, "comb", comb);
    const int64_t n_embd = residual->ne[0], hc = residual->ne[1], T = residual->ne[2];
    PG_SHAPE_CHECK(residual->ne[3] == 1,
                   (OpMessage(op) << "residual must be 3-D [n_embd, hc, n_tokens]").with("residual", residual));
    PG_SHAPE_CHECK(x->ne[0] == n_embd && x->ne[1] == T && x->ne[2] == 1 && x->ne[3] == 1,
                   (OpMessage(op) << "x must be [n_embd, n_tokens] = [" << n_embd << ", " << T << "]")
                       .with("x", x).with("residual", residual));
    PG_SHAPE_CHECK(post->ne[0] == hc && post->ne[1] == T && post->ne[2] == 1 && post->ne[3] == 1,
                   (OpMessage(op) << "post must be [hc, n_tokens] = [" << hc << ", " << T << "]")
                       .with("post", post).with("residual", residual));
    if (comb) {
        PG_SHAPE_CHECK(comb->ne[0] == hc && comb->ne[1] == hc && comb->ne[2] == T && comb->ne[3] == 1,
                       (OpMessage(op) << "comb must be [hc, hc, n_tokens] = [" << hc << ", " << hc << ", " << T
                                      << "]").with("comb", comb).with("residual", residual));
    }
    const int64_t ne[3] = {n_embd, hc, T};
    Tensor* r = ctx->new_tensor(Type::F32, 3, ne);
    r->op = Op::DSV4_HC_POST;
    r->src[0] = x;
    r->src[1] = residual;
    r->src[2] = post;
    r->src[3] = comb;
    return r;
}

}  // namespace pyggml
