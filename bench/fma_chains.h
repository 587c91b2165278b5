// Independent f32 FMA chains (12 accumulators hide the latency) at 256 and 512 bits: a core's
// FMA peak for bench/cases/fma_peak.cpp and bench/float_micro_cycles.cpp. 8 resp. 16 lanes x 12
// FMAs x 2 flops per iteration. x86 only; the caller checks the CPU runs the width.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace bench {

__attribute__((target("avx2,fma"))) inline float fma_chains256(int64_t iters) {
    __m256 acc[12];
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_set1_ps(0.001f * j);
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
    }
    float s = 0;
    for (int j = 0; j < 12; ++j) s += acc[j][0];
    return s;
}

__attribute__((target("avx512f"))) inline float fma_chains512(int64_t iters) {
    __m512 acc[12];
    for (int j = 0; j < 12; ++j) acc[j] = _mm512_set1_ps(0.001f * j);
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
    }
    float s = 0;
    for (int j = 0; j < 12; ++j) s += acc[j][0];
    return s;
}

}  // namespace bench
