// TSC cycles per weight block and column of pyggml's quantized mul_mat kernels at two
// instruction-set levels (default avx2 and avx512), per path: the one-row dot at 1 and 4
// columns, the two-row dot at 4 columns (where the set has one) and the GEMM tile (one packed
// row, or two with the two-row tile, times a packed group of 8 columns). One row of K values:
// weights and activations stay in L1/L2. The levels alternate over 201 samples of 20 calls:
// median and minimum, ratio = first level / second (> 1: the second is faster). "differ" marks
// outputs that are not bitwise equal across the levels. No threads, so it holds on a loaded
// machine. Reported, never asserted.
//   g++ -O2 -std=c++17 -Icsrc/include -Icsrc bench/quant_isa_cycles.cpp build/libpyggml_core.a -lpthread -o build/quant_isa_cycles
//   build/quant_isa_cycles [K] [TYPES]
#include <x86intrin.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/mul_mat_kernels.h"
#include "pyggml/types.h"
using namespace pyggml;
using cpu::mm::Kernels;
using cpu::simd::Isa;

namespace {
constexpr int kReps = 201, kInner = 20, kCols = cpu::mm::kQgCols;

// The inputs of one type as a level's kernels read them.
struct Side {
    const Kernels* kr;
    std::vector<char> act, group, rows;  // 8 converted columns; their packed group; 2 packed rows
    size_t col_bytes = 0, row_bytes = 0;
};

Side prepare(Isa isa, Type t, int64_t K, const std::vector<char>& wq, size_t wrow, const std::vector<float>& x,
             const float* aux) {
    Side s;
    s.kr = &cpu::mm::kernels_for(isa);
    const Type vt = type_traits(t).vec_dot_type;
    s.col_bytes = row_size(vt, K);
    s.act.resize(kCols * s.col_bytes + 64);
    for (int c = 0; c < kCols; ++c) s.kr->quantize[(int)vt](x.data() + c * K, s.act.data() + c * s.col_bytes, K);
    if (s.kr->qg_tile[(int)t]) {
        const int64_t nq = K / type_traits(vt).blck_size;
        s.group.resize(size_t(nq) * s.kr->qg_act_block_bytes[(int)vt] + 64);
        s.kr->qg_pack_act[(int)vt](s.act.data(), s.col_bytes, kCols, K, s.group.data());
        s.row_bytes = size_t(nq) * s.kr->qg_row_block_bytes[(int)t];
        s.rows.resize(2 * s.row_bytes + 64);
        for (int r = 0; r < 2; ++r) s.kr->qg_pack_row[(int)t](wq.data() + r * wrow, K, s.rows.data() + r * s.row_bytes, aux);
    }
    return s;
}

struct Stat {
    double med, min;
};
Stat stat(std::vector<double> v, double scale) {
    std::sort(v.begin(), v.end());
    return {v[v.size() / 2] / scale, v[0] / scale};
}
}  // namespace

int main(int argc, char** argv) {
    const int64_t K = argc > 1 ? atoll(argv[1]) : 4096;
    const Isa levels[2] = {Isa::Avx2, Isa::Avx512};
    if (cpu::simd::detected_isa() < Isa::Avx512) {
        printf("this CPU has no AVX-512: nothing to compare\n");
        return 0;
    }
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> w(2 * K), x(kCols * K);
    for (auto& v : w) v = u(rng);
    for (auto& v : x) v = u(rng);
    float aux[256];  // nvfp4's scale table: any finite values do for timing
    for (float& v : aux) v = 1.0f;
    Type types[kTypeIdLimit];
    const int n = valid_types(types);
    printf("# K=%lld; TSC cycles per weight block and column (GEMM: per row and column); ratio = avx2 / avx512\n",
           (long long)K);
    printf("%-8s %-10s %9s %9s %9s %9s %7s %7s\n", "type", "path", "avx2 med", "avx2 min", "512 med", "512 min", "ratio",
           "r@min");
    for (int i = 0; i < n; ++i) {
        const Type t = types[i];
        const TypeTraits& tt = type_traits(t);
        if (!tt.is_quantized || !tt.is_weight || K % tt.blck_size) continue;
        if (argc > 2 && !strstr(argv[2], tt.name)) continue;
        const size_t wrow = row_size(t, K);
        std::vector<char> wq(2 * wrow + 64);
        for (int r = 0; r < 2; ++r) from_float_row(t, w.data() + r * K, wq.data() + r * wrow, K);
        Side s[2] = {prepare(levels[0], t, K, wq, wrow, x, aux), prepare(levels[1], t, K, wq, wrow, x, aux)};
        const double blocks = double(K) / tt.blck_size;
        // path name, columns per call, rows per call, the call on side j writing out
        struct Path {
            const char* name;
            int cols, rows;
            bool on;
        };
        const Path paths[] = {{"dot n=1", 1, 1, true},
                              {"dot n=4", 4, 1, true},
                              {"dot2 n=4", 4, 2, s[0].kr->dot2[(int)t] || s[1].kr->dot2[(int)t]},
                              {"gemm", kCols, 1, s[0].kr->qg_tile[(int)t] && s[1].kr->qg_tile[(int)t]},
                              {"gemm 2row", kCols, 2, s[0].kr->qg_tile[(int)t] && s[1].kr->qg_tile[(int)t]}};
        for (const Path& p : paths) {
            if (!p.on) continue;
            float out[2][16] = {};
            auto call = [&](int j) {
                const Side& d = s[j];
                const Kernels& kr = *d.kr;
                if (p.cols == kCols) {
                    if (p.rows == 2 && kr.qg_tile2[(int)t]) {
                        kr.qg_tile2[(int)t](K, d.rows.data(), d.row_bytes, d.group.data(), out[j]);
                    } else {
                        for (int r = 0; r < p.rows; ++r) kr.qg_tile[(int)t](K, d.rows.data() + r * d.row_bytes, d.group.data(), out[j] + 8 * r);
                    }
                } else if (p.rows == 2 && kr.dot2[(int)t]) {
                    kr.dot2[(int)t](K, wq.data(), wrow, d.act.data(), d.col_bytes, p.cols, out[j], aux);
                } else {
                    for (int r = 0; r < p.rows; ++r)
                        kr.dot[(int)t](K, wq.data() + r * wrow, d.act.data(), d.col_bytes, p.cols, out[j] + 4 * r, aux);
                }
            };
            std::vector<double> ts[2];
            for (int r = 0; r < kReps; ++r)
                for (int jj = 0; jj < 2; ++jj) {
                    const int j = (r + jj) % 2;
                    const uint64_t t0 = __rdtsc();
                    for (int k = 0; k < kInner; ++k) call(j);
                    ts[j].push_back(double(__rdtsc() - t0) / kInner);
                }
            const double per = blocks * p.cols * p.rows;
            const Stat a = stat(ts[0], per), b = stat(ts[1], per);
            printf("%-8s %-10s %9.2f %9.2f %9.2f %9.2f %7.2f %7.2f%s\n", tt.name, p.name, a.med, a.min, b.med, b.min,
                   a.med / b.med, a.min / b.min, memcmp(out[0], out[1], sizeof out[0]) ? "  differ" : "");
        }
    }
    return 0;
}
