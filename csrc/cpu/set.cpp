// CPU kernels of ACC and SET. Unless in place, the threads first copy a into dst (each a slice),
// meet at a barrier, then split b's rows. ACC adds to a's values (read from src0, as ggml does,
// so that overlapping views of a out-of-place acc read the original).
#include <cstring>

#include "cpu/kernels.h"

namespace pyggml::cpu {

namespace {
void copy_a_into_dst(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    if (dst->data == a->data) return;
    int64_t b0, b1;
    split_range((int64_t)dst->nbytes(), p.ith, p.nth, b0, b1);
    if (b1 > b0) std::memcpy((char*)dst->data + b0, (const char*)a->data + b0, (size_t)(b1 - b0));
    p.barrier();
}

template <class RowFn>
void for_view_rows(const ComputeParams& p, Tensor* dst, RowFn fn) {
    const Tensor* b = dst->src[1];
    const size_t nb1 = (size_t)dst->param_i32(0), nb2 = (size_t)dst->param_i32(1),
                 nb3 = (size_t)dst->param_i32(2), offset = (size_t)dst->param_i32(3);
    const int64_t ne1 = b->ne[1], ne2 = b->ne[2];
    int64_t r0, r1;
    split_range(b->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const size_t at = offset + i1 * nb1 + i2 * nb2 + i3 * nb3;
        fn((char*)dst->data + at, (const char*)dst->src[0]->data + at, b->row(i1, i2, i3), b->ne[0]);
    }
}
}  // namespace

void cpu_forward_ACC(const ComputeParams& p, Tensor* dst) {
    copy_a_into_dst(p, dst);
    for_view_rows(p, dst, [](char* d, const char* a, const char* b, int64_t n) {
        float* y = (float*)d;
        const float* x = (const float*)a;
        const float* v = (const float*)b;
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] + v[i];
    });
}
size_t cpu_work_size_ACC(const Tensor*, int) { return 0; }

void cpu_forward_SET(const ComputeParams& p, Tensor* dst) {
    copy_a_into_dst(p, dst);
    const size_t es = type_size(dst->type);
    for_view_rows(p, dst, [es](char* d, const char*, const char* b, int64_t n) { std::memcpy(d, b, n * es); });
}
size_t cpu_work_size_SET(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
