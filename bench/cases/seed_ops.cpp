// Seed ops: DeepSeek-V4 hyper-connection ops, the Mamba-2 selective scan and the lightning
// indexer. Throughput in GB/s of data read + written (reference: the memcpy bandwidth measured
// at start), the indexer in GFLOP/s. Reported, never asserted.
#include <random>
#include <vector>

#include "../bench/bench_common.h"

namespace {

void fill(pyggml::Tensor* t, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> row(t->ne[0]);
    for (int64_t r = 0; r < t->nrows(); ++r) {
        for (auto& v : row) v = u(rng);
        pyggml::from_float_row(t->type, row.data(),
                               t->row(r % t->ne[1], (r / t->ne[1]) % t->ne[2], r / (t->ne[1] * t->ne[2])), t->ne[0]);
    }
}

double run_seconds(pyggml::Context& ctx, pyggml::Tensor* out, int n_threads) {
    pyggml::Graph g(&ctx);
    g.build_forward_expand(out);
    return bench::time_median([&] { g.compute(n_threads); }, 9);
}

}  // namespace

PYGGML_BENCH(seed_ops) {
    using pyggml::Type;
    std::mt19937 rng(11);
    const int64_t n_embd = 4096, hc = 4, T = 512;
    if (bc.wants("dsv4_hc_comb")) {
        for (int n_iter : {1, 20}) {
            pyggml::Context ctx(size_t(8) << 20);
            pyggml::Tensor* mixes = ctx.new_tensor(Type::F32, {(2 + hc) * hc, T});
            pyggml::Tensor* scale = ctx.new_tensor(Type::F32, {3});
            pyggml::Tensor* base = ctx.new_tensor(Type::F32, {(2 + hc) * hc});
            fill(mixes, rng, -2, 2);
            fill(scale, rng, -0.5f, 0.5f);
            fill(base, rng, -0.25f, 0.25f);
            pyggml::Tensor* r = pyggml::dsv4_hc_comb(&ctx, mixes, scale, base, 1e-6f, n_iter);
            const double bytes = double(mixes->nbytes() + r->nbytes());
            const double t = run_seconds(ctx, r, bc.n_threads);
            bc.report("dsv4_hc_comb hc4 T512 n_iter" + std::to_string(n_iter), bytes / t / 1e9, "GB/s", bc.copy_gbs,
                      "copy");
        }
    }
    if (bc.wants("dsv4_hc_pre")) {
        pyggml::Context ctx(size_t(160) << 20);
        pyggml::Tensor* x = ctx.new_tensor(Type::F32, {n_embd, hc, T});
        pyggml::Tensor* w = ctx.new_tensor(Type::F32, {hc, T});
        pyggml::Tensor* g = ctx.new_tensor(Type::F32, {n_embd, hc, T});
        fill(x, rng);
        fill(w, rng, 0, 1);
        fill(g, rng, -4, 4);
        pyggml::Tensor* r = pyggml::dsv4_hc_pre(&ctx, x, w);
        double bytes = double(x->nbytes() + w->nbytes() + r->nbytes());
        bc.report("dsv4_hc_pre n_embd4096 hc4 T512", bytes / run_seconds(ctx, r, bc.n_threads) / 1e9, "GB/s",
                  bc.copy_gbs, "copy");
        pyggml::Tensor* rg = pyggml::dsv4_hc_pre_gated(&ctx, x, g, 0.25f);
        bytes = double(x->nbytes() + g->nbytes() + rg->nbytes());
        bc.report("dsv4_hc_pre_gated n_embd4096 hc4 T512", bytes / run_seconds(ctx, rg, bc.n_threads) / 1e9, "GB/s",
                  bc.copy_gbs, "copy");
    }
    if (bc.wants("dsv4_hc_post")) {
        pyggml::Context ctx(size_t(160) << 20);
        pyggml::Tensor* x = ctx.new_tensor(Type::F32, {n_embd, T});
        pyggml::Tensor* res = ctx.new_tensor(Type::F32, {n_embd, hc, T});
        pyggml::Tensor* post = ctx.new_tensor(Type::F32, {hc, T});
        pyggml::Tensor* comb = ctx.new_tensor(Type::F32, {hc, hc, T});
        fill(x, rng);
        fill(res, rng);
        fill(post, rng, 0, 2);
        fill(comb, rng, 0, 1);
        pyggml::Tensor* r = pyggml::dsv4_hc_post(&ctx, x, res, post, comb);
        const double bytes = double(x->nbytes() + res->nbytes() + post->nbytes() + comb->nbytes() + r->nbytes());
        bc.report("dsv4_hc_post n_embd4096 hc4 T512 comb", bytes / run_seconds(ctx, r, bc.n_threads) / 1e9, "GB/s",
                  bc.copy_gbs, "copy");
    }
    if (bc.wants("ssm_scan")) {
        const int64_t d_state = 128, head_dim = 64, n_head = 32, n_group = 1, n_tok = 256, n_seqs = 1;
        pyggml::Context ctx(size_t(64) << 20);
        pyggml::Tensor* s = ctx.new_tensor(Type::F32, {d_state, head_dim, n_head, n_seqs});
        pyggml::Tensor* x = ctx.new_tensor(Type::F32, {head_dim, n_head, n_tok, n_seqs});
        pyggml::Tensor* dt = ctx.new_tensor(Type::F32, {n_head, n_tok, n_seqs});
        pyggml::Tensor* A = ctx.new_tensor(Type::F32, {1, n_head});
        pyggml::Tensor* B = ctx.new_tensor(Type::F32, {d_state, n_group, n_tok, n_seqs});
        pyggml::Tensor* C = ctx.new_tensor(Type::F32, {d_state, n_group, n_tok, n_seqs});
        pyggml::Tensor* ids = ctx.new_tensor(Type::I32, {n_seqs});
        fill(s, rng);
        fill(x, rng);
        fill(dt, rng);
        fill(A, rng, -1.0f, -0.5f);
        fill(B, rng);
        fill(C, rng);
        ((int32_t*)ids->data)[0] = 0;
        pyggml::Tensor* r = pyggml::ssm_scan(&ctx, s, x, dt, A, B, C, ids, 1);
        const double bytes = double(s->nbytes() + x->nbytes() + dt->nbytes() + A->nbytes() + B->nbytes() +
                                    C->nbytes() + r->nbytes());
        const double t = run_seconds(ctx, r, bc.n_threads);
        bc.report("ssm_scan mamba2 ds128 hd64 h32 T256", bytes / t / 1e9, "GB/s", bc.copy_gbs, "copy");
        // 2 flops for the update (fma + mul) + 2 for the y dot, per state element and token
        bc.report("ssm_scan mamba2 ds128 hd64 h32 T256", 4.0 * d_state * head_dim * n_head * n_tok / t / 1e9,
                  "GFLOP/s");
    }
    if (bc.wants("lightning_indexer")) {
        const int64_t D = 128, H = 64, N = 32, KV = 4096;
        pyggml::Context ctx(size_t(64) << 20);
        pyggml::Tensor* q = ctx.new_tensor(Type::F32, {D, H, N, 1});
        pyggml::Tensor* k = ctx.new_tensor(Type::F16, {D, 1, KV, 1});
        pyggml::Tensor* w = ctx.new_tensor(Type::F32, {H, N, 1, 1});
        pyggml::Tensor* m = ctx.new_tensor(Type::F16, {KV, N, 1, 1});
        fill(q, rng);
        fill(k, rng);
        fill(w, rng, 0, 1.0f / H);
        fill(m, rng);
        pyggml::Tensor* r = pyggml::lightning_indexer(&ctx, q, k, w, m);
        const double t = run_seconds(ctx, r, bc.n_threads);
        bc.report("lightning_indexer D128 H64 N32 kv4096 f16 K", 2.0 * D * H * N * KV / t / 1e9, "GFLOP/s");
    }
}
