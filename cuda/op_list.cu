// What the CUDA backend runs: an explicit list of ops, each with the types and parameters its
// kernel handles. Anything not listed (including every op added to the op table later) is
// unsupported, and Graph::compute refuses it before anything runs. When a kernel learns a new
// type or mode, widen its check here in the same change.
#include <array>
#include <initializer_list>
#include <string>

#include "kernels.cuh"

namespace pyggml::cuda {

namespace {

bool one_of(Type t, std::initializer_list<Type> ts) {
    for (Type x : ts) if (x == t) return true;
    return false;
}
const std::initializer_list<Type> kFloat = {Type::F32, Type::F16, Type::BF16};
const std::initializer_list<Type> kWeights = {Type::F32, Type::F16, Type::BF16, Type::Q8_0, Type::Q4_0};

std::string type_rule(const char* what, const Tensor* t, const char* allowed) {
    return std::string(what) + " type " + type_name(t->type) + " (the kernel handles " + allowed + ")";
}

// Element-wise kernels read and write through the float path: float types only.
std::string floats(const Tensor* d) {
    for (int i = 0; i < kMaxSrc && d->src[i]; ++i)
        if (!one_of(d->src[i]->type, kFloat)) return type_rule("source", d->src[i], "f32, f16, bf16");
    if (!one_of(d->type, kFloat)) return type_rule("result", d, "f32, f16, bf16");
    return "";
}
// Kernels that read the source with the result's type.
std::string same_float(const Tensor* d) {
    std::string why = floats(d);
    if (why.empty() && d->src[0] && d->src[0]->type != d->type)
        why = std::string("source ") + type_name(d->src[0]->type) + " differs from the result " + type_name(d->type);
    return why;
}
std::string f32_only(const Tensor* d) {
    for (int i = 0; i < kMaxSrc && d->src[i]; ++i)
        if (d->src[i]->type != Type::F32) return type_rule("source", d->src[i], "f32");
    return d->type == Type::F32 ? "" : type_rule("result", d, "f32");
}

std::string check_unary(const Tensor* d) {
    std::string why = same_float(d);
    if (!why.empty()) return why;
    switch ((UnaryOp)d->op_params[0]) {
        case UnaryOp::ABS: case UnaryOp::SGN: case UnaryOp::NEG: case UnaryOp::STEP: case UnaryOp::TANH:
        case UnaryOp::ELU: case UnaryOp::RELU: case UnaryOp::SIGMOID: case UnaryOp::GELU:
        case UnaryOp::GELU_QUICK: case UnaryOp::SILU: case UnaryOp::HARDSWISH: case UnaryOp::HARDSIGMOID:
        case UnaryOp::EXP: case UnaryOp::EXPM1: case UnaryOp::SOFTPLUS: case UnaryOp::GELU_ERF:
        case UnaryOp::FLOOR: case UnaryOp::CEIL: case UnaryOp::ROUND: case UnaryOp::TRUNC:
            return "";
        default:
            return "unary op " + std::to_string(d->op_params[0]) + " has no CUDA kernel";
    }
}
std::string check_glu(const Tensor* d) {
    std::string why = same_float(d);
    if (why.empty() && d->src[1] && d->src[1]->type != d->type) why = "split gate and up of different types";
    if (!why.empty()) return why;
    return d->op_params[0] >= 0 && d->op_params[0] < (int)GluOp::COUNT
               ? "" : "glu op " + std::to_string(d->op_params[0]) + " has no CUDA kernel";
}
std::string check_arange(const Tensor* d) { return d->type == Type::F32 ? "" : type_rule("result", d, "f32"); }
std::string check_fill(const Tensor* d) {
    if (!one_of(d->type, kFloat)) return type_rule("result", d, "f32, f16, bf16");
    return d->is_contiguous() ? "" : "non-contiguous result";
}
std::string check_soft_max(const Tensor* d) {
    const Tensor* a = d->src[0];
    const Tensor* mask = d->src[1];
    const Tensor* sinks = d->src[2];
    if (a->type != Type::F32) return type_rule("source", a, "f32");
    if (d->type != Type::F32) return type_rule("result", d, "f32");
    if (mask && !one_of(mask->type, {Type::F32, Type::F16})) return type_rule("mask", mask, "f32, f16");
    if (sinks && sinks->type != Type::F32) return type_rule("sinks", sinks, "f32");
    return "";
}
std::string check_rope(const Tensor* d) {
    if (!one_of(d->src[0]->type, kFloat) || d->src[0]->type != d->type)
        return std::string("source ") + type_name(d->src[0]->type) + " / result " + type_name(d->type) +
               " (the kernel handles one float type for both)";
    const int mode = d->op_params[2];
    if (mode != 0 && mode != 2) return "mode " + std::to_string(mode) + " (the kernel handles NORMAL (0) and NEOX (2))";
    if (d->src[1]->type != Type::I32) return type_rule("positions", d->src[1], "i32");
    if (d->src[2] && d->src[2]->type != Type::F32) return type_rule("freq_factors", d->src[2], "f32");
    return "";
}
std::string check_get_rows(const Tensor* d) {
    if (!one_of(d->src[0]->type, kWeights)) return type_rule("source", d->src[0], "f32, f16, bf16, q8_0, q4_0");
    if (!one_of(d->src[1]->type, {Type::I32, Type::I64})) return type_rule("indices", d->src[1], "i32, i64");
    return one_of(d->type, kFloat) ? "" : type_rule("result", d, "f32, f16, bf16");
}
std::string check_set_rows(const Tensor* d) {
    if (!one_of(d->src[0]->type, kFloat)) return type_rule("rows", d->src[0], "f32, f16, bf16");
    if (!one_of(d->src[1]->type, {Type::I32, Type::I64})) return type_rule("indices", d->src[1], "i32, i64");
    return one_of(d->type, kFloat) ? "" : type_rule("destination", d, "f32, f16, bf16");
}
std::string check_copy(const Tensor* d) {
    const Tensor* s = d->src[0];
    const std::initializer_list<Type> elems = {Type::F32, Type::F16, Type::BF16, Type::I32};
    if (is_quantized(d->type)) {
        if (s->type != d->type) return std::string("quantizing copy to ") + type_name(d->type);
        if (!one_of(s->type, {Type::Q8_0, Type::Q4_0})) return type_rule("block", s, "q8_0, q4_0");
        return s->is_contiguous() && d->is_contiguous() ? "" : "strided block copy";
    }
    if (!one_of(s->type, elems) && !one_of(s->type, {Type::Q8_0, Type::Q4_0}))
        return type_rule("source", s, "f32, f16, bf16, i32, q8_0, q4_0");
    return one_of(d->type, elems) ? "" : type_rule("result", d, "f32, f16, bf16, i32");
}
std::string check_mul_mat(const Tensor* d) {
    if (!one_of(d->src[0]->type, kWeights)) return type_rule("weights", d->src[0], "f32, f16, bf16, q8_0, q4_0");
    if (!one_of(d->src[1]->type, kFloat)) return type_rule("activations", d->src[1], "f32, f16, bf16");
    if (d->op == Op::MUL_MAT_ID && d->src[2]->type != Type::I32) return type_rule("ids", d->src[2], "i32");
    return d->type == Type::F32 ? "" : type_rule("result", d, "f32");
}
std::string check_flash_attn(const Tensor* d) {
    const Tensor *q = d->src[0], *k = d->src[1], *v = d->src[2], *mask = d->src[3], *sinks = d->src[4];
    if (q->type != Type::F32) return type_rule("q", q, "f32");
    if (!one_of(k->type, kWeights)) return type_rule("k", k, "f32, f16, bf16, q8_0, q4_0");
    if (!one_of(v->type, kWeights)) return type_rule("v", v, "f32, f16, bf16, q8_0, q4_0");
    if (v->ne[0] > 1024) return "head size " + std::to_string(v->ne[0]) + " above 1024";
    if (mask && mask->type != Type::F16) return type_rule("mask", mask, "f16");
    if (sinks && sinks->type != Type::F32) return type_rule("sinks", sinks, "f32");
    return d->type == Type::F32 ? "" : type_rule("result", d, "f32");
}

struct Listed { Op op; OpEntry entry; };
const Listed kOps[] = {
    {Op::ADD, {cuda_forward_ADD, floats}},
    {Op::SUB, {cuda_forward_SUB, floats}},
    {Op::MUL, {cuda_forward_MUL, floats}},
    {Op::DIV, {cuda_forward_DIV, floats}},
    {Op::SQR, {cuda_forward_SQR, same_float}},
    {Op::SQRT, {cuda_forward_SQRT, same_float}},
    {Op::UNARY, {cuda_forward_UNARY, check_unary}},
    {Op::GLU, {cuda_forward_GLU, check_glu}},
    {Op::SCALE, {cuda_forward_SCALE, same_float}},
    {Op::CLAMP, {cuda_forward_CLAMP, same_float}},
    {Op::ARANGE, {cuda_forward_ARANGE, check_arange}},
    {Op::TRI, {cuda_forward_TRI, f32_only}},
    {Op::FILL, {cuda_forward_FILL, check_fill}},
    {Op::NORM, {cuda_forward_NORM, f32_only}},
    {Op::RMS_NORM, {cuda_forward_RMS_NORM, f32_only}},
    {Op::SOFT_MAX, {cuda_forward_SOFT_MAX, check_soft_max}},
    {Op::ROPE, {cuda_forward_ROPE, check_rope}},
    {Op::GET_ROWS, {cuda_forward_GET_ROWS, check_get_rows}},
    {Op::SET_ROWS, {cuda_forward_SET_ROWS, check_set_rows}},
    {Op::CPY, {cuda_forward_CPY, check_copy}},
    {Op::DUP, {cuda_forward_DUP, check_copy}},
    {Op::CONT, {cuda_forward_CONT, check_copy}},
    {Op::MUL_MAT, {cuda_forward_MUL_MAT, check_mul_mat}},
    {Op::MUL_MAT_ID, {cuda_forward_MUL_MAT_ID, check_mul_mat}},
    {Op::FLASH_ATTN_EXT, {cuda_forward_FLASH_ATTN_EXT, check_flash_attn}},
};

}  // namespace

const OpEntry* find_op(Op op) {
    static const auto by_op = [] {
        std::array<const OpEntry*, (size_t)Op::COUNT> t{};
        for (const Listed& l : kOps) t[(size_t)l.op] = &l.entry;
        return t;
    }();
    const size_t i = (size_t)op;
    return i < by_op.size() ? by_op[i] : nullptr;
}

std::string unsupported_reason(const Tensor* node) {
    if (op_is_layout_only(node->op)) return "";
    const OpEntry* e = find_op(node->op);
    if (!e) return "no CUDA kernel for this op";
    return e->check(node);
}

}  // namespace pyggml::cuda
