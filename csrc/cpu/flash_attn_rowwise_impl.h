// The row-wise flash-attention kernel (flash_attn_rowwise.cpp describes its order of operations),
// written once for every instruction-set level: Rowwise<false> holds the accumulators and sums
// in 8-lane AVX2 registers, Rowwise<true> in 16-lane AVX-512 ones. The levels differ only in
// the score dots' sum order (ggml's AVX2 build's and its AVX-512 build's: 32 against 64 dims
// per step, four accumulators each, reduced in that build's order) and in register width; the
// per-lane arithmetic of the softmax and of the F16 V accumulators is the same.
//
// Included by one translation unit per level, inside that level's `#pragma GCC target` region,
// after the standard headers, <immintrin.h>, cpu/expf_libm_avx2.h and
// cpu/flash_attn_rowwise_plan.h. Everything is in an unnamed namespace: each level's copy of
// the helpers (compiled for its own instruction set) stays in its own translation unit.
#pragma once
#include "cpu/flash_attn_rowwise_steps.h"

namespace pyggml::cpu {
namespace {

using fa_rowwise::kBlock;
using fa_rowwise::kChunk;
using fa_rowwise::kMaxVectors;
using fa_rowwise::RowPlan;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Folds chunk state (Mc, Sc, Vc) into the running (M, S, V), chunks in ascending order.
// Never inlined: the split and the in-thread fold must run the very same instructions.
__attribute__((noinline)) void fold(float& M, float& S, float* V, float Mc, float Sc, const float* Vc, int64_t Dv) {
    if (Sc == 0.0f) return;
    const float Mn = std::max(M, Mc);
    const float so = expf(M - Mn), sn = expf(Mc - Mn);
    for (int64_t d = 0; d < Dv; ++d) V[d] = V[d] * so + Vc[d] * sn;
    S = S * so + Sc * sn;
    M = Mn;
}

struct Item {
    int64_t s, t0, t1, h0, h1, nh, nq, hk, hv;
};

// A register of a level: 8 lanes (AVX2) or 16 (AVX-512).
template <bool Wide>
struct VecOf {
    using type = __m256;
};
template <>
struct VecOf<true> {
    using type = __m512;
};

template <bool Wide>
class Rowwise : RowwiseSteps<Wide> {
    using Base = RowwiseSteps<Wide>;
    using Base::acc_;
    using Base::Dv_;
    using Base::rescales_;
    using Base::step_ms_;
    using Base::step_n_;
    using Base::step_rs_;
    using Base::step_v_;
    using Base::step_vs_;
    using Base::vrow_;

    // dims per step of the score dots (four accumulators of 8 or 16 lanes); the rest go one
    // by one in f64
    static constexpr int64_t kDotStep = Wide ? 64 : 32;

    // one register of the level's width (member functions: only the level's own are compiled)
    using Vec = typename VecOf<Wide>::type;
    static Vec vzero() {
        if constexpr (Wide) return _mm512_setzero_ps(); else return _mm256_setzero_ps();
    }
    static Vec vload(const float* p) {
        if constexpr (Wide) return _mm512_loadu_ps(p); else return _mm256_loadu_ps(p);
    }
    static Vec vload_f16(const uint16_t* p) {
        if constexpr (Wide) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p));
        else return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p));
    }
    static Vec vadd(Vec a, Vec b) {
        if constexpr (Wide) return _mm512_add_ps(a, b); else return _mm256_add_ps(a, b);
    }
    static Vec vfma(Vec a, Vec b, Vec c) {
        if constexpr (Wide) return _mm512_fmadd_ps(a, b, c); else return _mm256_fmadd_ps(a, b, c);
    }
    static __m256 fold8(Vec u) {
        if constexpr (Wide) return _mm256_add_ps(_mm512_extractf32x8_ps(u, 1), _mm512_castps512_ps256(u));
        else return u;
    }

public:
    Rowwise(const ComputeParams& p, Tensor* dst) : p_(p), dst_(dst), plan_(dst, p.nth) {
        q_ = dst->src[0]; k_ = dst->src[1]; v_ = dst->src[2]; mask_ = dst->src[3]; sinks_ = dst->src[4];
        scale_ = dst->param_f32(kFaScale);
        max_bias_ = dst->param_f32(kFaMaxBias);
        cap_ = dst->param_f32(kFaLogitSoftcap);
        if (cap_ != 0.0f) scale_ /= cap_;
        prefetch_ = fa_rowwise::prefetch_kv(k_, v_);
        const uint32_t n_head = (uint32_t)plan_.H;
        n_head_log2_ = 1u << (uint32_t)std::floor(std::log2((double)n_head));
        m0_ = std::pow(2.0f, -(max_bias_) / (float)n_head_log2_);
        m1_ = std::pow(2.0f, -(max_bias_ / 2.0f) / (float)n_head_log2_);
        float* base = (float*)(((uintptr_t)p.wdata + 63) & ~uintptr_t(63));
        partials_ = base;
        float* w = base + plan_.partial_floats() + size_t(p.ith) * size_t(plan_.per_thread);
        const int64_t nq = plan_.nq(), D = plan_.D, Dv = plan_.Dv;
        qf_ = w; w += nq * D;
        acc_ = w; w += nq * Dv;
        Dv_ = Dv;
        fold_V_ = w; w += nq * Dv;
        M_ = w; w += nq;
        S_ = w; w += nq;
        fM_ = w; w += nq;
        fS_ = w; w += nq;
        slope_ = w;
    }

    // Run as a gang (every thread at once: a fixed share of the pieces each, a barrier before
    // the fold of the split chunks) or as shares (share_slots set: the pieces are claimed from
    // a counter, so a thread that is late or descheduled leaves its part to the others, and
    // the last share to finish folds every split chunk). Each piece computes the same either way.
    void run() {
        const int nth = p_.nth, ith = p_.ith;
        std::atomic<int64_t>* slots = p_.share_slots;
        int64_t next = ith;  // the gang's fixed pieces: ith, ith + nth, ...
        auto claim = [&] {
            if (slots) return slots[0].fetch_add(1, std::memory_order_relaxed);
            const int64_t w = next;
            next += nth;
            return w;
        };
        if (!plan_.split) {
            for (int64_t u; (u = claim()) < plan_.n_base;) {
                const Item x = item(u);
                load_queries(x);
                begin_fold(x);
                for (int64_t c = 0; c < plan_.nchunks; ++c) {
                    chunk(x, c);
                    for (int64_t i = 0; i < x.nq; ++i)
                        fold(fM_[i], fS_[i], fold_V_ + i * plan_.Dv, M_[i], S_[i], acc_ + i * plan_.Dv, plan_.Dv);
                }
                for (int64_t i = 0; i < x.nq; ++i) finish(x, i, fM_[i], fS_[i], fold_V_ + i * plan_.Dv);
            }
            return;
        }
        const int64_t nc = plan_.nchunks, nq = plan_.nq(), Dv = plan_.Dv;
        for (int64_t w; (w = claim()) < plan_.n_base * nc;) {
            const int64_t u = w / nc, c = w % nc;
            const Item x = item(u);
            load_queries(x);
            chunk(x, c);
            for (int64_t i = 0; i < x.nq; ++i) {
                float* pp = partial(u, c, i);
                pp[0] = M_[i];
                pp[1] = S_[i];
                std::memcpy(pp + 2, acc_ + i * Dv, size_t(Dv) * sizeof(float));
            }
        }
        int f0 = ith, fstep = nth;  // the fold: [f0, ..., by fstep)
        if (slots) {
            // the partials of every share are visible to the one that counts last
            if (slots[1].fetch_add(1, std::memory_order_acq_rel) + 1 < nth) return;
            f0 = 0;
            fstep = 1;
        } else {
            p_.barrier();
        }
        for (int64_t w = f0; w < plan_.n_base * nq; w += fstep) {
            const int64_t u = w / nq, i = w % nq;
            const Item x = item(u);
            if (i >= x.nq) continue;
            float M = kNegInf, S = 0.0f;
            float* V = fold_V_;
            std::fill(V, V + Dv, 0.0f);
            for (int64_t c = 0; c < nc; ++c) {
                const float* pp = partial(u, c, i);
                fold(M, S, V, pp[0], pp[1], pp + 2, Dv);
            }
            finish(x, i, M, S, V);
        }
    }

private:
    Item item(int64_t u) const {
        Item x;
        const int64_t hb = u % plan_.n_hb; u /= plan_.n_hb;
        const int64_t g = u % plan_.ng; u /= plan_.ng;
        const int64_t tb = u % plan_.n_tb; u /= plan_.n_tb;
        x.s = u;
        x.t0 = tb * plan_.tpi;
        x.t1 = std::min(plan_.N, x.t0 + plan_.tpi);
        x.h0 = g * plan_.r + hb * plan_.hpi;
        x.h1 = std::min(g * plan_.r + plan_.r, x.h0 + plan_.hpi);
        x.nh = x.h1 - x.h0;
        x.nq = (x.t1 - x.t0) * x.nh;
        x.hk = x.h0 / plan_.rk;
        x.hv = x.h0 / plan_.rv;
        return x;
    }

    float* partial(int64_t u, int64_t c, int64_t i) const {
        return partials_ + ((u * plan_.nchunks + c) * plan_.nq() + i) * (plan_.Dv + 2);
    }

    // Query vector i of the item: token x.t0 + i / nh, head x.h0 + i % nh.
    int64_t tok(const Item& x, int64_t i) const { return x.t0 + i / x.nh; }
    int64_t head(const Item& x, int64_t i) const { return x.h0 + i % x.nh; }

    void load_queries(const Item& x) {
        for (int64_t i = 0; i < x.nq; ++i) {
            const uint32_t h = (uint32_t)head(x, i);
            slope_[i] = max_bias_ > 0.0f
                ? (h < n_head_log2_ ? std::pow(m0_, (float)(h + 1)) : std::pow(m1_, (float)(2 * (h - n_head_log2_) + 1)))
                : 1.0f;
            const float* pq = (const float*)q_->ptr(0, tok(x, i), h, x.s);
            float* qf = qf_ + i * plan_.D;
            for (int64_t d = 0; d < plan_.D; ++d) qf[d] = round_f16(pq[d]);
            mrow_[i] = mask_ ? (const uint16_t*)mask_->ptr(0, tok(x, i), h % mask_->ne[2], x.s % mask_->ne[3]) : nullptr;
        }
    }

    void begin_fold(const Item& x) {
        for (int64_t i = 0; i < x.nq; ++i) {
            fM_[i] = kNegInf;
            fS_[i] = 0.0f;
        }
        std::fill(fold_V_, fold_V_ + x.nq * plan_.Dv, 0.0f);
    }

    // The online softmax of every query vector over chunk c, from scratch, kBlock columns at
    // a time: first every score of the block (each K row converted once for all vectors),
    // then per vector the scalar recurrence of ggml's order (max, rescale factor, weight,
    // sum), then the accumulator update over the block with the accumulator held in registers.
    void chunk(const Item& x, int64_t c) {
        const int64_t Dv = plan_.Dv, nq = x.nq;
        const int64_t j0 = c * kChunk, j1 = std::min(plan_.KV, j0 + kChunk);
        for (int64_t i = 0; i < nq; ++i) {
            M_[i] = kNegInf;
            S_[i] = 0.0f;
        }
        std::fill(acc_, acc_ + nq * Dv, 0.0f);
        // K and V rows by plain stride arithmetic (F16 has no blocks to look up per column)
        const char* k_base = k_->row(0, x.hk, x.s);
        const char* v_base = v_->row(0, x.hv, x.s);
        const size_t k_stride = k_->nb[1], v_stride = v_->nb[1];
        const size_t k_bytes = size_t(plan_.D) * sizeof(uint16_t), v_bytes = size_t(Dv) * sizeof(uint16_t);
        if (prefetch_) prefetch_rows(k_base, k_stride, k_bytes, j0, std::min(j1, j0 + kBlock));
        for (int64_t jb = j0; jb < j1; jb += kBlock) {
            const int nb = (int)std::min<int64_t>(kBlock, j1 - jb);
            // A long cache is read from memory (one head's rows are strided, many layers do
            // not stay in the caches): this block's V rows are wanted after its scores, the
            // next block's K rows after this block.
            if (prefetch_) {
                prefetch_rows(v_base, v_stride, v_bytes, jb, jb + nb);
                prefetch_rows(k_base, k_stride, k_bytes, jb + nb, std::min(j1, jb + nb + kBlock));
            }
            // every vector's mask values over the block (slope times the F16 entry, as ggml),
            // and the columns some vector sees
            const uint32_t all = nb == 32 ? ~0u : (1u << nb) - 1;
            uint32_t seen = 0;
            for (int64_t i = 0; i < nq; ++i) seen |= mask_block(i, jb, nb);
            int na = 0;  // columns of the block some vector sees
            if (seen == all) {  // every column: no compaction
                mvs_used_ = mblk_;
                for (int jj = 0; jj < nb; ++jj) {
                    krow_[jj] = (const uint16_t*)(k_base + (jb + jj) * k_stride);
                    vrow_[jj] = (const uint16_t*)(v_base + (jb + jj) * v_stride);
                }
                na = nb;
            } else {
                mvs_used_ = mvs_;
                for (; seen; seen &= seen - 1) {
                    const int jj = __builtin_ctz(seen);
                    const int64_t ic = jb + jj;
                    for (int64_t i = 0; i < nq; ++i) mvs_[i * kBlock + na] = mblk_[i * kBlock + jj];
                    krow_[na] = (const uint16_t*)(k_base + ic * k_stride);
                    vrow_[na++] = (const uint16_t*)(v_base + ic * v_stride);
                }
            }
            if (na == 0) continue;
            score_all(nq, na);
            bool all_full = true;  // every vector weighs every column
            for (int64_t i = 0; i < nq; ++i) {
                step_n_[i] = recurrence(i, na);
                all_full &= step_n_[i] == na;
            }
            sum_plain(nq, na);
            // A vector without a rescale in the block weighs every column in order: its
            // accumulator skips the per-step checks and reads the block's V rows.
            if constexpr (Wide) {
                this->accumulate_wide(nq, na);
                continue;
            }
            int64_t i = 0;
            if (all_full && Dv == 32)
                // Two vectors over the same V rows at once: twice the chains in flight for
                // narrow heads, and each V row widened once for both.
                for (; i + 2 <= nq; i += 2) {
                    if (!rescales_[i] && !rescales_[i + 1]) {
                        this->template acc_pair<4, false>(acc_ + i * Dv, i, na);
                        continue;
                    }
                    for (int64_t v = i; v < i + 2; ++v)
                        if (!rescales_[v]) this->record_plain_steps(v, na);
                    this->template acc_pair<4, true>(acc_ + i * Dv, i, na);
                }
            for (; i < nq; ++i) {
                if (!step_n_[i]) continue;
                if (rescales_[i]) this->template accumulate<true>(acc_ + i * Dv, i, Dv, step_n_[i]);
                else this->template accumulate<false>(acc_ + i * Dv, i, Dv, step_n_[i]);
            }
        }
    }

    // Asks for the cache lines of rows [r0, r1) (row r at base + r * stride, `bytes` long) to
    // be brought into L2 (into L1, the many lines of a block overflow its miss buffers: no gain).
    static void prefetch_rows(const char* base, size_t stride, size_t bytes, int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) prefetch_to_l2(base + r * stride, bytes);
    }

    // Mask values of vector i for columns jb..jb+nb-1 into mblk_; returns the bits of the
    // columns it sees (value above -inf).
    uint32_t mask_block(int64_t i, int64_t jb, int nb) {
        float* mb = mblk_ + i * kBlock;
        const uint32_t all = nb == 32 ? ~0u : (1u << nb) - 1;
        if (!mrow_[i]) {
            std::fill(mb, mb + nb, 0.0f);
            return all;
        }
        const uint16_t* m = mrow_[i] + jb;
        const __m256 slope = _mm256_set1_ps(slope_[i]), ninf = _mm256_set1_ps(kNegInf);
        uint32_t bits = 0;
        int jj = 0;
        for (; jj + 8 <= nb; jj += 8) {
            const __m256 v = _mm256_mul_ps(slope, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(m + jj))));
            _mm256_storeu_ps(mb + jj, v);
            bits |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(v, ninf, _CMP_NEQ_UQ)) << jj;
        }
        for (; jj < nb; ++jj) {
            mb[jj] = slope_[i] * _cvtsh_ss(m[jj]);
            bits |= uint32_t(mb[jj] != kNegInf) << jj;
        }
        return bits & all;
    }

    // Scores of every vector against the block's na visible columns (K rows krow_, F16).
    // Each dot is ggml's F16 dot term for term: lanes j*8..j*8+7 of every 32 (AVX-512:
    // j*16..j*16+15 of every 64) go to accumulator j, then (a0 + a2) + (a1 + a3), halves, two
    // horizontal adds; the last D % 32 (D % 64) products are added one by one in f64. Each K row is converted once for up to
    // three vectors; eight columns go through the cross-lane adds together (the same pairs
    // added in the same order, one transposed reduction instead of eight horizontal ones).
    void score_all(int64_t nq, int na) {
        for (int a0 = 0; a0 < na; a0 += 8) {
            const int n8 = std::min(8, na - a0);
            int64_t i = 0;
            for (; i + 3 <= nq; i += 3) dots<3>(i, a0, n8);
            if (nq - i == 2) dots<2>(i, a0, n8);
            else if (nq - i == 1) dots<1>(i, a0, n8);
            for (int64_t v = 0; v < nq; ++v) finish_scores(v, a0, n8);
        }
    }

    // The per-column sums u (before the cross-lane adds) of vectors i..i+G-1 for columns
    // a0..a0+n8-1 into usum_, 8 lanes each; columns n8..7 get zeros (their lanes are never
    // read). AVX-512 accumulates 16 lanes and folds them to 8 (lane l + lane l + 8, the first
    // step of its build's reduction).
    template <int G>
    void dots(int64_t i, int a0, int n8) {
        constexpr int W = Wide ? 16 : 8;  // lanes of a register
        const int64_t D = plan_.D, np = D & ~(kDotStep - 1);
        const float* q[G];
        for (int g = 0; g < G; ++g) q[g] = qf_ + (i + g) * D;
        for (int c = 0; c < 8; ++c) {
            if (c >= n8) {
                for (int g = 0; g < G; ++g) _mm256_store_ps(usum_ + ((i + g) * 8 + c) * 8, _mm256_setzero_ps());
                continue;
            }
            const uint16_t* kr = krow_[a0 + c];
            Vec acc[G][4];
            for (int g = 0; g < G; ++g)
                for (int j = 0; j < 4; ++j) acc[g][j] = vzero();
            for (int64_t d = 0; d < np; d += kDotStep) {
                Vec kv[4];
                for (int j = 0; j < 4; ++j) kv[j] = vload_f16(kr + d + W * j);
                for (int g = 0; g < G; ++g)
                    for (int j = 0; j < 4; ++j) acc[g][j] = vfma(kv[j], vload(q[g] + d + W * j), acc[g][j]);
            }
            for (int g = 0; g < G; ++g)
                _mm256_store_ps(usum_ + ((i + g) * 8 + c) * 8,
                                fold8(vadd(vadd(acc[g][0], acc[g][2]), vadd(acc[g][1], acc[g][3]))));
        }
    }

    // Vector v's scores of columns a0..a0+n8-1 from its sums u: cross-lane adds, the D % 32
    // tail, scale, soft cap and mask.
    void finish_scores(int64_t v, int a0, int n8) {
        const int64_t D = plan_.D, np = D & ~(kDotStep - 1);
        const float* q = qf_ + v * D;
        const float* mv = mvs_used_ + v * kBlock;
        float* sc = score_ + v * kBlock;
        const float* us = usum_ + v * 64;
        // t_c = low half + high half of u_c, columns c and c + 4 side by side
        __m256 t[4];
        for (int c = 0; c < 4; ++c) {
            const __m256 u0 = _mm256_load_ps(us + 8 * c), u1 = _mm256_load_ps(us + 8 * (c + 4));
            t[c] = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
        }
        // AVX2's last four lanes sum as (0 + 1) + (2 + 3), AVX-512's as (0 + 2) + (1 + 3)
        if constexpr (Wide)
            for (int c = 0; c < 4; ++c) t[c] = _mm256_permute_ps(t[c], 0xD8);  // lanes 0 2 1 3
        const __m256 r = _mm256_hadd_ps(_mm256_hadd_ps(t[0], t[1]), _mm256_hadd_ps(t[2], t[3]));
        if (np == D && cap_ == 0.0f && n8 == 8) {  // the loop below, eight columns at once
            const __m256 m = _mm256_loadu_ps(mv + a0);
            // product and sum rounded apart, as the loop's (the empty asm keeps the
            // compiler from fusing them)
            __m256 x = _mm256_mul_ps(r, _mm256_set1_ps(scale_));
            __asm__("" : "+x"(x));
            x = _mm256_add_ps(x, m);
            const __m256 ninf = _mm256_set1_ps(kNegInf);
            _mm256_storeu_ps(sc + a0, _mm256_blendv_ps(x, ninf, _mm256_cmp_ps(m, ninf, _CMP_EQ_OQ)));
            return;
        }
        alignas(32) float r8[8];
        _mm256_store_ps(r8, r);
        for (int c = 0; c < n8; ++c) {
            const int a = a0 + c;
            if (mv[a] == kNegInf) {
                sc[a] = kNegInf;
                continue;
            }
            float s = r8[c];
            if (np < D) {  // the last D % 32 products, one by one in f64
                const uint16_t* kr = krow_[a];
                double sum = (double)s;
                for (int64_t d = np; d < D; ++d) {
                    const float prod = _cvtsh_ss(kr[d]) * q[d];
                    sum += (double)prod;
                }
                s = (float)sum;
            }
            s = s * scale_;
            if (cap_ != 0.0f) s = cap_ * tanhf(s);
            s += mv[a];
            sc[a] = s;
        }
    }

    // ggml's recurrence for vector i over the block's na scores: a new maximum rescales the
    // accumulator (then weight 1), otherwise the weight is exp(s - M); entries at -inf are
    // skipped. The running maximum before each column fixes every exponent's argument, so
    // the exponentials are taken eight at a time (expf_libm8: expf's bits), then the sum
    // runs in column order. Returns the number of update steps recorded; rescales_[i] says
    // whether any step rescales (if not, step k is column k and only step_vs_ is written).
    int recurrence(int64_t i, int na) {
        const int64_t o = i * kBlock;
        const float* sc = score_ + o;
        float M = M_[i];
        // Common case: no new maximum and no -inf in the block (the same predicates the
        // general loop tests per column, so the bits are those of that loop).
        {
            const __m256 vM = _mm256_set1_ps(M), ninf = _mm256_set1_ps(kNegInf);
            int flags = 0, a = 0;
            for (; a + 8 <= na; a += 8) {
                const __m256 s8 = _mm256_loadu_ps(sc + a);
                flags |= _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(s8, vM, _CMP_GT_OQ),
                                                         _mm256_cmp_ps(s8, ninf, _CMP_EQ_OQ)));
            }
            for (; a < na; ++a) flags |= (sc[a] > M) | (sc[a] == kNegInf);
            if (!flags) {
                float* e = step_vs_ + o;
                a = 0;
                for (; a + 8 <= na; a += 8)
                    _mm256_storeu_ps(e + a, expf_libm8(_mm256_sub_ps(_mm256_loadu_ps(sc + a), vM)));
                if (a < na) {
                    alignas(32) float arg[8] = {0, 0, 0, 0, 0, 0, 0, 0}, ex[8];
                    for (int b = a; b < na; ++b) arg[b - a] = sc[b] - M;
                    _mm256_store_ps(ex, expf_libm8(_mm256_load_ps(arg)));
                    for (int b = a; b < na; ++b) e[b] = ex[b - a];
                }
                rescales_[i] = false;  // the sum is left to sum_plain
                return na;
            }
        }
        alignas(32) float arg[kBlock], e[kBlock];
        bool up[kBlock];
        for (int a = 0; a < na; ++a) {
            const float s = sc[a];
            const bool nm = s > M;
            up[a] = nm;
            arg[a] = s == kNegInf ? 0.0f : nm ? M - s : s - M;
            if (nm) M = s;
        }
        for (int a = na; a < ((na + 7) & ~7); ++a) arg[a] = 0.0f;
        for (int a = 0; a < na; a += 8) _mm256_store_ps(e + a, expf_libm8(_mm256_load_ps(arg + a)));
        float S = S_[i];
        int n = 0;
        for (int a = 0; a < na; ++a) {
            if (sc[a] == kNegInf) continue;
            const float ms = up[a] ? e[a] : 1.0f, vs = up[a] ? 1.0f : e[a];
            S = std::fma(S, ms, vs);
            step_v_[o + n] = vrow_[a];
            step_vs_[o + n] = vs;
            step_ms_[o + n] = ms;
            step_rs_[o + n] = up[a];
            ++n;
        }
        M_[i] = M;
        S_[i] = S;
        rescales_[i] = true;
        return n;
    }

    // S += weight, column by column (ggml's order), for the vectors whose block took the
    // common case of recurrence: up to four chains at once, each an add in column order.
    void sum_plain(int64_t nq, int na) {
        int64_t idx[kMaxVectors];
        int n = 0;
        for (int64_t i = 0; i < nq; ++i)
            if (!rescales_[i]) idx[n++] = i;
        int k = 0;
        for (; k + 4 <= n; k += 4) sum_chains<4>(idx + k, na);
        switch (n - k) {
            case 3: sum_chains<3>(idx + k, na); break;
            case 2: sum_chains<2>(idx + k, na); break;
            case 1: sum_chains<1>(idx + k, na); break;
            default: break;
        }
    }

    template <int G>
    void sum_chains(const int64_t* idx, int na) {
        float S[G];
        const float* e[G];
        for (int g = 0; g < G; ++g) {
            S[g] = S_[idx[g]];
            e[g] = step_vs_ + idx[g] * kBlock;
        }
        for (int b = 0; b < na; ++b)
            for (int g = 0; g < G; ++g) S[g] = std::fma(S[g], 1.0f, e[g][b]);  // = S + e, once rounded
        for (int g = 0; g < G; ++g) S_[idx[g]] = S[g];
    }

    // Sinks, normalisation and the permuted output row [D_v, H, N, S].
    void finish(const Item& x, int64_t i, float M, float S, float* V) const {
        const int64_t Dv = plan_.Dv, h = head(x, i), t = tok(x, i);
        if (sinks_) {
            const float s = ((const float*)sinks_->data)[h];
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                ms = expf(M - s);
                for (int64_t d = 0; d < Dv; ++d) V[d] *= ms;
            } else {
                vs = expf(s - M);
            }
            S = S * ms + vs;
        }
        const float inv = S == 0.0f ? 0.0f : 1.0f / S;
        float* o = (float*)dst_->ptr(0, h, t, x.s);
        for (int64_t d = 0; d < Dv; ++d) o[d] = V[d] * inv;
    }

    const ComputeParams& p_;
    Tensor* dst_;
    RowPlan plan_;
    const Tensor *q_, *k_, *v_, *mask_, *sinks_;
    float scale_, max_bias_, cap_, m0_, m1_;
    uint32_t n_head_log2_;
    bool prefetch_ = false;  // fa_rowwise::prefetch_kv: K/V rows asked for ahead of their use
    float* partials_;
    float *qf_, *fold_V_, *M_, *S_, *fM_, *fS_, *slope_;
    const uint16_t* mrow_[kMaxVectors];
    // one block of columns: scores and mask values per vector
    float score_[kMaxVectors * kBlock], mvs_[kMaxVectors * kBlock], mblk_[kMaxVectors * kBlock];
    const float* mvs_used_ = nullptr;  // mvs_, or mblk_ when the block keeps every column
    alignas(32) float usum_[kMaxVectors * 8 * 8];  // per vector, 8 columns' lane sums
    const uint16_t* krow_[kBlock];
};


}  // namespace
}  // namespace pyggml::cpu
