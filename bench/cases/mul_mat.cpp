// mul_mat throughput: F32 GEMM (GFLOP/s) and the decode GEMV 4096 x 14336, n = 1, per weight
// type (GB/s of weights read, against the memcpy bandwidth measured at start, so the ratio is
// the fraction of the copy bandwidth reached).
#include <random>
#include <vector>

#include "../bench/bench_common.h"
#include "pyggml/error.h"

namespace {

struct MulMatCase {
    pyggml::Context ctx;
    pyggml::Graph graph;
    pyggml::Tensor* a;
    MulMatCase(pyggml::Type wt, int64_t K, int64_t M, int64_t N)
        : ctx(size_t(K) * M * 4 + size_t(K) * N * 4 + size_t(M) * N * 4 + (size_t(16) << 20)), graph(&ctx) {
        std::mt19937 rng(1);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        a = ctx.new_tensor(wt, {K, M});
        pyggml::Tensor* b = ctx.new_tensor(pyggml::Type::F32, {K, N});
        std::vector<float> row(K);
        for (int64_t m = 0; m < M; ++m) {
            for (auto& v : row) v = u(rng);
            pyggml::from_float_row(wt, row.data(), a->row(m), K);
        }
        for (int64_t i = 0; i < K * N; ++i) ((float*)b->data)[i] = u(rng);
        graph.build_forward_expand(pyggml::mul_mat(&ctx, a, b));
    }
    double seconds(int n_threads, int reps) {
        return bench::time_median([&] { graph.compute(n_threads); }, reps);
    }
};

}  // namespace

PYGGML_BENCH(mul_mat) {
    using pyggml::Type;
    if (bc.wants("mul_mat f32 gemm 1024")) {
        MulMatCase c(Type::F32, 1024, 1024, 1024);
        const double t = c.seconds(bc.n_threads, 7);
        bc.report("mul_mat f32 gemm 1024x1024x1024", 2.0 * 1024 * 1024 * 1024 / t / 1e9, "GFLOP/s");
    }
    if (bc.wants("mul_mat q4_0 gemm")) {
        MulMatCase c(Type::Q4_0, 4096, 4096, 512);
        const double t = c.seconds(bc.n_threads, 3);
        bc.report("mul_mat q4_0 gemm K4096 M4096 N512", 2.0 * 4096 * 4096 * 512 / t / 1e9, "GFLOP/s");
    }
    const struct { Type t; const char* name; } gemv[] = {
        {Type::F32, "f32"}, {Type::F16, "f16"}, {Type::Q8_0, "q8_0"}, {Type::Q4_0, "q4_0"}};
    for (auto& g : gemv) {
        const std::string name = std::string("mul_mat ") + g.name + " gemv K4096 M14336 N1";
        if (!bc.wants(name)) continue;
        MulMatCase c(g.t, 4096, 14336, 1);
        const double t = c.seconds(bc.n_threads, 9);
        const double bytes = double(pyggml::row_size(g.t, 4096)) * 14336;
        bc.report(name + " GFLOP/s", 2.0 * 4096 * 14336 / t / 1e9, "GFLOP/s");
        bc.report(name + " GB/s", bytes / t / 1e9, "GB/s", bc.copy_gbs, "copy");
    }
}
