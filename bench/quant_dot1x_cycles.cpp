// TSC cycles per weight block of the one-column kernels that read activation extras
// (Kernels::dot1x: mxfp4, nvfp4, iq4_nl) against the plain one-column dot and ggml's vec_dot,
// one row of 4096 values in cache, the three alternating over 301 samples of 50 calls
// (median / minimum). "same bits": dot1x's result equals dot's. No threads.
//   g++ -O2 -std=c++17 -Icsrc/include -Icsrc bench/quant_dot1x_cycles.cpp build/libpyggml_core.a -ldl -lpthread -o build/quant_dot1x_cycles
//   GGML_LIB_DIR=$(python -c "import llama_cpp, os; print(os.path.dirname(llama_cpp.__file__) + '/lib')") build/quant_dot1x_cycles
#include <dlfcn.h>
#include <x86intrin.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "ggml_cpu_dl.h"
#include "cpu/mul_mat_common.h"
using namespace pyggml;
int main(int argc, char** argv) {
    const GetTraits get = load_ggml_cpu_traits();
    if (!get) return 1;
    const int64_t K = 4096; const int reps = 301, inner = 50;
    const auto& kr = cpu::mm::kernels_for(cpu::simd::Isa::Avx2);
    std::mt19937 rng(1); std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> w(K), x(K); for (auto& v : w) v = u(rng); for (auto& v : x) v = u(rng);
    for (Type t : {Type::MXFP4, Type::NVFP4, Type::IQ4_NL}) {
        const auto& tt = type_traits(t);
        std::vector<char> wq(row_size(t, K) + 64), act(row_size(Type::Q8_0, K) + 64);
        std::vector<char> ext(cpu::mm::act_extras_bytes(t, K));
        from_float_row(t, w.data(), wq.data(), K);
        kr.quantize[(int)Type::Q8_0](x.data(), act.data(), K);
        cpu::mm::act_extras(t, (const BlockQ8_0*)act.data(), K, ext.data());
        const GTraits* g = get((int)t);
        float nv[256]; for (int j = 0; j < 256; ++j) nv[j] = 1.0f;
        float o1[8], o2 = 0, o3[8];
        std::vector<double> tp, tx, tg;
        for (int r = 0; r < reps; ++r) {
            uint64_t t0 = __rdtsc();
            for (int k = 0; k < inner; ++k) kr.dot[(int)t](K, wq.data(), act.data(), 0, 1, o1, nv);
            uint64_t t1 = __rdtsc();
            for (int k = 0; k < inner; ++k) kr.dot1x[(int)t](K, wq.data(), act.data(), ext.data(), o3, nv);
            uint64_t t2 = __rdtsc();
            for (int k = 0; k < inner; ++k) g->vec_dot((int)K, &o2, 0, wq.data(), 0, act.data(), 0, 1);
            uint64_t t3 = __rdtsc();
            tp.push_back(double(t1 - t0) / inner); tx.push_back(double(t2 - t1) / inner); tg.push_back(double(t3 - t2) / inner);
        }
        std::sort(tp.begin(), tp.end()); std::sort(tx.begin(), tx.end()); std::sort(tg.begin(), tg.end());
        double nb = double(K) / tt.blck_size;
        printf("%-6s dot %6.2f/%6.2f  dot1x %6.2f/%6.2f  ggml %6.2f/%6.2f  gg/dot1x %.2f/%.2f  dot/dot1x %.2f/%.2f %s\n", tt.name,
               tp[reps/2]/nb, tp[0]/nb, tx[reps/2]/nb, tx[0]/nb, tg[reps/2]/nb, tg[0]/nb, tg[reps/2]/tx[reps/2], tg[0]/tx[0],
               tp[reps/2]/tx[reps/2], tp[0]/tx[0], memcmp(o1, o3, 4) == 0 ? "same bits" : "BITS DIFFER");
    }
}
