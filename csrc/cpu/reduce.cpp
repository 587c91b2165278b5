// CPU kernels of SUM_ROWS, MEAN (row sums in double), CUMSUM (sequential f32 prefix sum), SUM,
// ARGMAX and COUNT_EQUAL. Rows are split across threads. SUM adds rows in at most kSumBlocks
// fixed blocks of consecutive rows (the blocks depend only on the shape), one partial per block
// in scratch, and thread 0 adds the partials in order, so the result does not depend on the
// thread count; COUNT_EQUAL's integer partials are exact in any order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/rowops_simd.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {
inline void row_index(const Tensor* t, int64_t r, int64_t& i1, int64_t& i2, int64_t& i3) {
    i1 = r % t->ne[1];
    i2 = (r / t->ne[1]) % t->ne[2];
    i3 = r / (t->ne[1] * t->ne[2]);
}

// Calls f(row_as_f32, i1, i2, i3) for this thread's rows of a.
template <class F>
void for_rows_f32(const ComputeParams& p, const Tensor* a, F f) {
    const int64_t ne0 = a->ne[0];
    std::vector<float> buf(a->type == Type::F32 ? 0 : ne0);
    int64_t r0, r1;
    split_range(a->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        row_index(a, r, i1, i2, i3);
        const char* row = a->row(i1, i2, i3);
        const float* x = (const float*)row;
        if (a->type != Type::F32) {
            to_float_row(a->type, row, buf.data(), ne0);
            x = buf.data();
        }
        f(x, i1, i2, i3);
    }
}

inline double row_sum(const float* x, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += (double)x[i];
    return s;
}

inline void store(Tensor* dst, char* at, float v) {
    switch (dst->type) {
        case Type::F32: *(float*)at = v; break;
        case Type::F16: *(uint16_t*)at = fp32_to_fp16(v); break;
        case Type::BF16: *(uint16_t*)at = fp32_to_bf16(v); break;
        default: throw UnsupportedError("[reduce] unsupported output type");
    }
}
}  // namespace

void cpu_forward_SUM_ROWS(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t ne0 = a->ne[0];
    for_rows_f32(p, a, [&](const float* x, int64_t i1, int64_t i2, int64_t i3) {
        store(dst, dst->row(i1, i2, i3), (float)row_sum(x, ne0));
    });
}
size_t cpu_work_size_SUM_ROWS(const Tensor*, int) { return 0; }

void cpu_forward_MEAN(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t ne0 = a->ne[0];
    for_rows_f32(p, a, [&](const float* x, int64_t i1, int64_t i2, int64_t i3) {
        // ne0 == 0 gives 0/0 = NaN, the mean of nothing.
        *(float*)dst->row(i1, i2, i3) = (float)(row_sum(x, ne0) / (double)ne0);
    });
}
size_t cpu_work_size_MEAN(const Tensor*, int) { return 0; }

void cpu_forward_CUMSUM(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t ne0 = a->ne[0];
    std::vector<float> out(dst->type == Type::F32 ? 0 : ne0);
    for_rows_f32(p, a, [&](const float* x, int64_t i1, int64_t i2, int64_t i3) {
        float* o = dst->type == Type::F32 ? (float*)dst->row(i1, i2, i3) : out.data();
        float s = 0.0f;
        for (int64_t i = 0; i < ne0; ++i) {
            s += x[i];
            o[i] = s;
        }
        if (dst->type != Type::F32) from_float_row(dst->type, out.data(), dst->row(i1, i2, i3), ne0);
    });
}
size_t cpu_work_size_CUMSUM(const Tensor*, int) { return 0; }

namespace {
// Element i0 of a row of a 16/32-bit float tensor as f32 (any nb[0]).
inline float load_f32(const Tensor* t, const char* row, int64_t i0) {
    const char* e = row + i0 * t->nb[0];
    switch (t->type) {
        case Type::F16: return fp16_to_fp32(*(const uint16_t*)e);
        case Type::BF16: return bf16_to_fp32(*(const uint16_t*)e);
        default: return *(const float*)e;
    }
}
}  // namespace

namespace {
constexpr int64_t kSumBlocks = 1024;
int64_t sum_rows_per_block(int64_t nrows) { return (nrows + kSumBlocks - 1) / kSumBlocks; }
}  // namespace

void cpu_forward_SUM(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t ne0 = a->ne[0], nrows = a->nrows();
    const int64_t per_block = sum_rows_per_block(nrows);
    const int64_t n_blocks = per_block > 0 ? (nrows + per_block - 1) / per_block : 0;
    double* partial = (double*)p.wdata;
    const rowops::Level l = rowops::level();
    const bool packed_f32 = a->type == Type::F32 && a->nb[0] == sizeof(float);
    int64_t b0, b1;
    split_range(n_blocks, p.ith, p.nth, b0, b1);
    for (int64_t blk = b0; blk < b1; ++blk) {
        double s = 0.0;
        for (int64_t r = blk * per_block; r < std::min(nrows, (blk + 1) * per_block); ++r) {
            int64_t i1, i2, i3;
            row_index(a, r, i1, i2, i3);
            const char* row = a->row(i1, i2, i3);
            if (packed_f32) {
                s += rowops::sum(l, (const float*)row, ne0);
            } else {
                double rs = 0.0;
                for (int64_t i = 0; i < ne0; ++i) rs += (double)load_f32(a, row, i);
                s += rs;
            }
        }
        partial[blk] = s;
    }
    p.barrier();
    if (p.ith != 0) return;
    double total = 0.0;
    for (int64_t blk = 0; blk < n_blocks; ++blk) total += partial[blk];
    store(dst, (char*)dst->data, (float)total);
}
size_t cpu_work_size_SUM(const Tensor* dst, int) {
    const int64_t nrows = dst->src[0]->nrows();
    return (size_t)std::min(nrows, kSumBlocks) * sizeof(double);
}

void cpu_forward_ARGMAX(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t ne0 = a->ne[0];
    int64_t r0, r1;
    split_range(a->ne[1], p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const char* row = a->row(r);
        // ggml's rule: keep the running max only while it compares greater (so a NaN input
        // resets it to the next value); among equal maxima the last index wins.
        float mx = -INFINITY;
        int32_t idx = 0;
        for (int64_t i = 0; i < ne0; ++i) {
            const float v = *(const float*)(row + i * a->nb[0]);
            mx = mx > v ? mx : v;
            if (mx == v) idx = (int32_t)i;
        }
        *(int32_t*)((char*)dst->data + r * dst->nb[0]) = idx;
    }
}
size_t cpu_work_size_ARGMAX(const Tensor*, int) { return 0; }

void cpu_forward_COUNT_EQUAL(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const int64_t ne0 = a->ne[0];
    int64_t* partial = (int64_t*)p.wdata;
    int64_t r0, r1;
    split_range(a->nrows(), p.ith, p.nth, r0, r1);
    int64_t n = 0;
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        row_index(a, r, i1, i2, i3);
        const char* ra = a->row(i1, i2, i3);
        const char* rb = b->row(i1, i2, i3);
        for (int64_t i = 0; i < ne0; ++i)
            n += *(const int32_t*)(ra + i * a->nb[0]) == *(const int32_t*)(rb + i * b->nb[0]);
    }
    partial[p.ith] = n;
    p.barrier();
    if (p.ith != 0) return;
    int64_t total = 0;
    for (int t = 0; t < p.nth; ++t) total += partial[t];
    *(int64_t*)dst->data = total;
}
size_t cpu_work_size_COUNT_EQUAL(const Tensor*, int n_threads) { return (size_t)n_threads * sizeof(int64_t); }

}  // namespace pyggml::cpu
