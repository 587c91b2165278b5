// Shapes of the row-wise flash-attention kernel's work items (flash_attn_rowwise.cpp): shared by
// the work-size query and the kernel of every instruction-set level, which must agree.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>

#include "cpu/kernels.h"

namespace pyggml::cpu::fa_rowwise {

constexpr int64_t kRowwiseMaxTokens = 64;  // up to this many query tokens (ggml tiles from 64 on)
constexpr int64_t kChunk = 512;            // KV columns per chunk (fixed boundaries)
constexpr int64_t kMaxVectors = 16;        // query vectors per work item
constexpr int kBlock = 32;                 // columns scored before the accumulators move

// Whether the kernel asks for K/V rows ahead of their use: when one node's K and V span more
// than twice a core's L2 they come from L3 or memory, faster for the prefetches (SmolLM2-135M
// Q4_1 decode at 4096 cached tokens: 27% less time a token at 1 thread, 21% at 2; the tiny
// demo model at 16384: 34%). Smaller caches are read from L2 and L3 as fast without, and the
// prefetch instructions cost (the tiny model at 4096, 1.1 MB a layer: +3%). PYGGML_FA_PREFETCH=0
// turns it off, for benchmarks.
bool prefetch_kv(const Tensor* k, const Tensor* v);

// Shapes of the work items; the work size and the kernel must agree.
struct RowPlan {
    int64_t D, Dv, N, H, S, KV;
    int64_t rk, rv, r, hpi, n_hb, tpi, n_tb, ng;
    int64_t n_base;   // items without the chunk split
    int64_t nchunks;  // chunks of the KV axis
    bool split;       // items are (base item, chunk), folded after a barrier
    int64_t per_thread;  // floats

    RowPlan(const Tensor* dst, int nth) {
        const Tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2];
        D = q->ne[0]; Dv = v->ne[0]; N = q->ne[1]; H = q->ne[2]; S = q->ne[3]; KV = k->ne[1];
        rk = H / k->ne[2];
        rv = H / v->ne[2];
        r = std::gcd(rk, rv);
        hpi = std::min(r, kMaxVectors);
        n_hb = (r + hpi - 1) / hpi;
        tpi = std::min<int64_t>(std::max<int64_t>(1, kMaxVectors / hpi), std::max<int64_t>(N, 1));
        n_tb = (N + tpi - 1) / tpi;
        ng = H / r;
        n_base = S * n_tb * ng * n_hb;
        nchunks = std::max<int64_t>(1, (KV + kChunk - 1) / kChunk);
        split = nchunks > 1 && n_base < 4 * nth;
        const int64_t nq = hpi * tpi;
        per_thread = nq * (D + 2 * Dv + 8) + Dv + 64;
    }
    int64_t nq() const { return hpi * tpi; }
    size_t partial_floats() const { return split ? size_t(n_base * nchunks * nq() * (Dv + 2)) : 0; }
};

}  // namespace pyggml::cpu::fa_rowwise
