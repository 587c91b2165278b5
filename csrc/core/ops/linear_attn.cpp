// Constructors of the 'linear_attn' family (GATED_LINEAR_ATTN, RWKV_WKV6, RWKV_WKV7):
// validation and shape inference only.
#include "pyggml/ops/linear_attn.h"

#include "pyggml/error.h"

namespace pyggml {

namespace {

void require(const char* op, const char* what, const Tensor* t) {
    if (!t) throw_type(OpMessage(op) << what << " is required (got None)");
    PG_TYPE_CHECK(t->type == Type::F32, (OpMessage(op) << what << " must be f32").with(what, t));
    PG_SHAPE_CHECK(t->is_contiguous(), (OpMessage(op) << what << " must be contiguous").with(what, t));
}

// A per-token input [S, H, n_tokens] like the reference `k`.
void require_token_input(const char* op, const char* what, const Tensor* t, const Tensor* k) {
    require(op, what, t);
    PG_SHAPE_CHECK(t->ne[0] == k->ne[0] && t->ne[1] == k->ne[1] && t->ne[2] == k->ne[2] && t->ne[3] == 1,
                   (OpMessage(op) << what << " must be [S, H, n_tokens] = [" << k->ne[0] << ", " << k->ne[1] << ", "
                                  << k->ne[2] << "]").with(what, t).with("k", k));
}

Tensor* make_result(Context* ctx, const char* op, const Tensor* k, const Tensor* state, Op kind) {
    const int64_t S = k->ne[0], H = k->ne[1], T = k->ne[2], n_seqs = state->ne[1];
    PG_SHAPE_CHECK(S >= 1 && H >= 1, (OpMessage(op) << "head size and head count must be >= 1").with("k", k));
    PG_SHAPE_CHECK(n_seqs >= 1 && state->ne[2] == 1 && state->ne[3] == 1 && state->ne[0] == S * S * H,
                   (OpMessage(op) << "state must be [S*S*H, n_seqs] = [" << S * S * H << ", n_seqs]")
                       .with("state", state).with("k", k));
    PG_SHAPE_CHECK(T % n_seqs == 0, (OpMessage(op) << "n_tokens=" << T << " must be a multiple of n_seqs=" << n_seqs)
                                        .with("k", k).with("state", state));
    const int64_t ne[4] = {S * H, T + S * n_seqs, 1, 1};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    r->op = kind;
    return r;
}

}  // namespace

Tensor* gated_linear_attn(Context* ctx, Tensor* k, Tensor* v, Tensor* q, Tensor* g, Tensor* state, float scale) {
    const char* op = "gated_linear_attn";
    require(op, "k", k);
    PG_SHAPE_CHECK(k->ne[3] == 1, (OpMessage(op) << "k must be [S, H, n_tokens]").with("k", k));
    require_token_input(op, "v", v, k);
    require_token_input(op, "q", q, k);
    require_token_input(op, "g", g, k);
    require(op, "state", state);
    Tensor* r = make_result(ctx, op, k, state, Op::GATED_LINEAR_ATTN);
    r->set_param_f32(0, scale);
    r->src[0] = k;
    r->src[1] = v;
    r->src[2] = q;
    r->src[3] = g;
    r->src[4] = state;
    return r;
}

Tensor* rwkv_wkv6(Context* ctx, Tensor* k, Tensor* v, Tensor* r, Tensor* tf, Tensor* td, Tensor* state) {
    const char* op = "rwkv_wkv6";
    require(op, "k", k);
    PG_SHAPE_CHECK(k->ne[3] == 1, (OpMessage(op) << "k must be [S, H, n_tokens]").with("k", k));
    require_token_input(op, "v", v, k);
    require_token_input(op, "r", r, k);
    require_token_input(op, "td", td, k);
    require(op, "tf", tf);
    PG_SHAPE_CHECK(tf->nelements() == k->ne[0] * k->ne[1],
                   (OpMessage(op) << "tf must hold S*H = " << k->ne[0] * k->ne[1] << " values ([S, H])").with("tf", tf));
    require(op, "state", state);
    Tensor* res = make_result(ctx, op, k, state, Op::RWKV_WKV6);
    res->src[0] = k;
    res->src[1] = v;
    res->src[2] = r;
    res->src[3] = tf;
    res->src[4] = td;
    res->src[5] = state;
    return res;
}

Tensor* rwkv_wkv7(Context* ctx, Tensor* r, Tensor* w, Tensor* k, Tensor* v, Tensor* a, Tensor* b, Tensor* state) {
    const char* op = "rwkv_wkv7";
    require(op, "k", k);
    PG_SHAPE_CHECK(k->ne[3] == 1, (OpMessage(op) << "k must be [S, H, n_tokens]").with("k", k));
    require_token_input(op, "r", r, k);
    require_token_input(op, "w", w, k);
    require_token_input(op, "v", v, k);
    require_token_input(op, "a", a, k);
    require_token_input(op, "b", b, k);
    require(op, "state", state);
    Tensor* res = make_result(ctx, op, k, state, Op::RWKV_WKV7);
    res->src[0] = r;
    res->src[1] = w;
    res->src[2] = k;
    res->src[3] = v;
    res->src[4] = a;
    res->src[5] = b;
    res->src[6] = state;
    return res;
}

}  // namespace pyggml
