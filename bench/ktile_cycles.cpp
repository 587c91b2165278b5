// TSC cycles per super-block, row and column of the K-quant tile kernels (quant_ktile.h) next to
// the repacked tiles at the avx512 level (quant_repack_k256.h, 8 columns a call), and of the
// tile path's decoding (per super-block and row, to be spread over the columns of a unit). One
// panel of 16 rows and 8 columns of K values, resident in L1/L2, random bytes; the variants
// alternate over 201 samples of 20 calls: median and minimum. No threads. Reported, never asserted.
//   g++ -O2 -std=c++17 -Icsrc/include -Icsrc bench/ktile_cycles.cpp build/libpyggml_core.a -lpthread -o build/ktile_cycles
//   build/ktile_cycles [K]
#include <x86intrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cpu/quant_ktile.h"
#include "cpu/quant_repack_kernels.h"
#include "pyggml/types.h"
using namespace pyggml;

int main(int argc, char** argv) {
    const int64_t K = argc > 1 ? atoll(argv[1]) : 4096, nsb = K / 256;
    constexpr int kReps = 201, kInner = 20, kCols = 8;
    std::mt19937 rng(1);
    const cpu::kt::Kernels& kk = cpu::kt::kernels_avx512();
    const cpu::rp::Kernels& rk = cpu::rp::kernels_avx512();
    std::vector<cpu::kt::PanelSb> panel(nsb);
    std::vector<cpu::kt::ActSb> act(size_t(kCols) * nsb);
    std::vector<unsigned char> group(size_t(nsb) * 2048 + 64), actk(size_t(kCols) * nsb * sizeof(cpu::rp::ActK) + 64);
    for (auto& v : group) v = (unsigned char)(rng() & 0x3f);
    for (auto& v : actk) v = (unsigned char)rng();
    for (auto& a : act) for (auto& q : a.qs) q = (int8_t)rng();
    std::vector<unsigned char> blocks(size_t(16) * nsb * 256);
    for (auto& v : blocks) v = (unsigned char)(rng() & 0x3f);
    printf("# K=%lld; TSC cycles per super-block, row and column (decode: per super-block and row)\n", (long long)K);
    printf("%-6s %-14s %8s %8s\n", "type", "variant", "med", "min");
    for (Type t : {Type::Q2_K, Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K}) {
        const size_t bb = type_size(t);
        const char* rows[16];
        for (int r = 0; r < 16; ++r) rows[r] = (const char*)blocks.data() + r * nsb * bb;
        for (int64_t ib = 0; ib < nsb; ++ib) kk.decode[(int)t](rows, bb, 16, ib, &panel[ib]);
        const cpu::kt::ActSb* cols[kCols];
        for (int c = 0; c < kCols; ++c) cols[c] = act.data() + c * nsb;
        const void* kcols[kCols];
        for (int c = 0; c < kCols; ++c) kcols[c] = actk.data() + size_t(c) * nsb * sizeof(cpu::rp::ActK);
        std::vector<double> s[3];
        float out[16 * kCols];
        const cpu::rp::TileFn rtile = rk.tile[(int)t];
        for (int rep = 0; rep < kReps; ++rep) {
            uint64_t t0 = __rdtsc();
            for (int i = 0; i < kInner; ++i) kk.tile[(int)t](nsb, panel.data(), cols, kCols, out);
            s[0].push_back(double(__rdtsc() - t0) / (kInner * nsb * 16.0 * kCols));
            t0 = __rdtsc();
            for (int i = 0; i < kInner; ++i)
                for (int64_t ib = 0; ib < nsb; ++ib) kk.decode[(int)t](rows, bb, 16, ib, &panel[ib]);
            s[1].push_back(double(__rdtsc() - t0) / (kInner * nsb * 16.0));
            if (rtile) {
                t0 = __rdtsc();
                for (int i = 0; i < kInner; ++i)
                    for (int g = 0; g < 2; ++g) rtile(nsb, group.data(), kcols, kCols, out);
                s[2].push_back(double(__rdtsc() - t0) / (kInner * nsb * 16.0 * kCols));
            }
        }
        const char* names[3] = {"ktile 16x8", "ktile decode", "repacked x8"};
        for (int v = 0; v < 3; ++v) {
            if (s[v].empty()) continue;
            std::sort(s[v].begin(), s[v].end());
            printf("%-6s %-14s %8.2f %8.2f\n", type_traits(t).name, names[v], s[v][kReps / 2], s[v][0]);
        }
    }
}
