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
#include <immintrin.h>

namespace {

__attribute__((target("avx2,fma"))) float fma_chains(int64_t iters) {
    __m256 acc[12];
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_set1_ps(0.001f * j);
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
    }
    __m256 s = acc[0];
    for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, acc[j]);
    alignas(32) float out[8];
    _mm256_store_ps(out, s);
    return out[0];
}

__attribute__((target("avx512f"))) float fma_chains512(int64_t iters) {
    __m512 acc[12];
    for (int j = 0; j < 12; ++j) acc[j] = _mm512_set1_ps(0.001f * j);
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
    }
    __m512 s = acc[0];
    for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, acc[j]);
    return _mm512_reduce_add_ps(s);
}

}  // namespace

PYGGML_BENCH(fma_peak) {
    if (!bc.wants("fma_peak") || pyggml::cpu::simd::detected_isa() == pyggml::cpu::simd::Isa::Scalar) return;
    const int64_t iters = 20000000;
    std::vector<float> sink(bc.n_threads);
    const double t = bench::time_median([&] {
        std::vector<std::thread> th;
        for (int i = 0; i < bc.n_threads; ++i) th.emplace_back([&, i] { sink[i] = fma_chains(iters); });
        for (auto& x : th) x.join();
    }, 3);
    // 12 FMAs x 8 lanes x 2 flops per iteration per thread
    bc.report("fma_peak f32 avx2", 12.0 * 8 * 2 * iters * bc.n_threads / t / 1e9 + 0.0 * sink[0], "GFLOP/s");
    if (pyggml::cpu::simd::detected_isa() != pyggml::cpu::simd::Isa::Avx512) return;
    const double t512 = bench::time_median([&] {
        std::vector<std::thread> th;
        for (int i = 0; i < bc.n_threads; ++i) th.emplace_back([&, i] { sink[i] = fma_chains512(iters / 2); });
        for (auto& x : th) x.join();
    }, 3);
    bc.report("fma_peak f32 avx512", 12.0 * 16 * 2 * (iters / 2) * bc.n_threads / t512 / 1e9 + 0.0 * sink[0], "GFLOP/s");
}
#endif
