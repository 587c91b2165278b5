// mul_mat per block type of the type table, on a 4096 x 14336 weight (an 8B model's FFN):
// GEMV (n = 1: GB/s of weights read, against the memcpy bandwidth measured at start) and
// GEMM (n = 128, prompt processing: GFLOP/s). The weights are 64 quantized random rows
// repeated, so setting up the K-quants does not dominate the run.
#include <cstring>
#include <random>
#include <vector>

#include "../bench/bench_common.h"
#include "pyggml/error.h"

namespace {

constexpr int64_t kK = 4096, kM = 14336;

struct QuantMulMat {
    pyggml::Context ctx;
    pyggml::Graph graph;
    QuantMulMat(pyggml::Type wt, int64_t N)
        : ctx(pyggml::row_size(wt, kK) * kM + size_t(kK) * N * 4 + size_t(kM) * N * 4 + (size_t(64) << 20)),
          graph(&ctx) {
        std::mt19937 rng(1);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        pyggml::Tensor* a = ctx.new_tensor(wt, {kK, kM});
        pyggml::Tensor* b = ctx.new_tensor(pyggml::Type::F32, {kK, N});
        const size_t rs = pyggml::row_size(wt, kK);
        std::vector<float> row(kK);
        for (int64_t m = 0; m < 64; ++m) {
            for (auto& v : row) v = u(rng);
            pyggml::from_float_row(wt, row.data(), a->row(m), kK);
        }
        for (int64_t m = 64; m < kM; ++m) std::memcpy(a->row(m), a->row(m % 64), rs);
        for (int64_t i = 0; i < kK * N; ++i) ((float*)b->data)[i] = u(rng);
        graph.build_forward_expand(pyggml::mul_mat(&ctx, a, b));
    }
    double seconds(int n_threads, int reps) {
        return bench::time_median([&] { graph.compute(n_threads); }, reps);
    }
};

}  // namespace

PYGGML_BENCH(mul_mat_quant) {
    pyggml::Type types[pyggml::kTypeIdLimit];
    const int n = pyggml::valid_types(types);
    for (int i = 0; i < n; ++i) {
        const pyggml::Type t = types[i];
        const pyggml::TypeTraits& tt = pyggml::type_traits(t);
        if (!tt.is_quantized || !tt.is_weight) continue;
        const std::string base = std::string("mul_mat ") + tt.name + " K4096 M14336";
        if (bc.wants(base + " gemv")) {
            QuantMulMat c(t, 1);
            const double s = c.seconds(bc.n_threads, 9);
            bc.report(base + " gemv N1 GB/s", double(pyggml::row_size(t, kK)) * kM / s / 1e9, "GB/s", bc.copy_gbs,
                      "copy");
        }
        if (bc.wants(base + " gemm")) {
            QuantMulMat c(t, 128);
            const double s = c.seconds(bc.n_threads, 3);
            bc.report(base + " gemm N128", 2.0 * kK * kM * 128 / s / 1e9, "GFLOP/s");
        }
    }
}
