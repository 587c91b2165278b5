// The K-quant tile path of MUL_MAT (quant_ktile.h): activation conversion and the driver.
#include "cpu/quant_ktile.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/mul_mat_common.h"
#include "pyggml/quant_blocks.h"

namespace pyggml::cpu {

using kt::ActSb;
using kt::PanelSb;

namespace {

constexpr int64_t kColBlock = 256;  // columns per unit: one decoded panel serves them all

const kt::Kernels* ktile_kernels() {
    return simd::cpu_isa() >= simd::Isa::Avx512 ? &kt::kernels_avx512() : nullptr;
}

size_t col_bytes(const Tensor* dst) { return size_t(dst->src[0]->ne[0] / 256) * sizeof(ActSb); }
size_t conv_bytes(const Tensor* dst) {
    const Tensor* b = dst->src[1];
    return mm::align64(size_t(b->ne[1] * b->ne[2] * b->ne[3]) * col_bytes(dst));
}
// Per thread: one panel of kRows rows over all of K, and one q8_K column.
size_t thread_bytes(const Tensor* dst) {
    const int64_t nsb = dst->src[0]->ne[0] / 256;
    return size_t(nsb) * sizeof(PanelSb) + mm::align64(size_t(nsb) * sizeof(BlockQ8_K));
}

// One column converted as the plain path converts it (q8_K), then widened to ActSb records.
void convert_column(const mm::Kernels& kr, Type wt, Type bt, const char* brow, int64_t K, char* q8, ActSb* out,
                    std::vector<float>& tmp) {
    mm::convert_act(kr, wt, bt, brow, K, q8, tmp);
    for (int64_t ib = 0; ib < K / 256; ++ib) {
        const BlockQ8_K& y = ((const BlockQ8_K*)q8)[ib];
        ActSb& a = out[ib];
        std::memcpy(a.qs, y.qs, 256);
        int32_t bs32[8];
        for (int j = 0; j < 8; ++j) bs32[j] = y.bsums[2 * j] + y.bsums[2 * j + 1];
        for (int p = 0; p < 8; ++p)
            a.bp16[p] = int32_t(uint32_t(uint16_t(y.bsums[2 * p])) | (uint32_t(uint16_t(y.bsums[2 * p + 1])) << 16));
        for (int p = 0; p < 4; ++p)
            a.bp32[p] = int32_t(uint32_t(uint16_t(bs32[2 * p])) | (uint32_t(uint16_t(bs32[2 * p + 1])) << 16));
        a.d = y.d;
        std::memset(a.unused, 0, sizeof a.unused);
    }
}

}  // namespace

bool use_ktile(const Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    if (dst->ne[1] < kt::kMinColumns || a->ne[0] <= 0 || a->ne[0] % 256) return false;
    if (!(b->type == Type::F32 || b->type == Type::F16 || b->type == Type::BF16)) return false;
    if (b->nb[0] != type_size(b->type) || dst->nb[0] != sizeof(float)) return false;
    const kt::Kernels* k = ktile_kernels();
    return k && k->tile[(int)a->type] && k->decode[(int)a->type];
}

size_t ktile_mul_mat_work_size(const Tensor* dst, int n_threads) {
    n_threads = std::max(1, n_threads);
    return mm::kCounterBytes + size_t(n_threads) * thread_bytes(dst) +
           (mm::private_conversion(dst) ? size_t(n_threads) : 1) * conv_bytes(dst);
}

bool ktile_mul_mat_barrier_free(const Tensor* dst) { return mm::private_conversion(dst); }

void ktile_mul_mat_forward(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const Type w = a->type;
    const int64_t K = a->ne[0], M = a->ne[1], N = dst->ne[1], nsb = K / 256;
    const int64_t ne12 = b->ne[2], ne13 = b->ne[3], r2 = ne12 / a->ne[2], r3 = ne13 / a->ne[3];
    const kt::Kernels& kk = *ktile_kernels();
    const mm::Kernels& kr = mm::kernels_for(simd::cpu_isa());
    const kt::DecodeFn decode = kk.decode[(int)w];
    const kt::TileFn tile = kk.tile[(int)w];
    const bool priv = mm::private_conversion(dst);
    const size_t colb = col_bytes(dst);
    char* mine = (char*)p.wdata + mm::kCounterBytes + size_t(p.ith) * thread_bytes(dst);
    PanelSb* panel = (PanelSb*)mine;
    char* q8 = mine + size_t(nsb) * sizeof(PanelSb);
    char* conv = (char*)p.wdata + mm::kCounterBytes + size_t(p.nth) * thread_bytes(dst) +
                 (priv ? size_t(p.ith) * conv_bytes(dst) : 0);
    {
        std::vector<float> tmp;
        mm::convert_columns(p, b, priv, conv, colb, [&](const char* src, char* out) {
            convert_column(kr, w, b->type, src, K, q8, (ActSb*)out, tmp);
        });
    }
    const size_t block_bytes = type_size(w);
    const int64_t chunks = (M + kt::kRows - 1) / kt::kRows, col_blocks = (N + kColBlock - 1) / kColBlock;
    const int64_t units = chunks * col_blocks * ne12 * ne13;
    auto run_unit = [&](int64_t u) {
        const int64_t bt = u / (chunks * col_blocks), cb = (u / chunks) % col_blocks;
        const int64_t i12 = bt % ne12, i13 = bt / ne12;
        const int64_t m0 = (u % chunks) * kt::kRows;
        const int rows = (int)std::min<int64_t>(kt::kRows, M - m0);
        const int64_t n0 = cb * kColBlock, n1 = std::min(N, n0 + kColBlock);
        const char* abase = (const char*)a->data + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
        const char* row_ptrs[kt::kRows];
        for (int r = 0; r < rows; ++r) row_ptrs[r] = abase + (m0 + r) * a->nb[1];
        for (int64_t ib = 0; ib < nsb; ++ib) decode(row_ptrs, block_bytes, rows, ib, panel + ib);
        char* dbase = (char*)dst->data + i12 * dst->nb[2] + i13 * dst->nb[3] + m0 * sizeof(float);
        const char* cbase = conv + bt * N * colb;
        float out[kt::kRows * kt::kCols];
        const ActSb* cols[kt::kCols];
        for (int64_t n = n0; n < n1; n += kt::kCols) {
            const int nc = (int)std::min<int64_t>(kt::kCols, n1 - n);
            for (int c = 0; c < nc; ++c) cols[c] = (const ActSb*)(cbase + (n + c) * colb);
            tile(nsb, panel, cols, nc, out);
            for (int c = 0; c < nc; ++c) std::memcpy(dbase + (n + c) * dst->nb[1], out + kt::kRows * c, size_t(rows) * sizeof(float));
        }
    };
    if (priv) mm::run_barrier_free_units(p, units, run_unit);
    else mm::run_mul_mat_units(p, units, false, run_unit);
}

}  // namespace pyggml::cpu
