// LIGHTNING_INDEXER constructor: validation and shape inference only.
#include "pyggml/ops/lightning_indexer.h"

#include "pyggml/error.h"

namespace pyggml {

Tensor* lightning_indexer(Context* ctx, Tensor* q, Tensor* k, Tensor* weights, Tensor* mask) {
    const char* op = "lightning_indexer";
    if (!q || !k || !weights) throw_type(OpMessage(op) << "q, k and weights are required (got None)");
    if (!mask) throw_type(OpMessage(op) << "mask is mandatory (f16 [n_kv, n_batch, 1, S_m]), got None");
    PG_TYPE_CHECK(q->type == Type::F32, (OpMessage(op) << "q must be f32").with("q", q));
    PG_TYPE_CHECK(weights->type == Type::F32, (OpMessage(op) << "weights must be f32").with("weights", weights));
    PG_TYPE_CHECK(mask->type == Type::F16, (OpMessage(op) << "mask must be f16").with("mask", mask));
    PG_TYPE_CHECK(has_to_float(k->type) && k->type != Type::I32 && k->type != Type::I64,
                  (OpMessage(op) << "k must be f32, f16, bf16 or a block type, got " << type_name(k->type)).with("k", k));
    const int64_t D = q->ne[0], n_head = q->ne[1], n_batch = q->ne[2], S = q->ne[3];
    const int64_t n_kv = k->ne[2];
    PG_SHAPE_CHECK(k->ne[0] == D && k->ne[1] == 1 && k->ne[3] == S,
                   (OpMessage(op) << "k must be [D, 1, n_kv, S] with D=" << D << ", S=" << S).with("q", q).with("k", k));
    PG_SHAPE_CHECK(weights->ne[0] == n_head && weights->ne[1] == n_batch && weights->ne[2] == 1 && weights->ne[3] == S,
                   (OpMessage(op) << "weights must be [n_head, n_batch, 1, S] = [" << n_head << ", " << n_batch
                                  << ", 1, " << S << "]").with("q", q).with("weights", weights));
    PG_SHAPE_CHECK(mask->ne[0] == n_kv && mask->ne[1] >= n_batch && mask->ne[2] == 1 && mask->ne[3] > 0 &&
                       S % mask->ne[3] == 0,
                   (OpMessage(op) << "mask must be [n_kv, >= n_batch, 1, S_m] with n_kv=" << n_kv << ", n_batch="
                                  << n_batch << " and S=" << S << " a multiple of S_m").with("q", q).with("k", k)
                       .with("mask", mask));
    PG_SHAPE_CHECK(q->nb[0] == sizeof(float) && weights->nb[0] == sizeof(float) && mask->nb[0] == 2 &&
                       (k->nb[0] == type_size(k->type) || k->ne[0] == blck_size(k->type)),
                   (OpMessage(op) << "dim-0 strides must be element-sized (rows packed)").with("q", q).with("k", k)
                       .with("weights", weights).with("mask", mask));
    const int64_t ne[4] = {n_kv, n_batch, 1, S};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    r->op = Op::LIGHTNING_INDEXER;
    r->src[0] = q;
    r->src[1] = k;
    r->src[2] = weights;
    r->src[3] = mask;
    return r;
}

}  // namespace pyggml
