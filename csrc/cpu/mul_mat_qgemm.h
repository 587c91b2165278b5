// Quantized GEMM for MUL_MAT with many activation columns (prompt processing, verify batches).
// Every output is bit-identical to the dot path's (the tiles repeat the dot kernels' arithmetic,
// mul_mat_kernels.h), so a column's result does not depend on how many columns there are.
//   - b's columns are converted to the weights' vec_dot blocks exactly as the dot path converts
//     them, 8 at a time, and packed into groups of 8 columns (all threads, then a barrier; a small
//     b is packed by every thread for itself, without a barrier);
//   - units (batch, chunk of rows, block of 64 columns): each weight row of the chunk is packed
//     once (decoded) and dotted with the block's groups. Groups small enough for L1 (short
//     rows) go outermost, each dotted with all the chunk's packed rows; larger ones stream from
//     L2 past one packed row at a time;
//   - where the set has a wide tile (the VNNI build's 512-bit form), two rows take two full
//     groups at once, 16 columns a call: per output the same operations, for fewer
//     instructions (K 4096 x M 14336 x N 128, 2 threads: 1.14-1.26x of the two-row tile's
//     rate for q8_0, q4_0, q5_0, iq4_nl, mxfp4);
//   - a last group of 1..4 columns is not padded to 8: those columns keep their converted
//     blocks and take the dot kernel (the same bits, for less work than a padded tile; wider
//     ones cost more in dot kernels than one padded tile on rows already packed).
#pragma once
#include <algorithm>
#include <vector>

#include "cpu/mul_mat_common.h"

namespace pyggml::cpu::mm {

constexpr int64_t kQgMinColumns = 8;             // below: the dot path (4-column kernels)
// q4_1 / q5_1 (q8_1 activations): their dot kernels cost more per column, so a padded tile
// already wins at 6 columns (measured on AVX2); other types break even only at 7 to 8.
constexpr int64_t kQgMinColumnsWithMin = 6;
constexpr int64_t kQgColBlock = 64;              // columns per unit, a multiple of kQgCols
constexpr size_t kQgL1Group = size_t(16) << 10;   // packed groups up to this size stay in L1
constexpr size_t kQgRowsBudget = size_t(256) << 10;  // packed rows of a chunk, groups in L1
constexpr int kQgDotTail = 3;                     // MUL_MAT_ID: a last group this narrow takes dots
constexpr int kQgMatDotTail = 4;                  // MUL_MAT: the same (measured on AVX2)

// Fewest columns for which a (padded) GEMM tile is cheaper than the dot kernels.
inline int64_t qg_min_columns(Type w) {
    return w == Type::Q4_1 || w == Type::Q5_1 ? kQgMinColumnsWithMin : kQgMinColumns;
}

inline bool use_qgemm(const Kernels& kr, const Tensor* dst) {
    const Tensor* a = dst->src[0];
    return is_quantized(a->type) && kr.qg_tile[(int)a->type] && a->ne[0] > 0 && dst->ne[1] >= qg_min_columns(a->type);
}

struct QgShape {
    int64_t K, M, N, ne12, ne13, groups;  // groups of kQgCols columns per batch
    size_t group_bytes, row_bytes, col_bytes;
    int tail;  // columns of the last group left to the dot kernel (0: every group is packed)
    bool priv, groups_outer;
    int64_t max_rows;  // rows per unit at most (all packed at once when groups_outer)
};

inline QgShape qg_shape(const Kernels& kr, const Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const Type vt = vec_dot_type(a->type);
    QgShape s;
    s.K = a->ne[0];
    s.M = a->ne[1];
    s.N = dst->ne[1];
    s.ne12 = b->ne[2];
    s.ne13 = b->ne[3];
    s.groups = (s.N + kQgCols - 1) / kQgCols;
    const int64_t nq = s.K / type_traits(vt).blck_size;
    s.tail = kr.dot[(int)a->type] && s.N % kQgCols <= kQgMatDotTail ? int(s.N % kQgCols) : 0;
    s.col_bytes = act_col_bytes(a->type, s.K);
    s.group_bytes = std::max(align64(size_t(nq) * kr.qg_act_block_bytes[(int)vt]), size_t(kQgMatDotTail) * s.col_bytes);
    s.row_bytes = align64(size_t(nq) * kr.qg_row_block_bytes[(int)a->type]);
    s.priv = private_conversion(dst);
    s.groups_outer = s.group_bytes <= kQgL1Group;
    s.max_rows = s.groups_outer ? std::clamp<int64_t>(int64_t(kQgRowsBudget / s.row_bytes), 1, 64) : 64;
    return s;
}

// Per thread: packed rows (one, or a chunk's when groups_outer) and 8 converted columns; then
// the packed groups (once, or once per thread when private).
inline size_t qg_thread_bytes(const QgShape& s) {
    return (s.groups_outer ? size_t(s.max_rows) : 2) * s.row_bytes + align64(kQgCols * s.col_bytes);
}
inline size_t qg_groups_bytes(const QgShape& s) { return size_t(s.ne12 * s.ne13 * s.groups) * s.group_bytes; }

inline size_t qgemm_work_size(const Kernels& kr, const Tensor* dst, int nth) {
    const QgShape s = qg_shape(kr, dst);
    nth = std::max(1, nth);
    return kCounterBytes + size_t(nth) * qg_thread_bytes(s) + (s.priv ? size_t(nth) : 1) * qg_groups_bytes(s);
}

// One unit's rows [m0, m1) times its columns [n0, n1) (groups of kQgCols from n0): each row
// packed once (pack_row(m, slot)), then the tiles: `wide(m, rows, n)` on two rows and two full
// groups where `wide_ok`, `two(m, rows, n)` on two rows and a group where `pairs`, `one(m, row,
// n)` else. groups_outer: every row of the unit packed first, each group (or pair of groups)
// then dotted with all of them (it stays in L1); otherwise one or two rows at a time, dotted
// with every group. MUL_MAT's and MUL_MAT_ID's GEMM units.
template <class PackRow, class One, class Two, class Wide>
void qg_sweep(bool groups_outer, bool pairs, bool wide_ok, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
              char* packed_rows, size_t row_bytes, PackRow pack_row, One one, Two two, Wide wide) {
    auto span = [&](int64_t n) { return wide_ok && pairs && n + 2 * kQgCols <= n1 ? 2 * kQgCols : kQgCols; };
    auto row_pair = [&](int64_t m, const char* rows, int64_t n, int64_t width) {
        if (width > kQgCols) return wide(m, rows, n);
        two(m, rows, n);
    };
    if (groups_outer) {
        for (int64_t m = m0; m < m1; ++m) pack_row(m, packed_rows + (m - m0) * row_bytes);
        for (int64_t n = n0, width = span(n0); n < n1; n += width, width = span(n)) {
            int64_t m = m0;
            for (; pairs && m + 1 < m1; m += 2) row_pair(m, packed_rows + (m - m0) * row_bytes, n, width);
            for (; m < m1; ++m)
                for (int64_t c = 0; c < width; c += kQgCols) one(m, packed_rows + (m - m0) * row_bytes, n + c);
        }
        return;
    }
    for (int64_t m = m0, nr; m < m1; m += nr) {
        nr = pairs && m + 1 < m1 ? 2 : 1;
        for (int r = 0; r < nr; ++r) pack_row(m + r, packed_rows + r * row_bytes);
        for (int64_t n = n0, width = span(n0); n < n1; n += width, width = span(n)) {
            if (nr == 2) {
                row_pair(m, packed_rows, n, width);
                continue;
            }
            for (int64_t c = 0; c < width; c += kQgCols) one(m, packed_rows, n + c);
        }
    }
}

// The weight rows [0, M) of one matrix, `stride` bytes apart, packed for the tiles: row m packed
// into `slot` after asking, where the matrix streams from memory, for row m + 2 (the next pair
// of rows; measured: K 4096 x M 14336 at 16 / 24 columns, 2 threads, q4_K 1.12x, q6_K
// 1.10-1.16x, q8_0 1.10x the rate; 2 and 4 rows ahead alike).
inline auto qg_row_packer(QgPackRowFn pack, const char* abase, size_t stride, const Tensor* a, int64_t M,
                          const float* aux) {
    const size_t bytes = a->row_bytes();
    const bool streamed = size_t(M) * stride > kStreamedWeightBytes;
    return [=](int64_t m, char* slot) {
        if (streamed && m + 2 < M) prefetch_to_l2(abase + (m + 2) * stride, bytes);
        pack(abase + m * stride, a->ne[0], slot, aux);
    };
}

inline void qgemm_forward(const ComputeParams& p, Tensor* dst, const Kernels& kr, const float* aux) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const Type w = a->type;
    const QgShape s = qg_shape(kr, dst);
    const int64_t r2 = s.ne12 / a->ne[2], r3 = s.ne13 / a->ne[3];
    char* mine = (char*)p.wdata + kCounterBytes + size_t(p.ith) * qg_thread_bytes(s);
    char* packed_rows = mine;
    char* cols = mine + (s.groups_outer ? size_t(s.max_rows) : 1) * s.row_bytes;
    char* groups = (char*)p.wdata + kCounterBytes + size_t(p.nth) * qg_thread_bytes(s) +
                   (s.priv ? size_t(p.ith) * qg_groups_bytes(s) : 0);
    const QgPackActFn pack_act = kr.qg_pack_act[(int)vec_dot_type(w)];
    const QgPackRowFn pack_row = kr.qg_pack_row[(int)w];
    const QgTileFn tile = kr.qg_tile[(int)w];
    const QgTile2Fn tile2 = kr.qg_tile2[(int)w];
    const QgTileWideFn wide = kr.qg_tile_wide[(int)w];

    {  // group (n / 8, i12, i13) -> groups + ((i13 * ne12 + i12) * groups + n / 8) * group_bytes
        std::vector<float> tmp;
        int64_t g0 = 0, g1 = s.groups * s.ne12 * s.ne13;
        if (!s.priv) split_range(g1, p.ith, p.nth, g0, g1);
        for (int64_t gi = g0; gi < g1; ++gi) {
            const int64_t bt = gi / s.groups, n0 = (gi % s.groups) * kQgCols;
            const int64_t i12 = bt % s.ne12, i13 = bt / s.ne12;
            const int nc = (int)std::min<int64_t>(kQgCols, s.N - n0);
            char* slot = groups + gi * s.group_bytes;
            const bool dot_tail = nc == s.tail;  // the tail's converted columns stay as they are
            for (int c = 0; c < nc; ++c)
                convert_act(kr, w, b->type, b->row(n0 + c, i12, i13), s.K, (dot_tail ? slot : cols) + c * s.col_bytes, tmp);
            if (!dot_tail) pack_act(cols, s.col_bytes, nc, s.K, slot);
        }
    }

    const int64_t col_blocks = (s.N + kQgColBlock - 1) / kQgColBlock;
    const int64_t nbatch = s.ne12 * s.ne13;
    const int64_t want_units = int64_t(p.nth) * 16;
    const int64_t rows = std::clamp<int64_t>(s.M * nbatch * col_blocks / want_units, 1, s.max_rows);
    const int64_t chunks = (s.M + rows - 1) / rows, units = chunks * col_blocks * nbatch;
    float out[4 * kQgCols];
    auto run_unit = [&](int64_t u) {
        const int64_t bt = u / (chunks * col_blocks), cb = (u / chunks) % col_blocks;
        const int64_t i12 = bt % s.ne12, i13 = bt / s.ne12;
        const int64_t m0 = (u % chunks) * rows, m1 = std::min(s.M, m0 + rows);
        const int64_t n0 = cb * kQgColBlock, n1 = std::min(s.N, n0 + kQgColBlock);
        const char* abase = (const char*)a->data + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
        char* dbase = (char*)dst->data + i12 * dst->nb[2] + i13 * dst->nb[3];
        const char* gbase = groups + bt * s.groups * s.group_bytes;
        auto one = [&](int64_t m, const char* row, int64_t n) {
            const int nc = (int)std::min<int64_t>(kQgCols, n1 - n);
            const char* slot = gbase + (n / kQgCols) * s.group_bytes;
            if (nc == s.tail) kr.dot[(int)w](s.K, abase + m * a->nb[1], slot, s.col_bytes, nc, out, aux);
            else tile(s.K, row, slot, out);
            char* d = dbase + m * sizeof(float) + n * dst->nb[1];
            for (int c = 0; c < nc; ++c) *(float*)(d + c * dst->nb[1]) = out[c];
        };
        // rows m, m + 1 packed row_bytes apart at `rows` (the dot tail: row by row)
        auto two = [&](int64_t m, const char* rows, int64_t n) {
            const int nc = (int)std::min<int64_t>(kQgCols, n1 - n);
            if (nc == s.tail) {
                one(m, rows, n);
                one(m + 1, rows + s.row_bytes, n);
                return;
            }
            tile2(s.K, rows, s.row_bytes, gbase + (n / kQgCols) * s.group_bytes, out);
            for (int r = 0; r < 2; ++r) {
                char* d = dbase + (m + r) * sizeof(float) + n * dst->nb[1];
                for (int c = 0; c < nc; ++c) *(float*)(d + c * dst->nb[1]) = out[kQgCols * r + c];
            }
        };
        // rows m, m + 1 times the two full groups from column n (16 columns)
        auto two_wide = [&](int64_t m, const char* rows, int64_t n) {
            wide(s.K, rows, s.row_bytes, gbase + (n / kQgCols) * s.group_bytes, s.group_bytes, out);
            for (int r = 0; r < 2; ++r) {
                char* d = dbase + (m + r) * sizeof(float) + n * dst->nb[1];
                for (int c = 0; c < 2 * kQgCols; ++c) *(float*)(d + c * dst->nb[1]) = out[2 * kQgCols * r + c];
            }
        };
        qg_sweep(s.groups_outer, tile2 != nullptr, wide != nullptr, m0, m1, n0, n1, packed_rows, s.row_bytes,
                 qg_row_packer(pack_row, abase, a->nb[1], a, s.M, aux), one, two, two_wide);
    };
    run_mul_mat_units(p, units, s.priv, run_unit);
}

}  // namespace pyggml::cpu::mm
