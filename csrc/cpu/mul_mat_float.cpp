// CPU driver of MUL_MAT with f32 / f16 / bf16 weights, in the canonical order of
// mul_mat_float.h on both of its paths (so the path switch changes no result):
//   - direct (few columns): b converted once where needed, then units of (batch, 64-column
//     block, row chunk); tiles of up to 8 rows x 4 columns read weights and b in place;
//   - packed GEMM (many columns): b's columns are packed into panels of nr columns (all of K,
//     zero-padded) by all threads; then tasks of (batch piece, mc rows, nc columns) are taken
//     from a shared counter: per K block a task widens its weights into panels of mr rows
//     (kept in L2) and every column panel (kept in L1) sweeps them.
//     When all of b's panels fit the pack budget at once the node has no barrier (a shared
//     step): the threads claim panels to pack and then tasks from one counter, and a task waits
//     only for the panel it needs next, so a thread that wakes late or is preempted delays
//     nobody (on 2 loaded cores the packing barrier cost up to 1.5 ms of a 17 ms 1024^3 GEMM).
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "cpu/convert.h"
#include "cpu/mul_mat_common.h"
#include "cpu/mul_mat_float.h"

namespace pyggml::cpu {

using namespace mm;

namespace {

// From this many columns the packed GEMM is faster than the direct tiles, for every weight type
// (AVX2, bench/compare_ggml.py-sized weights, K = M = 4096, and the tiny F16 model's prompt:
// f16 weights read in place and widened in registers were ahead of the dot-product tiles'
// packing up to a thousand columns, and are level with or behind the outer-product tiles from
// 64: the tiny F16 model's pp128 / pp512 ran 20-30% faster packed).
constexpr int64_t kPackedMinColumns = 64;
constexpr int64_t kDirectColBlock = 64;
// Weights of at most this many values (a small model's projections: 128 x 384 is 192 KiB in f32)
// stay in L2 whole, so the packed GEMM's re-sweeps of the column panels cost little there: it
// cuts them into row blocks of about kSmallWeightBlockRows instead of mc, which gives 2 threads
// 4 tasks of a 128-row weight instead of 2 (balance) and, at K <= 128, a weight block that stays
// in L1 (measured with bench/compare_prompt_ops.py's f32 shapes, 2 threads: 3-15% faster at K 128,
// even at K 384).
constexpr int64_t kSmallWeightValues = int64_t(1) << 16;
constexpr int64_t kSmallWeightBlockRows = 32;
constexpr size_t kPackBudget = size_t(32) << 20;
constexpr int64_t kMinTasksPerThread = 8;

const FloatKernels& float_kernels(const Tensor* dst) { return float_kernels_for(simd::cpu_isa(), dst->src[0]->type); }

bool use_packed(const Tensor* dst) {
    const Tensor* a = dst->src[0];
    return a->ne[0] > 0 && a->ne[1] >= 16 && dst->ne[1] >= kPackedMinColumns;
}

// ---- direct path

// f16 weights take their columns as f16 (the values ggml rounds them to, half the bytes), bf16
// weights dotted as bf16 pairs as bf16; f32 / other bf16 weights as f32 values.
Type column_type(const Tensor* dst) {
    const Type w = dst->src[0]->type;
    return w == Type::F16 ? Type::F16 : w == Type::BF16 && float_kernels(dst).direct_bf16b ? Type::BF16 : Type::F32;
}
bool needs_conversion(const Tensor* dst) {
    const Type ct = column_type(dst);
    return !(dst->src[1]->type == ct && ct == dst->src[0]->type);
}
size_t column_bytes(const Tensor* dst, int64_t K) { return align64(size_t(K) * type_size(column_type(dst))); }

size_t conv_bytes(const Tensor* dst) {
    const Tensor* b = dst->src[1];
    return size_t(b->ne[1] * b->ne[2] * b->ne[3]) * column_bytes(dst, b->ne[0]);
}

constexpr size_t kClaimMinWeightBytes = size_t(1) << 20;

// Rows per unit: a multiple of the largest tile, at most 64; where threads claim units from a
// counter, enough units for dynamic balance (with fixed shares one unit per thread will do: a
// unit costs a few divisions and a call, which small weights feel); where several column
// groups sweep the unit's rows, few enough for those rows to stay in L2.
constexpr size_t kDirectRowsBytes = size_t(128) << 10;
int64_t rows_per_unit(int64_t M, int64_t nbatch, int nth, bool fixed, bool swept, size_t row_bytes) {
    const int64_t want_units = int64_t(nth) * (fixed ? 1 : 16);
    int64_t r = std::clamp<int64_t>(M * nbatch / want_units, 1, 64);
    if (swept) r = std::min<int64_t>(r, std::max<int64_t>(kMaxDirectRows, int64_t(kDirectRowsBytes / row_bytes)));
    return (r + kMaxDirectRows - 1) / kMaxDirectRows * kMaxDirectRows;
}

void direct_forward(const ComputeParams& p, Tensor* dst, const Kernels& kr, const FloatKernels& fk) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const Type w = a->type;
    const Type ct = column_type(dst);
    const FloatDirectFn tile = ct == Type::F16 ? fk.direct_f16b : ct == Type::BF16 ? fk.direct_bf16b : fk.direct[float_kind(w)];
    const int64_t K = a->ne[0], M = a->ne[1], N = dst->ne[1];
    const int64_t ne12 = b->ne[2], ne13 = b->ne[3], r2 = ne12 / a->ne[2], r3 = ne13 / a->ne[3];
    const bool convert = needs_conversion(dst);
    const bool priv = private_conversion(dst);
    const size_t colb = column_bytes(dst, K);
    char* conv = (char*)p.wdata + kCounterBytes + (priv ? size_t(p.ith) * align64(conv_bytes(dst)) : 0);

    if (convert) {
        std::vector<float> tmp;
        convert_columns(p, b, priv, conv, colb, [&](const char* src, char* out) {
            if (ct == Type::F16) cpu::conv::f32_to_f16_row(widen_row(kr, b->type, src, K, tmp), (uint16_t*)out, K);
            else if (ct == Type::BF16) cpu::conv::f32_to_bf16_row(widen_row(kr, b->type, src, K, tmp), (uint16_t*)out, K);
            else convert_act(kr, w, b->type, src, K, out, tmp);
        });
    }
    const bool fixed = priv || !convert;
    // As a shared step with big weights, units are claimed from the step's counter, so a share
    // that starts late takes fewer (K 4096 x M 14336, 2 threads under load 9: +5% f32, +8% f16
    // median); small weights keep one unit per share (each claim costs).
    const bool claim = fixed && p.share_slots && p.nth > 1 && a->nbytes() >= kClaimMinWeightBytes;
    const int64_t col_blocks = (N + kDirectColBlock - 1) / kDirectColBlock;
    const int64_t rows = rows_per_unit(M, ne12 * ne13 * col_blocks, p.nth, fixed && !claim, N > fk.direct_cols, a->nb[1]);
    const int64_t chunks = (M + rows - 1) / rows, units = chunks * col_blocks * ne12 * ne13;
    // unit u = ((bt * col_blocks) + cb) * chunks + chunk; consecutive units step the position
    // instead of dividing again
    struct Pos { int64_t u = -2, chunk = 0, cb = 0, bt = -1, i12 = 0, i13 = 0; const char* abase = nullptr; char* dbase = nullptr; } pos;
    auto locate = [&](int64_t u) {
        int64_t bt;
        if (u == pos.u + 1) {
            bt = pos.bt;
            if (++pos.chunk == chunks) {
                pos.chunk = 0;
                if (++pos.cb == col_blocks) pos.cb = 0, ++bt;
            }
        } else {
            pos.chunk = u % chunks;
            pos.cb = (u / chunks) % col_blocks;
            bt = u / (chunks * col_blocks);
        }
        pos.u = u;
        if (bt != pos.bt) {
            pos.bt = bt;
            pos.i12 = bt % ne12, pos.i13 = bt / ne12;
            pos.abase = (const char*)a->data + (pos.i12 / r2) * a->nb[2] + (pos.i13 / r3) * a->nb[3];
            pos.dbase = (char*)dst->data + pos.i12 * dst->nb[2] + pos.i13 * dst->nb[3];
        }
    };
    auto run_unit = [&](int64_t u) {
        locate(u);
        const int64_t bt = pos.bt, i12 = pos.i12, i13 = pos.i13;
        const int64_t m0 = pos.chunk * rows, m1 = std::min(M, m0 + rows);
        const int64_t n0 = pos.cb * kDirectColBlock, n1 = std::min(N, n0 + kDirectColBlock);
        const char* abase = pos.abase;
        char* dbase = pos.dbase;
        float out[kMaxDirectRows * 4];
        for (int64_t n = n0; n < n1; n += fk.direct_cols) {
            const int nc = (int)std::min<int64_t>(fk.direct_cols, n1 - n);
            const char* bp = convert ? conv + (bt * N + n) * colb : b->row(n, i12, i13);
            const size_t bs = convert ? colb : b->nb[1];
            for (int64_t m = m0; m < m1; m += fk.direct_rows[nc]) {
                const int nr = (int)std::min<int64_t>(fk.direct_rows[nc], m1 - m);
                tile(K, abase + m * a->nb[1], a->nb[1], nr, bp, bs, nc, out);
                char* d = dbase + m * sizeof(float) + n * dst->nb[1];
                for (int j = 0; j < nc; ++j)
                    for (int r = 0; r < nr; ++r) ((float*)(d + j * dst->nb[1]))[r] = out[r * 4 + j];
            }
        }
    };
    if (claim) run_barrier_free_units(p, units, run_unit);
    else run_mul_mat_units(p, units, fixed, run_unit);
}

// ---- packed GEMM

struct PackedShape {
    int64_t K, M, N, nbatch;  // nbatch = ne12 * ne13 of dst
    int64_t kq;               // lane chunks of K (the last zero-padded)
};

PackedShape packed_shape(const Tensor* dst, const FloatKernels& fk) {
    const int64_t K = dst->src[0]->ne[0];
    return {K, dst->ne[0], dst->ne[1], dst->ne[2] * dst->ne[3], (K + fk.lanes - 1) / fk.lanes};
}

// Float offsets of one column panel, of the packed b budget and of one thread's weight block.
size_t panel_floats(const PackedShape& s, const FloatKernels& fk) { return size_t(s.kq) * fk.nr * chunk_floats(fk); }
size_t pack_budget_floats(const PackedShape& s, const FloatKernels& fk) {
    const size_t one = panel_floats(s, fk);
    const size_t total = size_t(s.nbatch) * ((s.N + fk.nr - 1) / fk.nr) * one;
    return std::min(total, std::max(kPackBudget / sizeof(float), one));
}
size_t a_block_floats(const FloatKernels& fk) { return size_t(fk.mc / fk.mr) * a_panel_floats(fk, fk.kb / fk.lanes); }
// dst columns a multiple of 4 KiB apart put a tile's 12 output columns in one set of the 8-way
// L1, so its read-add-store of the running sums after every K block missed L1 (K4096 M4096 N128,
// 1 thread: the tiles alone took 5.5% (bf16) / 3% (f16) longer than with columns 576 bytes
// apart). Over several K blocks a task then keeps its running sums in a scratch block of
// columns `scratch_ldc` floats apart and copies them to dst at its end (the same sums: the
// scratch only moves where they are kept); the whole product ran 1.9% / 1.8% faster.
bool sums_in_scratch(const Tensor* dst, const FloatKernels& fk) {
    return dst->nb[1] % 4096 == 0 && dst->src[0]->ne[0] > fk.kb;
}
int64_t scratch_ldc(const FloatKernels& fk) { return fk.mc + 16; }
size_t sums_scratch_floats(const Tensor* dst, const PackedShape& s, const FloatKernels& fk) {
    if (!sums_in_scratch(dst, fk)) return 0;
    return size_t(scratch_ldc(fk)) * size_t(std::min(fk.nc, (s.N + fk.nr - 1) / fk.nr * fk.nr));
}
// One thread's weight block and running-sum scratch.
size_t thread_block_floats(const Tensor* dst, const PackedShape& s, const FloatKernels& fk) {
    return a_block_floats(fk) + sums_scratch_floats(dst, s, fk);
}
int64_t total_panels(const PackedShape& s, const FloatKernels& fk) { return s.nbatch * ((s.N + fk.nr - 1) / fk.nr); }
// All of b's panels fit the budget: one chunk, packed once, and no barrier is needed.
bool packed_in_one_chunk(const PackedShape& s, const FloatKernels& fk) {
    return size_t(total_panels(s, fk)) * panel_floats(s, fk) <= pack_budget_floats(s, fk);
}
// Ready flags of the panels (one chunk only), after the packed b.
size_t ready_flags_offset(const PackedShape& s, const FloatKernels& fk) {
    return align64(sizeof(float) * pack_budget_floats(s, fk));
}

size_t packed_work_size(const Tensor* dst, int nth) {
    const FloatKernels& fk = float_kernels(dst);
    const PackedShape s = packed_shape(dst, fk);
    const size_t flags = packed_in_one_chunk(s, fk) ? sizeof(std::atomic<uint32_t>) * size_t(total_panels(s, fk)) : 0;
    return kCounterBytes + sizeof(float) * size_t(nth) * thread_block_floats(dst, s, fk) + ready_flags_offset(s, fk) + flags;
}

// Waits until a panel another thread is packing is ready.
void wait_ready(const std::atomic<uint32_t>& flag) {
    spin_until([&] { return flag.load(std::memory_order_acquire) != 0; });
}

// Columns [n0, n1) of dst batch `batch`, packed at float offset `off`.
struct Piece { int64_t batch, n0, n1; size_t off; };

void packed_forward(const ComputeParams& p, Tensor* dst, const Kernels& kr, const FloatKernels& fk) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const Type w = a->type;
    const PackedShape s = packed_shape(dst, fk);
    const int V = fk.lanes, CF = chunk_floats(fk), MR = fk.mr, NR = fk.nr;
    const int64_t ne12 = b->ne[2], r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const int64_t ldc = dst->nb[1] / sizeof(float);
    const FloatPackAFn pack_a = fk.pack_a[float_kind(w)];
    const FloatMicroFn micro = w == Type::F16 && fk.micro_f16 ? fk.micro_f16 : fk.micro;
    const int64_t wsize = int64_t(type_size(w));

    float* wbase = (float*)((char*)p.wdata + kCounterBytes);
    float* apack = wbase + size_t(p.ith) * thread_block_floats(dst, s, fk);
    float* bpack = wbase + size_t(p.nth) * thread_block_floats(dst, s, fk);
    float* sums = sums_in_scratch(dst, fk) ? apack + a_block_floats(fk) : nullptr;
    const size_t budget = pack_budget_floats(s, fk);
    const size_t pfl = panel_floats(s, fk);
    const int64_t piece_cols = std::max<int64_t>(NR, int64_t(budget / pfl) * NR);

    // Columns are converted into kq * V values each (zero past K), unless f32 columns with whole
    // chunks can be packed straight from b: for f32 weights, and for the bf16-pair form, whose
    // packing rounds to bf16 itself (the scalar rounding here took 3% of bf16 K4096 M4096 N128).
    const bool in_place = (w == Type::F32 || fk.unit_values == 2) && b->type == Type::F32 && s.K % V == 0;
    std::vector<float> tmp, cols_buf(in_place ? 0 : size_t(NR) * s.kq * V);
    auto panels_of = [&](const Piece& pc) { return (pc.n1 - pc.n0 + NR - 1) / NR; };

    // Panel jp of piece pc.
    auto pack_panel = [&](const Piece& pc, int64_t jp) {
        const int64_t i12 = pc.batch % ne12, i13 = pc.batch / ne12;
        const float* cols[kMaxFloatNR];
        for (int j = 0; j < NR; ++j) {
            const int64_t n = pc.n0 + jp * NR + j;
            if (n >= pc.n1) {
                cols[j] = nullptr;
            } else if (in_place) {
                cols[j] = (const float*)b->row(n, i12, i13);
            } else {
                float* col = cols_buf.data() + size_t(j) * s.kq * V;
                convert_act(kr, w, b->type, b->row(n, i12, i13), s.K, col, tmp);
                std::fill(col + s.K, col + s.kq * V, 0.0f);
                cols[j] = col;
            }
        }
        fk.pack_b(cols, s.kq, bpack + pc.off + jp * pfl);
    };
    auto pack_b = [&](const std::vector<Piece>& pieces) {
        int64_t total = 0;
        for (auto& pc : pieces) total += panels_of(pc);
        int64_t r0, r1;
        split_range(total, p.ith, p.nth, r0, r1);
        int64_t base = 0;
        for (auto& pc : pieces) {
            const int64_t np = panels_of(pc);
            for (int64_t jp = std::max<int64_t>(0, r0 - base); jp < std::min(np, r1 - base); ++jp) pack_panel(pc, jp);
            base += np;
        }
    };

    // Shared steps: panel i of the chunk is ready once ready[i] is non-zero.
    const std::atomic<uint32_t>* ready = nullptr;
    auto run_task = [&](const Piece& pc, int64_t m0, int64_t m1, int64_t c0, int64_t c1) {
        const int64_t i12 = pc.batch % ne12, i13 = pc.batch / ne12;
        const char* abase = (const char*)a->data + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
        float* cbase = (float*)dst->data + (i12 * dst->nb[2] + i13 * dst->nb[3]) / sizeof(float);
        const int64_t mp = (m1 - m0 + MR - 1) / MR;
        // the running sums of outputs (m, n): dst's, or sums[(n - c0) * cld + m - m0]
        const int64_t cld = sums ? scratch_ldc(fk) : ldc;
        auto sum_at = [&](int64_t m, int64_t n) { return sums ? sums + (n - c0) * cld + (m - m0) : cbase + n * ldc + m; };
        for (int64_t k0 = 0; k0 < s.K; k0 += fk.kb) {
            const int64_t kc = std::min(fk.kb, s.K - k0), nq = (kc + V - 1) / V;
            // the weight block: panels of MR rows, zero past row m1 and past K
            for (int64_t ip = 0; ip < mp; ++ip) {
                const int64_t m = m0 + ip * MR;
                pack_a(abase + m * a->nb[1], a->nb[1], (int)std::min<int64_t>(MR, m1 - m), k0, kc, apack + ip * a_panel_floats(fk, nq));
            }
            // Each sweep of the weight panels also prefetches, a slice per tile spread over the
            // tile's run, the next column panel's values (from L3: all of a K block's columns
            // exceed L2); a burst of them before each tile stalled on the L1 miss buffers.
            const int64_t b_lines = (nq * NR * CF * int64_t(sizeof(float)) + 63) / 64;
            const int64_t lines_per_tile = (b_lines + mp - 1) / mp;
            // f16 / bf16 weights: the next K block's rows are fetched over the sweep, a few rows
            // per tile, so that its packing waits less on memory (pack_a fell from 7-8.5% to 6%
            // of K4096 M4096 N128 in perf; 1 thread: bf16 1.025x, f16 1.01x). f32 weights, twice
            // the lines, lost 2%.
            const int64_t kn = k0 + fk.kb;
            const char* next_w = kn < s.K && wsize == 2 ? abase + m0 * a->nb[1] + kn * wsize : nullptr;
            const int64_t next_bytes = next_w ? std::min(fk.kb, s.K - kn) * wsize : 0;
            const int64_t tiles = mp * ((c1 - c0 + NR - 1) / NR);
            int64_t tile = 0;
            auto prefetch_next_weights = [&] {
                for (int64_t r = tile * (m1 - m0) / tiles, r1 = (tile + 1) * (m1 - m0) / tiles; r < r1; ++r)
                    prefetch_to_l2(next_w + r * a->nb[1], size_t(next_bytes) + 64);
                ++tile;
            };
            for (int64_t n = c0; n < c1; n += NR) {
                const float* bp = bpack + pc.off + ((n - pc.n0) / NR) * pfl + (k0 / V) * NR * CF;
                const char* bnext = (const char*)(bp + pfl);
                const bool has_next = n + NR < c1;
                const int nv = (int)std::min<int64_t>(NR, c1 - n);
                if (ready && k0 == 0) wait_ready(ready[pc.off / pfl + (n - pc.n0) / NR]);
                for (int64_t ip = 0; ip < mp; ++ip) {
                    const int64_t m = m0 + ip * MR;
                    const int mv = (int)std::min<int64_t>(MR, m1 - m);
                    float* c = sum_at(m, n);
                    const int64_t l0 = std::min(b_lines, ip * lines_per_tile);
                    const int pf_lines = has_next ? (int)(std::min(b_lines, l0 + lines_per_tile) - l0) : 0;
                    if (next_w) prefetch_next_weights();
                    micro(nq, apack + ip * a_panel_floats(fk, nq), bp, c, cld, mv, nv, k0 > 0, bnext + l0 * 64, pf_lines);
                }
            }
        }
        if (sums)
            for (int64_t n = c0; n < c1; ++n)
                std::memcpy(cbase + n * ldc + m0, sum_at(m0, n), sizeof(float) * size_t(m1 - m0));
    };

    struct TaskPlan {
        std::vector<int64_t> bounds;      // row blocks, in panels
        std::vector<int64_t> first_task;  // per piece
        int64_t mblocks;
    };
    auto plan_tasks = [&](const std::vector<Piece>& pieces) {
        // Row blocks of at most mc rows (fewer for small weights), as many as a multiple of the
        // threads (equal tasks end together) and, with several threads, at least
        // kMinTasksPerThread tasks per thread (a thread that finds the counter exhausted waits
        // for the others' last tasks; 1024^3 on 2 loaded cores: 16 tasks level with or slightly
        // ahead of 12); column blocks of at most nc, of equal width (no thin last block repacking all
        // of its weights for a few columns). Boundaries on whole panels.
        const int64_t mpanels = (s.M + MR - 1) / MR;
        const int64_t mc = s.M * s.K <= kSmallWeightValues
                               ? std::clamp<int64_t>(kSmallWeightBlockRows / MR * MR, MR, fk.mc)
                               : fk.mc;
        auto nblocks_of = [&](const Piece& pc) { return (pc.n1 - pc.n0 + fk.nc - 1) / fk.nc; };
        int64_t col_tasks = 0;
        for (auto& pc : pieces) col_tasks += nblocks_of(pc);
        int64_t mblocks = (s.M + mc - 1) / mc;
        if (p.nth > 1) mblocks = std::max(mblocks, (kMinTasksPerThread * p.nth + col_tasks - 1) / col_tasks);
        mblocks = std::min(mpanels, (mblocks + p.nth - 1) / p.nth * p.nth);
        // With several threads the last row blocks of a sweep shrink (each takes at most a
        // (2 nth)-th of the panels left), so the threads end within a small task of each other.
        std::vector<int64_t> bounds{0};  // in panels
        if (p.nth > 1 && col_tasks == 1) {
            const int64_t most = (mpanels + mblocks - 1) / mblocks;
            for (int64_t left = mpanels; left > 0;) {
                const int64_t take = std::clamp<int64_t>((left + 2 * p.nth - 1) / (2 * p.nth), 1, most);
                bounds.push_back(bounds.back() + take);
                left -= take;
            }
        } else {
            for (int64_t i = 1; i <= mblocks; ++i) bounds.push_back(i * mpanels / mblocks);
        }
        mblocks = (int64_t)bounds.size() - 1;
        std::vector<int64_t> first_task(pieces.size() + 1, 0);
        for (size_t i = 0; i < pieces.size(); ++i) first_task[i + 1] = first_task[i] + mblocks * nblocks_of(pieces[i]);
        return TaskPlan{std::move(bounds), std::move(first_task), mblocks};
    };
    auto run_task_at = [&](const std::vector<Piece>& pieces, const TaskPlan& plan, int64_t t) {
        const size_t pi = std::upper_bound(plan.first_task.begin(), plan.first_task.end(), t) - plan.first_task.begin() - 1;
        const Piece& pc = pieces[pi];
        const int64_t local = t - plan.first_task[pi];
        const int64_t mb = local % plan.mblocks, nb = local / plan.mblocks;
        const int64_t nbs = (pc.n1 - pc.n0 + fk.nc - 1) / fk.nc, npanels = panels_of(pc);
        const int64_t c0 = pc.n0 + nb * npanels / nbs * NR, c1 = std::min(pc.n1, pc.n0 + (nb + 1) * npanels / nbs * NR);
        auto m_bound = [&](int64_t i) { return std::min(s.M, plan.bounds[i] * MR); };
        run_task(pc, m_bound(mb), m_bound(mb + 1), c0, c1);
    };

    auto run_chunk = [&](const std::vector<Piece>& pieces, bool last) {
        reset_counter(p);
        pack_b(pieces);
        p.barrier();
        const TaskPlan plan = plan_tasks(pieces);
        std::atomic<int64_t>* counter = work_counter(p);
        for (int64_t t; (t = counter->fetch_add(1, std::memory_order_relaxed)) < plan.first_task.back();)
            run_task_at(pieces, plan, t);
        if (!last) p.barrier();  // the next chunk reuses the packed b; after the last, the node ends
    };

    // A shared step (one chunk): units 0..P-1 of the step's claim counter pack panels, the rest
    // are the GEMM's tasks. The first share to arrive clears the ready flags (the scratch is
    // shared by the graph's nodes) before anyone claims; a late share finds the work taken.
    auto run_shared = [&](const std::vector<Piece>& pieces) {
        auto* flags = (std::atomic<uint32_t>*)((char*)bpack + ready_flags_offset(s, fk));
        std::atomic<int64_t>& claims = p.share_slots[0];
        std::atomic<int64_t>& arrivals = p.share_slots[1];
        constexpr int64_t kFlagsCleared = int64_t(1) << 40;
        std::vector<int64_t> first_panel(pieces.size() + 1, 0);
        for (size_t i = 0; i < pieces.size(); ++i) first_panel[i + 1] = first_panel[i] + panels_of(pieces[i]);
        const int64_t npanels = first_panel.back();
        if (arrivals.fetch_add(1, std::memory_order_acq_rel) == 0) {
            for (int64_t i = 0; i < npanels; ++i) flags[i].store(0, std::memory_order_relaxed);
            arrivals.fetch_add(kFlagsCleared, std::memory_order_release);
        } else {
            while (arrivals.load(std::memory_order_acquire) < kFlagsCleared) std::this_thread::yield();
        }
        ready = flags;
        const TaskPlan plan = plan_tasks(pieces);
        const int64_t units = npanels + plan.first_task.back();
        for (int64_t u; (u = claims.fetch_add(1, std::memory_order_relaxed)) < units;) {
            if (u < npanels) {
                const size_t pi = std::upper_bound(first_panel.begin(), first_panel.end(), u) - first_panel.begin() - 1;
                pack_panel(pieces[pi], u - first_panel[pi]);
                flags[u].store(1, std::memory_order_release);
            } else {
                run_task_at(pieces, plan, u - npanels);
            }
        }
    };

    // Group (batch, column range) pieces into chunks whose packed b fits the budget.
    std::vector<Piece> chunk;
    size_t used = 0;
    for (int64_t bt = 0; bt < s.nbatch; ++bt) {
        for (int64_t n0 = 0; n0 < s.N; n0 += piece_cols) {
            Piece pc{bt, n0, std::min(s.N, n0 + piece_cols), 0};
            const size_t need = size_t(panels_of(pc)) * pfl;
            if (used + need > budget && !chunk.empty()) {
                run_chunk(chunk, false);
                chunk.clear();
                used = 0;
            }
            pc.off = used;
            used += need;
            chunk.push_back(pc);
        }
    }
    if (chunk.empty()) return;
    if (p.share_slots) run_shared(chunk);  // float_mul_mat_barrier_free: the only chunk
    else run_chunk(chunk, true);
}

}  // namespace

void float_mul_mat_forward(const ComputeParams& p, Tensor* dst) {
    const Kernels& kr = kernels_for(simd::cpu_isa());
    if (use_packed(dst)) packed_forward(p, dst, kr, float_kernels(dst));
    else direct_forward(p, dst, kr, float_kernels(dst));
}

// The direct path with no shared conversion and the packed GEMM in one chunk have no barrier.
bool float_mul_mat_barrier_free(const Tensor* dst) {
    if (use_packed(dst)) return packed_in_one_chunk(packed_shape(dst, float_kernels(dst)), float_kernels(dst));
    return private_conversion(dst) || !needs_conversion(dst);
}

size_t float_mul_mat_work_size(const Tensor* dst, int n_threads) {
    if (use_packed(dst)) return packed_work_size(dst, n_threads);
    if (!needs_conversion(dst)) return kCounterBytes;
    const size_t one = align64(conv_bytes(dst));
    return kCounterBytes + (private_conversion(dst) ? size_t(std::max(1, n_threads)) * one : one);
}

}  // namespace pyggml::cpu
