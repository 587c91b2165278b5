// Ops added for issue 14 that models run per token: l2_norm (RWKV-7, gated delta nets),
// group_norm (diffusion/vision), add_id (MoE expert biases), leaky_relu, in GB/s of data read +
// written against the memcpy bandwidth; out_prod in GFLOP/s against mul_mat on the same product
// with pre-transposed operands. Reported, never asserted.
#include <random>
#include <vector>

#include "../bench/bench_common.h"

namespace {

void fill(pyggml::Tensor* t, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> row(t->ne[0]);
    for (int64_t r = 0; r < t->nrows(); ++r) {
        for (auto& v : row) v = u(rng);
        pyggml::from_float_row(t->type, row.data(),
                               t->row(r % t->ne[1], (r / t->ne[1]) % t->ne[2], r / (t->ne[1] * t->ne[2])), t->ne[0]);
    }
}

double seconds(pyggml::Context& ctx, pyggml::Tensor* out, int n_threads) {
    pyggml::Graph g(&ctx);
    g.build_forward_expand(out);
    return bench::time_median([&] { g.compute(n_threads); }, 9);
}

}  // namespace

PYGGML_BENCH(more_ops) {
    using pyggml::Type;
    std::mt19937 rng(5);
    if (bc.wants("l2_norm")) {
        pyggml::Context ctx(size_t(64) << 20);
        pyggml::Tensor* x = ctx.new_tensor(Type::F32, {64, 32, 512});
        fill(x, rng);
        const double t = seconds(ctx, pyggml::l2_norm(&ctx, x, 1e-6f), bc.n_threads);
        bc.report("l2_norm f32 64x32x512", 2.0 * x->nbytes() / t / 1e9, "GB/s", bc.copy_gbs, "copy");
    }
    if (bc.wants("group_norm")) {
        pyggml::Context ctx(size_t(96) << 20);
        pyggml::Tensor* x = ctx.new_tensor(Type::F32, {64, 64, 320});
        fill(x, rng);
        const double t = seconds(ctx, pyggml::group_norm(&ctx, x, 32, 1e-6f), bc.n_threads);
        bc.report("group_norm f32 64x64x320 g32", 3.0 * x->nbytes() / t / 1e9, "GB/s", bc.copy_gbs, "copy");
    }
    if (bc.wants("add_id")) {
        pyggml::Context ctx(size_t(96) << 20);
        pyggml::Tensor* a = ctx.new_tensor(Type::F32, {2880, 4, 512});
        pyggml::Tensor* b = ctx.new_tensor(Type::F32, {2880, 32});
        pyggml::Tensor* ids = ctx.new_tensor(Type::I32, {4, 512});
        fill(a, rng);
        fill(b, rng);
        for (int i = 0; i < 4 * 512; ++i) ((int32_t*)ids->data)[i] = (i * 7) % 32;
        const double t = seconds(ctx, pyggml::add_id(&ctx, a, b, ids), bc.n_threads);
        bc.report("add_id f32 2880x4x512 (32 experts)", 3.0 * a->nbytes() / t / 1e9, "GB/s", bc.copy_gbs, "copy");
    }
    if (bc.wants("leaky_relu")) {
        pyggml::Context ctx(size_t(64) << 20);
        pyggml::Tensor* x = ctx.new_tensor(Type::F32, {4096, 1024});
        fill(x, rng);
        const double t = seconds(ctx, pyggml::leaky_relu(&ctx, x, 0.1f, false), bc.n_threads);
        bc.report("leaky_relu f32 4096x1024", 2.0 * x->nbytes() / t / 1e9, "GB/s", bc.copy_gbs, "copy");
    }
    if (bc.wants("out_prod")) {
        const int64_t m = 512, n = 512, k = 256;
        pyggml::Context ctx(size_t(64) << 20);
        pyggml::Tensor* a = ctx.new_tensor(Type::F32, {m, k});
        pyggml::Tensor* b = ctx.new_tensor(Type::F32, {n, k});
        pyggml::Tensor* at = ctx.new_tensor(Type::F32, {k, m});  // the same product for mul_mat
        pyggml::Tensor* bt = ctx.new_tensor(Type::F32, {k, n});
        fill(a, rng);
        fill(b, rng);
        fill(at, rng);
        fill(bt, rng);
        const double flops = 2.0 * m * n * k;
        const double ours = seconds(ctx, pyggml::out_prod(&ctx, a, b), bc.n_threads);
        const double ref = seconds(ctx, pyggml::mul_mat(&ctx, at, bt), bc.n_threads);
        bc.report("out_prod f32 512x512 k256", flops / ours / 1e9, "GFLOP/s", flops / ref / 1e9, "mul_mat");
    }
}
