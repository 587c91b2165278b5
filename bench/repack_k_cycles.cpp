// TSC cycles per super-block, row and column of the repacked K-quant tiles (quant_repack_k256.h)
// at the avx2 and avx512 levels, 8 columns taken 4 per call or all in one call (where the level's
// tile takes 8): one 8-row group of K values and 8 activation columns, resident in L1/L2, random
// bytes (the cost does not depend on the values). The variants alternate over 201 samples of 20
// calls: median and minimum. No threads, so it holds on a loaded machine. Reported, never asserted.
//   g++ -O2 -std=c++17 -Icsrc/include -Icsrc bench/repack_k_cycles.cpp build/libpyggml_core.a -lpthread -o build/repack_k_cycles
//   build/repack_k_cycles [K]
#include <x86intrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cpu/quant_repack_kernels.h"
#include "pyggml/types.h"
using namespace pyggml;

int main(int argc, char** argv) {
    const int64_t K = argc > 1 ? atoll(argv[1]) : 4096, nb = K / 256;
    constexpr int kReps = 201, kInner = 20, kCols = 8;
    std::mt19937 rng(1);
    std::vector<unsigned char> group(size_t(nb) * 2048 + 64);
    std::vector<unsigned char> act(size_t(kCols) * nb * sizeof(cpu::rp::ActK) + 64);
    for (auto& v : group) v = (unsigned char)(rng() & 0x3f);  // small scales keep sums in range
    for (auto& v : act) v = (unsigned char)rng();
    const void* cols[kCols];
    for (int c = 0; c < kCols; ++c) cols[c] = act.data() + size_t(c) * nb * sizeof(cpu::rp::ActK);
    struct Variant { const char* name; const cpu::rp::Kernels* k; int per_call; };
    const Variant vars[] = {{"avx2 x4", &cpu::rp::kernels_avx2(), 4}, {"avx512 x4", &cpu::rp::kernels_avx512(), 4},
                            {"avx512 x8", &cpu::rp::kernels_avx512(), 8}};
    printf("# K=%lld; TSC cycles per super-block, row and column (8 rows x 8 columns per sample)\n", (long long)K);
    printf("%-6s %-10s %8s %8s\n", "type", "variant", "med", "min");
    for (Type t : {Type::Q4_K, Type::Q5_K, Type::Q6_K}) {
        std::vector<double> s[3];
        float out[8 * kCols];
        for (int rep = 0; rep < kReps; ++rep)
            for (int v = 0; v < 3; ++v) {
                const cpu::rp::TileFn tile = vars[v].k->tile[(int)t];
                const uint64_t t0 = __rdtsc();
                for (int i = 0; i < kInner; ++i)
                    for (int c = 0; c < kCols; c += vars[v].per_call) tile(nb, group.data(), cols + c, vars[v].per_call, out);
                s[v].push_back(double(__rdtsc() - t0) / (kInner * nb * 8.0 * kCols));
            }
        for (int v = 0; v < 3; ++v) {
            std::sort(s[v].begin(), s[v].end());
            printf("%-6s %-10s %8.2f %8.2f\n", type_traits(t).name, vars[v].name, s[v][kReps / 2], s[v][0]);
        }
    }
}
