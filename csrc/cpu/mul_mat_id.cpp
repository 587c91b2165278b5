// CPU kernel of MUL_MAT_ID (mixture-of-experts matmul): out[:, e, t] = as[ids[e, t]] @ b[:, e % Nb, t].
//
// The (slot e, token t) pairs are grouped by expert, so an expert's tokens share every weight
// row load: its columns are converted once, contiguously in expert order, and each expert is a
// small matmul over the gathered columns, run by the tiles of the MUL_MAT drivers:
//   - block weights with a quantized GEMM (mul_mat_qgemm.h), on experts with at least
//     kQgMinColumns tokens: groups of 8 columns packed once, each weight row packed (decoded)
//     once per unit and dotted with the unit's groups; a last group of 1..3 columns and the
//     experts with fewer tokens take the dot kernels (1..4 columns, two rows where the set
//     has two-row dots);
//   - float weights (mul_mat_float.h): the direct tiles of up to 8 rows x 4 columns;
//   - K-quant weights at the avx512 level (quant_ktile.h), on experts with at least
//     kt::kMinColumns tokens: MUL_MAT's tile path, 16-row panels decoded once per unit.
// Every output of an expert under kt::kMinColumns tokens is bitwise what the dot kernel gives
// for that weight row and column (the tiles repeat its arithmetic in its order), so a token's
// result is the same however the batch groups tokens onto experts and whatever the thread
// count (speculative decoding verifies a batch against tokens decoded alone). From
// kt::kMinColumns tokens on, an expert's outputs are the K-quant tiles' bits, again the same
// whatever the token count and the threads (MUL_MAT's rule, per expert). Units (expert, row
// chunk, column block) are taken from a shared counter; experts without tokens have none. As
// shares of a barrier-free step the threads also claim the column groups to convert
// (mm::convert_claimed), so none waits for a thread that has not started.
#include <algorithm>
#include <atomic>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/mul_mat_common.h"
#include "cpu/mul_mat_float.h"
#include "cpu/mul_mat_qgemm.h"
#include "cpu/quant_ktile.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

using namespace mm;

namespace {

// Columns per unit (a multiple of the tiles' 4 and 8 columns): an expert's block of
// activations stays in L2 while its weight rows stream past it once.
constexpr int64_t kColBlock = 64;

// Rows per unit: enough units for dynamic balance, at most `max_rows` (even, at least 2); even,
// so the two-row kernels pair every row of a unit (visit_row_pairs), and a multiple of the float tiles' 8 rows where
// it can be.
int64_t rows_per_unit(int64_t M, int64_t n_groups, int nth, int64_t max_rows) {
    const int64_t want_units = int64_t(nth) * 16;
    int64_t r = std::clamp<int64_t>(M * n_groups / want_units, 1, std::min<int64_t>(max_rows, std::max<int64_t>(M, 1)));
    r += r & 1;
    return r >= kMaxDirectRows ? r / kMaxDirectRows * kMaxDirectRows : r;
}

// Sizes of the quantized GEMM's packed rows and groups for weights of type w (K values a row).
struct QgSizes {
    bool on = false;
    size_t group_bytes = 0, row_bytes = 0;
    bool groups_outer = false;
    int64_t max_rows = 64;
};

QgSizes qg_sizes(const Kernels& kr, Type w, int64_t K) {
    QgSizes s;
    s.on = is_quantized(w) && kr.qg_tile[(int)w] && kr.dot[(int)w] && K > 0;
    if (!s.on) return s;
    const Type vt = vec_dot_type(w);
    const int64_t nq = K / type_traits(vt).blck_size;
    s.group_bytes = align64(size_t(nq) * kr.qg_act_block_bytes[(int)vt]);
    s.row_bytes = align64(size_t(nq) * kr.qg_row_block_bytes[(int)w]);
    s.groups_outer = s.group_bytes <= kQgL1Group;
    s.max_rows = s.groups_outer ? std::clamp<int64_t>(int64_t(kQgRowsBudget / s.row_bytes), 2, 64) & ~int64_t(1) : 64;
    return s;
}

// Packed groups at most: sum over experts of ceil(count / 8), with at most min(E, slots) experts used.
int64_t max_groups(int64_t slots, int64_t E) {
    const int64_t used = std::min(E, slots);
    return (slots + (kQgCols - 1) * used) / kQgCols;
}

size_t qg_thread_bytes(const QgSizes& q) { return (q.groups_outer ? size_t(q.max_rows) : 2) * q.row_bytes; }

// The K-quant tile path where these weights and activations can take it (experts with enough
// tokens then do). A tile expert's column holds ActSb records, so every column gets room for them.
struct KtSizes {
    bool on = false;
    kt::TypeKernels k{};
};
KtSizes kt_sizes(const Tensor* dst) {
    KtSizes s;
    s.on = kt::kernels_for(dst->src[0], dst->src[1], s.k);
    return s;
}
size_t col_bytes(const Kernels& kr, const KtSizes& t, Type w, int64_t K) {
    const size_t dots = dot_col_bytes(kr, w, K);  // the extras' room only where w has a dot1x or dot2x
    return t.on ? std::max(dots, kt::act_col_bytes(K)) : dots;
}
// Per thread: the packed weight rows of the GEMM or a tile panel (a unit takes one path), or,
// while converting, a q8_K column for the tiles (the panel's room: conversion ends before units).
size_t thread_bytes(const QgSizes& q, const KtSizes& t, int64_t K) {
    return std::max(qg_thread_bytes(q), t.on ? size_t(K / 256) * sizeof(kt::PanelSb) : size_t(0));
}

struct Layout {  // offsets into wdata
    size_t conv, groups, rows;
};

Layout layout(const QgSizes& q, int64_t slots, int64_t E, size_t colb) {
    Layout l;
    l.conv = kCounterBytes;
    l.groups = l.conv + align64(size_t(slots) * colb);
    l.rows = l.groups + (q.on ? size_t(max_groups(slots, E)) * q.group_bytes : 0);
    return l;
}

}  // namespace

// Every thread builds the same grouping, converts (and packs) its share of the experts' column
// groups straight into expert order (claimed, or a contiguous run), then takes units.
void cpu_forward_MUL_MAT_ID(const ComputeParams& p, Tensor* dst) {
    const Tensor* as = dst->src[0];
    const Tensor* b = dst->src[1];
    const Tensor* ids = dst->src[2];
    const Kernels& kr = kernels_for(simd::cpu_isa());
    const Type w = as->type;
    const int64_t K = as->ne[0], M = as->ne[1], E = as->ne[2];
    const int64_t U = ids->ne[0], T = ids->ne[1], Nb = b->ne[1];

    // Validation and grouping run on every thread before any conversion, so an error is
    // symmetric: no share claims a group, nobody waits for one.
    std::vector<int64_t> count(E + 1, 0);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < U; ++e) {
            const int32_t x = *(const int32_t*)((const char*)ids->data + e * ids->nb[0] + t * ids->nb[1]);
            if (x < 0 || x >= E)
                throw_shape(OpMessage("mul_mat_id") << "ids[" << e << ", " << t << "]=" << x
                                                    << " is out of range [0, " << E << ")");
            ++count[x];
        }
    std::vector<int64_t> start(E + 1, 0), first_group(E + 1, 0);
    for (int64_t x = 0; x < E; ++x) {
        start[x + 1] = start[x] + count[x];
        first_group[x + 1] = first_group[x] + (count[x] + kQgCols - 1) / kQgCols;
    }
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    std::vector<int32_t> slot_e(U * T), slot_t(U * T);  // sorted slot -> (e, t)
    for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < U; ++e) {
            const int32_t x = *(const int32_t*)((const char*)ids->data + e * ids->nb[0] + t * ids->nb[1]);
            const int64_t s = fill[x]++;
            slot_e[s] = (int32_t)e;
            slot_t[s] = (int32_t)t;
        }
    float scale[256];
    if (w == Type::NVFP4) nvfp4_scale_table(scale);

    const QgSizes qg = qg_sizes(kr, w, K);
    const KtSizes kts = kt_sizes(dst);
    const bool float_tiles = is_float_weight(w);
    const FloatKernels& fk = float_kernels_for(simd::cpu_isa(), w);
    auto tile_expert = [&](int64_t x) { return kts.on && count[x] >= kt::kMinColumns; };
    auto gemm_expert = [&](int64_t x) { return qg.on && count[x] >= kQgMinColumns && !tile_expert(x); };
    // the dot kernels of an expert's columns (MUL_MAT's choice for its token count; their
    // extras are converted with the columns)
    auto expert_dots = [&](int64_t x) { return choose_dots(kr, w, K, M, count[x], is_quantized(w)); };
    const size_t colb = col_bytes(kr, kts, w, K), blocks_bytes = act_col_bytes(w, K);
    const Layout lay = layout(qg, U * T, E, colb);
    char* conv = (char*)p.wdata + lay.conv;
    char* groups = (char*)p.wdata + lay.groups;
    char* packed_rows = (char*)p.wdata + lay.rows + size_t(p.ith) * thread_bytes(qg, kts, K);
    kt::PanelSb* panel = (kt::PanelSb*)packed_rows;
    // Shares of a barrier-free step (mul_mat_id_barrier_free) claim the groups to convert and
    // then the units, with no barrier; a gang's threads each convert a contiguous run of groups
    // and meet once.
    const bool claimed = p.share_slots != nullptr;
    {
        std::vector<float> tmp;
        // group g of expert x: slots [start[x] + 8 (g - first_group[x]), +8)
        auto convert_group = [&](int64_t g) {
            const int64_t x = std::upper_bound(first_group.begin(), first_group.end(), g) - first_group.begin() - 1;
            const int64_t s0 = start[x] + (g - first_group[x]) * kQgCols, s1 = std::min(start[x + 1], s0 + kQgCols);
            for (int64_t s = s0; s < s1; ++s) {
                const char* brow = b->row(slot_e[s] % Nb, slot_t[s]);
                if (tile_expert(x)) kt::convert_column(kr, w, b->type, brow, K, packed_rows, (kt::ActSb*)(conv + s * colb), tmp);
                else {
                    convert_act(kr, w, b->type, brow, K, conv + s * colb, tmp);
                    if (expert_dots(x).extras())
                        act_extras(w, (const BlockQ8_0*)(conv + s * colb), K, conv + s * colb + blocks_bytes);
                }
            }
            if (gemm_expert(x) && s1 - s0 > kQgDotTail)
                kr.qg_pack_act[(int)vec_dot_type(w)](conv + s0 * colb, colb, int(s1 - s0), K, groups + g * qg.group_bytes);
        };
        if (claimed) {
            convert_claimed(p, first_group[E], convert_group);
        } else {
            int64_t g0, g1;
            split_range(first_group[E], p.ith, p.nth, g0, g1);
            for (int64_t g = g0; g < g1; ++g) convert_group(g);
        }
    }

    const int64_t rows = rows_per_unit(M, std::max<int64_t>(1, std::min<int64_t>(E, U * T)), p.nth,
                                       qg.max_rows);
    const int64_t chunks = (M + rows - 1) / rows, tile_chunks = (M + kt::kRows - 1) / kt::kRows;
    std::vector<int64_t> first_unit(E + 1, 0);
    for (int64_t x = 0; x < E; ++x)
        first_unit[x + 1] = first_unit[x] + (tile_expert(x) ? tile_chunks * ((count[x] + kt::kColBlock - 1) / kt::kColBlock)
                                                            : chunks * ((count[x] + kColBlock - 1) / kColBlock));

    auto store = [&](int64_t m, int64_t s, float v) {
        *(float*)((char*)dst->data + m * sizeof(float) + slot_e[s] * dst->nb[1] + slot_t[s] * dst->nb[2]) = v;
    };
    // Dot kernels over slots [s0, s1) of expert x, rows [m0, m1): MUL_MAT's choice for the
    // expert's token count.
    auto run_dots = [&](const char* abase, int64_t x, int64_t m0, int64_t m1, int64_t s0, int64_t s1) {
        float out[8];
        const DotChoice dots = expert_dots(x);
        visit_row_pairs(m0, m1, dots.pairs(), [&](int64_t m, int64_t half) {
            const char* arow = abase + m * as->nb[1];
            for (int64_t s = s0; s < s1; s += 4) {
                const int nc = (int)std::min<int64_t>(4, s1 - s);
                dots.run(kr, w, K, arow, half * as->nb[1], conv + s * colb, colb, blocks_bytes, nc, out, scale);
                for (int j = 0; j < nc; ++j) {
                    store(m, s + j, out[j]);
                    if (half) store(m + half, s + j, out[4 + j]);
                }
            }
        });
    };
    auto run_float = [&](const char* abase, int64_t m0, int64_t m1, int64_t s0, int64_t s1) {
        float out[kMaxDirectRows * 4];
        const FloatDirectFn tile = fk.direct[float_kind(w)];
        for (int64_t s = s0; s < s1; s += fk.direct_cols) {
            const int nc = (int)std::min<int64_t>(fk.direct_cols, s1 - s);
            for (int64_t m = m0; m < m1; m += fk.direct_rows[nc]) {
                const int nr = (int)std::min<int64_t>(fk.direct_rows[nc], m1 - m);
                tile(K, abase + m * as->nb[1], as->nb[1], nr, conv + s * colb, colb, nc, out);
                for (int j = 0; j < nc; ++j)
                    for (int r = 0; r < nr; ++r) store(m + r, s + j, out[r * 4 + j]);
            }
        }
    };
    auto run_gemm = [&](const char* abase, int64_t x, int64_t m0, int64_t m1, int64_t s0, int64_t s1) {
        float out[4 * kQgCols];
        const QgTileFn tile = kr.qg_tile[(int)w];
        const QgTile2Fn tile2 = kr.qg_tile2[(int)w];
        const QgTileWideFn wide = kr.qg_tile_wide[(int)w];
        const QgPackRowFn pack_row = kr.qg_pack_row[(int)w];
        auto one = [&](int64_t m, const char* row, int64_t s) {
            const int nc = (int)std::min<int64_t>(kQgCols, s1 - s);
            if (nc <= kQgDotTail) return run_dots(abase, x, m, m + 1, s, s1);
            tile(K, row, groups + (first_group[x] + (s - start[x]) / kQgCols) * qg.group_bytes, out);
            for (int c = 0; c < nc; ++c) store(m, s + c, out[c]);
        };
        // rows m, m + 1 packed row_bytes apart (the dot tail: row by row)
        auto two = [&](int64_t m, const char* rows, int64_t s) {
            const int nc = (int)std::min<int64_t>(kQgCols, s1 - s);
            if (nc <= kQgDotTail) return run_dots(abase, x, m, m + 2, s, s1);
            tile2(K, rows, qg.row_bytes, groups + (first_group[x] + (s - start[x]) / kQgCols) * qg.group_bytes, out);
            for (int r = 0; r < 2; ++r)
                for (int c = 0; c < nc; ++c) store(m + r, s + c, out[kQgCols * r + c]);
        };
        // rows m, m + 1 times the two full groups from slot s (MUL_MAT's wide tile)
        auto two_wide = [&](int64_t m, const char* rows, int64_t s) {
            wide(K, rows, qg.row_bytes, groups + (first_group[x] + (s - start[x]) / kQgCols) * qg.group_bytes,
                 qg.group_bytes, out);
            for (int r = 0; r < 2; ++r)
                for (int c = 0; c < 2 * kQgCols; ++c) store(m + r, s + c, out[2 * kQgCols * r + c]);
        };
        qg_sweep(qg.groups_outer, tile2 != nullptr, wide != nullptr, m0, m1, s0, s1, packed_rows, qg.row_bytes,
                 qg_row_packer(pack_row, abase, as->nb[1], as, M, scale), one, two, two_wide);
    };
    // A tile unit: one 16-row panel, decoded once, times up to kt::kColBlock of the expert's slots.
    auto run_tiles = [&](const char* abase, int64_t local, int64_t x) {
        const int64_t m0 = (local % tile_chunks) * kt::kRows, s0 = start[x] + local / tile_chunks * kt::kColBlock;
        const int nr = (int)std::min<int64_t>(kt::kRows, M - m0);
        kt::decode_panel(kts.k.decode, abase, as->nb[1], type_size(w), m0, nr, K / 256, panel, M);
        kt::tile_columns(
            kts.k.tile, K / 256, panel, s0, std::min(start[x + 1], s0 + kt::kColBlock),
            [&](int64_t s) { return (const kt::ActSb*)(conv + s * colb); },
            [&](int64_t s, const float* v) {
                char* d = (char*)dst->data + m0 * sizeof(float) + slot_e[s] * dst->nb[1] + slot_t[s] * dst->nb[2];
                std::copy(v, v + nr, (float*)d);
            });
    };
    auto run_unit = [&](int64_t u) {
        const int64_t x = std::upper_bound(first_unit.begin(), first_unit.end(), u) - first_unit.begin() - 1;
        const char* abase = (const char*)as->data + x * as->nb[2];
        if (tile_expert(x)) return run_tiles(abase, u - first_unit[x], x);
        const int64_t local = u - first_unit[x], cb = local / chunks;
        const int64_t m0 = (local % chunks) * rows, m1 = std::min(M, m0 + rows);
        const int64_t s0 = start[x] + cb * kColBlock, s1 = std::min(start[x + 1], s0 + kColBlock);
        if (gemm_expert(x)) run_gemm(abase, x, m0, m1, s0, s1);
        else if (float_tiles) run_float(abase, m0, m1, s0, s1);
        else run_dots(abase, x, m0, m1, s0, s1);
    };
    // every share claims from the front: the tiles' panels decode slower going down the rows
    if (claimed) run_barrier_free_units(p, first_unit[E], run_unit, false);
    else run_mul_mat_units(p, first_unit[E], false, run_unit);
}

// Shares claim the conversion's groups (at most one a slot) and the units: no barrier.
bool mul_mat_id_barrier_free(const Tensor* dst) {
    const Tensor* ids = dst->src[2];
    return ids->ne[0] * ids->ne[1] < kMaxClaimedItems;
}

size_t cpu_work_size_MUL_MAT_ID(const Tensor* dst, int n_threads) {
    const Tensor* as = dst->src[0];
    const Tensor* ids = dst->src[2];
    const int64_t K = as->ne[0];
    const QgSizes qg = qg_sizes(kernels_for(simd::cpu_isa()), as->type, K);
    const KtSizes kts = kt_sizes(dst);
    const Layout l = layout(qg, ids->ne[0] * ids->ne[1], as->ne[2], col_bytes(kernels_for(simd::cpu_isa()), kts, as->type, K));
    return l.rows + size_t(std::max(1, n_threads)) * thread_bytes(qg, kts, K);
}

}  // namespace pyggml::cpu
