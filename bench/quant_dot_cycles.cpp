// TSC cycles per weight block of pyggml's AVX2 one-column dot kernel against ggml's vec_dot
// (llama-cpp-python's libggml-cpu), one row of K values (weight and activations stay in L1/L2),
// the two alternating over 301 samples of 50 calls: median and minimum, ratio = ggml / pyggml
// (> 1: pyggml faster). Both sides get the same weight and activation bytes; "results differ"
// marks types whose dot order is not ggml's. No threads, so it holds on a loaded machine.
//   g++ -O2 -std=c++17 -Icsrc/include -Icsrc bench/quant_dot_cycles.cpp build/libpyggml_core.a -ldl -lpthread -o build/quant_dot_cycles
//   GGML_LIB_DIR=$(python -c "import llama_cpp, os; print(os.path.dirname(llama_cpp.__file__) + '/lib')") build/quant_dot_cycles [K] [TYPES]
#include <dlfcn.h>
#include <x86intrin.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "ggml_cpu_dl.h"
#include "cpu/mul_mat_kernels.h"
#include "pyggml/types.h"
using namespace pyggml;
int main(int argc, char** argv) {
    const GetTraits get = load_ggml_cpu_traits();
    if (!get) return 1;
    const int64_t K = argc > 1 ? atoll(argv[1]) : 4096;
    const int reps = 301;
    const auto& kr = cpu::mm::kernels_for(cpu::simd::Isa::Avx2);
    Type types[kTypeIdLimit]; int n = valid_types(types);
    std::mt19937 rng(1); std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> w(K), x(K); for (auto& v : w) v = u(rng); for (auto& v : x) v = u(rng);
    printf("%-8s %9s %9s %9s %9s %7s %7s %s\n", "type", "py med", "py min", "gg med", "gg min", "ratio", "r@min", "(TSC cycles per block, ratio = gg/py)");
    for (int i = 0; i < n; ++i) {
        Type t = types[i]; const auto& tt = type_traits(t);
        if (!tt.is_quantized || !tt.is_weight || !kr.dot[(int)t]) continue;
        if (argc > 2 && !strstr(argv[2], tt.name)) continue;
        std::vector<char> wq(row_size(t, K) + 64), act(row_size(tt.vec_dot_type, K) + 64), actg(act.size());
        from_float_row(t, w.data(), wq.data(), K);
        kr.quantize[(int)tt.vec_dot_type](x.data(), act.data(), K);
        const GTraits* g = get((int)t);
        actg = act;  // the same activation bytes (pyggml's quantizer) on both sides
        float nv[256];  // nvfp4's scale table: any finite values do for timing
        for (int j = 0; j < 256; ++j) nv[j] = 1.0f;
        float o1[8], o2 = 0;
        std::vector<double> tp, tg;
        const int inner = 50;
        for (int r = 0; r < reps; ++r) {
            uint64_t t0 = __rdtsc();
            for (int k = 0; k < inner; ++k) kr.dot[(int)t](K, wq.data(), act.data(), 0, 1, o1, nv);
            uint64_t t1 = __rdtsc();
            for (int k = 0; k < inner; ++k) g->vec_dot((int)K, &o2, 0, wq.data(), 0, actg.data(), 0, 1);
            uint64_t t2 = __rdtsc();
            tp.push_back(double(t1 - t0) / inner); tg.push_back(double(t2 - t1) / inner);
        }
        std::sort(tp.begin(), tp.end()); std::sort(tg.begin(), tg.end());
        double nb = double(K) / tt.blck_size;
        double pm = tp[reps / 2] / nb, pn = tp[0] / nb, gm = tg[reps / 2] / nb, gn = tg[0] / nb;
        printf("%-8s %9.2f %9.2f %9.2f %9.2f %7.2f %7.2f %s\n", tt.name, pm, pn, gm, gn, gm / pm, gn / pn,
               (t == Type::NVFP4 || memcmp(&o1[0], &o2, 4) == 0) ? "" : "  (results differ)");
    }
}
