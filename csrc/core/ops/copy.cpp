// DUP/CPY/CONT constructors: conversion matrix, element counts, destination layout.
#include "pyggml/ops/copy.h"

#include "pyggml/error.h"

namespace pyggml {

namespace {
bool is_float(Type t) { return t == Type::F32 || t == Type::F16 || t == Type::BF16; }

void require(const char* op, const Tensor* a) {
    if (!a) throw_type(OpMessage(op) << "tensor a is required (got None)");
}

// Checks the type pair and the destination layout of a copy of `a` into a tensor of type
// `dt` and shape `ne` (dst may be null when the destination is created by the op).
void check_copy(const char* op, const Tensor* a, Type dt, const int64_t* ne, const Tensor* dst) {
    PG_TYPE_CHECK(cpy_supported(a->type, dt),
                  (OpMessage(op) << "unsupported conversion " << type_name(a->type) << " -> "
                                 << type_name(dt)).with("a", a));
    const int64_t bs = blck_size(dt);
    PG_SHAPE_CHECK(ne[0] % bs == 0,
                   (OpMessage(op) << "destination ne[0]=" << ne[0] << " must be a multiple of the "
                                  << type_name(dt) << " block size " << bs).with("a", a));
    if (is_quantized(a->type))
        PG_SHAPE_CHECK(a->is_contiguous_rows(),
                       (OpMessage(op) << "a block-typed source needs packed blocks along dim 0").with("a", a));
    if (is_quantized(dt) && a->type != dt && dst)
        PG_SHAPE_CHECK(dst->is_contiguous(),
                       (OpMessage(op) << "a quantizing copy needs a contiguous destination")
                           .with("a", a).with("dst", dst));
    if (dst && is_quantized(dt))
        PG_SHAPE_CHECK(dst->is_contiguous_rows(),
                       (OpMessage(op) << "a block-typed destination needs packed blocks along dim 0")
                           .with("dst", dst));
}

Tensor* cont_impl(Context* ctx, Tensor* a, int n_dims, const int64_t* ne, const char* op) {
    require(op, a);
    int64_t shape[4] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; ++i) {
        PG_SHAPE_CHECK(ne[i] >= 0, (OpMessage(op) << "ne[" << i << "]=" << ne[i] << " must be >= 0").with("a", a));
        shape[i] = ne[i];
    }
    const int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    PG_SHAPE_CHECK(n == a->nelements(),
                   (OpMessage(op) << "the new shape [" << shape[0] << ", " << shape[1] << ", " << shape[2]
                                  << ", " << shape[3] << "] has " << n << " elements, a has "
                                  << a->nelements()).with("a", a));
    check_copy(op, a, a->type, shape, nullptr);
    Tensor* r = ctx->new_tensor(a->type, 4, shape);
    r->op = Op::CONT;
    r->src[0] = a;
    return r;
}
}  // namespace

bool cpy_supported(Type s, Type d) {
    if (!type_traits(s).is_valid || !type_traits(d).is_valid) return false;
    if (s == d) return true;  // raw copy (bit exact), any type
    if (is_float(s) && is_float(d)) return true;
    if ((s == Type::F32 && d == Type::I32) || (s == Type::I32 && d == Type::F32)) return true;
    if (is_float(s) && is_quantized(d)) return true;   // quantize
    if (is_quantized(s) && d == Type::F32) return true;  // dequantize
    return false;
}

Tensor* dup(Context* ctx, Tensor* a) {
    require("dup", a);
    check_copy("dup", a, a->type, a->ne, nullptr);
    Tensor* r = ctx->dup_tensor(a);
    r->op = Op::DUP;
    r->src[0] = a;
    return r;
}

Tensor* dup_inplace(Context* ctx, Tensor* a) {
    require("dup_inplace", a);
    check_copy("dup_inplace", a, a->type, a->ne, a);
    Tensor* r = ctx->view_tensor(a);
    r->op = Op::DUP;
    r->src[0] = a;
    return r;
}

Tensor* cpy(Context* ctx, Tensor* a, Tensor* b) {
    if (!a || !b) throw_type(OpMessage("cpy") << "tensors a and b are required (got None)");
    PG_SHAPE_CHECK(a->nelements() == b->nelements(),
                   (OpMessage("cpy") << "a has " << a->nelements() << " elements, b has "
                                     << b->nelements() << "; they must be equal").with("a", a).with("b", b));
    check_copy("cpy", a, b->type, b->ne, b);
    if (is_quantized(a->type) && is_quantized(b->type))
        PG_SHAPE_CHECK(b->is_contiguous_rows(),
                       (OpMessage("cpy") << "block copies need packed blocks along dim 0").with("b", b));
    Tensor* r = ctx->view_tensor(b);
    if (!b->name.empty()) r->name = b->name + " (copy of " + (a->name.empty() ? "a" : a->name) + ")";
    r->op = Op::CPY;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

Tensor* cast(Context* ctx, Tensor* a, Type type) {
    require("cast", a);
    PG_TYPE_CHECK(type_traits(type).is_valid,
                  (OpMessage("cast") << "unsupported type id " << (int)type).with("a", a));
    check_copy("cast", a, type, a->ne, nullptr);
    Tensor* r = ctx->new_tensor(type, 4, a->ne);
    r->op = Op::CPY;
    r->src[0] = a;
    r->src[1] = r;  // as ggml: the destination is the result itself (kernels write dst)
    return r;
}

Tensor* cont(Context* ctx, Tensor* a) {
    require("cont", a);
    return cont_impl(ctx, a, 4, a->ne, "cont");
}
Tensor* cont_1d(Context* ctx, Tensor* a, int64_t ne0) {
    const int64_t ne[1] = {ne0};
    return cont_impl(ctx, a, 1, ne, "cont_1d");
}
Tensor* cont_2d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return cont_impl(ctx, a, 2, ne, "cont_2d");
}
Tensor* cont_3d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return cont_impl(ctx, a, 3, ne, "cont_3d");
}
Tensor* cont_4d(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return cont_impl(ctx, a, 4, ne, "cont_4d");
}

}  // namespace pyggml
