// Streaming GEMV of a 4096 x 14336 weight, one activation column: pyggml's AVX2 one-row dot
// kernel against ggml's vec_dot (llama-cpp-python's libggml-cpu) and memcpy, the three
// alternating over REPS samples; GB/s of weight bytes (memcpy: read + write), median/minimum,
// py/cp and py/gg ratios of medians (py/gg also of minima). With one thread the time is the
// thread's CPU time, so a loaded machine's preemptions do not count (shared memory bandwidth
// still does); with T > 1 wall time, rows split in halves (DYN=1: 64-row chunks taken from a
// shared counter, as ggml does). Same weight and activation bytes on both sides.
//   g++ -O2 -std=c++17 -Icsrc/include -Icsrc bench/quant_gemv_stream.cpp build/libpyggml_core.a -ldl -lpthread -o build/quant_gemv_stream
//   GGML_LIB_DIR=$(python -c "import llama_cpp, os; print(os.path.dirname(llama_cpp.__file__) + '/lib')") build/quant_gemv_stream TYPES [T] [REPS]
#include <dlfcn.h>
#include <x86intrin.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <atomic>
#include <vector>
#include <chrono>
#include <ctime>
#include "cpu/mul_mat_kernels.h"
#include "pyggml/types.h"
using namespace pyggml;
struct GTraits { void (*from_float)(const float*, void*, int64_t); void (*vec_dot)(int, float*, size_t, const void*, size_t, const void*, size_t, int); int vec_dot_type; int64_t nrows; };
int main(int argc, char** argv) {
    const char* dir = getenv("GGML_LIB_DIR");
    if (!dir || argc < 2) { fprintf(stderr, "usage: GGML_LIB_DIR=<folder of libggml-cpu.so> %s TYPES [T] [REPS]\n", argv[0]); return 1; }
    std::string b = std::string(dir) + "/libggml-base.so", c = std::string(dir) + "/libggml-cpu.so";
    dlopen(b.c_str(), RTLD_NOW | RTLD_GLOBAL);
    void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    auto init = (void (*)())dlsym(h, "ggml_cpu_init"); init();
    auto get = (const GTraits* (*)(int))dlsym(h, "ggml_get_type_traits_cpu");
    const int64_t K = 4096, M = 14336;
    int T = argc > 2 ? atoi(argv[2]) : 1;
    int reps = argc > 3 ? atoi(argv[3]) : 11;
    const auto& kr = cpu::mm::kernels_for(cpu::simd::Isa::Avx2);
    Type types[kTypeIdLimit]; int n = valid_types(types);
    std::mt19937 rng(1); std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> w(K * 64), x(K); for (auto& v : w) v = u(rng); for (auto& v : x) v = u(rng);
    std::vector<char> src(64 << 20), dst(64 << 20);  // twice the L3
    memset(src.data(), 1, src.size()); memset(dst.data(), 2, dst.size());
    for (int i = 0; i < n; ++i) {
        Type t = types[i]; const auto& tt = type_traits(t);
        if (!strstr(argv[1], tt.name)) continue;
        size_t rs = row_size(t, K);
        std::vector<char> wq(rs * M + 64), act(row_size(tt.vec_dot_type, K) + 64);
        for (int r = 0; r < 64; ++r) from_float_row(t, w.data() + r * K, wq.data() + r * rs, K);
        for (int64_t r = 64; r < M; ++r) memcpy(wq.data() + r * rs, wq.data() + (r % 64) * rs, rs);
        kr.quantize[(int)tt.vec_dot_type](x.data(), act.data(), K);
        const GTraits* g = get((int)t);
        std::vector<float> o1(M), o2(M);
        const size_t cpb = src.size();
        auto par = [&](auto f) {
            std::vector<std::thread> th;
            if (T == 1) { f(0, M, 0); return; }
            for (int k = 0; k < T; ++k) th.emplace_back([&, k] { f(M * k / T, M * (k + 1) / T, k); });
            for (auto& x : th) x.join();
        };
        static const bool dyn = getenv("DYN") != nullptr;
        std::atomic<int64_t> ctr{0};
        auto rows = [&](int64_t a, int64_t e, auto body) {
            if (!dyn) { for (int64_t r = a; r < e; ++r) body(r); return; }
            for (int64_t c; (c = ctr.fetch_add(64)) < M;) for (int64_t r = c; r < std::min(M, c + 64); ++r) body(r);
        };
        auto py = [&] { ctr = 0; par([&](int64_t a, int64_t e, int) { float o[8]; rows(a, e, [&](int64_t r) { kr.dot[(int)t](K, wq.data() + r * rs, act.data(), 0, 1, o, nullptr); o1[r] = o[0]; }); }); };
        auto gg = [&] { ctr = 0; par([&](int64_t a, int64_t e, int) { rows(a, e, [&](int64_t r) { g->vec_dot((int)K, &o2[r], 0, wq.data() + r * rs, 0, act.data(), 0, 1); }); }); };
        auto cp = [&] { par([&](int64_t, int64_t, int k) { memcpy(dst.data() + k * cpb / T, src.data() + k * cpb / T, cpb / T); }); };
        std::vector<double> tp, tg, tc;
        auto tm = [&](auto f) { if (T == 1) { timespec a, b2; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a); f(); clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b2); return (b2.tv_sec - a.tv_sec) + 1e-9 * (b2.tv_nsec - a.tv_nsec); } auto t0 = std::chrono::steady_clock::now(); f(); return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
        for (int r = 0; r < reps; ++r) { tp.push_back(tm(py)); tg.push_back(tm(gg)); tc.push_back(tm(cp)); }
        std::sort(tp.begin(), tp.end()); std::sort(tg.begin(), tg.end()); std::sort(tc.begin(), tc.end());
        double B = rs * M;
        printf("%-6s T%d GB/s py %.2f/%.2f gg %.2f/%.2f cp(2x) %.2f/%.2f  py/cp %.2f py/gg %.2f (min %.2f)\n", tt.name, T,
               B / tp[reps / 2] / 1e9, B / tp[0] / 1e9, B / tg[reps / 2] / 1e9, B / tg[0] / 1e9, 2 * cpb / tc[reps / 2] / 1e9, 2 * cpb / tc[0] / 1e9,
               tc[reps / 2] / tp[reps / 2] * B / (2 * cpb), tg[reps / 2] / tp[reps / 2], tg[0] / tp[0]);
    }
}
