// CPU kernels of NORM, RMS_NORM and L2_NORM: one row at a time, rows split
// across threads. Packed rows run the SIMD row primitives; rows with nb[0] != 4 (in src or dst) are
// gathered into per-thread scratch, normalised there and scattered back.
#include <cmath>
#include <algorithm>
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

// The sum of squares as ggml forms it: each square rounded to f32, added in order in f64. A
// faster sum differs in the last bit of the mean now and then, which quantized models amplify.
double sumsq_in_order(const float* x, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float sq = x[i] * x[i];
        s += (double)sq;
    }
    return s;
}

void rms_norm_row(rowops::Level l, float* y, const float* x, int64_t n, float eps) {
    const float mean = (float)(sumsq_in_order(x, n) / (double)n);
    const float s = 1.0f / std::sqrt(mean + eps);
    rowops::scale(l, y, x, s, n);
}

void l2_norm_row(rowops::Level l, float* y, const float* x, int64_t n, float eps) {
    const float norm = (float)std::sqrt(rowops::sumsq(l, x, n));
    rowops::scale(l, y, x, 1.0f / std::fmax(norm, eps), n);
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

void cpu_forward_L2_NORM(const ComputeParams& p, Tensor* dst) { norm_rows(p, dst, l2_norm_row); }
size_t cpu_work_size_L2_NORM(const Tensor* dst, int n_threads) { return norm_work_size(dst, n_threads); }

// GROUP_NORM: the work items are (group, i3) pairs. Mean and variance are accumulated in
// double over the group's rows; the second pass writes x - mean, the third scales it.
void cpu_forward_GROUP_NORM(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t ne0 = a->ne[0], ne1 = a->ne[1], n_ch = a->ne[2], ne3 = a->ne[3];
    const int64_t n_groups = dst->param_i32(0);
    const float eps = dst->param_f32(1);
    const int64_t per_group = (n_ch + n_groups - 1) / n_groups;
    const rowops::Level l = rowops::level();
    int64_t w0, w1;
    split_range(n_groups * ne3, p.ith, p.nth, w0, w1);
    for (int64_t w = w0; w < w1; ++w) {
        const int64_t g = w % n_groups, i3 = w / n_groups;
        const int64_t c0 = g * per_group, c1 = std::min(c0 + per_group, n_ch);
        if (c1 <= c0) continue;  // more groups than channels: this one is empty
        const double count = (double)ne0 * (double)ne1 * (double)(c1 - c0);
        double sum = 0.0;
        for (int64_t c = c0; c < c1; ++c)
            for (int64_t i1 = 0; i1 < ne1; ++i1) sum += rowops::sum(l, (const float*)a->row(i1, c, i3), ne0);
        const float mean = (float)(sum / count);
        double sum2 = 0.0;
        for (int64_t c = c0; c < c1; ++c)
            for (int64_t i1 = 0; i1 < ne1; ++i1)
                sum2 += rowops::center_sumsq(l, (float*)dst->row(i1, c, i3), (const float*)a->row(i1, c, i3), mean, ne0);
        const float s = 1.0f / std::sqrt((float)(sum2 / count) + eps);
        for (int64_t c = c0; c < c1; ++c)
            for (int64_t i1 = 0; i1 < ne1; ++i1) {
                float* y = (float*)dst->row(i1, c, i3);
                rowops::scale(l, y, y, s, ne0);
            }
    }
}
size_t cpu_work_size_GROUP_NORM(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
