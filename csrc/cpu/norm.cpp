// CPU kernels of NORM and RMS_NORM (spec 4.9, 4.10): one row at a time, rows split across
// threads. Packed rows run the SIMD row primitives; rows with nb[0] != 4 (in src or dst) are
// gathered into per-thread scratch, normalised there and scattered back.
#include <cmath>
#include <cstring>

#include "cpu/kernels.h"
#include "cpu/rowops_simd.h"

namespace pyggml::cpu {

namespace {

constexpr int64_t kPad = 16;  // floats of padding between per-thread scratch rows

bool rows_packed(const Tensor* dst) {
    return dst->src[0]->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);
}

// y = normalised x (y may equal x).
void norm_row(rowops::Level l, float* y, const float* x, int64_t n, float eps) {
    const float mean = (float)(rowops::sum(l, x, n) / (double)n);
    const float var = (float)(rowops::center_sumsq(l, y, x, mean, n) / (double)n);
    const float s = 1.0f / std::sqrt(var + eps);
    rowops::scale(l, y, y, s, n);
}

void rms_norm_row(rowops::Level l, float* y, const float* x, int64_t n, float eps) {
    const float mean = (float)(rowops::sumsq(l, x, n) / (double)n);
    const float s = 1.0f / std::sqrt(mean + eps);
    rowops::scale(l, y, x, s, n);
}

template <class RowFn>
void norm_rows(const ComputeParams& p, Tensor* dst, RowFn row_fn) {
    const Tensor* a = dst->src[0];
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const float eps = dst->param_f32(0);
    const rowops::Level l = rowops::level();
    const bool packed = rows_packed(dst);
    float* scratch = packed ? nullptr : (float*)p.wdata + (ne0 + kPad) * p.ith;
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char* xs = a->row(i1, i2, i3);
        char* ys = dst->row(i1, i2, i3);
        if (packed) {
            row_fn(l, (float*)ys, (const float*)xs, ne0, eps);
            continue;
        }
        for (int64_t i = 0; i < ne0; ++i) std::memcpy(scratch + i, xs + i * a->nb[0], sizeof(float));
        row_fn(l, scratch, scratch, ne0, eps);
        for (int64_t i = 0; i < ne0; ++i) std::memcpy(ys + i * dst->nb[0], scratch + i, sizeof(float));
    }
}

size_t norm_work_size(const Tensor* dst, int n_threads) {
    if (rows_packed(dst)) return 0;
    return (size_t)(dst->ne[0] + kPad) * sizeof(float) * (size_t)n_threads;
}

}  // namespace

void cpu_forward_NORM(const ComputeParams& p, Tensor* dst) { norm_rows(p, dst, norm_row); }
size_t cpu_work_size_NORM(const Tensor* dst, int n_threads) { return norm_work_size(dst, n_threads); }

void cpu_forward_RMS_NORM(const ComputeParams& p, Tensor* dst) { norm_rows(p, dst, rms_norm_row); }
size_t cpu_work_size_RMS_NORM(const Tensor* dst, int n_threads) { return norm_work_size(dst, n_threads); }

}  // namespace pyggml::cpu
