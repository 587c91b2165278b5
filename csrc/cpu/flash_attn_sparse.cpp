// CPU kernel of FLASH_ATTN_EXT with the sparse hint (op_params slot 4, n_kv_max > 0, with a
// mask): each row of the mask promises at most n_kv_max finite entries, and the work follows
// that count rather than the cache size.
//
// Phase 1: the finite columns of every distinct mask row (token, mask head, mask stream) are
// listed once, in ascending order, and shared by all head groups that use the row (under
// GQA, or DeepSeek V4's single K=V head, every head of a token reads the same list).
// Phase 2: units of (stream, head group, head block, token): the token's query vectors of
// one head group run full tiles of kTile columns taken from the list; K/V rows are read in
// place (F16 converted while loading, for few query vectors) or widened once per tile for
// all heads of the unit; the next tile's rows are prefetched while a tile computes, so the
// random rows of the cache stream in during the arithmetic. When V is K's own rows (the
// shared K=V head, or V a view of K's first dims) a widened row serves both.
// Batch invariance: a token's result depends only on its own inputs, never on the other
// tokens of the batch, the thread count or the head blocking. Its list is cut into chunks of
// kChunkEntries entries at fixed list positions; each chunk runs the online softmax from
// scratch over tiles at fixed positions, and the chunks are folded in ascending order with
// the log-sum-exp rule. With few units (decode) the threads take (unit, chunk) pieces and
// fold after a barrier, otherwise a unit folds its own chunks: the same instructions either
// way. A row breaking the promise (more finite entries than n_kv_max) is still computed
// exactly, by scanning the mask in place, or raises ValueError in debug mode.
// Lists of many tokens that would not fit kListBudget are built and used in passes of
// consecutive tokens.
#include "cpu/flash_attn_sparse.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "cpu/env.h"
#include "cpu/flash_attn_common.h"
#include "cpu/flash_attn_kernels.h"
#include "pyggml/error.h"
#include "pyggml/graph.h"
#include "pyggml/ops/flash_attn.h"

namespace pyggml::cpu {

namespace {

constexpr int kTile = 64;                     // columns per tile
constexpr int64_t kChunkEntries = 4 * kTile;  // list entries per chunk (fixed positions)
constexpr int kMaxHeads = 64;                 // query heads per unit at most
constexpr int kMinHeads = 8;                  // head blocks shrink to this for parallelism
constexpr int kDirectMaxQ = 8;                // up to this many query vectors read F16 in place
constexpr int kSegment = 16;                  // columns per prefetch step of a tile
constexpr int64_t kListBudget = int64_t(64) << 20;  // bytes of column lists per pass
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using fa::Bump;
using fa::fold_state;
using fa::round_up;

struct Scratch {
    float *kt, *vt, *P, *O, *M, *Z, *Oa, *Ma, *Za, *slope, *mval;
    uint16_t* mraw;
    int32_t* stream;  // columns of a row scanned in place (broken promise)
    int64_t* heads;   // heads of the unit sharing one mask row
    const float** qp;
    const float** kp;
    const float** vp;
    const uint16_t** kh;
    const uint16_t** vh;
};

struct Plan {
    int64_t D, Dv, N, H, S, KV;
    int64_t rk, rv, r, G;  // query heads per K head, per V head; heads per group; groups
    int64_t hm_n, sm_n;    // mask heads and streams in use
    int64_t cap, stride;   // list entries per row at most; entries reserved per row
    int64_t nchunks;       // chunks of a full list
    int64_t hpu, n_hb;     // heads per unit, head blocks per group
    int64_t tpp, npass;    // tokens per pass, passes
    int64_t nsplit;        // 1: a unit folds its own chunks; nchunks: pieces merged after a barrier
    int64_t ldk, ldv;
    bool kv_shared;
    size_t shared, lists, partials, per_thread;

    Plan(const Tensor* dst, int nth) {
        const Tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3];
        D = q->ne[0]; Dv = v->ne[0]; N = q->ne[1]; H = q->ne[2]; S = q->ne[3]; KV = k->ne[1];
        rk = H / k->ne[2];
        rv = H / v->ne[2];
        r = std::gcd(rk, rv);
        G = H / r;
        hm_n = std::min(mask->ne[2], H);
        sm_n = std::min(mask->ne[3], S);
        cap = std::max<int64_t>(1, std::min<int64_t>(dst->param_i32(kFaNKvMax), KV));
        stride = cap + kTile;  // the list scan appends up to one step past the cap (then values)
        nchunks = (cap + kChunkEntries - 1) / kChunkEntries;
        const int64_t row_bytes = stride * 8, rows_per_token = hm_n * sm_n;
        tpp = std::clamp<int64_t>(kListBudget / std::max<int64_t>(1, row_bytes * rows_per_token), 1,
                                  std::max<int64_t>(N, 1));
        npass = (N + tpp - 1) / tpp;
        hpu = std::min<int64_t>(r, kMaxHeads);
        auto units = [&] { return S * G * ((r + hpu - 1) / hpu) * N; };
        while (units() < 4 * nth && hpu > kMinHeads) hpu = (hpu + 1) / 2;
        n_hb = (r + hpu - 1) / hpu;
        nsplit = npass == 1 && nchunks > 1 && units() < 4 * nth ? nchunks : 1;
        ldk = round_up(D, 16);
        ldv = round_up(Dv, 16);
        kv_shared = v->data == k->data && v->type == k->type && v->nb[1] == k->nb[1] && v->nb[2] == k->nb[2] &&
                    v->nb[3] == k->nb[3] && rk == rv && Dv <= D;
        shared = 64 * (size_t)(nth + 1);
        lists = (size_t)round_up((int64_t)(sizeof(int32_t) * (rows_per_token * tpp) * (2 * stride + 1)), 64);
        partials = nsplit > 1 ? (size_t)round_up((int64_t)(sizeof(float) * S * G * n_hb * N * nsplit * hpu *
                                                           (ldv + 2)), 64)
                              : 0;
        Bump b{0};
        Scratch sc;
        layout(b, sc);
        per_thread = (size_t)b.p;
    }
    void layout(Bump& b, Scratch& sc) const {
        sc.kt = b.take<float>(kTile * ldk);
        sc.vt = b.take<float>(kTile * ldv);
        sc.P = b.take<float>(hpu * kTile);
        sc.O = b.take<float>(hpu * ldv);
        sc.M = b.take<float>(hpu);
        sc.Z = b.take<float>(hpu);
        sc.Oa = b.take<float>(hpu * ldv);
        sc.Ma = b.take<float>(hpu);
        sc.Za = b.take<float>(hpu);
        sc.slope = b.take<float>(hpu);
        sc.mval = b.take<float>(kTile);
        sc.mraw = b.take<uint16_t>(kTile);
        sc.stream = b.take<int32_t>(3 * kTile);
        sc.heads = b.take<int64_t>(hpu);
        sc.qp = b.take<const float*>(hpu);
        sc.kp = b.take<const float*>(kTile);
        sc.vp = b.take<const float*>(kTile);
        sc.kh = b.take<const uint16_t*>(kTile);
        sc.vh = b.take<const uint16_t*>(kTile);
    }
    size_t total(int nth) const { return shared + lists + partials + per_thread * (size_t)nth; }
};

struct DebugReport {
    int64_t bad, t, hm, sm, count;
};

class SparseFlashAttn {
public:
    SparseFlashAttn(const ComputeParams& p, Tensor* dst)
        : p_(p), dst_(dst), plan_(dst, p.nth), kern_(fa::select_kernels()) {
        q_ = dst->src[0]; k_ = dst->src[1]; v_ = dst->src[2]; mask_ = dst->src[3]; sinks_ = dst->src[4];
        scale_ = dst->param_f32(kFaScale);
        max_bias_ = dst->param_f32(kFaMaxBias);
        cap_ = dst->param_f32(kFaLogitSoftcap);
        n_kv_max_ = dst->param_i32(kFaNKvMax);
        if (cap_ != 0.0f) scale_ /= cap_;
        alibi_ = fa::AlibiSlopes(max_bias_, plan_.H);
        prefetch_ = env_not_zero("PYGGML_FA_PREFETCH");  // 0: off, for benchmarks
        char* base = (char*)p.wdata;
        counter_ = (std::atomic<int64_t>*)base;
        reports_ = (DebugReport*)(base + 64);
        counts_ = (int32_t*)(base + plan_.shared);
        lists_ = counts_ + plan_.hm_n * plan_.sm_n * plan_.tpp;
        partials_ = (float*)(base + plan_.shared + plan_.lists);
        Bump b{(uintptr_t)base + plan_.shared + plan_.lists + plan_.partials + plan_.per_thread * p.ith};
        plan_.layout(b, sc_);
    }

    void run() {
        if (debug_enabled()) {
            check_contract();
            p_.barrier();
            for (int t = 0; t < p_.nth; ++t)
                if (reports_[t].bad) {
                    if (p_.ith != 0) return;
                    const DebugReport& r = reports_[t];
                    std::ostringstream os;
                    os << "[flash_attn_ext] n_kv_max contract violated: mask row (token " << r.t << ", head " << r.hm
                       << ", seq " << r.sm << ") has " << r.count << " finite entries, more than n_kv_max="
                       << n_kv_max_ << " (debug mode)";
                    throw ShapeError(os.str());
                }
        }
        for (int64_t pass = 0; pass < plan_.npass; ++pass) {
            if (pass > 0) p_.barrier();  // the previous pass's units are done with the lists
            t0_ = pass * plan_.tpp;
            t1_ = std::min(plan_.N, t0_ + plan_.tpp);
            build_lists();
            if (p_.ith == 0) counter_->store(0, std::memory_order_relaxed);
            p_.barrier();
            const int64_t nu = plan_.S * plan_.G * plan_.n_hb * (t1_ - t0_) * plan_.nsplit;
            // The next unit is taken before this one runs, so its first rows can be prefetched
            // during this one's last tile.
            int64_t u = counter_->fetch_add(1, std::memory_order_relaxed);
            while (u < nu) {
                const int64_t un = counter_->fetch_add(1, std::memory_order_relaxed);
                unit(u, un < nu ? un : -1);
                u = un;
            }
        }
        if (plan_.nsplit > 1) {
            p_.barrier();
            merge();
        }
    }

private:
    // List of mask row (t, hm, sm) of the current pass: count (-1: more than cap), then at
    // lists_ + index * 2 * stride its columns and their mask values.
    int64_t row_index(int64_t t, int64_t hm, int64_t sm) const {
        return (sm * plan_.hm_n + hm) * plan_.tpp + (t - t0_);
    }

    void build_lists() {
        const int64_t nt = t1_ - t0_, nrows = nt * plan_.hm_n * plan_.sm_n;
        int64_t r0, r1;
        split_range(nrows, p_.ith, p_.nth, r0, r1);
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t t = t0_ + r % nt, hm = (r / nt) % plan_.hm_n, sm = r / (nt * plan_.hm_n);
            const uint16_t* row = (const uint16_t*)mask_->row(t, hm, sm);
            const int64_t ri = row_index(t, hm, sm);
            int32_t* out = lists_ + ri * 2 * plan_.stride;
            int64_t n = 0;
            for (int64_t j = 0; j < plan_.KV && n <= plan_.cap; j += kTile)
                n += kern_.scan(&row, 1, j, std::min<int64_t>(plan_.KV, j + kTile), out + n);
            counts_[ri] = n > plan_.cap ? -1 : (int32_t)n;
            // the mask values of the entries, in list order (read contiguously by the tiles)
            float* val = (float*)(out + plan_.stride);
            if (n <= plan_.cap)
                for (int64_t e = 0; e < n; ++e) val[e] = fp16_to_fp32(row[out[e]]);
        }
    }

    void check_contract() {
        DebugReport& rep = reports_[p_.ith];
        rep = DebugReport{0, 0, 0, 0, 0};
        const int64_t nrows = plan_.N * plan_.hm_n * plan_.sm_n;
        int64_t r0, r1;
        split_range(nrows, p_.ith, p_.nth, r0, r1);
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t t = r % plan_.N, hm = (r / plan_.N) % plan_.hm_n, sm = r / (plan_.N * plan_.hm_n);
            const int64_t c = kern_.count_finite((const uint16_t*)mask_->row(t, hm, sm), plan_.KV);
            if (c > n_kv_max_) {
                rep = DebugReport{1, t, hm, sm, c};
                return;
            }
        }
    }

    float slope(int64_t h) const { return alibi_(h); }

    struct Unit {
        int64_t s, g, hb, t, c, h0, h1;
    };

    Unit decode(int64_t u) const {
        Unit x;
        const int64_t nt = t1_ - t0_;
        x.c = u % plan_.nsplit; u /= plan_.nsplit;
        x.t = t0_ + u % nt; u /= nt;
        x.hb = u % plan_.n_hb; u /= plan_.n_hb;
        x.g = u % plan_.G;
        x.s = u / plan_.G;
        x.h0 = x.g * plan_.r + x.hb * plan_.hpu;
        x.h1 = std::min(x.g * plan_.r + plan_.r, x.h0 + plan_.hpu);
        return x;
    }

    // Index of a (head block, token, chunk) piece among the partials.
    float* partial(const Unit& x, int64_t c, int64_t i) const {
        const int64_t u0 = ((x.s * plan_.G + x.g) * plan_.n_hb + x.hb) * plan_.N + x.t;
        return partials_ + ((u0 * plan_.nsplit + c) * plan_.hpu + i) * (plan_.ldv + 2);
    }

    // Rows to prefetch: columns cols[0..n) of K head hk / V head hv, stream s.
    struct Ahead {
        const int32_t* cols = nullptr;
        int n = 0;
        int64_t hk = 0, hv = 0, s = 0;
    };

    // The first tile of unit u (its first mask row's list from its chunk).
    Ahead first_tile(int64_t u) const {
        Ahead a;
        if (u < 0) return a;
        const Unit x = decode(u);
        const int64_t ri = row_index(x.t, x.h0 % mask_->ne[2], x.s % mask_->ne[3]);
        const int64_t e0 = plan_.nsplit > 1 ? x.c * kChunkEntries : 0;
        if (counts_[ri] <= e0) return a;
        a.cols = lists_ + ri * 2 * plan_.stride + e0;
        a.n = (int)std::min<int64_t>(kTile, counts_[ri] - e0);
        a.hk = x.h0 / plan_.rk;
        a.hv = x.h0 / plan_.rv;
        a.s = x.s;
        return a;
    }

    void unit(int64_t u, int64_t u_next) {
        const Unit x = decode(u);
        // Heads reading the same mask row run together: head h reads mask head h % mh, so the
        // first mh heads of the block start one group each.
        const int64_t mh = mask_->ne[2];
        const int64_t h_end = std::min(x.h1, x.h0 + mh);
        for (int64_t h = x.h0; h < h_end; ++h) {
            int nq = 0;
            for (int64_t h2 = h; h2 < x.h1; h2 += mh) sc_.heads[nq++] = h2;
            run_heads(x, nq, h % mh, h + 1 == h_end ? first_tile(u_next) : Ahead{});
        }
    }

    // The query vectors sc_.heads[0..nq) of token x.t, all reading mask row (x.t, hm, s).
    // then_ahead: the rows that follow the last tile (the next unit's first).
    void run_heads(const Unit& x, int nq, int64_t hm, const Ahead& then_ahead) {
        const int64_t ld = plan_.ldv, Dv = plan_.Dv, sm = x.s % mask_->ne[3];
        for (int i = 0; i < nq; ++i) {
            sc_.qp[i] = (const float*)q_->row(x.t, sc_.heads[i], x.s);
            sc_.slope[i] = slope(sc_.heads[i]);
        }
        const int64_t ri = row_index(x.t, hm, sm);
        const int32_t count = counts_[ri];
        const int32_t* list = lists_ + ri * 2 * plan_.stride;
        const uint16_t* mrow = (const uint16_t*)mask_->row(x.t, hm, sm);
        const int64_t hk = x.h0 / plan_.rk, hv = x.h0 / plan_.rv;
        auto reset = [&](float* M, float* Z, float* O) {
            std::fill(M, M + nq, kNegInf);
            std::fill(Z, Z + nq, 0.0f);
            for (int i = 0; i < nq; ++i) std::fill(O + i * ld, O + i * ld + Dv, 0.0f);
        };
        auto fold = [&] {
            for (int i = 0; i < nq; ++i)
                fold_state(sc_.Ma[i], sc_.Za[i], sc_.Oa + i * ld, sc_.M[i], sc_.Z[i], sc_.O + i * ld, Dv);
        };
        auto store_partial = [&](int64_t c, const float* M, const float* Z, const float* O) {
            for (int i = 0; i < nq; ++i) {
                float* pp = partial(x, c, sc_.heads[i] - x.h0);
                pp[0] = M[i];
                pp[1] = Z[i];
                std::copy(O + i * ld, O + i * ld + Dv, pp + 2);
            }
        };
        reset(sc_.Ma, sc_.Za, sc_.Oa);
        if (count < 0) {  // broken promise: the whole row, scanned in place, by chunk 0
            if (x.c == 0) {
                stream_row(nq, mrow, hk, hv, x.s, reset, fold);
            }
        } else {
            const int64_t nch = (count + kChunkEntries - 1) / kChunkEntries;
            const int64_t c0 = plan_.nsplit > 1 ? x.c : 0, c1 = plan_.nsplit > 1 ? x.c + 1 : nch;
            for (int64_t c = c0; c < std::min(c1, nch); ++c) {
                reset(sc_.M, sc_.Z, sc_.O);
                const int64_t e0 = c * kChunkEntries, e1 = std::min<int64_t>(count, e0 + kChunkEntries);
                const int64_t e_end = plan_.nsplit > 1 ? e1 : count;  // prefetch within the unit
                for (int64_t e = e0; e < e1; e += kTile) {
                    const int n = (int)std::min<int64_t>(kTile, e1 - e);
                    const int nx = (int)(std::min<int64_t>(e_end, e + n + kTile) - (e + n));
                    const bool last = e + n >= e_end && c + 1 >= std::min(c1, nch);
                    tile(nq, (const float*)(list + plan_.stride) + e, list + e, n, hk, hv, x.s,
                         last ? then_ahead : Ahead{list + e + n, nx, hk, hv, x.s});
                }
                fold();
            }
        }
        if (plan_.nsplit > 1) {
            store_partial(x.c, sc_.Ma, sc_.Za, sc_.Oa);
            return;
        }
        for (int i = 0; i < nq; ++i)
            write_out(sc_.Oa + i * ld, sc_.Ma[i], sc_.Za[i], sc_.heads[i], x.t, x.s);
    }

    // A row with more finite entries than promised: its columns found tile by tile, with
    // chunk boundaries every kChunkEntries entries as a list would have them.
    template <class Reset, class Fold>
    void stream_row(int nq, const uint16_t* mrow, int64_t hk, int64_t hv, int64_t s, Reset& reset, Fold& fold) {
        int32_t* buf = sc_.stream;
        int64_t have = 0, j = 0, done = 0;
        while (true) {
            while (have < kTile && j < plan_.KV) {
                const int64_t j1 = std::min<int64_t>(plan_.KV, j + kTile);
                have += kern_.scan(&mrow, 1, j, j1, buf + have);
                j = j1;
            }
            if (have == 0) break;
            const int n = (int)std::min<int64_t>(kTile, have);
            if (done % kChunkEntries == 0) reset(sc_.M, sc_.Z, sc_.O);
            for (int jj = 0; jj < n; ++jj) sc_.mraw[jj] = mrow[buf[jj]];
            kern_.f16_to_f32(sc_.mraw, sc_.mval, n);
            tile(nq, sc_.mval, buf, n, hk, hv, s, Ahead{});
            done += n;
            std::copy(buf + n, buf + have, buf);
            have -= n;
            if (done % kChunkEntries == 0 || (have == 0 && j >= plan_.KV)) fold();
        }
    }

    const float* row_f32(const Tensor* t, int64_t j, int64_t h, int64_t s, float* buf, int64_t n) const {
        return fa::row_as_f32(kern_, t, j, h, s, buf, n);
    }

    // Logits (scale, softcap, mask) of the tile's scores and the online-softmax update.
    // mval: the mask values of the tile's columns.
    void softmax_step(int nq, const float* mval, int n) {
        const int64_t Dv = plan_.Dv;
        for (int i = 0; i < nq; ++i) {
            float* srow = sc_.P + (int64_t)i * kTile;
            const float mt = kern_.logits(srow, mval, n, scale_, cap_, sc_.slope[i]);
            const float Mnew =
                fa::raise_max(kern_, srow, n, mt, sc_.M[i], sc_.Z[i], sc_.O + (int64_t)i * plan_.ldv, Dv);
            if (Mnew == kNegInf) continue;  // nothing finite yet for this query
            sc_.Z[i] += kern_.exp_sum(srow, n, Mnew);
        }
    }

    // One tile of columns idx[0..n) with mask values mval[0..n); nx: the rows of the tile
    // that follows (prefetched).
    void tile(int nq, const float* mval, const int32_t* idx, int n, int64_t hk, int64_t hv, int64_t s,
              const Ahead& nx) {
        const int64_t D = plan_.D, Dv = plan_.Dv;
        const bool shared = plan_.kv_shared;
        const bool direct = nq <= kDirectMaxQ && kern_.qk_f16 && kern_.pv_f16 && k_->type == Type::F16 &&
                            v_->type == Type::F16;
        // The next tile's rows are prefetched a segment at a time between segments of this
        // tile's work (a burst of prefetches would stall on the core's miss buffers with no
        // arithmetic left to overlap); segments cut neither a dot product nor an O update.
        auto ahead = [&](const Tensor* t, int j, int m, int64_t h) {
            if (prefetch_ && j < nx.n) fa::prefetch_rows(t, nx.cols + j, std::min(m, nx.n - j), h, nx.s);
        };
        float* P = sc_.P;
        float* O = sc_.O;
        const int ldv = (int)plan_.ldv;
        if (direct) {
            for (int jj = 0; jj < n; ++jj) sc_.kh[jj] = (const uint16_t*)k_->row(idx[jj], hk, s);
            for (int j = 0; j < n; j += kSegment) {
                const int m = std::min(kSegment, n - j);
                ahead(k_, j, m, nx.hk);
                kern_.qk_f16(sc_.qp, nq, sc_.kh + j, m, D, P + j, kTile);
            }
        } else {
            for (int j = 0; j < n; j += kSegment) {
                const int m = std::min(kSegment, n - j);
                ahead(k_, j, m, nx.hk);
                for (int jj = j; jj < j + m; ++jj) sc_.kp[jj] = row_f32(k_, idx[jj], hk, s, sc_.kt + jj * plan_.ldk, D);
            }
            kern_.qk(sc_.qp, nq, sc_.kp, n, D, P, kTile);
        }
        softmax_step(nq, mval, n);
        if (direct) {
            for (int jj = 0; jj < n; ++jj) sc_.vh[jj] = (const uint16_t*)v_->row(idx[jj], hv, s);
            for (int j = 0; j < n; j += kSegment) {
                const int m = std::min(kSegment, n - j);
                if (!shared) ahead(v_, j, m, nx.hv);
                kern_.pv_f16(P + j, kTile, nq, sc_.vh + j, m, Dv, O, ldv);
            }
        } else {
            for (int j = 0; j < n; j += kSegment) {
                const int m = std::min(kSegment, n - j);
                if (!shared) ahead(v_, j, m, nx.hv);
                for (int jj = j; jj < j + m; ++jj)
                    sc_.vp[jj] = shared ? sc_.kp[jj] : row_f32(v_, idx[jj], hv, s, sc_.vt + jj * plan_.ldv, Dv);
            }
            kern_.pv(P, kTile, nq, sc_.vp, n, Dv, O, ldv);
        }
    }

    // Sinks, normalisation and the permuted output row [D_v, H, N, S].
    void write_out(float* o, float M, float Z, int64_t h, int64_t t, int64_t s) const {
        fa::finish_row(kern_, sinks_, o, M, Z, h, plan_.Dv, (float*)dst_->ptr(0, h, t, s));
    }

    // Folds the chunks of every (head, token) in ascending order.
    void merge() {
        const int64_t total = plan_.S * plan_.H * plan_.N;
        int64_t r0, r1;
        split_range(total, p_.ith, p_.nth, r0, r1);
        float* o = sc_.O;
        for (int64_t w = r0; w < r1; ++w) {
            const int64_t t = w % plan_.N, h = (w / plan_.N) % plan_.H, s = w / (plan_.N * plan_.H);
            Unit x;
            x.s = s;
            x.g = h / plan_.r;
            x.hb = (h % plan_.r) / plan_.hpu;
            x.t = t;
            x.h0 = x.g * plan_.r + x.hb * plan_.hpu;
            float M = kNegInf, Z = 0.0f;
            std::fill(o, o + plan_.Dv, 0.0f);
            for (int64_t c = 0; c < plan_.nsplit; ++c) {
                const float* pp = partial(x, c, h - x.h0);
                fold_state(M, Z, o, pp[0], pp[1], pp + 2, plan_.Dv);
            }
            write_out(o, M, Z, h, t, s);
        }
    }

    const ComputeParams& p_;
    Tensor* dst_;
    Plan plan_;
    const fa::Kernels& kern_;
    const Tensor *q_, *k_, *v_, *mask_, *sinks_;
    float scale_, max_bias_, cap_;
    int32_t n_kv_max_;
    bool prefetch_ = true;  // ask for the next tile's rows ahead (PYGGML_FA_PREFETCH)
    fa::AlibiSlopes alibi_;
    std::atomic<int64_t>* counter_;
    DebugReport* reports_;
    int32_t *counts_, *lists_;
    float* partials_;
    int64_t t0_ = 0, t1_ = 0;
    Scratch sc_;
};

}  // namespace

bool fa_sparse_applies(const Tensor* dst) {
    return dst->src[3] && dst->param_i32(kFaNKvMax) > 0 && dst->src[1]->ne[1] > 0;
}

void fa_sparse_forward(const ComputeParams& p, Tensor* dst) { SparseFlashAttn(p, dst).run(); }

size_t fa_sparse_work_size(const Tensor* dst, int n_threads) {
    return fa_sparse_applies(dst) ? Plan(dst, n_threads).total(n_threads) : 0;
}

}  // namespace pyggml::cpu
