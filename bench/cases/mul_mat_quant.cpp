// mul_mat per block type of the type table, on a 4096 x 14336 weight (an 8B model's FFN):
// GEMV (n = 1: GB/s of weights read, against a memcpy timed alternately with it) and
// GEMM (n = 128, prompt processing: GFLOP/s). The weights are 64 quantized random rows
// repeated, so setting up the K-quants does not dominate the run.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
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

double seconds_of(const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// GEMV and a 64 MiB memcpy (twice the L3) timed alternately, kReps each: a burst of load on a
// shared machine hits both, so their ratio holds better than against the copy measured at start.
// Returns {median, min} GB/s of weights read and of memcpy (read + write).
struct GemvVsCopy { double gemv_med, gemv_min, copy_med, copy_min; };
GemvVsCopy gemv_vs_copy(QuantMulMat& c, double weight_bytes, int n_threads) {
    constexpr int kReps = 15;
    static std::vector<char> src(size_t(64) << 20, 1), dst(size_t(64) << 20, 0);
    auto gemv = [&] { c.graph.compute(n_threads); };
    auto copy = [&] { std::memcpy(dst.data(), src.data(), src.size()); };
    gemv(), copy();
    std::vector<double> tg, tc;
    for (int r = 0; r < kReps; ++r) {
        tg.push_back(seconds_of(gemv));
        tc.push_back(seconds_of(copy));
    }
    std::sort(tg.begin(), tg.end());
    std::sort(tc.begin(), tc.end());
    const double cb = 2.0 * double(src.size());
    return {weight_bytes / tg[kReps / 2] / 1e9, weight_bytes / tg[0] / 1e9, cb / tc[kReps / 2] / 1e9, cb / tc[0] / 1e9};
}

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
            const GemvVsCopy g = gemv_vs_copy(c, double(pyggml::row_size(t, kK)) * kM, bc.n_threads);
            bc.report(base + " gemv N1 GB/s median", g.gemv_med, "GB/s", g.copy_med, "memcpy median");
            bc.report(base + " gemv N1 GB/s best", g.gemv_min, "GB/s", g.copy_min, "memcpy best");
        }
        if (bc.wants(base + " gemm")) {
            QuantMulMat c(t, 128);
            const double s = c.seconds(bc.n_threads, 3);
            bc.report(base + " gemm N128", 2.0 * kK * kM * 128 / s / 1e9, "GFLOP/s");
        }
    }
}
