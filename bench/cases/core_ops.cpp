// Core llama-layer ops besides mul_mat: rms_norm, soft_max_ext (with an f16 mask) and rope
// (NeoX). Memory-bound ops: reported in GB/s of data read + written, against the memcpy
// bandwidth measured at start (the ratio is the fraction of the copy bandwidth).
#include <random>
#include <vector>

#include "../bench/bench_common.h"
#include "pyggml/ops/rope.h"

namespace {

void fill_uniform(pyggml::Tensor* t, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> row(t->ne[0]);
    for (int64_t r = 0; r < t->nrows(); ++r) {
        for (auto& v : row) v = u(rng);
        pyggml::from_float_row(t->type, row.data(), t->row(r % t->ne[1], (r / t->ne[1]) % t->ne[2], r / (t->ne[1] * t->ne[2])), t->ne[0]);
    }
}

double run_gbs(pyggml::Context& ctx, pyggml::Tensor* out, double bytes, int n_threads) {
    pyggml::Graph g(&ctx);
    g.build_forward_expand(out);
    const double t = bench::time_median([&] { g.compute(n_threads); }, 9);
    return bytes / t / 1e9;
}

}  // namespace

PYGGML_BENCH(core_ops) {
    using pyggml::Type;
    std::mt19937 rng(7);
    if (bc.wants("rms_norm")) {
        pyggml::Context ctx(size_t(64) << 20);
        pyggml::Tensor* x = ctx.new_tensor(Type::F32, {4096, 512});
        fill_uniform(x, rng);
        const double bytes = 2.0 * x->nbytes();
        bc.report("rms_norm f32 4096x512", run_gbs(ctx, pyggml::rms_norm(&ctx, x, 1e-6f), bytes, bc.n_threads), "GB/s",
                  bc.copy_gbs, "copy");
    }
    if (bc.wants("soft_max_ext")) {
        pyggml::Context ctx(size_t(128) << 20);
        pyggml::Tensor* x = ctx.new_tensor(Type::F32, {4096, 32, 32});
        pyggml::Tensor* mask = ctx.new_tensor(Type::F16, {4096, 32});
        fill_uniform(x, rng);
        fill_uniform(mask, rng);
        const double bytes = 2.0 * x->nbytes() + mask->nbytes();
        bc.report("soft_max_ext f32 kv4096 x32 x32 f16 mask",
                  run_gbs(ctx, pyggml::soft_max_ext(&ctx, x, mask, 0.125f, 0.0f), bytes, bc.n_threads), "GB/s",
                  bc.copy_gbs, "copy");
    }
    if (bc.wants("rope")) {
        pyggml::Context ctx(size_t(128) << 20);
        pyggml::Tensor* x = ctx.new_tensor(Type::F32, {128, 32, 512});
        pyggml::Tensor* pos = ctx.new_tensor(Type::I32, {512});
        fill_uniform(x, rng);
        for (int i = 0; i < 512; ++i) ((int32_t*)pos->data)[i] = 1000 + i;
        const double bytes = 2.0 * x->nbytes();
        pyggml::Tensor* r = pyggml::rope_ext(&ctx, x, pos, nullptr, 128, pyggml::kRopeNeox, 0, 10000.0f, 1.0f, 0.0f,
                                             1.0f, 32.0f, 1.0f);
        bc.report("rope_ext neox f32 128x32x512", run_gbs(ctx, r, bytes, bc.n_threads), "GB/s", bc.copy_gbs, "copy");
    }
}
