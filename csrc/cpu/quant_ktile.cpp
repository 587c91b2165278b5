// The K-quant tile path (quant_ktile.h): activation conversion, panels, and the MUL_MAT driver.
#include "cpu/quant_ktile.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/ktile_timeline.h"
#include "cpu/mul_mat_common.h"
#include "pyggml/quant_blocks.h"

namespace pyggml::cpu {

using kt::ActSb;
using kt::PanelSb;

namespace {

// Row chunks a thread from which a MUL_MAT unit takes all of b's columns (the last unit of a
// late thread is then still a small part of its share).
constexpr int64_t kChunksPerThread = 16;

size_t col_bytes(const Tensor* dst) { return kt::act_col_bytes(dst->src[0]->ne[0]); }
size_t conv_bytes(const Tensor* dst) {
    const Tensor* b = dst->src[1];
    return mm::align64(size_t(b->ne[1] * b->ne[2] * b->ne[3]) * col_bytes(dst));
}
// Per thread: one panel of kRows rows over all of K, and one q8_K column.
size_t thread_bytes(const Tensor* dst) {
    const int64_t nsb = dst->src[0]->ne[0] / 256;
    return size_t(nsb) * sizeof(PanelSb) + mm::align64(size_t(nsb) * sizeof(BlockQ8_K));
}

}  // namespace

namespace kt {

bool kernels_for(const Tensor* a, const Tensor* b, TypeKernels& out) {
    if (a->ne[0] <= 0 || a->ne[0] % 256 || simd::cpu_isa() < simd::Isa::Avx512) return false;
    if (!(b->type == Type::F32 || b->type == Type::F16 || b->type == Type::BF16)) return false;
    if (b->nb[0] != type_size(b->type)) return false;
    const Kernels& k = kernels_avx512();
    out = {k.decode[(int)a->type], k.tile[(int)a->type]};
    return out.decode && out.tile;
}

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

void decode_panel(DecodeFn decode, const char* abase, size_t row_stride, size_t block_bytes, int64_t m0, int rows,
                  int64_t nsb, PanelSb* panel, int64_t m_end) {
    const char* row_ptrs[kRows];
    for (int r = 0; r < rows; ++r) row_ptrs[r] = abase + (m0 + r) * row_stride;
    for (int64_t ib = 0; ib < nsb; ++ib) decode(row_ptrs, block_bytes, rows, ib, panel + ib);
    // Weights bigger than L2 stream from memory: the next panel's rows start towards L2 while
    // this one is tiled. That is this thread's next unit on one thread; where threads share a
    // counter it is often another's, which then reads them from this core's cache (measured:
    // per-unit decode time at 2 threads as at 1; claiming 4 neighbours at once no faster).
    // Smaller weights stay in L2 across units.
    if (size_t(m_end) * row_stride <= mm::kStreamedWeightBytes) return;
    for (int r = 0; r < kRows && m0 + kRows + r < m_end; ++r)
        prefetch_to_l2(abase + (m0 + kRows + r) * row_stride, size_t(nsb) * block_bytes);
}

}  // namespace kt

bool use_ktile(const Tensor* dst) {
    kt::TypeKernels k;
    return dst->ne[1] >= kt::kMinColumns && dst->nb[0] == sizeof(float) && kt::kernels_for(dst->src[0], dst->src[1], k);
}

size_t ktile_mul_mat_work_size(const Tensor* dst, int n_threads) {
    n_threads = std::max(1, n_threads);
    return mm::kCounterBytes + size_t(n_threads) * thread_bytes(dst) +
           (mm::private_conversion(dst) ? size_t(n_threads) : 1) * conv_bytes(dst);
}

// Few columns: each share converts them all; more: the shares claim them (a step with shares).
bool ktile_mul_mat_barrier_free(const Tensor* dst) {
    return mm::private_conversion(dst) || mm::claimed_conversion_fits(dst->src[1]);
}

void ktile_mul_mat_forward(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const Type w = a->type;
    const int64_t K = a->ne[0], M = a->ne[1], N = dst->ne[1], nsb = K / 256;
    const int64_t ne12 = b->ne[2], ne13 = b->ne[3], r2 = ne12 / a->ne[2], r3 = ne13 / a->ne[3];
    kt::TypeKernels kk;
    kt::kernels_for(a, b, kk);
    const mm::Kernels& kr = mm::kernels_for(simd::cpu_isa());
    const bool priv = mm::private_conversion(dst);
    const bool claimed = !priv && p.share_slots;  // shares of a barrier-free step: no barrier
    const size_t colb = col_bytes(dst);
    char* mine = (char*)p.wdata + mm::kCounterBytes + size_t(p.ith) * thread_bytes(dst);
    PanelSb* panel = (PanelSb*)mine;
    char* q8 = mine + size_t(nsb) * sizeof(PanelSb);
    char* conv = (char*)p.wdata + mm::kCounterBytes + size_t(p.nth) * thread_bytes(dst) +
                 (priv ? size_t(p.ith) * conv_bytes(dst) : 0);
    kt::Timeline timeline(p.ith);
    {
        std::vector<float> tmp;
        auto convert_one = [&](const char* src, char* out) {
            kt::convert_column(kr, w, b->type, src, K, q8, (ActSb*)out, tmp);
            timeline.column();
        };
        if (claimed) mm::convert_columns_claimed(p, b, conv, colb, convert_one);
        else mm::convert_columns(p, b, priv, conv, colb, convert_one);
    }
    timeline.converted();
    const size_t block_bytes = type_size(w);
    // Columns a unit: all of them where the row chunks alone give every thread many units (a
    // panel is then decoded once, not once per kColBlock columns), else kColBlock.
    const int64_t chunks = (M + kt::kRows - 1) / kt::kRows;
    const int64_t col_block = chunks * ne12 * ne13 >= kChunksPerThread * p.nth ? N : kt::kColBlock;
    const int64_t col_blocks = (N + col_block - 1) / col_block;
    const int64_t units = chunks * col_blocks * ne12 * ne13;
    auto run_unit = [&](int64_t u) {
        const int64_t bt = u / (chunks * col_blocks), cb = (u / chunks) % col_blocks;
        const int64_t i12 = bt % ne12, i13 = bt / ne12;
        const int64_t m0 = (u % chunks) * kt::kRows;
        const int rows = (int)std::min<int64_t>(kt::kRows, M - m0);
        const int64_t n0 = cb * col_block, n1 = std::min(N, n0 + col_block);
        const char* abase = (const char*)a->data + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
        timeline.unit_start();
        kt::decode_panel(kk.decode, abase, a->nb[1], block_bytes, m0, rows, nsb, panel, M);
        timeline.unit_decoded();
        char* dbase = (char*)dst->data + i12 * dst->nb[2] + i13 * dst->nb[3] + m0 * sizeof(float);
        const char* cbase = conv + bt * N * colb;
        kt::tile_columns(
            kk.tile, nsb, panel, n0, n1, [&](int64_t n) { return (const ActSb*)(cbase + n * colb); },
            [&](int64_t n, const float* v) { std::memcpy(dbase + n * dst->nb[1], v, size_t(rows) * sizeof(float)); });
        timeline.unit_done();
    };
    // every share claims from the front: panels decoded going down the rows (a share claiming
    // from the back) took 1.6x the decode time of going up, at 2 threads
    if (priv || claimed) mm::run_barrier_free_units(p, units, run_unit, false);
    else mm::run_mul_mat_units(p, units, false, run_unit);
}

}  // namespace pyggml::cpu
