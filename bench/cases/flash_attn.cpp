// flash_attn_ext throughput (head size 128, 32 query heads / 8 KV heads, F16 K/V):
// * dense, n_kv 4096, batch 1 and 32: GFLOP/s (4·N·H·KV·D) against our own naive attention
//   (mul_mat K·Q, soft_max_ext, mul_mat with a transposed V cache, permute + cont), and GB/s of
//   K/V read (once per KV head) against the memcpy bandwidth;
// * sparse hint, n_kv 16384, n_kv_max in {256, 1024, 4096}, random masks with exactly n_kv_max
//   finite entries per row (random columns, or random 64-row blocks as an indexer picks them):
//   time relative to the dense op on the same inputs at F32 precision (the kernel the sparse
//   hint runs in; at the default precision F16 K/V with few tokens take ggml's order of
//   operations, a different and slower kernel), the "ratio" column is measured / ideal,
//   ideal = n_kv_max / n_kv; 1.0 is perfect. The sparse time itself is reported too.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "../bench/bench_common.h"
#include "pyggml/error.h"

namespace {

using pyggml::Tensor;
using pyggml::Type;

constexpr uint16_t kF16Zero = 0x0000, kF16NegInf = 0xFC00;

struct FaCase {
    int64_t D = 128, H = 32, Hkv = 8, KV, N;
    pyggml::Context ctx;
    Tensor *q, *k, *v, *vt, *mask;
    FaCase(int64_t kv, int64_t n)
        : KV(kv), N(n), ctx(size_t(3) * D * kv * 8 * 2 + size_t(D) * n * 32 * 8 + size_t(kv) * n * 2 +
                            size_t(kv) * n * 32 * 4 * 2 + (size_t(64) << 20)) {
        std::mt19937 rng(1);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        q = ctx.new_tensor(Type::F32, {D, N, H, 1});
        k = ctx.new_tensor(Type::F16, {D, KV, Hkv, 1});
        v = ctx.new_tensor(Type::F16, {D, KV, Hkv, 1});
        vt = ctx.new_tensor(Type::F16, {KV, D, Hkv, 1});  // the non-FA cache layout (V transposed)
        mask = ctx.new_tensor(Type::F16, {KV, N, 1, 1});
        for (int64_t i = 0; i < q->nelements(); ++i) ((float*)q->data)[i] = u(rng);
        for (Tensor* t : {k, v, vt}) {
            uint16_t* p = (uint16_t*)t->data;
            for (int64_t i = 0; i < t->nelements(); ++i) p[i] = pyggml::fp32_to_fp16(u(rng));
        }
        std::fill((uint16_t*)mask->data, (uint16_t*)mask->data + mask->nelements(), kF16Zero);
    }
    // Exactly n finite entries per row: random 64-row blocks (indexer-style top-k blocks).
    void block_mask(int64_t n, uint32_t seed) {
        std::mt19937 rng(seed);
        const int64_t nb = KV / 64, want = n / 64;
        std::vector<int32_t> blocks(nb);
        for (int64_t t = 0; t < N; ++t) {
            uint16_t* row = (uint16_t*)mask->row(t);
            std::fill(row, row + KV, kF16NegInf);
            for (int64_t b = 0; b < nb; ++b) blocks[b] = (int32_t)b;
            std::shuffle(blocks.begin(), blocks.end(), rng);
            for (int64_t b = 0; b < want; ++b) std::fill(row + 64 * blocks[b], row + 64 * blocks[b] + 64, kF16Zero);
        }
    }
    // Exactly n finite entries per row at random columns (values 0).
    void sparse_mask(int64_t n, uint32_t seed) {
        std::mt19937 rng(seed);
        std::vector<int32_t> cols(KV);
        for (int64_t t = 0; t < N; ++t) {
            uint16_t* row = (uint16_t*)mask->row(t);
            std::fill(row, row + KV, kF16NegInf);
            for (int64_t j = 0; j < KV; ++j) cols[j] = (int32_t)j;
            for (int64_t j = 0; j < n; ++j) {  // partial Fisher-Yates
                std::uniform_int_distribution<int64_t> d(j, KV - 1);
                std::swap(cols[j], cols[d(rng)]);
                row[cols[j]] = kF16Zero;
            }
        }
    }
    float scale() const { return 1.0f / std::sqrt((float)D); }
    double seconds(Tensor* out, int n_threads, int reps) {
        pyggml::Graph g(&ctx);
        g.build_forward_expand(out);
        return bench::time_median([&] { g.compute(n_threads); }, reps);
    }
    Tensor* fa(int32_t n_kv_max = 0, bool prec_f32 = false) {
        Tensor* r = pyggml::flash_attn_ext(&ctx, q, k, v, mask, scale(), 0.0f, 0.0f);
        pyggml::flash_attn_ext_set_n_kv_max(r, n_kv_max);
        if (prec_f32) pyggml::flash_attn_ext_set_prec(r, 10);
        return r;
    }
    Tensor* naive() {
        Tensor* kq = pyggml::mul_mat(&ctx, k, q);                         // [KV, N, H, 1]
        kq = pyggml::soft_max_ext(&ctx, kq, mask, scale(), 0.0f);
        Tensor* kqv = pyggml::mul_mat(&ctx, vt, kq);                      // [D, N, H, 1]
        return pyggml::cont(&ctx, pyggml::permute(&ctx, kqv, 0, 2, 1, 3));  // [D, H, N, 1]
    }
    double flops() const { return 4.0 * N * H * KV * D; }
    double kv_bytes() const { return 2.0 * KV * Hkv * D * 2; }
};

}  // namespace

PYGGML_BENCH(flash_attn) {
    for (int64_t n : {1, 32}) {
        const std::string name = "flash_attn f16 D128 kv4096 h32/8 n" + std::to_string(n);
        if (!bc.wants(name)) continue;
        FaCase c(4096, n);
        const int reps = n == 1 ? 21 : 7;
        const double t = c.seconds(c.fa(), bc.n_threads, reps);
        double t_ref = 0.0;
        try {
            t_ref = c.seconds(c.naive(), bc.n_threads, reps);
        } catch (const pyggml::Error&) {  // naive path ops not available on this build
        }
        bc.report(name + " GFLOP/s", c.flops() / t / 1e9, "GFLOP/s", t_ref > 0 ? c.flops() / t_ref / 1e9 : 0.0,
                  "naive mm+sm+mm");
        bc.report(name + " GB/s", c.kv_bytes() / t / 1e9, "GB/s", bc.copy_gbs, "copy");
    }
    for (int64_t n : {1, 32}) {
        const std::string base = "flash_attn sparse kv16384 n" + std::to_string(n);
        if (!bc.wants(base)) continue;
        FaCase c(16384, n);
        const int reps = n == 1 ? 11 : 5;
        const double t_dense = c.seconds(c.fa(0, true), bc.n_threads, reps);
        bc.report(base + " dense (F32 prec) ms", t_dense * 1e3, "ms");
        for (int blocks = 0; blocks < 2; ++blocks)
            for (int64_t nmax : {256, 1024, 4096}) {
                if (blocks) c.block_mask(nmax, (uint32_t)nmax);
                else c.sparse_mask(nmax, (uint32_t)nmax);
                const double t_sp = c.seconds(c.fa((int32_t)nmax), bc.n_threads, reps);
                const double ideal = (double)nmax / c.KV;
                // ours = time(sparse)/time(dense); reference = the ideal ratio; ratio = ours/ideal
                const std::string name = base + (blocks ? " blocks64" : " random") + " n_kv_max " + std::to_string(nmax);
                bc.report(name + " ms", t_sp * 1e3, "ms");
                bc.report(name + " t/t_dense", t_sp / t_dense, "x", ideal, "ideal");
            }
    }
}
