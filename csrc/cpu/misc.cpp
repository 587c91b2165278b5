// CPU kernels of SCALE, CLAMP, ARANGE, TRI and TIMESTEP_EMBEDDING.
// SCALE and CLAMP run row by row (any row strides) and tolerate dst aliasing src0.
#include <cmath>
#include <vector>

#include "cpu/convert.h"
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {
// Applies f to every row: f(const float* x, float* y, n) on f32 rows (converted through a
// per-thread buffer for 16-bit types).
template <class F>
void map_rows(const ComputeParams& p, Tensor* dst, F f) {
    const Tensor* a = dst->src[0];
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    float* buf = (float*)p.wdata + (size_t)p.ith * (ne0 + 16);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char* x = a->row(i1, i2, i3);
        char* y = dst->row(i1, i2, i3);
        if (dst->type == Type::F32) {
            f((const float*)x, (float*)y, ne0);
        } else {
            conv::convert_contig(a->type, x, Type::F32, buf, ne0);
            f(buf, buf, ne0);
            conv::convert_contig(Type::F32, buf, dst->type, y, ne0);
        }
    }
}

size_t row_scratch(const Tensor* dst, int n_threads) {
    return dst->type == Type::F32 ? 0 : (size_t)n_threads * (size_t)(dst->ne[0] + 16) * sizeof(float);
}
}  // namespace

void cpu_forward_SCALE(const ComputeParams& p, Tensor* dst) {
    const float s = dst->param_f32(0), b = dst->param_f32(1);
    if (b == 0.0f) {
        map_rows(p, dst, [s](const float* x, float* y, int64_t n) {
            for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
        });
    } else {
        map_rows(p, dst, [s, b](const float* x, float* y, int64_t n) {
            for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s + b;
        });
    }
}
size_t cpu_work_size_SCALE(const Tensor* dst, int n) { return row_scratch(dst, n); }

void cpu_forward_CLAMP(const ComputeParams& p, Tensor* dst) {
    const float lo = dst->param_f32(0), hi = dst->param_f32(1);
    map_rows(p, dst, [lo, hi](const float* x, float* y, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
            const float v = x[i] < hi ? x[i] : hi;  // NaN -> hi, as the CPU reference
            y[i] = v > lo ? v : lo;
        }
    });
}
size_t cpu_work_size_CLAMP(const Tensor* dst, int n) { return row_scratch(dst, n); }

void cpu_forward_ARANGE(const ComputeParams& p, Tensor* dst) {
    const float start = dst->param_f32(0), step = dst->param_f32(2);
    float* y = (float*)dst->data;
    int64_t i0, i1;
    split_range(dst->ne[0], p.ith, p.nth, i0, i1);
    for (int64_t i = i0; i < i1; ++i) y[i] = start + step * (float)i;
}
size_t cpu_work_size_ARANGE(const Tensor*, int) { return 0; }

void cpu_forward_TRI(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int type = dst->param_i32(0);
    const int64_t n = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const float* x = (const float*)a->row(i1, i2, i3);
        float* y = (float*)dst->row(i1, i2, i3);
        // kept columns i0 form one range [c0, c1) of the row
        int64_t c0 = 0, c1 = n;
        switch (type) {
            case 0: c0 = i1; break;          // UPPER_DIAG: i0 >= i1
            case 1: c0 = i1 + 1; break;      // UPPER:      i0 >  i1
            case 2: c1 = i1 + 1; break;      // LOWER_DIAG: i0 <= i1
            default: c1 = i1; break;         // LOWER:      i0 <  i1
        }
        c0 = std::min(c0, n);
        c1 = std::min(c1, n);
        for (int64_t i = 0; i < n; ++i) y[i] = (i >= c0 && i < c1) ? x[i] : 0.0f;
    }
}
size_t cpu_work_size_TRI(const Tensor*, int) { return 0; }

// Frequencies in f32 exactly as ggml forms them: exp(-log(max_period) * j / half).
void cpu_forward_TIMESTEP_EMBEDDING(const ComputeParams& p, Tensor* dst) {
    const Tensor* t = dst->src[0];
    const int dim = dst->param_i32(0), half = dim / 2;
    const float neg_log_period = -std::log((float)dst->param_i32(1));
    int64_t r0, r1;
    split_range(dst->ne[1], p.ith, p.nth, r0, r1);
    for (int64_t i = r0; i < r1; ++i) {
        const float ts = *(const float*)((const char*)t->data + i * t->nb[0]);
        float* y = (float*)dst->row(i);
        for (int j = 0; j < half; ++j) {
            const float freq = std::exp(neg_log_period * (float)j / (float)half);
            const float arg = ts * freq;
            y[j] = std::cos(arg);
            y[j + half] = std::sin(arg);
        }
        if (dim % 2 != 0) y[2 * half] = 0.0f;
    }
}
size_t cpu_work_size_TIMESTEP_EMBEDDING(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
