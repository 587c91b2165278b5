// CPU kernels of SUM_ROWS, MEAN (row sums in double) and CUMSUM (sequential f32 prefix sum).
// Rows are split across threads; dim 0 is packed (the constructors check it).
#include <vector>

#include "cpu/kernels.h"
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

}  // namespace pyggml::cpu
