// Recurrent attention ops: the gated delta rule (Qwen3.5 shapes: head size 128, decode and a
// 64-token prompt chunk), GLA and RWKV-6/7 (head size 64). GFLOP/s counts the multiply-adds of
// the state update and output per state element and token. Reported, never asserted.
#include <random>
#include <vector>

#include "../bench/bench_common.h"

namespace {

void fill(pyggml::Tensor* t, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    float* p = (float*)t->data;
    for (int64_t i = 0; i < t->nelements(); ++i) p[i] = u(rng);
}

double run_seconds(pyggml::Context& ctx, pyggml::Tensor* out, int n_threads) {
    pyggml::Graph g(&ctx);
    g.build_forward_expand(out);
    return bench::time_median([&] { g.compute(n_threads); }, 9);
}

}  // namespace

PYGGML_BENCH(recurrent_attn) {
    using pyggml::Type;
    std::mt19937 rng(7);
    for (const int64_t T : {int64_t(1), int64_t(64)}) {
        const std::string name = "gated_delta_net S128 H32 Hk16 T" + std::to_string(T) + " kda";
        if (!bc.wants(name)) continue;
        const int64_t S = 128, H = 32, Hk = 16;
        pyggml::Context ctx(size_t(128) << 20);
        pyggml::Tensor* q = ctx.new_tensor(Type::F32, {S, Hk, T, 1});
        pyggml::Tensor* k = ctx.new_tensor(Type::F32, {S, Hk, T, 1});
        pyggml::Tensor* v = ctx.new_tensor(Type::F32, {S, H, T, 1});
        pyggml::Tensor* g = ctx.new_tensor(Type::F32, {S, H, T, 1});
        pyggml::Tensor* beta = ctx.new_tensor(Type::F32, {1, H, T, 1});
        pyggml::Tensor* st = ctx.new_tensor(Type::F32, {S, S, H, 1});
        fill(q, rng, -0.1f, 0.1f);
        fill(k, rng, -0.1f, 0.1f);
        fill(v, rng);
        fill(g, rng, -0.5f, -0.01f);
        fill(beta, rng, 0.1f, 1.0f);
        fill(st, rng);
        pyggml::Tensor* r = pyggml::gated_delta_net(&ctx, q, k, v, g, beta, st, 1);
        const double t = run_seconds(ctx, r, bc.n_threads);
        // decay (1 mul), k dot (1 fma), update (1 fma), q dot (1 fma): 7 flops per element
        bc.report(name, 7.0 * S * S * H * T / t / 1e9, "GFLOP/s");
    }
    const int64_t S = 64, H = 32, T = 64;
    if (bc.wants("rwkv_wkv7")) {
        pyggml::Context ctx(size_t(64) << 20);
        std::vector<pyggml::Tensor*> in;
        for (int i = 0; i < 6; ++i) {
            in.push_back(ctx.new_tensor(Type::F32, {S, H, T}));
            fill(in.back(), rng, -0.1f, 0.1f);
        }
        pyggml::Tensor* st = ctx.new_tensor(Type::F32, {S * S * H, 1});
        fill(st, rng);
        pyggml::Tensor* r = pyggml::rwkv_wkv7(&ctx, in[0], in[1], in[2], in[3], in[4], in[5], st);
        bc.report("rwkv_wkv7 S64 H32 T64", 8.0 * S * S * H * T / run_seconds(ctx, r, bc.n_threads) / 1e9, "GFLOP/s");
    }
    if (bc.wants("rwkv_wkv6")) {
        pyggml::Context ctx(size_t(64) << 20);
        std::vector<pyggml::Tensor*> in;
        for (int i = 0; i < 4; ++i) {
            in.push_back(ctx.new_tensor(Type::F32, {S, H, T}));
            fill(in.back(), rng, -0.1f, 0.1f);
        }
        pyggml::Tensor* tf = ctx.new_tensor(Type::F32, {S, H});
        pyggml::Tensor* st = ctx.new_tensor(Type::F32, {S * S * H, 1});
        fill(tf, rng);
        fill(st, rng);
        pyggml::Tensor* r = pyggml::rwkv_wkv6(&ctx, in[0], in[1], in[2], tf, in[3], st);
        bc.report("rwkv_wkv6 S64 H32 T64", 6.0 * S * S * H * T / run_seconds(ctx, r, bc.n_threads) / 1e9, "GFLOP/s");
    }
    if (bc.wants("gated_linear_attn")) {
        pyggml::Context ctx(size_t(64) << 20);
        std::vector<pyggml::Tensor*> in;
        for (int i = 0; i < 4; ++i) {
            in.push_back(ctx.new_tensor(Type::F32, {S, H, T}));
            fill(in.back(), rng, -0.1f, 0.1f);
        }
        pyggml::Tensor* st = ctx.new_tensor(Type::F32, {S * S * H, 1});
        fill(st, rng);
        pyggml::Tensor* r = pyggml::gated_linear_attn(&ctx, in[0], in[1], in[2], in[3], st, 0.125f);
        bc.report("gated_linear_attn S64 H32 T64", 4.0 * S * S * H * T / run_seconds(ctx, r, bc.n_threads) / 1e9,
                  "GFLOP/s");
    }
}
