// CPU kernels of DIAG, DIAG_MASK_INF and DIAG_MASK_ZERO: output rows split across threads.
// The masks copy each row (unless in place) and overwrite its columns past n_past + i1, so
// a row is only ever touched by one thread.
#include <cmath>
#include <cstring>

#include "cpu/kernels.h"

namespace pyggml::cpu {

void cpu_forward_DIAG(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t n = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        float* y = (float*)dst->row(i1, i2, i3);
        std::memset(y, 0, (size_t)n * sizeof(float));
        y[i1] = *(const float*)(a->row(0, i2, i3) + i1 * a->nb[0]);
    }
}
size_t cpu_work_size_DIAG(const Tensor*, int) { return 0; }

namespace {
void diag_mask_rows(const ComputeParams& p, Tensor* dst, float value) {
    const Tensor* a = dst->src[0];
    const int64_t n = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const int64_t n_past = dst->param_i32(0);
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        float* y = (float*)dst->row(i1, i2, i3);
        const float* x = (const float*)a->row(i1, i2, i3);
        if (y != x) std::memcpy(y, x, (size_t)n * sizeof(float));
        for (int64_t i0 = n_past + i1 + 1; i0 < n; ++i0) y[i0] = value;
    }
}
}  // namespace

void cpu_forward_DIAG_MASK_INF(const ComputeParams& p, Tensor* dst) { diag_mask_rows(p, dst, -INFINITY); }
void cpu_forward_DIAG_MASK_ZERO(const ComputeParams& p, Tensor* dst) { diag_mask_rows(p, dst, 0.0f); }
size_t cpu_work_size_DIAG_MASK_INF(const Tensor*, int) { return 0; }
size_t cpu_work_size_DIAG_MASK_ZERO(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
