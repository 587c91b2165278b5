// SSM_CONV / SSM_SCAN constructors: validation and shape inference only.
#include "pyggml/ops/ssm.h"

#include <cstdint>

#include "pyggml/error.h"

namespace pyggml {

namespace {

void require(const char* op, const char* what, const Tensor* t, Type type) {
    if (!t) throw_type(OpMessage(op) << what << " is required (got None)");
    PG_TYPE_CHECK(t->type == type, (OpMessage(op) << what << " must be " << type_name(type)).with(what, t));
}

bool rows01_packed(const Tensor* t) { return t->nb[0] == sizeof(float) && t->nb[1] == t->ne[0] * sizeof(float); }

}  // namespace

Tensor* ssm_conv(Context* ctx, Tensor* sx, Tensor* c) {
    const char* op = "ssm_conv";
    require(op, "sx", sx, Type::F32);
    require(op, "c", c, Type::F32);
    PG_SHAPE_CHECK(sx->ne[3] == 1, (OpMessage(op) << "sx must be 3-D [d_conv-1+n_t, d_inner, n_s]").with("sx", sx));
    PG_SHAPE_CHECK(c->ne[2] == 1 && c->ne[3] == 1, (OpMessage(op) << "c must be 2-D [d_conv, d_inner]").with("c", c));
    const int64_t d_conv = c->ne[0], d_inner = c->ne[1];
    PG_SHAPE_CHECK(d_conv >= 1, (OpMessage(op) << "d_conv (c.ne[0]) must be >= 1").with("c", c));
    PG_SHAPE_CHECK(sx->ne[1] == d_inner,
                   (OpMessage(op) << "sx.ne[1]=" << sx->ne[1] << " must equal d_inner=c.ne[1]=" << d_inner)
                       .with("sx", sx).with("c", c));
    PG_SHAPE_CHECK(sx->ne[0] >= d_conv - 1,
                   (OpMessage(op) << "sx.ne[0]=" << sx->ne[0] << " must be at least d_conv-1=" << d_conv - 1)
                       .with("sx", sx).with("c", c));
    PG_SHAPE_CHECK(c->nb[0] == sizeof(float), (OpMessage(op) << "c rows must be contiguous").with("c", c));
    const int64_t ne[3] = {d_inner, sx->ne[0] - d_conv + 1, sx->ne[2]};
    Tensor* r = ctx->new_tensor(Type::F32, 3, ne);
    r->op = Op::SSM_CONV;
    r->src[0] = sx;
    r->src[1] = c;
    return r;
}

Tensor* ssm_scan(Context* ctx, Tensor* s, Tensor* x, Tensor* dt, Tensor* A, Tensor* B, Tensor* C, Tensor* ids,
                 int64_t K) {
    const char* op = "ssm_scan";
    require(op, "s", s, Type::F32);
    require(op, "x", x, Type::F32);
    require(op, "dt", dt, Type::F32);
    require(op, "A", A, Type::F32);
    require(op, "B", B, Type::F32);
    require(op, "C", C, Type::F32);
    require(op, "ids", ids, Type::I32);
    const int64_t head_dim = x->ne[0], n_head = x->ne[1], n_tokens = x->ne[2], n_seqs = x->ne[3];
    const int64_t d_state = s->ne[0], n_group = B->ne[1];
    PG_SHAPE_CHECK(K >= 1 && K <= INT32_MAX, (OpMessage(op) << "K must be in [1, INT32_MAX], got " << K));
    PG_SHAPE_CHECK(s->ne[1] == head_dim && s->ne[2] == n_head,
                   (OpMessage(op) << "s must be [d_state, head_dim, n_head, n_slots] with head_dim=" << head_dim
                                  << ", n_head=" << n_head).with("s", s).with("x", x));
    PG_SHAPE_CHECK(s->is_contiguous(), (OpMessage(op) << "s must be contiguous").with("s", s));
    PG_SHAPE_CHECK(rows01_packed(x), (OpMessage(op) << "x must have packed dims 0/1 (nb[1] == ne[0]*4)").with("x", x));
    PG_SHAPE_CHECK(dt->ne[0] == n_head && dt->ne[1] == n_tokens && dt->ne[2] == n_seqs && dt->ne[3] == 1,
                   (OpMessage(op) << "dt must be [n_head, n_tokens, n_seqs] = [" << n_head << ", " << n_tokens << ", "
                                  << n_seqs << "]").with("dt", dt).with("x", x));
    PG_SHAPE_CHECK(dt->is_contiguous(), (OpMessage(op) << "dt must be contiguous").with("dt", dt));
    PG_SHAPE_CHECK((A->ne[0] == 1 || A->ne[0] == d_state) && A->ne[1] == n_head && A->ne[2] == 1 && A->ne[3] == 1,
                   (OpMessage(op) << "A must be [d_state, n_head] (Mamba-1) or [1, n_head] (Mamba-2) with d_state="
                                  << d_state << ", n_head=" << n_head).with("A", A));
    PG_SHAPE_CHECK(A->is_contiguous(), (OpMessage(op) << "A must be contiguous").with("A", A));
    const bool mamba1 = A->ne[0] != 1;
    PG_SHAPE_CHECK(!mamba1 || K == 1,
                   (OpMessage(op) << "K=" << K << " snapshots are only supported for Mamba-2 (A [1, n_head]); "
                                  << "Mamba-1 (A [d_state, n_head]) requires K == 1").with("A", A));
    PG_SHAPE_CHECK(B->ne[0] == d_state && B->ne[2] == n_tokens && B->ne[3] == n_seqs && n_group >= 1,
                   (OpMessage(op) << "B must be [d_state, n_group, n_tokens, n_seqs] with d_state=" << d_state
                                  << ", n_tokens=" << n_tokens << ", n_seqs=" << n_seqs).with("B", B).with("x", x));
    PG_SHAPE_CHECK(C->ne[0] == B->ne[0] && C->ne[1] == B->ne[1] && C->ne[2] == B->ne[2] && C->ne[3] == B->ne[3],
                   (OpMessage(op) << "C must have B's shape").with("B", B).with("C", C));
    PG_SHAPE_CHECK(n_head % n_group == 0,
                   (OpMessage(op) << "n_head=" << n_head << " must be a multiple of n_group=" << n_group)
                       .with("B", B).with("x", x));
    PG_SHAPE_CHECK(rows01_packed(B) && rows01_packed(C),
                   (OpMessage(op) << "B and C must have packed dims 0/1 (nb[1] == ne[0]*4)").with("B", B).with("C", C));
    PG_SHAPE_CHECK(ids->ne[0] == n_seqs && ids->ne[1] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1 &&
                       ids->nb[0] == sizeof(int32_t),
                   (OpMessage(op) << "ids must be a packed 1-D i32 [n_seqs] with n_seqs=" << n_seqs).with("ids", ids));
    const int64_t Ny = head_dim * n_head * n_tokens * n_seqs;
    const int64_t Ns = d_state * head_dim * n_head * n_seqs;
    PG_SHAPE_CHECK(Ns == 0 || (INT64_MAX - Ny) / Ns >= K, (OpMessage(op) << "result size overflows"));
    const int64_t ne[1] = {Ny + K * Ns};
    Tensor* r = ctx->new_tensor(Type::F32, 1, ne);
    r->op = Op::SSM_SCAN;
    r->set_param_i32(0, (int32_t)K);
    r->src[0] = s;
    r->src[1] = x;
    r->src[2] = dt;
    r->src[3] = A;
    r->src[4] = B;
    r->src[5] = C;
    r->src[6] = ids;
    return r;
}

}  // namespace pyggml
