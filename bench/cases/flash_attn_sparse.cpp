// flash_attn_ext with the sparse hint (n_kv_max set) against the same op forced dense, at a
// 16384-cell cache, F16 K/V, for two head shapes:
// * gqa:  head size 128, 32 query heads / 8 KV heads, K and V separate;
// * dsv4: DeepSeek V4's attention, head size 512, 64 query heads sharing one K=V head (V is
//   the K tensor itself), one mask row per token for all heads.
// Batches 1 and 32; masks with exactly n_kv_max finite entries per row in {256, 1024, 4096},
// at random columns or in random 64-row blocks (as the indexer's top-k of compressed rows and
// the raw window pick them). The dense op runs on a mask of zeros at F32 precision (the
// kernel the sparse hint runs in; at the default precision a few tokens of F16 K/V take a
// different, ggml-ordered kernel). "ideal" = dense time x n_kv_max / n_kv; the ratio column is
// measured / ideal (1.0 is perfect). Dense and sparse graphs are timed alternately, one run
// each per round, and each reports its median over the rounds (so load changes hit both).
// Filter on names such as "fa_sparse dsv4 n32" or "fa_sparse gqa n1 blocks64 1024".
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "../bench/bench_common.h"

namespace {

using pyggml::Tensor;
using pyggml::Type;

constexpr uint16_t kF16Zero = 0x0000, kF16NegInf = 0xFC00;
constexpr int64_t kCells = 16384;
constexpr int64_t kMaxes[] = {256, 1024, 4096};

struct Shape {
    const char* name;
    int64_t D, H, Hkv;
    bool kv_shared;
};

struct SparseCase {
    Shape sh;
    int64_t N;
    pyggml::Context ctx;
    Tensor *q, *k, *v;
    SparseCase(const Shape& s, int64_t n)
        : sh(s), N(n),
          ctx(size_t(2) * s.D * kCells * s.Hkv * 2 + size_t(2) * s.D * n * s.H * 4 + size_t(8) * kCells * n * 2 +
              (size_t(64) << 20)) {
        std::mt19937 rng(1);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        q = ctx.new_tensor(Type::F32, {s.D, N, s.H, 1});
        k = ctx.new_tensor(Type::F16, {s.D, kCells, s.Hkv, 1});
        v = s.kv_shared ? k : ctx.new_tensor(Type::F16, {s.D, kCells, s.Hkv, 1});
        for (int64_t i = 0; i < q->nelements(); ++i) ((float*)q->data)[i] = u(rng);
        for (Tensor* t : {k, v}) {
            uint16_t* p = (uint16_t*)t->data;
            for (int64_t i = 0; i < t->nelements(); ++i) p[i] = pyggml::fp32_to_fp16(u(rng));
        }
    }
    Tensor* zeros_mask() {
        Tensor* m = ctx.new_tensor(Type::F16, {kCells, N, 1, 1});
        std::fill((uint16_t*)m->data, (uint16_t*)m->data + m->nelements(), kF16Zero);
        return m;
    }
    // Exactly n finite entries (0) per row: random 64-row blocks, or random columns.
    Tensor* sparse_mask(int64_t n, bool blocks, uint32_t seed) {
        Tensor* m = ctx.new_tensor(Type::F16, {kCells, N, 1, 1});
        std::mt19937 rng(seed);
        const int64_t unit = blocks ? 64 : 1, nb = kCells / unit;
        std::vector<int32_t> ids(nb);
        for (int64_t t = 0; t < N; ++t) {
            uint16_t* row = (uint16_t*)m->row(t);
            std::fill(row, row + kCells, kF16NegInf);
            for (int64_t b = 0; b < nb; ++b) ids[b] = (int32_t)b;
            for (int64_t b = 0; b < n / unit; ++b) {  // partial Fisher-Yates
                std::uniform_int_distribution<int64_t> d(b, nb - 1);
                std::swap(ids[b], ids[d(rng)]);
                std::fill(row + unit * ids[b], row + unit * ids[b] + unit, kF16Zero);
            }
        }
        return m;
    }
    Tensor* fa(Tensor* mask, int32_t n_kv_max) {
        Tensor* r = pyggml::flash_attn_ext(&ctx, q, k, v, mask, 1.0f / std::sqrt((float)sh.D), 0.0f, 0.0f);
        pyggml::flash_attn_ext_set_n_kv_max(r, n_kv_max);
        pyggml::flash_attn_ext_set_prec(r, 10);
        return r;
    }
};

double seconds_once(pyggml::Graph& g, int n_threads) {
    const auto t0 = std::chrono::steady_clock::now();
    g.compute(n_threads);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

PYGGML_BENCH(flash_attn_sparse) {
    const Shape shapes[] = {{"gqa", 128, 32, 8, false}, {"dsv4", 512, 64, 1, true}};
    for (const Shape& sh : shapes)
        for (int64_t n : {1, 32}) {
            const std::string base = std::string("fa_sparse ") + sh.name + " n" + std::to_string(n);
            struct Variant {
                std::string name;
                int64_t nmax;
                bool blocks;
            };
            std::vector<Variant> vars;
            for (int blocks = 0; blocks < 2; ++blocks)
                for (int64_t nmax : kMaxes) {
                    Variant v{base + (blocks ? " blocks64 " : " random ") + std::to_string(nmax), nmax, blocks != 0};
                    if (bc.wants(v.name)) vars.push_back(v);
                }
            if (vars.empty()) continue;
            SparseCase c(sh, n);
            std::vector<std::unique_ptr<pyggml::Graph>> graphs;
            auto add_graph = [&](Tensor* out) {
                graphs.push_back(std::make_unique<pyggml::Graph>(&c.ctx));
                graphs.back()->build_forward_expand(out);
            };
            add_graph(c.fa(c.zeros_mask(), 0));
            for (const Variant& v : vars) add_graph(c.fa(c.sparse_mask(v.nmax, v.blocks, (uint32_t)v.nmax), (int32_t)v.nmax));
            // Rounds: the dense graph, then every sparse graph, once each; one warm-up round.
            const int rounds = n == 1 ? 9 : (sh.D >= 512 ? 3 : 5);
            std::vector<std::vector<double>> t(graphs.size());
            for (int r = -1; r < rounds; ++r)
                for (size_t i = 0; i < graphs.size(); ++i) {
                    const double s = seconds_once(*graphs[i], bc.n_threads);
                    if (r >= 0) t[i].push_back(s);
                }
            const double t_dense = median(t[0]);
            bc.report(base + " dense ms", t_dense * 1e3, "ms");
            for (size_t i = 0; i < vars.size(); ++i) {
                const double t_sp = median(t[i + 1]), ideal = t_dense * (double)vars[i].nmax / (double)kCells;
                bc.report(vars[i].name + " ms", t_sp * 1e3, "ms", ideal * 1e3, "ideal ms");
            }
        }
}
