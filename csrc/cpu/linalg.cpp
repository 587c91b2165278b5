// CPU kernels of OUT_PROD and SOLVE_TRI. Both work on whole contiguous rows: the inner loop is
// y += s*x over dim 0, a plain loop (the reference path) or AVX2+FMA picked at run time.
#include <algorithm>
#include <cstring>

#include "cpu/kernels.h"
#include "cpu/rowops_simd.h"

namespace pyggml::cpu {

namespace {
inline void axpy_plain(float* __restrict y, const float* __restrict x, float s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i] * s;
}
#ifdef PYGGML_ROWOPS_X86
__attribute__((target("avx2,fma"))) void axpy_avx2(float* __restrict y, const float* __restrict x, float s, int64_t n) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vs, _mm256_loadu_ps(y + i)));
        _mm256_storeu_ps(y + i + 8, _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), vs, _mm256_loadu_ps(y + i + 8)));
    }
    for (; i < n; ++i) y[i] += x[i] * s;
}
#endif
using AxpyFn = void (*)(float*, const float*, float, int64_t);
AxpyFn pick_axpy() {
#ifdef PYGGML_ROWOPS_X86
    if (rowops::level() != rowops::Level::Scalar) return axpy_avx2;
#endif
    return axpy_plain;
}
}  // namespace

// Each output row (i1, i2, i3) = sum_k b[i1, k, i2, i3] * a-row k of slice (i2/dps2, i3/dps3).
// Up to kRowBlock consecutive output rows of one slice share each a-row load (a is streamed
// once per block, not once per row); every element still sums over k in order.
// Non-f32 a is converted one slice at a time into this thread's scratch.
void cpu_forward_OUT_PROD(const ComputeParams& p, Tensor* dst) {
    constexpr int64_t kRowBlock = 8;
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const int64_t m = dst->ne[0], n = dst->ne[1], ne2 = dst->ne[2], K = a->ne[1];
    const int64_t dps2 = ne2 / a->ne[2], dps3 = dst->ne[3] / a->ne[3];
    const bool a_f32 = a->type == Type::F32;
    const AxpyFn axpy = pick_axpy();
    float* slice = a_f32 ? nullptr : (float*)p.wdata + (size_t)p.ith * (size_t)(K * m + 16);
    int64_t cached = -1;  // slice index held in `slice`
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1;) {
        const int64_t i1 = r % n, i2 = (r / n) % ne2, i3 = r / (n * ne2);
        const int64_t nr = std::min(kRowBlock, std::min(r1 - r, n - i1));
        const int64_t a2 = i2 / dps2, a3 = i3 / dps3;
        if (!a_f32 && cached != a3 * a->ne[2] + a2) {
            for (int64_t k = 0; k < K; ++k) to_float_row(a->type, a->row(k, a2, a3), slice + k * m, m);
            cached = a3 * a->ne[2] + a2;
        }
        float* ys[kRowBlock];
        const char* bcols[kRowBlock];
        for (int64_t j = 0; j < nr; ++j) {
            ys[j] = (float*)dst->row(i1 + j, i2, i3);
            std::memset(ys[j], 0, (size_t)m * sizeof(float));
            bcols[j] = (const char*)b->data + (i1 + j) * b->nb[0] + i2 * b->nb[2] + i3 * b->nb[3];
        }
        for (int64_t k = 0; k < K; ++k) {
            const float* x = a_f32 ? (const float*)a->row(k, a2, a3) : slice + k * m;
            for (int64_t j = 0; j < nr; ++j) axpy(ys[j], x, *(const float*)(bcols[j] + k * b->nb[1]), m);
        }
        r += nr;
    }
}
size_t cpu_work_size_OUT_PROD(const Tensor* dst, int n_threads) {
    const Tensor* a = dst->src[0];
    if (a->type == Type::F32) return 0;
    return (size_t)n_threads * (size_t)(a->ne[1] * a->ne[0] + 16) * sizeof(float);
}

// Forward substitution, row by row over a block of columns of X:
// X[i] = (B[i] - sum_{t<i} A[i, t] X[t]) / A[i, i]. Work items are (batch, column block).
void cpu_forward_SOLVE_TRI(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const int64_t k = dst->ne[0], n = dst->ne[1], ne2 = dst->ne[2];
    const int64_t n_batch = ne2 * dst->ne[3];
    const int64_t n_blocks = n_batch >= p.nth ? 1 : std::min<int64_t>(k, (p.nth + n_batch - 1) / n_batch);
    const int64_t block = n_blocks > 0 ? (k + n_blocks - 1) / n_blocks : 0;
    const AxpyFn axpy = pick_axpy();
    int64_t w0, w1;
    split_range(n_batch * n_blocks, p.ith, p.nth, w0, w1);
    for (int64_t w = w0; w < w1; ++w) {
        const int64_t bt = w / n_blocks, j0 = (w % n_blocks) * block, j1 = std::min(k, j0 + block);
        const int64_t i2 = bt % ne2, i3 = bt / ne2;
        if (j1 <= j0) continue;
        for (int64_t i = 0; i < n; ++i) {
            const float* arow = (const float*)a->row(i, i2, i3);
            float* x = (float*)dst->row(i, i2, i3) + j0;
            const int64_t w_cols = j1 - j0;
            std::memset(x, 0, (size_t)w_cols * sizeof(float));
            for (int64_t t = 0; t < i; ++t) axpy(x, (const float*)dst->row(t, i2, i3) + j0, arow[t], w_cols);
            const float* brow = (const float*)b->row(i, i2, i3) + j0;
            const float d = arow[i];
            for (int64_t j = 0; j < w_cols; ++j) x[j] = (brow[j] - x[j]) / d;
        }
    }
}
size_t cpu_work_size_SOLVE_TRI(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
