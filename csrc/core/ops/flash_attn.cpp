// FLASH_ATTN_EXT constructor and node modifiers: validation and shape inference only
//. The checks ggml leaves implicit ("not checked but required") are enforced
// here too: mask.ne0 >= KV, mask.ne1 >= N, v.ne1 == KV, q.ne2 % v.ne2 == 0.
#include "pyggml/ops/flash_attn.h"

#include <cmath>

#include "pyggml/error.h"

namespace pyggml {

namespace {
constexpr const char* kOp = "flash_attn_ext";

// Any float or block type that can be widened to f32 (the type table's to_float), as ggml.
bool kv_type_ok(Type t) { return has_to_float(t) && type_traits(t).is_weight; }

// a % b == 0 with b >= 1 (a zero-sized divisor never divides).
bool divides(int64_t b, int64_t a) { return b >= 1 && a % b == 0; }

Tensor* checked_node(Tensor* node, const char* fn) {
    if (!node) throw_type(OpMessage(fn) << "node is required (got None)");
    PG_SHAPE_CHECK(node->op == Op::FLASH_ATTN_EXT,
                   (OpMessage(fn) << "node must be a flash_attn_ext result, got op "
                                  << op_name(node->op)).with("node", node));
    return node;
}
}  // namespace

Tensor* flash_attn_ext(Context* ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale,
                       float max_bias, float logit_softcap) {
    if (!q || !k || !v)
        throw_type((OpMessage(kOp) << "q, k and v are required").with("q", q).with("k", k).with("v", v));
    PG_TYPE_CHECK(q->type == Type::F32, (OpMessage(kOp) << "q must be f32").with("q", q));
    PG_TYPE_CHECK(kv_type_ok(k->type) && kv_type_ok(v->type),
                  (OpMessage(kOp) << "k and v must be f32, f16, bf16 or a block type with a dequantizer (not q8_1/q8_K), got " << type_name(k->type) << " and " << type_name(v->type))
                      .with("k", k).with("v", v));
    PG_TYPE_CHECK(!mask || mask->type == Type::F16,
                  (OpMessage(kOp) << "mask must be f16").with("mask", mask));

    PG_SHAPE_CHECK(q->nb[0] == type_size(q->type),
                   (OpMessage(kOp) << "q rows must be contiguous (nb[0] == 4)").with("q", q));
    PG_SHAPE_CHECK(k->nb[0] == type_size(k->type) && v->nb[0] == type_size(v->type),
                   (OpMessage(kOp) << "k and v rows must be contiguous (nb[0] == type size)")
                       .with("k", k).with("v", v));
    PG_SHAPE_CHECK(k->ne[0] == q->ne[0],
                   (OpMessage(kOp) << "k.ne[0]=" << k->ne[0] << " must equal q.ne[0]=" << q->ne[0])
                       .with("q", q).with("k", k));
    PG_SHAPE_CHECK(v->ne[1] == k->ne[1],
                   (OpMessage(kOp) << "v.ne[1]=" << v->ne[1] << " must equal k.ne[1]=" << k->ne[1]
                                   << " (KV length)").with("k", k).with("v", v));
    PG_SHAPE_CHECK(divides(k->ne[2], q->ne[2]) && divides(v->ne[2], q->ne[2]),
                   (OpMessage(kOp) << "q.ne[2]=" << q->ne[2] << " (heads) must be a multiple of k.ne[2]="
                                   << k->ne[2] << " and v.ne[2]=" << v->ne[2] << " (GQA)")
                       .with("q", q).with("k", k).with("v", v));
    PG_SHAPE_CHECK(k->ne[3] == q->ne[3] && v->ne[3] == q->ne[3],
                   (OpMessage(kOp) << "q.ne[3], k.ne[3] and v.ne[3] must be equal (no dim-3 broadcast "
                                      "of k/v)").with("q", q).with("k", k).with("v", v));
    if (mask) {
        PG_SHAPE_CHECK(mask->is_contiguous(),
                       (OpMessage(kOp) << "mask must be contiguous").with("mask", mask));
        PG_SHAPE_CHECK(mask->ne[0] >= k->ne[1],
                       (OpMessage(kOp) << "mask.ne[0]=" << mask->ne[0] << " must be >= KV=k.ne[1]="
                                       << k->ne[1]).with("mask", mask).with("k", k));
        PG_SHAPE_CHECK(mask->ne[1] >= q->ne[1],
                       (OpMessage(kOp) << "mask.ne[1]=" << mask->ne[1] << " must be >= N=q.ne[1]="
                                       << q->ne[1]).with("mask", mask).with("q", q));
        PG_SHAPE_CHECK(divides(mask->ne[2], q->ne[2]) && divides(mask->ne[3], q->ne[3]),
                       (OpMessage(kOp) << "q.ne[2] and q.ne[3] must be multiples of mask.ne[2] and "
                                          "mask.ne[3] (mask broadcast)").with("q", q).with("mask", mask));
    }
    PG_SHAPE_CHECK(!(max_bias > 0.0f) || mask,
                   (OpMessage(kOp) << "max_bias=" << max_bias << " > 0 (ALiBi) requires a mask"));

    // Result [D_v, H, N, S]: rows of the natural [D_v, N, H, S] layout, heads before tokens.
    Tensor* r = ctx->new_tensor(Type::F32, {v->ne[0], q->ne[2], q->ne[1], q->ne[3]});
    r->op = Op::FLASH_ATTN_EXT;
    r->src[0] = q;
    r->src[1] = k;
    r->src[2] = v;
    r->src[3] = mask;
    r->set_param_f32(kFaScale, scale);
    r->set_param_f32(kFaMaxBias, max_bias);
    r->set_param_f32(kFaLogitSoftcap, logit_softcap);
    r->set_param_i32(kFaPrec, kPrecDefault);
    r->set_param_i32(kFaNKvMax, 0);
    return r;
}

void flash_attn_ext_add_sinks(Tensor* node, Tensor* sinks) {
    const char* fn = "flash_attn_ext_add_sinks";
    checked_node(node, fn);
    if (!sinks) {  // None clears
        node->src[4] = nullptr;
        note_tensor_edit();
        return;
    }
    PG_SHAPE_CHECK(!node->src[4], (OpMessage(fn) << "sinks are already set on this node (pass None "
                                                    "first to replace them)").with("node", node));
    PG_TYPE_CHECK(sinks->type == Type::F32, (OpMessage(fn) << "sinks must be f32").with("sinks", sinks));
    const Tensor* q = node->src[0];
    PG_SHAPE_CHECK(sinks->ne[0] == q->ne[2] && sinks->nb[0] == 4,
                   (OpMessage(fn) << "sinks.ne[0]=" << sinks->ne[0] << " must equal the number of heads "
                                     "q.ne[2]=" << q->ne[2] << " (contiguous)").with("sinks", sinks).with("q", q));
    node->src[4] = sinks;
    note_tensor_edit();
}

void flash_attn_ext_set_prec(Tensor* node, int32_t prec) {
    const char* fn = "flash_attn_ext_set_prec";
    checked_node(node, fn);
    PG_SHAPE_CHECK(prec == kPrecDefault || prec == kPrecF32,
                   OpMessage(fn) << "prec must be 0 (DEFAULT) or 10 (F32), got " << prec);
    node->set_param_i32(kFaPrec, prec);
    note_tensor_edit();
}

int32_t flash_attn_ext_get_prec(const Tensor* node) {
    checked_node(const_cast<Tensor*>(node), "flash_attn_ext_get_prec");
    return node->param_i32(kFaPrec);
}

void flash_attn_ext_set_n_kv_max(Tensor* node, int64_t n_kv_max) {
    const char* fn = "flash_attn_ext_set_n_kv_max";
    checked_node(node, fn);
    PG_SHAPE_CHECK(n_kv_max >= 0 && n_kv_max <= INT32_MAX,
                   OpMessage(fn) << "n_kv_max must be in [0, 2^31), got " << n_kv_max);
    node->set_param_i32(kFaNKvMax, (int32_t)n_kv_max);
    note_tensor_edit();
}

}  // namespace pyggml
