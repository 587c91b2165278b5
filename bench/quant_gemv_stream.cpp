// GEMV (one activation column) of an M x K quantized weight streamed from memory, against a
// read-only pass over the same bytes and a single-pass memcpy of a 64 MiB buffer, all in one
// process, interleaved (order rotated each rep), and, when GGML_LIB_DIR names the folder of
// llama-cpp-python's libggml-cpu.so, ggml's vec_dot over the same rows and activation bytes.
// Answers where the GEMV time goes apart from any thread pool: compute per block (dot vs
// read), the copy bandwidth itself (read vs memcpy), thread imbalance (max / min per-thread
// time of the dot side), and the kernels against ggml's. Threads are persistent and spin
// between runs.
//   g++ -O2 -std=c++17 -pthread -Icsrc/include -Icsrc -Ibench bench/quant_gemv_stream.cpp build/libpyggml_core.a -ldl -o build/quant_gemv_stream
//   GGML_LIB_DIR=... build/quant_gemv_stream [K=4096] [M=14336] [THREADS=2] [REPS=31] [TYPES=q4_0,q5_0,...]
#include <dlfcn.h>
#include <sys/mman.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu/mul_mat_kernels.h"
#include "spin_pool.h"
#include "pyggml/types.h"

using namespace pyggml;
using Clock = std::chrono::steady_clock;

namespace {

void split(int64_t n, int i, int t, int64_t& a, int64_t& b) {
    a = n * i / t;
    b = n * (i + 1) / t;
}

__attribute__((target("avx2"))) float read_pass(const char* p, size_t n) {
    __m256i acc = _mm256_setzero_si256();
    for (size_t i = 0; i + 128 <= n; i += 128) {
        acc = _mm256_xor_si256(acc, _mm256_load_si256((const __m256i*)(p + i)));
        acc = _mm256_xor_si256(acc, _mm256_load_si256((const __m256i*)(p + i + 32)));
        acc = _mm256_xor_si256(acc, _mm256_load_si256((const __m256i*)(p + i + 64)));
        acc = _mm256_xor_si256(acc, _mm256_load_si256((const __m256i*)(p + i + 96)));
    }
    return (float)_mm256_extract_epi32(acc, 0);
}

struct GTraits {
    void (*from_float)(const float*, void*, int64_t);
    void (*vec_dot)(int, float*, size_t, const void*, size_t, const void*, size_t, int);
    int vec_dot_type;
    int64_t nrows;
};
using GetTraits = const GTraits* (*)(int);
GetTraits load_ggml() {
    const char* dir = getenv("GGML_LIB_DIR");
    if (!dir) return nullptr;
    const std::string b = std::string(dir) + "/libggml-base.so", c = std::string(dir) + "/libggml-cpu.so";
    dlopen(b.c_str(), RTLD_NOW | RTLD_GLOBAL);
    void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) return nullptr;
    ((void (*)())dlsym(h, "ggml_cpu_init"))();
    return (GetTraits)dlsym(h, "ggml_get_type_traits_cpu");
}

double med(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}
double mn(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

}  // namespace

int main(int argc, char** argv) {
    const int64_t K = argc > 1 ? atoll(argv[1]) : 4096, M = argc > 2 ? atoll(argv[2]) : 14336;
    const int T = argc > 3 ? atoi(argv[3]) : 2, reps = argc > 4 ? atoi(argv[4]) : 31;
    const std::string want = argc > 5 ? argv[5] : "q4_0,q5_0,iq4_nl,mxfp4,nvfp4,q8_0,q4_1,q5_1";
    const auto& kr = cpu::mm::kernels_for(cpu::simd::cpu_isa());
    SpinPool pool(T);
    const GetTraits gget = load_ggml();
    const size_t cp_n = 64u << 20;
    // on 2 MiB pages, as numpy's arrays of that size are (it asks for them; THP "madvise")
    char* cs = (char*)aligned_alloc(2u << 20, cp_n);
    char* cd = (char*)aligned_alloc(2u << 20, cp_n);
    madvise(cs, cp_n, MADV_HUGEPAGE), madvise(cd, cp_n, MADV_HUGEPAGE);
    memset(cs, 1, cp_n), memset(cd, 2, cp_n);
    float nv[256];
    for (auto& v : nv) v = 0.5f;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> x(K), w(64 * K);
    for (auto& v : x) v = u(rng);
    for (auto& v : w) v = u(rng);
    printf("# K %lld x M %lld, %d threads, %d reps, GB/s: weight bytes / time (memcpy: 2 x 64 MiB / time)\n",
           (long long)K, (long long)M, T, reps);
    printf("# dot: pyggml's kernel on 4 KiB pages, dotH: on 2 MiB pages; gg: ggml's vec_dot (4 KiB); rd: read pass (4 KiB)\n");
    printf("# dotD: dotH with 64-row chunks taken from a shared counter; ratios of medians but @min; imbal: max/min thread time\n");
    printf("%-7s %6s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s %6s %6s %6s %6s %6s %6s %6s %6s\n", "type", "MB", "dot med",
           "dot min", "dotH md", "dotH mn", "dotD md", "dotD mn", "gg med", "gg min", "rd med", "rd min", "cp med", "cp min",
           "dH/cp", "@min", "dD/cp", "dH/gg", "dD/gg", "dD/dH", "imbal", "imbH");
    Type types[kTypeIdLimit];
    const int nt = valid_types(types);
    for (int ti = 0; ti < nt; ++ti) {
        const Type t = types[ti];
        const auto& tt = type_traits(t);
        if (!tt.is_quantized || !tt.is_weight || !kr.dot[(int)t]) continue;
        if (("," + want + ",").find("," + std::string(tt.name) + ",") == std::string::npos) continue;
        const size_t rs = row_size(t, K), nb = rs * M;
        std::vector<char> q64(rs * 64);
        for (int r = 0; r < 64; ++r) from_float_row(t, w.data() + r * K, q64.data() + r * rs, K);
        // two copies of the weights: on 4 KiB pages (wb) and on 2 MiB pages (wh, as pyggml's
        // CPU buffers of this size and numpy's 64 MiB copy buffers are)
        const size_t wn = (nb + (2u << 20) - 1) / (2u << 20) * (2u << 20);
        char* wb = (char*)aligned_alloc(2u << 20, wn);
        char* wh = (char*)aligned_alloc(2u << 20, wn);
        madvise(wh, wn, MADV_HUGEPAGE);
        for (int64_t r = 0; r < M; ++r) memcpy(wb + r * rs, q64.data() + (r % 64) * rs, rs);
        memcpy(wh, wb, nb);
        std::vector<char> act(row_size(tt.vec_dot_type, K) + 64);
        kr.quantize[(int)tt.vec_dot_type](x.data(), act.data(), K);
        std::vector<float> y(M);
        auto dot = [&](int i) {
            int64_t a, b;
            split(M, i, T, a, b);
            for (int64_t r = a; r < b; ++r) kr.dot[(int)t](K, wb + r * rs, act.data(), 0, 1, &y[r], nv);
        };
        auto doth = [&](int i) {
            int64_t a, b;
            split(M, i, T, a, b);
            for (int64_t r = a; r < b; ++r) kr.dot[(int)t](K, wh + r * rs, act.data(), 0, 1, &y[r], nv);
        };
        // dotD: as dotH, but 64-row chunks claimed from a shared counter (what pyggml's
        // backend does): a thread that starts late or runs slow takes fewer chunks
        std::atomic<int64_t> next_chunk{0};
        const int64_t chunk_rows = 64, n_chunks = (M + chunk_rows - 1) / chunk_rows;
        auto dotd = [&](int) {
            for (int64_t c; (c = next_chunk.fetch_add(1, std::memory_order_relaxed)) < n_chunks;)
                for (int64_t r = c * chunk_rows; r < std::min(M, (c + 1) * chunk_rows); ++r)
                    kr.dot[(int)t](K, wh + r * rs, act.data(), 0, 1, &y[r], nv);
        };
        auto rd = [&](int i) {
            int64_t a, b;
            split((int64_t)nb / 128, i, T, a, b);
            y[i] = read_pass(wb + a * 128, size_t(b - a) * 128);
        };
        const GTraits* g = gget ? gget((int)t) : nullptr;
        auto gg = [&](int i) {
            int64_t a, b;
            split(M, i, T, a, b);
            for (int64_t r = a; r < b; ++r) g->vec_dot((int)K, &y[r], 0, wb + r * rs, 0, act.data(), 0, 1);
        };
        auto cp = [&](int i) {
            if (i == 0) memcpy(cd, cs, cp_n);
        };
        std::vector<double> td, tr, tc, tg, th, tdd, imb, imbh;
        const int sides = g ? 6 : 5;
        for (int r = 0; r < 2; ++r) pool.go(dot), pool.go(rd), pool.go(cp);
        for (int r = 0; r < reps; ++r) {
            for (int s = 0; s < sides; ++s) {
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
                switch ((r + s) % sides) {
                    case 0: {
                        td.push_back(pool.go(dot));
                        const double lo = *std::min_element(pool.secs.begin(), pool.secs.end());
                        const double hi = *std::max_element(pool.secs.begin(), pool.secs.end());
                        imb.push_back(hi / lo);
                        break;
                    }
                    case 1: tr.push_back(pool.go(rd)); break;
                    case 2: tc.push_back(pool.go(cp)); break;
                    case 3: {
                        th.push_back(pool.go(doth));
                        const double lo = *std::min_element(pool.secs.begin(), pool.secs.end());
                        const double hi = *std::max_element(pool.secs.begin(), pool.secs.end());
                        imbh.push_back(hi / lo);
                        break;
                    }
                    case 4: next_chunk = 0, tdd.push_back(pool.go(dotd)); break;
                    default: tg.push_back(pool.go(gg)); break;
                }
            }
        }
        const double g_ = 1e-9;
        const double dm = nb / med(td) * g_, dn = nb / mn(td) * g_, rm = nb / med(tr) * g_, rn = nb / mn(tr) * g_;
        const double cm = 2.0 * cp_n / med(tc) * g_, cn = 2.0 * cp_n / mn(tc) * g_;
        const double gm = g ? nb / med(tg) * g_ : NAN, gn = g ? nb / mn(tg) * g_ : NAN;
        const double hm = nb / med(th) * g_, hn = nb / mn(th) * g_;
        const double dd = nb / med(tdd) * g_, ddn = nb / mn(tdd) * g_;
        printf("%-7s %6.1f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %6.2f %6.2f %6.2f %6.2f %6.2f"
               " %6.2f %6.2f %6.2f\n", tt.name, nb / 1e6, dm, dn, hm, hn, dd, ddn, gm, gn, rm, rn, cm, cn, hm / cm, hn / cn,
               dd / cm, hm / gm, dd / gm, dd / hm, med(imb), med(imbh));
        fflush(stdout);
        free(wb), free(wh);
    }
    free(cs), free(cd);
}
