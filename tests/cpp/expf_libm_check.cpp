// Compares expf_libm8 (csrc/cpu/expf_libm_avx2.h) with the C library's expf, bit for bit, on
// every `stride`-th float bit pattern plus the edge values; prints the first mismatches and
// exits non-zero on any. Built and run by tests/test_expf_libm.py.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/expf_libm_avx2.h"

int main(int argc, char** argv) {
    const uint64_t stride = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
    std::vector<float> xs;
    const float edges[] = {0.0f, -0.0f, -1e-30f, -0.5f, -1.0f, -87.3f, -88.0f, -88.7f, -100.0f, -103.28f,
                           -103.3f, -103.97f, -104.0f, -200.0f, 88.0f, 88.72f, 89.0f, 1.0f,
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::denorm_min()};
    for (float e : edges) xs.push_back(e);
    for (uint64_t b = 0; b < (1ull << 32); b += stride) {
        const uint32_t u = (uint32_t)b;
        float x;
        std::memcpy(&x, &u, 4);
        xs.push_back(x);
    }
    while (xs.size() % 8) xs.push_back(0.0f);
    uint64_t bad = 0;
    alignas(32) float in[8], out[8];
    for (size_t i = 0; i < xs.size(); i += 8) {
        std::memcpy(in, &xs[i], sizeof in);
        _mm256_store_ps(out, pyggml::cpu::expf_libm8(_mm256_load_ps(in)));
        for (int l = 0; l < 8; ++l) {
            const float want = expf(in[l]);
            uint32_t a, b;
            std::memcpy(&a, &want, 4);
            std::memcpy(&b, &out[l], 4);
            if (a != b && !(std::isnan(want) && std::isnan(out[l]))) {
                if (bad < 8) std::printf("x=%a: expf %a, expf_libm8 %a\n", in[l], want, out[l]);
                ++bad;
            }
        }
    }
    std::printf("%zu values, %llu differ\n", xs.size(), (unsigned long long)bad);
    return bad ? 1 : 0;
}
