// Streaming GEMV rate of one weight type, plain one-row dots against the repacked tiles, read
// in 64-row units as mul_mat's driver claims them: a 4096 x 14336 weight, one column, THREADS
// threads (default 1) spinning on a shared unit counter, an untimed 64 MiB copy before every
// GEMV (cold L3), the sides alternating over REPS GEMVs. Besides each side's whole-GEMV GB/s it
// prints thread 0's per-unit rates (TSC timed; p10 and median over every unit of every GEMV):
// units last ~0.1 ms, so on a loaded machine most of them run unpreempted and the per-unit
// figures compare the kernels' streaming speed even when whole-GEMV medians are noise.
// Timing only: the repacked activations are random bytes of the right layout.
//   g++ -O3 -std=c++17 -Icsrc/include -Icsrc bench/quant_stream_units.cpp build/libpyggml_core.a -lpthread -o build/quant_stream_units
//   build/quant_stream_units TYPE [REPS] [THREADS]
#include <x86intrin.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "cpu/mul_mat_kernels.h"
#include "cpu/quant_repack.h"
#include "cpu/quant_repack_kernels.h"
#include "pyggml/tensor.h"
#include "pyggml/types.h"
using namespace pyggml;

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static double pct(std::vector<double> v, double q) { std::sort(v.begin(), v.end()); return v[size_t(q * (v.size() - 1))]; }

int main(int argc, char** argv) {
    const char* tname = argc > 1 ? argv[1] : "q6_K";
    const int reps = argc > 2 ? atoi(argv[2]) : 15, nth = argc > 3 ? atoi(argv[3]) : 1;
    Type types[kTypeIdLimit];
    const int n = valid_types(types);
    Type t = Type::F32;
    for (int i = 0; i < n; ++i) if (!strcmp(type_traits(types[i]).name, tname)) t = types[i];
    if (!type_traits(t).is_quantized) { fprintf(stderr, "unknown quantized type %s\n", tname); return 1; }
    const auto& kr = cpu::mm::kernels_for(cpu::simd::Isa::Avx2);
    const int64_t K = 4096, M = 14336, kUnit = 64;
    const size_t rb = row_size(t, K);
    std::vector<char> W(rb * M);
    {   // 64 quantized random rows, tiled
        std::mt19937 rng(1);
        std::uniform_real_distribution<float> u(-1, 1);
        std::vector<float> r(K);
        for (int64_t i = 0; i < 64; ++i) { for (auto& v : r) v = u(rng); from_float_row(t, r.data(), W.data() + i * rb, K); }
        for (int64_t m = 64; m < M; ++m) std::memcpy(W.data() + m * rb, W.data() + (m % 64) * rb, rb);
    }
    const Type vt = vec_dot_type(t);
    std::vector<float> x(K);
    { std::mt19937 rng(2); std::uniform_real_distribution<float> u(-1, 1); for (auto& v : x) v = u(rng); }
    std::vector<char> act(row_size(vt, K) + 64);
    kr.quantize[(int)vt](x.data(), act.data(), K);
    std::vector<float> out(M + 8);

    struct Side { const char* name; std::function<void(int64_t)> unit; };
    std::vector<Side> sides;
    sides.push_back({"plain", [&](int64_t u) {
        for (int64_t m = u * kUnit; m < (u + 1) * kUnit; ++m) kr.dot[(int)t](K, W.data() + m * rb, act.data(), 0, 1, &out[m], nullptr);
    }});
    Tensor wt;
    wt.type = t;
    wt.ne[0] = K; wt.ne[1] = M;
    wt.nb[0] = type_size(t); wt.nb[1] = rb; wt.nb[2] = wt.nb[3] = rb * M;
    wt.data = W.data();
    cpu::RepackHandle rp;
    std::vector<char> ractv;
    const cpu::rp::TileFn tile = cpu::rp::kernels_avx2().tile[(int)t];
    if (cpu::repack_supported(&wt) && tile) {
        rp = cpu::repack_weights(&wt);
        const int64_t nblk = K / cpu::rp::record_values(t);
        ractv.resize(size_t(nblk) * cpu::rp::act_bytes(t));
        std::mt19937 rng(3);
        for (auto& c : ractv) c = char(rng() % 16);
        sides.push_back({"repacked", [&, nblk](int64_t u) {
            const void* cols[1] = {ractv.data()};
            for (int64_t g = u * kUnit / 8; g < (u + 1) * kUnit / 8; ++g) tile(nblk, rp->group(0, 0, g), cols, 1, &out[8 * g]);
        }});
    }
    std::vector<char> ca(64 << 20, 1), cb(64 << 20);
    std::atomic<int64_t> next{0};
    std::atomic<int> gen{0}, done{0};
    std::atomic<bool> quit{false};
    int cur = 0;
    std::vector<double>* unit_ts = nullptr;
    auto work = [&](int ith) {
        for (int64_t u; (u = next.fetch_add(1)) < M / kUnit;) {
            const uint64_t t0 = __rdtsc();
            sides[cur].unit(u);
            if (ith == 0 && unit_ts) unit_ts->push_back(double(__rdtsc() - t0));
        }
    };
    std::vector<std::thread> pool;
    for (int i = 1; i < nth; ++i)
        pool.emplace_back([&, i] {
            for (int g = 0;;) {
                while (gen.load() == g) { if (quit) return; _mm_pause(); }
                g = gen.load();
                work(i);
                done.fetch_add(1);
            }
        });
    auto gemv = [&](int s) { cur = s; next = 0; done = 0; gen.fetch_add(1); work(0); while (done.load() < nth - 1) _mm_pause(); };
    // TSC ticks per second, for the per-unit rates
    const double w0 = now(); const uint64_t c0 = __rdtsc();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const double tsc_hz = double(__rdtsc() - c0) / (now() - w0);
    std::vector<std::vector<double>> whole(sides.size()), units(sides.size());
    std::vector<double> copies;
    for (int r = 0; r < reps; ++r)
        for (size_t i = 0; i < sides.size(); ++i) {
            const size_t s = (r + i) % sides.size();
            double t0 = now();
            std::memcpy(cb.data(), ca.data(), ca.size());
            copies.push_back(now() - t0);
            unit_ts = &units[s];
            t0 = now();
            gemv((int)s);
            whole[s].push_back(now() - t0);
            unit_ts = nullptr;
        }
    quit = true;
    gen.fetch_add(1);
    for (auto& th : pool) th.join();
    const double cp = 2.0 * ca.size() / pct(copies, 0.5) / 1e9;
    printf("%s, %.1f MB, %d thread(s), %d GEMVs per side; memcpy median %.2f GB/s (read + write)\n", tname, W.size() / 1e6, nth, reps, cp);
    for (size_t s = 0; s < sides.size(); ++s) {
        const double ub = double(kUnit) * rb;
        printf("  %-9s GEMV median %6.2f GB/s (%.2f of memcpy)   per unit: p10 %6.2f, median %6.2f GB/s\n", sides[s].name,
               W.size() / pct(whole[s], 0.5) / 1e9, W.size() / pct(whole[s], 0.5) / 1e9 / cp,
               ub / (pct(units[s], 0.1) / tsc_hz) / 1e9, ub / (pct(units[s], 0.5) / tsc_hz) / 1e9);
    }
}
