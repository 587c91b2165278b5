// CPU kernel of FLASH_ATTN_EXT: tiled online softmax, F32 accumulation.
//
// Work is split into units: (sequence s, group of query heads sharing one K and one V head,
// block of consecutive query tokens, KV chunk). A unit holds up to kMaxQ query vectors
// (tokens x heads of the group); every K/V tile of up to kTile rows is widened to F32 once
// and used by all of them (so under GQA K/V are read once per group). Per tile:
//   S = Q·Kᵀ (SIMD over the head dim), logits = scale/softcap/ALiBi-mask, online (M, Z)
//   update, O += P·V.
// Column lists: each tile only holds the columns that are finite for at least one query
// vector of the unit (the mask is scanned with SIMD compares against f16 -inf); tiles
// without any are skipped, so K/V rows excluded by the mask are never read.
// The sparse hint (n_kv_max set) runs in flash_attn_sparse.cpp.
// Dense: every query vector's result depends only on its own inputs (not on the other query
// vectors of its unit, the batch size, the thread count or -inf columns anywhere), so a
// speculative verify batch reproduces one-token decoding bit for bit. The KV axis is cut into
// chunks at fixed multiples of kChunk, tiles at fixed multiples of kTile inside them; each
// chunk runs the online softmax from scratch; the sum of a tile's weights is taken over lanes
// fixed by the column index (so columns another query brought in add exact zeros), and the
// chunks are folded in ascending order with the log-sum-exp rule. With few units (decode) the
// threads take (unit, chunk) pieces and fold after a barrier, otherwise a unit folds its own
// chunks: the same instructions either way.
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>

#include "cpu/flash_attn_common.h"
#include "cpu/flash_attn_kernels.h"
#include "cpu/flash_attn_rowwise.h"
#include "cpu/flash_attn_sparse.h"
#include "cpu/kernels.h"
#include "pyggml/error.h"
#include "pyggml/graph.h"
#include "pyggml/ops/flash_attn.h"

namespace pyggml::cpu {

namespace {

constexpr int kTile = 64;   // K/V rows per tile
constexpr int64_t kChunk = 256;  // dense KV chunk (a multiple of kTile), fixed boundaries
constexpr int kMaxQ = 64;   // query vectors per unit
constexpr int kDirectMaxQ = 8;    // up to this many query vectors read F16 K/V rows in place
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using fa::Bump;
using fa::fold_state;
using fa::round_up;

struct Scratch {
    float *kt, *vt, *P, *O, *M, *Z, *slope, *mval;
    float *Oa, *Ma, *Za, *lanes;  // folded chunks of a unit; a tile's weights by column lane
    uint16_t* mraw;
    const float** qp;
    const uint16_t** mrow;   // mask row of each query vector (null: no mask)
    const uint16_t** drows;  // distinct mask rows of a token group
    const float** kp;        // K/V rows as F32 (in place or widened into kt/vt)
    const float** vp;
    const uint16_t** kh;     // K/V rows read in place as F16
    const uint16_t** vh;
    int32_t* list[2];
};

struct Plan;
void layout_scratch(Bump& b, const Plan& plan, Scratch& sc);

// Everything the work size and the kernel must agree on.
struct Plan {
    int64_t D, Dv, N, H, S, KV;
    int64_t rk, rv;       // query heads per K head, per V head
    int64_t r;            // heads per group (share both K and V head)
    int64_t hpu, n_hb;    // heads per unit, head blocks per group
    int64_t tpu, n_tb;    // tokens per unit, token blocks
    int64_t n_units0;     // units without the KV split
    int64_t nsplit, chunk;
    int64_t ldk, ldv;
    size_t per_thread, shared, partials;

    explicit Plan(const Tensor* dst, int nth) {
        const Tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2];
        D = q->ne[0]; Dv = v->ne[0]; N = q->ne[1]; H = q->ne[2]; S = q->ne[3]; KV = k->ne[1];
        rk = H / k->ne[2];
        rv = H / v->ne[2];
        r = std::gcd(rk, rv);
        hpu = std::min<int64_t>(r, kMaxQ);
        n_hb = (r + hpu - 1) / hpu;
        tpu = std::max<int64_t>(1, kMaxQ / hpu);
        tpu = std::min<int64_t>(tpu, std::max<int64_t>(N, 1));
        n_tb = (N + tpu - 1) / tpu;
        n_units0 = S * (H / r) * n_tb * n_hb;
        nsplit = 1;
        const int64_t nchunks = std::max<int64_t>(1, (KV + kChunk - 1) / kChunk);
        if (n_units0 > 0 && n_units0 < 4 * nth) nsplit = nchunks;
        chunk = nsplit > 1 ? kChunk : std::max<int64_t>(kTile, round_up(KV, kTile));
        nsplit = std::max<int64_t>(1, (KV + chunk - 1) / chunk);
        ldk = round_up(D, 16);
        ldv = round_up(Dv, 16);
        const int64_t nq = hpu * tpu;
        Bump b{0};
        Scratch sc;
        layout_scratch(b, *this, sc);
        per_thread = (size_t)b.p;
        partials = nsplit > 1 ? sizeof(float) * n_units0 * nsplit * nq * (ldv + 2) : 0;
        shared = 64 * (size_t)(nth + 1);
    }
    int64_t n_units() const { return n_units0 * nsplit; }
    int64_t nq_max() const { return hpu * tpu; }
};

// Per-thread scratch; run on a null base it measures the size.
void layout_scratch(Bump& b, const Plan& plan, Scratch& sc) {
    const int64_t nq = plan.nq_max();
    sc.kt = b.take<float>(kTile * plan.ldk);
    sc.vt = b.take<float>(kTile * plan.ldv);
    sc.P = b.take<float>(nq * kTile);
    sc.O = b.take<float>(nq * plan.ldv);
    sc.M = b.take<float>(nq);
    sc.Z = b.take<float>(nq);
    sc.Oa = b.take<float>(nq * plan.ldv);
    sc.Ma = b.take<float>(nq);
    sc.Za = b.take<float>(nq);
    sc.lanes = b.take<float>(kTile);
    sc.slope = b.take<float>(nq);
    sc.mval = b.take<float>(kTile);
    sc.mraw = b.take<uint16_t>(kTile);
    sc.qp = b.take<const float*>(nq);
    sc.mrow = b.take<const uint16_t*>(nq);
    sc.drows = b.take<const uint16_t*>(nq);
    sc.kp = b.take<const float*>(kTile);
    sc.vp = b.take<const float*>(kTile);
    sc.kh = b.take<const uint16_t*>(kTile);
    sc.vh = b.take<const uint16_t*>(kTile);
    for (int i = 0; i < 2; ++i) sc.list[i] = b.take<int32_t>(kTile);
}

class FlashAttn {
public:
    FlashAttn(const ComputeParams& p, Tensor* dst)
        : p_(p), dst_(dst), plan_(dst, p.nth), kern_(fa::select_kernels()) {
        q_ = dst->src[0]; k_ = dst->src[1]; v_ = dst->src[2]; mask_ = dst->src[3]; sinks_ = dst->src[4];
        scale_ = dst->param_f32(kFaScale);
        max_bias_ = dst->param_f32(kFaMaxBias);
        cap_ = dst->param_f32(kFaLogitSoftcap);
        if (cap_ != 0.0f) scale_ /= cap_;
        alibi_ = fa::AlibiSlopes(max_bias_, plan_.H);
        char* base = (char*)p.wdata;
        counter_ = (std::atomic<int64_t>*)base;
        partials_ = (float*)(base + plan_.shared);
        Bump b{(uintptr_t)base + plan_.shared + round_up((int64_t)plan_.partials, 64) + plan_.per_thread * p.ith};
        layout_scratch(b, plan_, sc_);
    }

    // As a gang: the counter is set up behind a barrier, and the chunks are merged by every
    // thread behind another. As shares (share_slots set: a counter that starts at zero, no
    // barrier): the last share to finish merges every chunk. Same units, same bits.
    void run() {
        std::atomic<int64_t>* slots = p_.share_slots;
        std::atomic<int64_t>* counter = slots ? &slots[0] : counter_;
        // Phase 1: init the counter.
        if (!slots) {
            if (p_.ith == 0) counter_->store(0, std::memory_order_relaxed);
            p_.barrier();
        }
        // Phase 2: units, dynamically scheduled.
        const int64_t nu = plan_.n_units();
        for (;;) {
            const int64_t u = counter->fetch_add(1, std::memory_order_relaxed);
            if (u >= nu) break;
            unit(u);
        }
        // Phase 3: merge the KV chunks.
        if (plan_.nsplit > 1) {
            if (!slots) {
                p_.barrier();
                merge(p_.ith, p_.nth);
            } else if (slots[1].fetch_add(1, std::memory_order_acq_rel) + 1 == p_.nth) {
                merge(0, 1);  // the partials of every share are visible to the last one
            }
        }
    }

private:
    struct Unit {
        int64_t u0;           // the unit's index without the KV chunk (its partials' slot)
        int64_t s, g, tb, hb, c;
        int64_t t0, t1, h0, h1, nh, nq, c0, c1;
    };

    // Token blocks are taken last first: under a causal mask the last block sees the most
    // columns, and the threads taking units in index order end evenly when the big units go
    // first (in ascending order one thread is left alone with the biggest unit at the end).
    Unit decode(int64_t u) const {
        Unit x;
        x.c = u % plan_.nsplit; u /= plan_.nsplit;
        x.u0 = u;
        x.hb = u % plan_.n_hb; u /= plan_.n_hb;
        x.tb = plan_.n_tb - 1 - u % plan_.n_tb; u /= plan_.n_tb;
        const int64_t ng = plan_.H / plan_.r;
        x.g = u % ng; u /= ng;
        x.s = u;
        x.t0 = x.tb * plan_.tpu;
        x.t1 = std::min(plan_.N, x.t0 + plan_.tpu);
        x.h0 = x.g * plan_.r + x.hb * plan_.hpu;
        x.h1 = std::min(x.g * plan_.r + plan_.r, x.h0 + plan_.hpu);
        x.nh = x.h1 - x.h0;
        x.nq = (x.t1 - x.t0) * x.nh;
        x.c0 = x.c * plan_.chunk;
        x.c1 = std::min(plan_.KV, x.c0 + plan_.chunk);
        return x;
    }

    float slope(int64_t h) const { return alibi_(h); }

    const uint16_t* mask_row(int64_t t, int64_t h, int64_t s) const {
        return (const uint16_t*)mask_->row(t, h % mask_->ne[2], s % mask_->ne[3]);
    }

    const float* row_f32(const Tensor* t, int64_t j, int64_t h, int64_t s, float* buf, int64_t n) const {
        return fa::row_as_f32(kern_, t, j, h, s, buf, n);
    }

    // Distinct mask rows of the query vectors [va, vb), into sc_.drows.
    int distinct_rows(int va, int vb) const {
        const uint16_t** out = sc_.drows;
        int nd = 0;
        for (int i = va; i < vb; ++i) {
            const uint16_t* m = sc_.mrow[i];
            bool seen = false;
            for (int d = nd - 1; d >= 0 && !seen; --d) seen = out[d] == m;
            if (!seen) out[nd++] = m;
        }
        return nd;
    }

    void unit(int64_t u) {
        const Unit x = decode(u);
        const int64_t hk = x.h0 / plan_.rk, hv = x.h0 / plan_.rv;
        for (int64_t t = x.t0; t < x.t1; ++t)
            for (int64_t h = x.h0; h < x.h1; ++h) {
                const int64_t i = (t - x.t0) * x.nh + (h - x.h0);
                sc_.qp[i] = (const float*)q_->row(t, h, x.s);
                sc_.mrow[i] = mask_ ? mask_row(t, h, x.s) : nullptr;
                sc_.slope[i] = slope(h);
                sc_.M[i] = kNegInf;
                sc_.Z[i] = 0.0f;
                std::fill(sc_.O + i * plan_.ldv, sc_.O + i * plan_.ldv + plan_.Dv, 0.0f);
            }
        const int nq = (int)x.nq;
        // Dense: tiles of kTile columns, each reduced to the columns finite for some query
        // vector (no mask: all); the next tile's list is built first so its K rows can be
        // prefetched while this tile computes.
        const int nd = mask_ ? distinct_rows(0, nq) : 0;
        auto build = [&](int64_t j0, int32_t* idx) {
            const int64_t j1 = std::min<int64_t>(x.c1, j0 + kTile);
            if (mask_) return kern_.scan(sc_.drows, nd, j0, j1, idx);
            for (int64_t j = j0; j < j1; ++j) idx[j - j0] = (int32_t)j;
            return (int)(j1 - j0);
        };
        int32_t *cur = sc_.list[0], *nxt = sc_.list[1];
        int ncur = x.c0 < x.c1 ? build(x.c0, cur) : 0;
        const bool folds = plan_.nsplit == 1;  // this unit covers every chunk
        if (folds) {
            std::fill(sc_.Ma, sc_.Ma + nq, kNegInf);
            std::fill(sc_.Za, sc_.Za + nq, 0.0f);
            std::fill(sc_.Oa, sc_.Oa + nq * plan_.ldv, 0.0f);
        }
        for (int64_t j0 = x.c0; j0 < x.c1; j0 += kTile) {
            if (folds && j0 > x.c0 && j0 % kChunk == 0) fold_chunk(nq);
            const int nnxt = j0 + kTile < x.c1 ? build(j0 + kTile, nxt) : 0;
            if (ncur) tile(0, nq, cur, ncur, hk, hv, x.s, nxt, nnxt, j0);
            std::swap(cur, nxt);
            ncur = nnxt;
        }
        if (folds) {
            fold_chunk(nq);
            finish(x, sc_.Oa, sc_.Ma, sc_.Za);
            return;
        }
        finish(x, sc_.O, sc_.M, sc_.Z);
    }

    // Folds the unit's current chunk state into its running (Ma, Za, Oa) and starts afresh.
    void fold_chunk(int nq) {
        const int64_t Dv = plan_.Dv, ld = plan_.ldv;
        for (int i = 0; i < nq; ++i) {
            fold_state(sc_.Ma[i], sc_.Za[i], sc_.Oa + i * ld, sc_.M[i], sc_.Z[i], sc_.O + i * ld, Dv);
            sc_.M[i] = kNegInf;
            sc_.Z[i] = 0.0f;
            std::fill(sc_.O + i * ld, sc_.O + i * ld + Dv, 0.0f);
        }
    }

    // Logits (scale, softcap, mask) of the tile's scores P[va..vb) and the online-softmax
    // update: P becomes exp(logit - M), O is rescaled where M grew, Z accumulates.
    // j0 >= 0: a dense tile of columns [j0, j0 + kTile); the weights are then summed over lanes
    // fixed by the column (columns that only other queries need add exact zeros in their own
    // lanes); j0 < 0: summed in list order.
    void softmax_step(int va, int vb, const int32_t* idx, int n, int64_t j0) {
        const int64_t Dv = plan_.Dv;
        const bool contiguous = idx[n - 1] - idx[0] == n - 1;
        const uint16_t* last_mrow = nullptr;
        for (int i = va; i < vb; ++i) {
            float* srow = sc_.P + (int64_t)i * kTile;
            const float* mv = nullptr;
            if (sc_.mrow[i]) {
                if (sc_.mrow[i] != last_mrow) {
                    const uint16_t* mr = sc_.mrow[i];
                    if (contiguous) {
                        kern_.f16_to_f32(mr + idx[0], sc_.mval, n);
                    } else {
                        for (int jj = 0; jj < n; ++jj) sc_.mraw[jj] = mr[idx[jj]];
                        kern_.f16_to_f32(sc_.mraw, sc_.mval, n);
                    }
                    last_mrow = mr;
                }
                mv = sc_.mval;
            }
            const float mt = kern_.logits(srow, mv, n, scale_, cap_, sc_.slope[i]);
            const float Mnew =
                fa::raise_max(kern_, srow, n, mt, sc_.M[i], sc_.Z[i], sc_.O + (int64_t)i * plan_.ldv, Dv);
            if (Mnew == kNegInf) continue;  // nothing finite yet for this query
            const float z = kern_.exp_sum(srow, n, Mnew);
            sc_.Z[i] += j0 >= 0 ? kern_.lane_sum(srow, idx, n, (int32_t)j0, sc_.lanes) : z;
        }
    }

    // One tile of n columns idx[0..n) for the query vectors [va, vb); next[0..nnext) are the
    // columns of the tile that follows (prefetched); j0: see softmax_step.
    void tile(int va, int vb, const int32_t* idx, int n, int64_t hk, int64_t hv, int64_t s,
              const int32_t* next, int nnext, int64_t j0) {
        const int64_t D = plan_.D, Dv = plan_.Dv;
        const int nq = vb - va;
        // Few query vectors: read F16 rows in place; otherwise widen the tile once.
        const bool k_direct = k_->type == Type::F16 && kern_.qk_f16 && nq <= kDirectMaxQ;
        const bool v_direct = v_->type == Type::F16 && kern_.pv_f16 && nq <= kDirectMaxQ;
        fa::prefetch_rows(v_, idx, n, hv, s);
        float* P = sc_.P + (int64_t)va * kTile;
        if (k_direct) {
            for (int jj = 0; jj < n; ++jj) sc_.kh[jj] = (const uint16_t*)k_->row(idx[jj], hk, s);
            if (nnext) fa::prefetch_rows(k_, next, nnext, hk, s);
            kern_.qk_f16(sc_.qp + va, nq, sc_.kh, n, D, P, kTile);
        } else {
            for (int jj = 0; jj < n; ++jj) sc_.kp[jj] = row_f32(k_, idx[jj], hk, s, sc_.kt + jj * plan_.ldk, D);
            if (nnext) fa::prefetch_rows(k_, next, nnext, hk, s);
            kern_.qk(sc_.qp + va, nq, sc_.kp, n, D, P, kTile);
        }
        softmax_step(va, vb, idx, n, j0);
        float* O = sc_.O + (int64_t)va * plan_.ldv;
        if (v_direct) {
            for (int jj = 0; jj < n; ++jj) sc_.vh[jj] = (const uint16_t*)v_->row(idx[jj], hv, s);
            kern_.pv_f16(P, kTile, nq, sc_.vh, n, Dv, O, (int)plan_.ldv);
        } else {
            for (int jj = 0; jj < n; ++jj) sc_.vp[jj] = row_f32(v_, idx[jj], hv, s, sc_.vt + jj * plan_.ldv, Dv);
            kern_.pv(P, kTile, nq, sc_.vp, n, Dv, O, (int)plan_.ldv);
        }
    }

    // Sinks, normalisation and the permuted output row [D_v, H, N, S].
    void write_out(float* o, float M, float Z, int64_t h, int64_t t, int64_t s) const {
        fa::finish_row(kern_, sinks_, o, M, Z, h, plan_.Dv, (float*)dst_->ptr(0, h, t, s));
    }

    float* partial(int64_t u0, int64_t c, int64_t i) const {
        return partials_ + ((u0 * plan_.nsplit + c) * plan_.nq_max() + i) * (plan_.ldv + 2);
    }

    void finish(const Unit& x, float* O, const float* M, const float* Z) {
        for (int64_t t = x.t0; t < x.t1; ++t)
            for (int64_t h = x.h0; h < x.h1; ++h) {
                const int64_t i = (t - x.t0) * x.nh + (h - x.h0);
                float* o = O + i * plan_.ldv;
                if (plan_.nsplit == 1) {
                    write_out(o, M[i], Z[i], h, t, x.s);
                } else {
                    float* pp = partial(x.u0, x.c, i);
                    pp[0] = M[i];
                    pp[1] = Z[i];
                    std::copy(o, o + plan_.Dv, pp + 2);
                }
            }
    }

    // Fold the chunks of every (unit, query vector) pair in ascending order.
    void merge(int ith, int nth) {
        const int64_t nq = plan_.nq_max();
        const int64_t total = plan_.n_units0 * nq;
        int64_t r0, r1;
        split_range(total, ith, nth, r0, r1);
        float* o = sc_.O;
        for (int64_t w = r0; w < r1; ++w) {
            const int64_t u0 = w / nq, i = w % nq;
            const Unit x = decode(u0 * plan_.nsplit);
            if (i >= x.nq) continue;
            float M = kNegInf, Z = 0.0f;
            std::fill(o, o + plan_.Dv, 0.0f);
            for (int64_t c = 0; c < plan_.nsplit; ++c) {
                const float* pp = partial(u0, c, i);
                fold_state(M, Z, o, pp[0], pp[1], pp + 2, plan_.Dv);
            }
            const int64_t t = x.t0 + i / x.nh, h = x.h0 + i % x.nh;
            write_out(o, M, Z, h, t, x.s);
        }
    }

    const ComputeParams& p_;
    Tensor* dst_;
    Plan plan_;
    const fa::Kernels& kern_;
    const Tensor *q_, *k_, *v_, *mask_, *sinks_;
    float scale_, max_bias_, cap_;
    fa::AlibiSlopes alibi_;
    std::atomic<int64_t>* counter_;
    float* partials_;
    Scratch sc_;
};

}  // namespace

void cpu_forward_FLASH_ATTN_EXT(const ComputeParams& p, Tensor* dst) {
    if (fa_sparse_applies(dst)) return fa_sparse_forward(p, dst);
    if (fa_rowwise_applies(dst)) return fa_rowwise_forward(p, dst);
    FlashAttn(p, dst).run();
}

bool flash_attn_barrier_free(const Tensor* dst) {
    // the row-wise and tiled kernels run as shares; the sparse one meets at barriers
    return !fa_sparse_applies(dst);
}

size_t cpu_work_size_FLASH_ATTN_EXT(const Tensor* dst, int n_threads) {
    // both kernels' needs: the ISA level that picks one may change before the compute
    const Plan plan(dst, n_threads);
    if (fa_sparse_applies(dst)) return fa_sparse_work_size(dst, n_threads);
    return std::max(fa_rowwise_work_size(dst, n_threads),
                    plan.shared + (size_t)round_up((int64_t)plan.partials, 64) + plan.per_thread * n_threads);
}

}  // namespace pyggml::cpu
