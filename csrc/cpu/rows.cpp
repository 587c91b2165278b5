// CPU kernels of GET_ROWS / SET_ROWS: rows split across threads; every index
// is range-checked before its row is touched (out-of-range indices raise ShapeError).
#include <sstream>

#include "cpu/convert.h"
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {
int64_t read_index(const Tensor* t, int64_t i0, int64_t i1, int64_t i2) {
    const char* p = (const char*)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2];
    if (t->type == Type::I64) { int64_t v; std::memcpy(&v, p, 8); return v; }
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

[[noreturn]] void bad_index(const char* op, int64_t idx, int64_t n_rows, int64_t i0, int64_t i1, int64_t i2) {
    std::ostringstream os;
    os << "[" << op << "] index " << idx << " at [" << i0 << ", " << i1 << ", " << i2
       << "] of the index tensor is out of range: the indexed tensor has " << n_rows << " rows";
    throw ShapeError(os.str());
}
}  // namespace

void cpu_forward_GET_ROWS(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const int64_t ne0 = a->ne[0], n_idx = b->ne[0], nb1 = b->ne[1], n_src = a->ne[1];
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    if (r0 >= r1) return;
    // The row copy is picked once: a per-row dispatch costs as much as a short row itself.
    const Type at = a->type;
    const bool i64 = b->type == Type::I64;
    const size_t row_bytes = (size_t)ne0 * 4;
    const auto f16_to_f32 = conv::kernels_for(simd::cpu_isa()).f16_to_f32;
    // Index positions advance without a division per row (i10 fastest).
    int64_t i10 = r0 % n_idx, i11 = (r0 / n_idx) % nb1, i12 = r0 / (n_idx * nb1);
    for (int64_t r = r0; r < r1; ++r) {
        const char* ip = (const char*)b->data + i10 * b->nb[0] + i11 * b->nb[1] + i12 * b->nb[2];
        int64_t idx;
        if (i64) std::memcpy(&idx, ip, 8);
        else { int32_t v; std::memcpy(&v, ip, 4); idx = v; }
        if (idx < 0 || idx >= n_src) bad_index("get_rows", idx, n_src, i10, i11, i12);
        const char* src = a->row(idx, i11, i12);
        char* out = dst->row(i10, i11, i12);
        if (at == Type::F32 || at == Type::I32)
            std::memcpy(out, src, row_bytes);
        else if (at == Type::F16)
            f16_to_f32((const uint16_t*)src, (float*)out, ne0);
        else if (at == Type::BF16)
            conv::bf16_to_f32_row((const uint16_t*)src, (float*)out, ne0);
        else
            to_float_row(at, src, (float*)out, ne0);
        if (++i10 == n_idx) {
            i10 = 0;
            if (++i11 == nb1) { i11 = 0; ++i12; }
        }
    }
}
size_t cpu_work_size_GET_ROWS(const Tensor*, int) { return 0; }

void cpu_forward_SET_ROWS(const ComputeParams& p, Tensor* dst) {
    const Tensor* b = dst->src[0];  // source rows
    const Tensor* c = dst->src[1];  // indices
    const Type dt = dst->type;      // dst is a view of a (same layout)
    const int64_t ne0 = b->ne[0], n_rows = b->ne[1], nb2 = b->ne[2];
    float* buf = (float*)p.wdata + (size_t)p.ith * (ne0 + 16);
    int64_t r0, r1;
    split_range(b->nrows(), p.ith, p.nth, r0, r1);
    if (b->type == Type::F32 && dt == Type::F16 && b->nb[0] == 4 && dst->nb[0] == 2 && b->ne[2] * b->ne[3] == 1) {
        // The KV cache write of a prompt (f32 rows into an f16 cache): the row converter is
        // picked once, not per row; a per-row dispatch costs as much as a short row itself.
        const auto to_f16 = conv::kernels_for(simd::cpu_isa()).f32_to_f16;
        for (int64_t i = r0; i < r1; ++i) {
            const int64_t idx = read_index(c, i, 0, 0);
            if (idx < 0 || idx >= dst->ne[1]) bad_index("set_rows", idx, dst->ne[1], i, 0, 0);
            to_f16((const float*)((const char*)b->data + i * b->nb[1]),
                   (uint16_t*)((char*)dst->data + idx * dst->nb[1]), ne0);
        }
        return;
    }
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i = r % n_rows, j = (r / n_rows) % nb2, k = r / (n_rows * nb2);
        const int64_t idx = read_index(c, i, j % c->ne[1], k % c->ne[2]);
        if (idx < 0 || idx >= dst->ne[1]) bad_index("set_rows", idx, dst->ne[1], i, j % c->ne[1], k % c->ne[2]);
        const char* src = b->row(i, j, k);
        char* out = dst->row(idx, j, k);
        if (b->type == dt) {
            std::memmove(out, src, dst->row_bytes());
        } else if (!is_quantized(dt)) {
            conv::convert_contig(b->type, src, dt, out, ne0);
        } else {
            const float* f = (const float*)src;
            if (b->type != Type::F32) {
                conv::convert_contig(b->type, src, Type::F32, buf, ne0);
                f = buf;
            }
            conv::from_float_row_fast(dt, f, out, ne0);
        }
    }
}
size_t cpu_work_size_SET_ROWS(const Tensor* dst, int n_threads) {
    const Tensor* b = dst->src[0];
    return (size_t)n_threads * (size_t)(b->ne[0] + 16) * sizeof(float);
}

}  // namespace pyggml::cpu
