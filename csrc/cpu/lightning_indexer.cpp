// CPU kernel of LIGHTNING_INDEXER (DeepSeek sparse-attention top-k scores).
// Phase 1: all threads widen the K rows to f32 into the shared scratch, transposed (KT[s][d][j]).
// Phase 2: work units (stream, block of 64 kv rows, query token) are split across threads; each
// score is sum_h relu(q_h . k_j) * w_h (h increasing, f32) plus the f16 mask value. The blocks
// run on AVX-512 / AVX2 (picked at run time) or a plain loop.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/seed_simd.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {

// K is widened to f32 and stored transposed per stream, KT[s][d][j] with the kv axis padded to
// a multiple of kJ (zeros), so a block of kJ scores is a plain sum of broadcast(q[d]) * KT[d][j..]
// vectors: no horizontal reductions, each lane accumulates its dot product in increasing d.
constexpr int64_t kJ = seed::kLiBlock;  // kv rows per block

struct Dims {
    int64_t D, H, N, n_kv, S, n_jb, ldk;
};

// KT rows hold n_jb blocks of kJ values plus 16 unused ones: a row stride that is a multiple
// of 4 KiB would put every d row of a block in the same L1 set.
inline Dims dims_of(const Tensor* dst) {
    const Tensor* q = dst->src[0];
    const Tensor* k = dst->src[1];
    Dims d{q->ne[0], q->ne[1], q->ne[2], k->ne[2], q->ne[3], 0, 0};
    d.n_jb = (d.n_kv + kJ - 1) / kJ;
    d.ldk = d.n_jb * kJ + 16;
    return d;
}

inline int64_t n_jb_rows(const Dims& d) { return d.n_jb * kJ; }

}  // namespace

void cpu_forward_LIGHTNING_INDEXER(const ComputeParams& p, Tensor* dst) {
    const Tensor* q = dst->src[0];
    const Tensor* k = dst->src[1];
    const Tensor* w = dst->src[2];
    const Tensor* mask = dst->src[3];
    if (dst->is_empty()) return;
    const Dims dm = dims_of(dst);
    const int64_t D = dm.D, N = dm.N, n_kv = dm.n_kv, S = dm.S, ldk = dm.ldk, S_m = mask->ne[3];
    float* KT = (float*)p.wdata;
    // Phase 1: widen K rows (and zero the padding rows) into KT, transposed, kTr rows at a
    // time: the rows are widened into a small buffer, then every d gets kTr consecutive
    // values (one short contiguous store per d instead of a scattered one per value).
    {
        constexpr int64_t kTr = 8;  // divides kJ, so a group never straddles two streams
        const int64_t n_used = n_jb_rows(dm);
        std::vector<float> rows(kTr * D);
        int64_t g0, g1;
        split_range(n_used * S / kTr, p.ith, p.nth, g0, g1);
        for (int64_t g = g0; g < g1; ++g) {
            const int64_t j0 = (g * kTr) % n_used, s = (g * kTr) / n_used;
            for (int64_t i = 0; i < kTr; ++i) {
                float* row = rows.data() + i * D;
                if (j0 + i < n_kv) to_float_row(k->type, k->row(0, j0 + i, s), row, D);
                else std::fill(row, row + D, 0.0f);
            }
            float* col = KT + s * D * ldk + j0;
            for (int64_t d = 0; d < D; ++d)
                for (int64_t i = 0; i < kTr; ++i) col[d * ldk + i] = rows[i * D + d];
        }
    }
    p.barrier();
    // Phase 2: units (stream, kv block, token), token fastest so a thread reuses its K block.
    const int64_t n_jb = dm.n_jb;
    int64_t u0, u1;
    split_range(S * n_jb * N, p.ith, p.nth, u0, u1);
    const seed::SeedOps& kern = seed::kernels_for(seed::isa());
    alignas(64) float sc[kJ];
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t t = u % N, jb = (u / N) % n_jb, s = u / (N * n_jb);
        const int64_t j0 = jb * kJ, j1 = std::min(n_kv, j0 + kJ);
        const float* Kb = KT + s * D * ldk + j0;
        const char* q0 = q->row(0, t, s);
        const float* wrow = (const float*)w->row(t, 0, s);
        kern.li_block(Kb, ldk, q0, q->nb[1], wrow, dm.H, D, sc);
        const uint16_t* mrow = (const uint16_t*)mask->row(t, 0, s % S_m);
        float* orow = (float*)dst->row(t, 0, s);
        for (int64_t j = j0; j < j1; ++j) orow[j] = sc[j - j0] + fp16_to_fp32(mrow[j]);
    }
}

size_t cpu_work_size_LIGHTNING_INDEXER(const Tensor* dst, int) {
    const Dims dm = dims_of(dst);
    return sizeof(float) * (size_t)(dm.D * dm.ldk * dm.S);
}

}  // namespace pyggml::cpu
