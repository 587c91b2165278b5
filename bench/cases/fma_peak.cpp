// The machine's f32 FMA peak: every thread runs independent 256-bit FMA chains (12 accumulators
// hide the latency), so GEMM GFLOP/s can be read as a fraction of it; on AVX-512 CPUs also with
// 512-bit chains (Zen 4 splits them into two 256-bit halves: the same peak; cores with two
// 512-bit units: twice it). The peak is the larger row. AVX2+FMA only; on other CPUs the case
// reports nothing.
#include <thread>
#include <vector>

#include "../bench/bench_common.h"
#include "cpu/simd/isa.h"

#if defined(__x86_64__)
#include "../bench/fma_chains.h"

namespace {
// GFLOP/s of every thread running `chains` of `lanes`-wide vectors at once (median of 3)
template <class Chains>
double peak(const bench::Context& bc, Chains chains, int lanes, int64_t iters) {
    std::vector<float> sink(bc.n_threads);
    const double t = bench::time_median([&] {
        std::vector<std::thread> th;
        for (int i = 0; i < bc.n_threads; ++i) th.emplace_back([&, i] { sink[i] = chains(iters); });
        for (auto& x : th) x.join();
    }, 3);
    return 12.0 * lanes * 2 * iters * bc.n_threads / t / 1e9 + 0.0 * sink[0];
}
}  // namespace

PYGGML_BENCH(fma_peak) {
    if (!bc.wants("fma_peak") || pyggml::cpu::simd::detected_isa() == pyggml::cpu::simd::Isa::Scalar) return;
    const int64_t iters = 20000000;
    bc.report("fma_peak f32 avx2", peak(bc, bench::fma_chains256, 8, iters), "GFLOP/s");
    if (pyggml::cpu::simd::detected_isa() != pyggml::cpu::simd::Isa::Avx512) return;
    bc.report("fma_peak f32 avx512", peak(bc, bench::fma_chains512, 16, iters / 2), "GFLOP/s");
}
#endif
