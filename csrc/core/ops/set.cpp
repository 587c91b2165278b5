// ACC and SET constructors. ggml checks the view's bounds only inside its kernel (by abort);
// here a view that leaves a, or strides that do not fit the int32 op_params, raise ValueError.
#include "pyggml/ops/set.h"

#include <cstdint>

#include "pyggml/error.h"

namespace pyggml {

namespace {
// op_params: nb1, nb2, nb3, offset (bytes), inplace flag.
Tensor* view_write(Context* ctx, Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset,
                   bool inplace, Op op, const char* name) {
    if (!a || !b) throw_type(OpMessage(name) << "a and b are required");
    if (op == Op::ACC) {
        PG_TYPE_CHECK(a->type == Type::F32 && b->type == Type::F32,
                      (OpMessage(name) << "a and b must be f32").with("a", a).with("b", b));
    } else {
        PG_TYPE_CHECK((a->type == Type::F32 || a->type == Type::I32) && b->type == a->type,
                      (OpMessage(name) << "a and b must be both f32 or both i32").with("a", a).with("b", b));
    }
    PG_SHAPE_CHECK(a->is_contiguous(), (OpMessage(name) << "a must be contiguous").with("a", a));
    PG_SHAPE_CHECK(b->nb[0] == type_size(b->type),
                   (OpMessage(name) << "b's rows must be contiguous (nb[0] == element size)").with("b", b));
    PG_SHAPE_CHECK(b->nelements() <= a->nelements(),
                   (OpMessage(name) << "b has more elements than a").with("a", a).with("b", b));
    const size_t es = type_size(a->type);
    const size_t lim = (size_t)INT32_MAX;
    PG_SHAPE_CHECK(nb1 <= lim && nb2 <= lim && nb3 <= lim && offset < ((size_t)1 << 30),
                   (OpMessage(name) << "strides must be < 2^31 and offset < 2^30 bytes (nb1=" << nb1 << ", nb2="
                                    << nb2 << ", nb3=" << nb3 << ", offset=" << offset << ")"));
    PG_SHAPE_CHECK(nb1 % es == 0 && nb2 % es == 0 && nb3 % es == 0 && offset % es == 0,
                   (OpMessage(name) << "strides and offset must be multiples of the element size " << es
                                    << " (nb1=" << nb1 << ", nb2=" << nb2 << ", nb3=" << nb3 << ", offset=" << offset
                                    << ")"));
    if (!b->is_empty()) {
        const size_t last = offset + (size_t)(b->ne[0] - 1) * es + (size_t)(b->ne[1] - 1) * nb1 +
                            (size_t)(b->ne[2] - 1) * nb2 + (size_t)(b->ne[3] - 1) * nb3;
        PG_SHAPE_CHECK(last + es <= a->nbytes(),
                       (OpMessage(name) << "the view of b's shape at offset " << offset << " with strides [" << es
                                        << ", " << nb1 << ", " << nb2 << ", " << nb3 << "] ends at byte "
                                        << last + es << ", past a's " << a->nbytes() << " bytes")
                           .with("a", a).with("b", b));
    }
    Tensor* r = inplace ? ctx->view_tensor(a) : ctx->dup_tensor(a);
    r->op = op;
    r->set_param_i32(0, (int32_t)nb1);
    r->set_param_i32(1, (int32_t)nb2);
    r->set_param_i32(2, (int32_t)nb3);
    r->set_param_i32(3, (int32_t)offset);
    r->set_param_i32(4, inplace ? 1 : 0);
    r->src[0] = a;
    r->src[1] = b;
    return r;
}
}  // namespace

Tensor* acc(Context* c, Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return view_write(c, a, b, nb1, nb2, nb3, offset, false, Op::ACC, "acc");
}
Tensor* acc_inplace(Context* c, Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return view_write(c, a, b, nb1, nb2, nb3, offset, true, Op::ACC, "acc_inplace");
}
Tensor* set(Context* c, Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return view_write(c, a, b, nb1, nb2, nb3, offset, false, Op::SET, "set");
}
Tensor* set_inplace(Context* c, Tensor* a, Tensor* b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return view_write(c, a, b, nb1, nb2, nb3, offset, true, Op::SET, "set_inplace");
}
Tensor* set_1d(Context* c, Tensor* a, Tensor* b, size_t offset) {
    if (!a) throw_type(OpMessage("set_1d") << "a is required");
    return view_write(c, a, b, a->nb[1], a->nb[2], a->nb[3], offset, false, Op::SET, "set_1d");
}
Tensor* set_1d_inplace(Context* c, Tensor* a, Tensor* b, size_t offset) {
    if (!a) throw_type(OpMessage("set_1d_inplace") << "a is required");
    return view_write(c, a, b, a->nb[1], a->nb[2], a->nb[3], offset, true, Op::SET, "set_1d_inplace");
}
Tensor* set_2d(Context* c, Tensor* a, Tensor* b, size_t nb1, size_t offset) {
    if (!a) throw_type(OpMessage("set_2d") << "a is required");
    return view_write(c, a, b, nb1, a->nb[2], a->nb[3], offset, false, Op::SET, "set_2d");
}
Tensor* set_2d_inplace(Context* c, Tensor* a, Tensor* b, size_t nb1, size_t offset) {
    if (!a) throw_type(OpMessage("set_2d_inplace") << "a is required");
    return view_write(c, a, b, nb1, a->nb[2], a->nb[3], offset, true, Op::SET, "set_2d_inplace");
}

}  // namespace pyggml
