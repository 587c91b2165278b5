// ROPE constructors: validation and shape inference only.
#include "pyggml/ops/rope.h"

#include "pyggml/error.h"

namespace pyggml {

namespace {
bool is_multi(int mode) { return (mode & kRopeMrope) != 0; }

Tensor* rope_impl(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims, const int* sections, int mode,
                  int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                  float beta_fast, float beta_slow, bool inplace, bool backward, const char* name) {
    if (!a) throw_type(OpMessage(name) << "a is required");
    if (!b) throw_type(OpMessage(name) << "b (positions) is required");
    PG_SHAPE_CHECK(mode == kRopeNormal || mode == kRopeNeox || mode == kRopeMrope || mode == kRopeVision ||
                       mode == kRopeImrope,
                   (OpMessage(name) << "mode " << mode << " is not one of NORMAL 0, NEOX 2, MROPE 8, VISION 24, IMROPE 40"
                                    << ((mode & 1) ? " (mode & 1 is no longer supported)" : "")));
    PG_TYPE_CHECK(a->type == Type::F32 || a->type == Type::F16, (OpMessage(name) << "a must be f32 or f16").with("a", a));
    PG_SHAPE_CHECK(a->nb[0] == type_size(a->type),
                   (OpMessage(name) << "a's rows must be contiguous (nb[0] == element size)").with("a", a));
    PG_TYPE_CHECK(b->type == Type::I32, (OpMessage(name) << "b (positions) must be i32").with("b", b));
    PG_SHAPE_CHECK(b->ne[1] == 1 && b->ne[2] == 1 && b->ne[3] == 1,
                   (OpMessage(name) << "b (positions) must be a vector").with("b", b));
    const bool multi = is_multi(mode);
    const int64_t n_pos = multi ? 4 * a->ne[2] : a->ne[2];
    PG_SHAPE_CHECK(b->ne[0] == n_pos,
                   (OpMessage(name) << "b must hold " << (multi ? "4*a.ne[2]=" : "a.ne[2]=") << n_pos
                                    << " positions (got " << b->ne[0] << ")").with("a", a).with("b", b));
    PG_SHAPE_CHECK(n_dims >= 0 && n_dims % 2 == 0 && n_dims <= a->ne[0],
                   (OpMessage(name) << "n_dims=" << n_dims << " must be even, >= 0 and <= a.ne[0]=" << a->ne[0]).with("a", a));
    if (mode == kRopeVision)
        PG_SHAPE_CHECK(2 * (int64_t)n_dims == a->ne[0],
                       (OpMessage(name) << "VISION requires n_dims == a.ne[0]/2 (n_dims=" << n_dims << ")").with("a", a));
    if (multi) {
        PG_SHAPE_CHECK(sections != nullptr,
                       (OpMessage(name) << "MROPE/IMROPE/VISION need sections: use rope_multi"));
        PG_SHAPE_CHECK(sections[0] >= 0 && sections[1] >= 0 && sections[2] >= 0 && sections[3] >= 0 &&
                           (sections[0] > 0 || sections[1] > 0 || sections[2] > 0),
                       (OpMessage(name) << "sections must be >= 0 with one of the first three > 0 (got ["
                                        << sections[0] << ", " << sections[1] << ", " << sections[2] << ", "
                                        << sections[3] << "])"));
        const int64_t sect = (int64_t)sections[0] + sections[1] + sections[2] + sections[3];
        PG_SHAPE_CHECK(sect <= a->ne[0],
                       (OpMessage(name) << "sum of sections " << sect << " must be <= a.ne[0]=" << a->ne[0]).with("a", a));
    }
    if (c) {
        PG_TYPE_CHECK(c->type == Type::F32, (OpMessage(name) << "c (freq_factors) must be f32").with("c", c));
        const int64_t need = mode == kRopeVision ? n_dims : n_dims / 2;
        PG_SHAPE_CHECK(c->ne[0] >= need,
                       (OpMessage(name) << "c (freq_factors) needs ne[0] >= " << need << " (got " << c->ne[0] << ")").with("c", c));
    }
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = Op::ROPE;
    r->set_param_i32(0, backward ? 1 : 0);
    r->set_param_i32(1, n_dims);
    r->set_param_i32(2, mode);
    r->set_param_i32(3, 0);
    r->set_param_i32(4, n_ctx_orig);
    r->set_param_f32(5, freq_base);
    r->set_param_f32(6, freq_scale);
    r->set_param_f32(7, ext_factor);
    r->set_param_f32(8, attn_factor);
    r->set_param_f32(9, beta_fast);
    r->set_param_f32(10, beta_slow);
    for (int i = 0; i < 4; ++i) r->set_param_i32(11 + i, multi ? sections[i] : 0);
    r->set_param_i32(15, 0);
    r->src[0] = a;
    r->src[1] = b;
    r->src[2] = c;
    return r;
}
}  // namespace

Tensor* rope(Context* ctx, Tensor* a, Tensor* b, int n_dims, int mode) {
    return rope_impl(ctx, a, b, nullptr, n_dims, nullptr, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, false,
                     false, "rope");
}
Tensor* rope_inplace(Context* ctx, Tensor* a, Tensor* b, int n_dims, int mode) {
    return rope_impl(ctx, a, b, nullptr, n_dims, nullptr, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, true,
                     false, "rope_inplace");
}

#define PG_ROPE_ARGS n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow

Tensor* rope_ext(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims, int mode, int n_ctx_orig, float freq_base,
                 float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, nullptr, mode, PG_ROPE_ARGS, false, false, "rope_ext");
}
Tensor* rope_ext_inplace(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims, int mode, int n_ctx_orig,
                         float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                         float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, nullptr, mode, PG_ROPE_ARGS, true, false, "rope_ext_inplace");
}
Tensor* rope_multi(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims, const int sections[4], int mode,
                   int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                   float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, sections, mode, PG_ROPE_ARGS, false, false, "rope_multi");
}
Tensor* rope_multi_inplace(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims, const int sections[4], int mode,
                           int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                           float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, sections, mode, PG_ROPE_ARGS, true, false, "rope_multi_inplace");
}
Tensor* rope_ext_back(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims, int mode, int n_ctx_orig,
                      float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                      float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, nullptr, mode, PG_ROPE_ARGS, false, true, "rope_ext_back");
}
Tensor* rope_multi_back(Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims, const int sections[4], int mode,
                        int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                        float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, sections, mode, PG_ROPE_ARGS, false, true, "rope_multi_back");
}
#undef PG_ROPE_ARGS

Tensor* rope_set_offset(Tensor* node, int n_offs) {
    const char* name = "rope_set_offset";
    if (!node) throw_type(OpMessage(name) << "node is required");
    PG_TYPE_CHECK(node->op == Op::ROPE,
                  (OpMessage(name) << "node must be a ROPE node (got " << op_name(node->op) << ")").with("node", node));
    const int n_dims = node->param_i32(1);
    const int mode = node->param_i32(2);
    PG_SHAPE_CHECK(mode != kRopeVision, (OpMessage(name) << "VISION rope does not support an offset").with("node", node));
    PG_SHAPE_CHECK(n_offs >= 0 && n_offs % 2 == 0 && (int64_t)n_offs + n_dims <= node->ne[0],
                   (OpMessage(name) << "n_offs=" << n_offs << " must be even, >= 0 and n_offs + n_dims (" << n_dims
                                    << ") <= ne[0]=" << node->ne[0]).with("node", node));
    node->set_param_i32(15, n_offs);
    note_tensor_edit();
    return node;
}

}  // namespace pyggml
