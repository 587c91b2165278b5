// CPU kernels of ADD/SUB/MUL/DIV (b tiled by modulo), ADD1 and ADD_ID: rows split across
// threads.
#include <sstream>
#include <vector>

#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {
template <class F>
void binary_rows(const ComputeParams& p, Tensor* dst, F f) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const int64_t ne0 = dst->ne[0];
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    const bool all_f32 = a->type == Type::F32 && b->type == Type::F32 && dst->type == Type::F32;
    const bool b_packed = b->nb[0] == type_size(b->type);
    std::vector<float> fa, fb, fo;  // scratch only for the converting paths
    if (!all_f32) { fa.resize(ne0); fo.resize(ne0); }
    if (!(b->type == Type::F32 && b_packed)) fb.resize(b->ne[0]);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
        const char* arow = a->row(i1, i2, i3);
        const char* brow = b->row(i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
        char* orow = dst->row(i1, i2, i3);
        // b's row as contiguous f32 (b may be permuted or narrower: tiled along dim 0).
        const float* bf;
        if (b->type == Type::F32 && b_packed) {
            bf = (const float*)brow;
        } else {
            for (int64_t i = 0; i < b->ne[0]; ++i) {
                const char* e = brow + i * b->nb[0];
                fb[i] = b->type == Type::F32 ? *(const float*)e
                      : b->type == Type::F16 ? fp16_to_fp32(*(const uint16_t*)e)
                                             : bf16_to_fp32(*(const uint16_t*)e);
            }
            bf = fb.data();
        }
        const int64_t nb0 = b->ne[0];
        if (all_f32) {
            const float* x = (const float*)arow;
            float* o = (float*)orow;
            if (nb0 == ne0) {
                for (int64_t i = 0; i < ne0; ++i) o[i] = f(x[i], bf[i]);
            } else {
                for (int64_t i = 0; i < ne0; i += nb0)
                    for (int64_t j = 0; j < nb0; ++j) o[i + j] = f(x[i + j], bf[j]);
            }
        } else {
            to_float_row(a->type, arow, fa.data(), ne0);
            for (int64_t i = 0; i < ne0; ++i) fo[i] = f(fa[i], bf[i % nb0]);
            from_float_row(dst->type, fo.data(), orow, ne0);
        }
    }
}
}  // namespace

void cpu_forward_ADD(const ComputeParams& p, Tensor* d) { binary_rows(p, d, [](float x, float y) { return x + y; }); }
void cpu_forward_SUB(const ComputeParams& p, Tensor* d) { binary_rows(p, d, [](float x, float y) { return x - y; }); }
void cpu_forward_MUL(const ComputeParams& p, Tensor* d) { binary_rows(p, d, [](float x, float y) { return x * y; }); }
void cpu_forward_DIV(const ComputeParams& p, Tensor* d) { binary_rows(p, d, [](float x, float y) { return x / y; }); }
void cpu_forward_ADD1(const ComputeParams& p, Tensor* dst) {
    const Tensor* b = dst->src[1];
    float v;
    to_float_row(b->type, b->data, &v, 1);
    binary_rows(p, dst, [v](float x, float) { return x + v; });
}

void cpu_forward_ADD_ID(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const Tensor* ids = dst->src[2];
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const int32_t id = *(const int32_t*)((const char*)ids->data + i1 * ids->nb[0] + i2 * ids->nb[1]);
        if (id < 0 || id >= b->ne[1]) {
            std::ostringstream os;
            os << "[add_id] ids[" << i1 << ", " << i2 << "] = " << id << " is out of range: b has "
               << b->ne[1] << " rows";
            throw ShapeError(os.str());
        }
        const float* x = (const float*)a->row(i1, i2, i3);
        const float* y = (const float*)b->row(id);
        float* o = (float*)dst->row(i1, i2, i3);
        for (int64_t i = 0; i < ne0; ++i) o[i] = x[i] + y[i];
    }
}
size_t cpu_work_size_ADD1(const Tensor*, int) { return 0; }
size_t cpu_work_size_ADD_ID(const Tensor*, int) { return 0; }
size_t cpu_work_size_ADD(const Tensor*, int) { return 0; }
size_t cpu_work_size_SUB(const Tensor*, int) { return 0; }
size_t cpu_work_size_MUL(const Tensor*, int) { return 0; }
size_t cpu_work_size_DIV(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
