// Constructors of the 'window' family (WIN_PART, WIN_UNPART, GET_REL_POS, ADD_REL_POS):
// validation and shape inference only.
#include "pyggml/ops/window.h"

#include "pyggml/error.h"

namespace pyggml {

namespace {
void require_f32(const char* op, const char* what, const Tensor* t) {
    if (!t) throw_type(OpMessage(op) << what << " is required (got None)");
    PG_TYPE_CHECK(t->type == Type::F32, (OpMessage(op) << what << " must be f32").with(what, t));
}
}  // namespace

Tensor* win_part(Context* ctx, Tensor* a, int w) {
    const char* op = "win_part";
    require_f32(op, "a", a);
    PG_SHAPE_CHECK(w >= 1, (OpMessage(op) << "window size w=" << w << " must be >= 1"));
    PG_SHAPE_CHECK(a->ne[3] == 1, (OpMessage(op) << "a must be 3-D [C, W, H]").with("a", a));
    const int64_t npx = (a->ne[1] + w - 1) / w, npy = (a->ne[2] + w - 1) / w;
    const int64_t ne[4] = {a->ne[0], w, w, npx * npy};
    Tensor* r = ctx->new_tensor(Type::F32, 4, ne);
    r->set_param_i32(0, (int32_t)npx);
    r->set_param_i32(1, (int32_t)npy);
    r->set_param_i32(2, w);
    r->op = Op::WIN_PART;
    r->src[0] = a;
    return r;
}

Tensor* win_unpart(Context* ctx, Tensor* a, int w0, int h0, int w) {
    const char* op = "win_unpart";
    require_f32(op, "a", a);
    PG_SHAPE_CHECK(w >= 1 && w0 >= 0 && h0 >= 0,
                   (OpMessage(op) << "need w >= 1, w0 >= 0, h0 >= 0; got w=" << w << ", w0=" << w0 << ", h0=" << h0));
    PG_SHAPE_CHECK(a->ne[1] == w && a->ne[2] == w,
                   (OpMessage(op) << "a must be [C, w, w, n_windows] with w=" << w).with("a", a));
    const int64_t npx = (int64_t(w0) + w - 1) / w, npy = (int64_t(h0) + w - 1) / w;
    PG_SHAPE_CHECK(a->ne[3] == npx * npy,
                   (OpMessage(op) << "a.ne[3]=" << a->ne[3] << " must equal the window count " << npx << "*" << npy
                                  << " of a " << w0 << "x" << h0 << " image").with("a", a));
    const int64_t ne[4] = {a->ne[0], w0, h0, 1};
    Tensor* r = ctx->new_tensor(Type::F32, 3, ne);
    r->set_param_i32(0, w);
    r->op = Op::WIN_UNPART;
    r->src[0] = a;
    return r;
}

Tensor* get_rel_pos(Context* ctx, Tensor* a, int qh, int kh) {
    const char* op = "get_rel_pos";
    if (!a) throw_type(OpMessage(op) << "a is required (got None)");
    PG_TYPE_CHECK(a->type == Type::F16 || a->type == Type::BF16, (OpMessage(op) << "a must be f16 or bf16").with("a", a));
    PG_SHAPE_CHECK(qh == kh && qh >= 1, (OpMessage(op) << "qh=" << qh << " must equal kh=" << kh << " and be >= 1"));
    PG_SHAPE_CHECK(a->ne[1] == 2 * int64_t(qh) - 1 && a->ne[2] == 1 && a->ne[3] == 1,
                   (OpMessage(op) << "a must be [C, 2*qh-1] = [C, " << 2 * int64_t(qh) - 1 << "]").with("a", a));
    const int64_t ne[4] = {a->ne[0], kh, qh, 1};
    Tensor* r = ctx->new_tensor(a->type, 3, ne);
    r->op = Op::GET_REL_POS;
    r->src[0] = a;
    return r;
}

namespace {
Tensor* add_rel_pos_impl(Context* ctx, Tensor* a, Tensor* pw, Tensor* ph, bool inplace) {
    const char* op = inplace ? "add_rel_pos_inplace" : "add_rel_pos";
    require_f32(op, "a", a);
    require_f32(op, "pw", pw);
    require_f32(op, "ph", ph);
    PG_SHAPE_CHECK(pw->same_shape(ph), (OpMessage(op) << "pw and ph must have the same shape").with("pw", pw).with("ph", ph));
    PG_SHAPE_CHECK(pw->ne[3] == a->ne[2] && pw->ne[0] * pw->ne[0] == a->ne[0] && pw->ne[1] * pw->ne[2] == a->ne[1] &&
                       pw->ne[0] == pw->ne[1] && a->ne[3] == 1,
                   (OpMessage(op) << "need a [W*W, W*qh, B] and pw, ph [W, W, qh, B]").with("a", a).with("pw", pw));
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->set_param_i32(0, inplace ? 1 : 0);
    r->op = Op::ADD_REL_POS;
    r->src[0] = a;
    r->src[1] = pw;
    r->src[2] = ph;
    return r;
}
}  // namespace

Tensor* add_rel_pos(Context* ctx, Tensor* a, Tensor* pw, Tensor* ph) { return add_rel_pos_impl(ctx, a, pw, ph, false); }
Tensor* add_rel_pos_inplace(Context* ctx, Tensor* a, Tensor* pw, Tensor* ph) {
    return add_rel_pos_impl(ctx, a, pw, ph, true);
}

}  // namespace pyggml
