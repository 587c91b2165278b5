// CPU kernels of DUP/CPY/CONT: a logical-order copy between any two layouts.
// The logical element (block) sequence of the source is walked in segments that stay inside
// one row of both tensors; each segment is one strided conversion (memmove when packed).
#include <vector>

#include "cpu/convert.h"
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {

// Walks the logical units (elements, or blocks for block types) of a tensor in order.
struct Walker {
    char* base;
    int64_t ne[4];
    size_t nb[4];
    int64_t i[4];
    Walker(const Tensor* t, int64_t k) : base((char*)t->data) {
        for (int d = 0; d < 4; ++d) { ne[d] = t->ne[d]; nb[d] = t->nb[d]; }
        ne[0] /= blck_size(t->type);
        i[0] = k % ne[0]; k /= ne[0];
        i[1] = k % ne[1]; k /= ne[1];
        i[2] = k % ne[2]; k /= ne[2];
        i[3] = k;
    }
    char* ptr() const { return base + i[0] * nb[0] + i[1] * nb[1] + i[2] * nb[2] + i[3] * nb[3]; }
    int64_t left() const { return ne[0] - i[0]; }
    void advance(int64_t n) {  // n <= left()
        i[0] += n;
        if (i[0] < ne[0]) return;
        i[0] = 0;
        if (++i[1] < ne[1]) return;
        i[1] = 0;
        if (++i[2] < ne[2]) return;
        i[2] = 0;
        ++i[3];
    }
};

// Units [k0, k1) of src into units [k0, k1) of dst with `fn(src_ptr, src_stride, dst_ptr,
// dst_stride, n)` per segment.
template <class F>
void walk_pair(const Tensor* src, const Tensor* dst, int64_t k0, int64_t k1, F fn) {
    if (k0 >= k1) return;
    Walker s(src, k0), d(dst, k0);
    for (int64_t k = k0; k < k1;) {
        const int64_t n = std::min(k1 - k, std::min(s.left(), d.left()));
        fn(s.ptr(), s.nb[0], d.ptr(), d.nb[0], n);
        s.advance(n);
        d.advance(n);
        k += n;
    }
}

// Gathers logical elements [k0, k0 + n) of a non-block tensor into f32.
void gather_f32(const Tensor* t, int64_t k0, int64_t n, float* out) {
    Walker w(t, k0);
    for (int64_t k = 0; k < n;) {
        const int64_t m = std::min(n - k, w.left());
        conv::convert_strided(t->type, w.ptr(), w.nb[0], Type::F32, (char*)(out + k), 4, m);
        w.advance(m);
        k += m;
    }
}

// Scatters f32 values into logical elements [k0, k0 + n) of a non-block tensor.
void scatter_f32(const float* in, const Tensor* t, int64_t k0, int64_t n) {
    Walker w(t, k0);
    for (int64_t k = 0; k < n;) {
        const int64_t m = std::min(n - k, w.left());
        conv::convert_strided(Type::F32, (const char*)(in + k), 4, t->type, w.ptr(), w.nb[0], m);
        w.advance(m);
        k += m;
    }
}

// Same-shape copy of a source whose dim 1 is packed and dim 0 strided (a transposed view)
// into rows packed along dim 0, in tiles of T0 (dim 0) x T1 (dim 1) so the strided reads
// stay in L1 (T0 small: power-of-two strides map every read line to one cache set).
void copy_transposed(const ComputeParams& p, const Tensor* src, Tensor* dst) {
    constexpr int64_t T = 64, T0 = 8;
    const Type st = src->type, dt = dst->type;
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const int64_t n1t = (ne1 + T - 1) / T;
    int64_t t0, t1;
    split_range(n1t * ne2 * dst->ne[3], p.ith, p.nth, t0, t1);
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t a = (t % n1t) * T, i2 = (t / n1t) % ne2, i3 = t / (n1t * ne2);
        const int64_t b = std::min(ne1, a + T);
        for (int64_t j0 = 0; j0 < ne0; j0 += T0) {
            const int64_t n = std::min(T0, ne0 - j0);
            if (st == dt && type_size(st) == 4) {
                for (int64_t i1 = a; i1 < b; ++i1)
                    conv::copy_units<uint32_t>(src->ptr(j0, i1, i2, i3), src->nb[0], dst->ptr(j0, i1, i2, i3), 4, n);
            } else if (st == dt && type_size(st) == 2) {
                for (int64_t i1 = a; i1 < b; ++i1)
                    conv::copy_units<uint16_t>(src->ptr(j0, i1, i2, i3), src->nb[0], dst->ptr(j0, i1, i2, i3), 2, n);
            } else {
                for (int64_t i1 = a; i1 < b; ++i1)
                    conv::convert_strided(st, src->ptr(j0, i1, i2, i3), src->nb[0], dt, dst->ptr(j0, i1, i2, i3),
                                          dst->nb[0], n);
            }
        }
    }
}

size_t scratch_floats(const Tensor* dst) {
    const Tensor* src = dst->src[0];
    return (size_t)std::max(src->ne[0], dst->ne[0]) + 16;
}

void copy_forward(const ComputeParams& p, Tensor* dst) {
    const Tensor* src = dst->src[0];
    const Type st = src->type, dt = dst->type;
    if (src->is_empty() || dst->is_empty()) return;

    if (st == dt || (!is_quantized(st) && !is_quantized(dt))) {
        if (st == dt && src->is_contiguous() && dst->is_contiguous()) {  // one flat memmove
            const size_t bytes = dst->nbytes();
            const int64_t chunk = 1 << 16;
            int64_t c0, c1;
            split_range((int64_t)((bytes + chunk - 1) / chunk), p.ith, p.nth, c0, c1);
            const size_t b0 = std::min(bytes, (size_t)c0 * chunk), b1 = std::min(bytes, (size_t)c1 * chunk);
            if (b1 > b0 && src->data != dst->data) std::memmove((char*)dst->data + b0, (const char*)src->data + b0, b1 - b0);
            return;
        }
        if (!is_quantized(st) && dst->same_shape(src) && src->nb[0] != type_size(st) &&
            src->nb[1] == type_size(st) && dst->nb[0] == type_size(dt) && src->ne[0] > 1) {
            copy_transposed(p, src, dst);
            return;
        }
        const int64_t n_units = dst->nelements() / blck_size(dt);
        int64_t k0, k1;
        split_range(n_units, p.ith, p.nth, k0, k1);
        if (st == dt) {
            const size_t es = type_size(st);
            walk_pair(src, dst, k0, k1, [es](const char* s, size_t ss, char* d, size_t ds, int64_t n) {
                conv::copy_strided(es, s, ss, d, ds, n);
            });
        } else {
            walk_pair(src, dst, k0, k1, [st, dt](const char* s, size_t ss, char* d, size_t ds, int64_t n) {
                conv::convert_strided(st, s, ss, dt, d, ds, n);
            });
        }
        return;
    }

    float* buf = (float*)p.wdata + (size_t)p.ith * scratch_floats(dst);
    if (is_quantized(dt)) {  // quantize: dst is contiguous, one dst row at a time
        const int64_t ne0 = dst->ne[0];
        const size_t rb = dst->row_bytes();
        int64_t r0, r1;
        split_range(dst->nrows(), p.ith, p.nth, r0, r1);
        for (int64_t r = r0; r < r1; ++r) {
            gather_f32(src, r * ne0, ne0, buf);
            conv::from_float_row_fast(dt, buf, (char*)dst->data + r * rb, ne0);
        }
        return;
    }
    // dequantize: one source row at a time, scattered in logical order into dst
    const int64_t ne00 = src->ne[0];
    int64_t r0, r1;
    split_range(src->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % src->ne[1], i2 = (r / src->ne[1]) % src->ne[2], i3 = r / (src->ne[1] * src->ne[2]);
        to_float_row(st, src->row(i1, i2, i3), buf, ne00);
        scatter_f32(buf, dst, r * ne00, ne00);
    }
}

size_t copy_work_size(const Tensor* dst, int n_threads) {
    const Tensor* src = dst->src[0];
    if (!src || src->type == dst->type || (!is_quantized(src->type) && !is_quantized(dst->type))) return 0;
    return (size_t)n_threads * scratch_floats(dst) * sizeof(float);
}

}  // namespace

void cpu_forward_DUP(const ComputeParams& p, Tensor* dst) { copy_forward(p, dst); }
size_t cpu_work_size_DUP(const Tensor* dst, int n) { return copy_work_size(dst, n); }

void cpu_forward_CPY(const ComputeParams& p, Tensor* dst) { copy_forward(p, dst); }
size_t cpu_work_size_CPY(const Tensor* dst, int n) { return copy_work_size(dst, n); }

void cpu_forward_CONT(const ComputeParams& p, Tensor* dst) { copy_forward(p, dst); }
size_t cpu_work_size_CONT(const Tensor* dst, int n) { return copy_work_size(dst, n); }

}  // namespace pyggml::cpu
