// CPU kernels of the 'layout' family: the metadata-only ops (no compute) and the copying ops
// REPEAT, CONCAT and PAD. The copying kernels move whole storage units (one element, or one
// block for block-quantized types) and honour every source stride.
#include <cstring>

#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {

// Copies n units of `us` bytes from a strided source to a strided destination.
inline void copy_units(char* dst, size_t dst_stride, const char* src, size_t src_stride, int64_t n, size_t us) {
    if (n <= 0) return;
    if (dst_stride == us && src_stride == us) {
        std::memcpy(dst, src, (size_t)n * us);
        return;
    }
    switch (us) {
        case 2:
            for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dst_stride, src + i * src_stride, 2);
            break;
        case 4:
            for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dst_stride, src + i * src_stride, 4);
            break;
        case 8:
            for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dst_stride, src + i * src_stride, 8);
            break;
        default:
            for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dst_stride, src + i * src_stride, us);
    }
}

// Row r of dst (dims 1..3 flattened) as indices.
inline void row_index(const Tensor* t, int64_t r, int64_t& i1, int64_t& i2, int64_t& i3) {
    i1 = r % t->ne[1];
    i2 = (r / t->ne[1]) % t->ne[2];
    i3 = r / (t->ne[1] * t->ne[2]);
}

inline int64_t units(const Tensor* t) { return t->ne[0] / blck_size(t->type); }

}  // namespace

void cpu_forward_NONE(const ComputeParams&, Tensor*) {}  // metadata only
size_t cpu_work_size_NONE(const Tensor*, int) { return 0; }

// out[i] = a[i0 % a.ne0, i1 % a.ne1, i2 % a.ne2, i3 % a.ne3]
void cpu_forward_REPEAT(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    if (dst->is_empty() || a->is_empty()) return;
    const size_t us = type_size(a->type);
    const int64_t na = units(a), nd = units(dst);
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        row_index(dst, r, i1, i2, i3);
        const char* src = a->row(i1 % a->ne[1], i2 % a->ne[2], i3 % a->ne[3]);
        char* out = dst->row(i1, i2, i3);
        for (int64_t k = 0; k < nd; k += na) copy_units(out + k * us, us, src, a->nb[0], na, us);
    }
}
size_t cpu_work_size_REPEAT(const Tensor*, int) { return 0; }

// out = a joined with b along dim (op_params[0]).
void cpu_forward_CONCAT(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const int dim = dst->param_i32(0);
    if (dst->is_empty()) return;
    const size_t us = type_size(dst->type);
    const int64_t nd = units(dst);
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i[4] = {0, 0, 0, 0};
        row_index(dst, r, i[1], i[2], i[3]);
        char* out = dst->row(i[1], i[2], i[3]);
        if (dim == 0) {
            const int64_t na = units(a);
            if (na > 0) copy_units(out, us, a->row(i[1], i[2], i[3]), a->nb[0], na, us);
            if (nd - na > 0) copy_units(out + na * us, us, b->row(i[1], i[2], i[3]), b->nb[0], nd - na, us);
        } else if (i[dim] < a->ne[dim]) {
            copy_units(out, us, a->row(i[1], i[2], i[3]), a->nb[0], nd, us);
        } else {
            i[dim] -= a->ne[dim];
            copy_units(out, us, b->row(i[1], i[2], i[3]), b->nb[0], nd, us);
        }
    }
}
size_t cpu_work_size_CONCAT(const Tensor*, int) { return 0; }

// Zero mode: out[i] = a[i - lp] inside [lp, lp + a.ne) in every dim, else 0.
// Circular mode: out[i] = a[(i - lp) mod a.ne].
void cpu_forward_PAD(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    if (dst->is_empty()) return;
    int64_t lp[4];
    for (int d = 0; d < 4; ++d) lp[d] = dst->param_i32(2 * d);
    const bool circular = dst->param_i32(8) != 0;
    const size_t es = type_size(dst->type);
    const int64_t ne0 = dst->ne[0];
    auto wrap = [](int64_t i, int64_t n) { const int64_t m = i % n; return m < 0 ? m + n : m; };
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        row_index(dst, r, i1, i2, i3);
        char* out = dst->row(i1, i2, i3);
        if (circular) {
            const char* src = a->row(wrap(i1 - lp[1], a->ne[1]), wrap(i2 - lp[2], a->ne[2]), wrap(i3 - lp[3], a->ne[3]));
            for (int64_t i0 = 0; i0 < ne0; ++i0)
                std::memcpy(out + i0 * es, src + wrap(i0 - lp[0], a->ne[0]) * a->nb[0], es);
            continue;
        }
        const int64_t j1 = i1 - lp[1], j2 = i2 - lp[2], j3 = i3 - lp[3];
        if (j1 < 0 || j1 >= a->ne[1] || j2 < 0 || j2 >= a->ne[2] || j3 < 0 || j3 >= a->ne[3]) {
            std::memset(out, 0, (size_t)ne0 * es);
            continue;
        }
        const int64_t n_in = a->ne[0];
        std::memset(out, 0, (size_t)lp[0] * es);
        copy_units(out + lp[0] * es, es, a->row(j1, j2, j3), a->nb[0], n_in, es);
        std::memset(out + (lp[0] + n_in) * es, 0, (size_t)(ne0 - lp[0] - n_in) * es);
    }
}
size_t cpu_work_size_PAD(const Tensor*, int) { return 0; }

void cpu_forward_RESHAPE(const ComputeParams&, Tensor*) {}  // metadata only
size_t cpu_work_size_RESHAPE(const Tensor*, int) { return 0; }

void cpu_forward_VIEW(const ComputeParams&, Tensor*) {}  // metadata only
size_t cpu_work_size_VIEW(const Tensor*, int) { return 0; }

void cpu_forward_PERMUTE(const ComputeParams&, Tensor*) {}  // metadata only
size_t cpu_work_size_PERMUTE(const Tensor*, int) { return 0; }

void cpu_forward_TRANSPOSE(const ComputeParams&, Tensor*) {}  // metadata only
size_t cpu_work_size_TRANSPOSE(const Tensor*, int) { return 0; }

namespace {
inline int64_t wrap(int64_t i, int64_t n) { return i < 0 ? i + n : i >= n ? i - n : i; }
}  // namespace

// out[i] = a[(i - shift) mod ne] per dim: each output row is one source row in two pieces.
void cpu_forward_ROLL(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const size_t es = type_size(dst->type);
    const int64_t s0 = wrap(-(int64_t)dst->param_i32(0), ne0);  // first source column
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char* x = a->row(wrap(i1 - dst->param_i32(1), ne1), wrap(i2 - dst->param_i32(2), ne2),
                               wrap(i3 - dst->param_i32(3), dst->ne[3]));
        char* y = dst->row(i1, i2, i3);
        std::memcpy(y, x + s0 * es, (size_t)(ne0 - s0) * es);
        std::memcpy(y + (ne0 - s0) * es, x, (size_t)s0 * es);
    }
}
size_t cpu_work_size_ROLL(const Tensor*, int) { return 0; }

void cpu_forward_PAD_REFLECT_1D(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t n = a->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const int64_t p0 = dst->param_i32(0), p1 = dst->param_i32(1);
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char* x = a->row(i1, i2, i3);
        float* y = (float*)dst->row(i1, i2, i3);
        auto at = [&](int64_t i) { return *(const float*)(x + i * a->nb[0]); };
        for (int64_t i = 0; i < n; ++i) y[p0 + i] = at(i);
        for (int64_t k = 1; k <= p0; ++k) y[p0 - k] = at(k);
        for (int64_t k = 1; k <= p1; ++k) y[p0 + n - 1 + k] = at(n - 1 - k);
    }
}
size_t cpu_work_size_PAD_REFLECT_1D(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
