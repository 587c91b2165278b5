// Constructor of GATED_DELTA_NET: validation and shape inference only.
#include "pyggml/ops/delta_net.h"

#include <cstdint>

#include "pyggml/error.h"

namespace pyggml {

Tensor* gated_delta_net(Context* ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* g, Tensor* beta, Tensor* state,
                        int64_t K) {
    const char* op = "gated_delta_net";
    const char* names[6] = {"q", "k", "v", "g", "beta", "state"};
    Tensor* ts[6] = {q, k, v, g, beta, state};
    for (int i = 0; i < 6; ++i) {
        if (!ts[i]) throw_type(OpMessage(op) << names[i] << " is required (got None)");
        PG_TYPE_CHECK(ts[i]->type == Type::F32, (OpMessage(op) << names[i] << " must be f32").with(names[i], ts[i]));
    }
    for (int i = 0; i < 3; ++i)
        PG_SHAPE_CHECK(ts[i]->nb[0] == sizeof(float),
                       (OpMessage(op) << names[i] << "'s rows must be contiguous").with(names[i], ts[i]));
    for (int i = 3; i < 6; ++i)
        PG_SHAPE_CHECK(ts[i]->is_contiguous(), (OpMessage(op) << names[i] << " must be contiguous").with(names[i], ts[i]));
    const int64_t S = v->ne[0], H = v->ne[1], T = v->ne[2], B = v->ne[3];
    PG_SHAPE_CHECK(S >= 1 && H >= 1, (OpMessage(op) << "v must have head size and head count >= 1").with("v", v));
    PG_SHAPE_CHECK(q->same_shape(k), (OpMessage(op) << "q and k must have the same shape").with("q", q).with("k", k));
    PG_SHAPE_CHECK(q->ne[0] == S && q->ne[2] == T && q->ne[1] >= 1 && H % q->ne[1] == 0 && q->ne[3] >= 1 &&
                       B % q->ne[3] == 0,
                   (OpMessage(op) << "q, k must be [S, H_k, T, B_k] with S=" << S << ", T=" << T
                                  << ", H_k dividing H=" << H << " and B_k dividing B=" << B).with("q", q).with("v", v));
    PG_SHAPE_CHECK((g->ne[0] == 1 || g->ne[0] == S) && g->ne[1] == H && g->ne[2] == T && g->ne[3] == B,
                   (OpMessage(op) << "g must be [1 or " << S << ", " << H << ", " << T << ", " << B << "]").with("g", g));
    PG_SHAPE_CHECK(beta->ne[0] == 1 && beta->ne[1] == H && beta->ne[2] == T && beta->ne[3] == B,
                   (OpMessage(op) << "beta must be [1, " << H << ", " << T << ", " << B << "]").with("beta", beta));
    PG_SHAPE_CHECK(state->ne[0] == S && state->ne[1] == S && state->ne[2] == H && state->ne[3] == B,
                   (OpMessage(op) << "state must be [" << S << ", " << S << ", " << H << ", " << B << "]")
                       .with("state", state));
    PG_SHAPE_CHECK(K >= 1 && K <= INT32_MAX, (OpMessage(op) << "K must be in [1, INT32_MAX], got " << K));
    const int64_t rows = T * B, state_rows = S * B;
    PG_SHAPE_CHECK(state_rows == 0 || (INT64_MAX / (S * H) - rows) / state_rows >= K,
                   (OpMessage(op) << "result size overflows"));
    const int64_t ne[4] = {S * H, rows + K * state_rows, 1, 1};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    r->set_param_i32(0, (int32_t)K);
    r->op = Op::GATED_DELTA_NET;
    for (int i = 0; i < 6; ++i) r->src[i] = ts[i];
    return r;
}

}  // namespace pyggml
