// Which one-column GEMV path streams a quantized weight fastest, and is it compute-bound?
// For each type, at the detected level, every path mul_mat's dot driver can take for one
// column: "dot" (one row), "dot1x" (one row with activation extras, where the type has one),
// "dot2" (two rows per call, where it has one), against a read-only pass over the same bytes
// ("read") and, with GGML_LIB_DIR set, ggml's vec_dot ("ggml").
// COLS > 1: the dots take that many activation columns (the same column repeated; no dot1x or
// ggml sides): "dot2" pairs neighbouring rows (2i, 2i+1), "dot2h" row i of a 64-row unit's first
// half with row i of its second half (mul_mat's dot driver).
// "dot4K"/"dot1x4K", "ggml4K" and "read4K": the driver's one-column path, ggml's vec_dot and the
// read pass on 4 KiB pages.
//   cache:  TSC cycles per weight block with 8 rows of K values resident (L1/L2), the sides
//           alternating over 201 samples: median / minimum. "same bits": the paths agree.
//   stream: an M x K weight (64 distinct rows tiled, 2 MiB pages) streamed by THREADS threads
//           taking 64-row units from a shared counter, an untimed 64 MiB copy before each GEMV
//           (cold L3), the sides alternating over REPS GEMVs. Per side: whole-GEMV GB/s
//           (median), and thread 0's TSC bytes per cycle per 64-row unit (median and p90: the
//           units last ~0.05 ms, so most run unpreempted on a loaded machine), and the per-thread
//           skew (max / min busy time of the threads in one GEMV, median).
// The prologue line: TSC cycles of the column's conversion, which every thread does before
// its first unit, against its share of the GEMV.
// A path whose cache cycles per block exceed (block bytes) / (stream bytes per cycle of "read")
// cannot keep up with memory. Reported, never asserted.
//   g++ -O2 -std=c++17 -pthread -Icsrc/include -Icsrc bench/quant_gemv_paths.cpp build/libpyggml_core.a -ldl -o build/quant_gemv_paths
//   GGML_LIB_DIR=... build/quant_gemv_paths [TYPES=q4_0,q5_0,q2_K,mxfp4,q6_K] [THREADS=2] [REPS=15] [K=4096] [M=14336] [LEVEL=detected] [COLS=1] [UNIT=64]
#include <sys/mman.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu/mul_mat_common.h"
#include "ggml_cpu_dl.h"
#include "spin_pool.h"
#include "pyggml/types.h"

using namespace pyggml;
using cpu::mm::Dot1xFn;
using cpu::mm::Kernels;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double pct(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[size_t(q * (v.size() - 1))];
}

__attribute__((target("avx2"))) int read_rows(const char* p, size_t n) {
    __m256i acc = _mm256_setzero_si256();
    for (size_t i = 0; i + 128 <= n; i += 128) {
        acc = _mm256_xor_si256(acc, _mm256_loadu_si256((const __m256i*)(p + i)));
        acc = _mm256_xor_si256(acc, _mm256_loadu_si256((const __m256i*)(p + i + 32)));
        acc = _mm256_xor_si256(acc, _mm256_loadu_si256((const __m256i*)(p + i + 64)));
        acc = _mm256_xor_si256(acc, _mm256_loadu_si256((const __m256i*)(p + i + 96)));
    }
    return _mm256_extract_epi32(acc, 0);
}

}  // namespace

int main(int argc, char** argv) {
    const std::string want = argc > 1 ? argv[1] : "q4_0,q5_0,q2_K,mxfp4,q6_K";
    const int T = argc > 2 ? atoi(argv[2]) : 2, reps = argc > 3 ? atoi(argv[3]) : 15;
    const int64_t K = argc > 4 ? atoll(argv[4]) : 4096, M = argc > 5 ? atoll(argv[5]) : 14336, kUnit = argc > 8 ? atoll(argv[8]) : 64;
    const int cols = argc > 7 ? std::clamp(atoi(argv[7]), 1, 4) : 1;  // activation columns (the same one)
    cpu::simd::Isa level = cpu::simd::cpu_isa();
    if (argc > 6 && !cpu::simd::parse_isa(argv[6], &level)) return fprintf(stderr, "unknown level %s\n", argv[6]), 1;
    const Kernels& kr = cpu::mm::kernels_for(level);
    const GetTraits gget = getenv("GGML_LIB_DIR") ? load_ggml_cpu_traits() : nullptr;
    SpinPool pool(T);
    const size_t cp_n = 64u << 20;
    char* cs = (char*)aligned_alloc(2u << 20, cp_n);
    char* cd = (char*)aligned_alloc(2u << 20, cp_n);
    madvise(cs, cp_n, MADV_HUGEPAGE), madvise(cd, cp_n, MADV_HUGEPAGE);
    memset(cs, 1, cp_n), memset(cd, 2, cp_n);
    float aux[256];
    cpu::mm::nvfp4_scale_table(aux);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> x(K), w(64 * K);
    for (auto& v : x) v = u(rng);
    for (auto& v : w) v = u(rng);
    const double w0 = now();
    const uint64_t c0 = __rdtsc();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const double tsc_hz = double(__rdtsc() - c0) / (now() - w0);
    printf("# level %s, K %lld, M %lld, %d threads, %d reps, TSC %.2f GHz\n", cpu::simd::isa_name(kr.isa), (long long)K,
           (long long)M, T, reps, tsc_hz / 1e9);
    printf("%-7s %-6s %9s %9s | %8s %8s %8s %8s %6s\n", "type", "path", "cyc/blk", "cyc min", "GEMV GB/s", "B/cyc md",
           "B/cyc p90", "need cyc", "skew");
    Type types[kTypeIdLimit];
    const int nt = valid_types(types);
    for (int ti = 0; ti < nt; ++ti) {
        const Type t = types[ti];
        const TypeTraits& tt = type_traits(t);
        if (!tt.is_quantized || !tt.is_weight || !kr.dot[(int)t]) continue;
        if (("," + want + ",").find("," + std::string(tt.name) + ",") == std::string::npos) continue;
        const size_t rs = row_size(t, K), nb = rs * M;
        const double blocks = double(K) / tt.blck_size;
        const size_t wn = (nb + (2u << 20) - 1) / (2u << 20) * (2u << 20);
        // W on 2 MiB pages; W4 on 4 KiB pages (THP "madvise": what posix_memalign gives pyggml's arena)
        char* W = (char*)aligned_alloc(2u << 20, wn);
        char* W4 = (char*)aligned_alloc(2u << 20, wn);
        madvise(W, wn, MADV_HUGEPAGE);
        for (int r = 0; r < 64; ++r) from_float_row(t, w.data() + r * K, W + r * rs, K);
        for (int64_t r = 64; r < M; ++r) memcpy(W + r * rs, W + (r % 64) * rs, rs);
        memcpy(W4, W, nb);
        // the activation column as dot_forward converts it: blocks, then the dot1x extras
        const Type vt = tt.vec_dot_type;
        const size_t blocks_bytes = cpu::mm::act_col_bytes(t, K);
        std::vector<char> act(blocks_bytes + cpu::mm::act_extras_bytes(t, K) + 64);
        char* const actp = (char*)(((uintptr_t)act.data() + 63) & ~uintptr_t(63));  // 64-byte aligned, as mul_mat's
        kr.quantize[(int)vt](x.data(), actp, K);
        if (kr.dot1x[(int)t]) cpu::mm::act_extras(t, (const BlockQ8_0*)actp, K, actp + blocks_bytes);
        const GTraits* g = gget && cols == 1 ? gget((int)t) : nullptr;
        std::vector<char> gact(row_size(Type(g ? g->vec_dot_type : 0), K) + 64);
        if (g) g->from_float(x.data(), gact.data(), K);
        std::vector<float> y(M + 8);
        // one side: rows [m0, m1) into y
        struct Side { const char* name; std::function<void(int64_t, int64_t)> rows; };
        std::vector<Side> sides;
        sides.push_back({"dot", [&](int64_t m0, int64_t m1) {
            for (int64_t m = m0; m < m1; ++m) {
                float o[4];
                kr.dot[(int)t](K, W + m * rs, actp, 0, cols, o, aux);
                y[m] = o[0];
            }
        }});
        if (kr.dot1x[(int)t] && cols == 1)
            sides.push_back({"dot1x", [&](int64_t m0, int64_t m1) {
                for (int64_t m = m0; m < m1; ++m) kr.dot1x[(int)t](K, W + m * rs, actp, actp + blocks_bytes, &y[m], aux);
            }});
        if (kr.dot2[(int)t])
            sides.push_back({"dot2", [&](int64_t m0, int64_t m1) {
                float o[8];
                for (int64_t m = m0; m < m1; m += 2) {
                    kr.dot2[(int)t](K, W + m * rs, rs, actp, 0, cols, o, aux);
                    y[m] = o[0], y[m + 1] = o[4];
                }
            }});
        // dot2 pairing row i of a unit's first half with row i of its second half: two
        // contiguous streams that run on from one call to the next
        if (kr.dot2[(int)t])
            sides.push_back({"dot2h", [&](int64_t m0, int64_t m1) {
                float o[8];
                const int64_t h = (m1 - m0) / 2;
                for (int64_t i = 0; i < h; ++i) {
                    kr.dot2[(int)t](K, W + (m0 + i) * rs, h * rs, actp, 0, cols, o, aux);
                    y[m0 + i] = o[0], y[m0 + h + i] = o[4];
                }
                if ((m1 - m0) & 1) {
                    kr.dot[(int)t](K, W + (m1 - 1) * rs, actp, 0, cols, o, aux);
                    y[m1 - 1] = o[0];
                }
            }});
        // the two-row dot1x, paired as dot2h (mul_mat's one-column path where the type has one)
        if (kr.dot1x2[(int)t] && cols == 1)
            sides.push_back({"dot1x2h", [&](int64_t m0, int64_t m1) {
                float o[2];
                const int64_t h = (m1 - m0) / 2;
                for (int64_t i = 0; i < h; ++i) {
                    kr.dot1x2[(int)t](K, W + (m0 + i) * rs, h * rs, actp, actp + blocks_bytes, o, aux);
                    y[m0 + i] = o[0], y[m0 + h + i] = o[1];
                }
                if ((m1 - m0) & 1) kr.dot1x[(int)t](K, W + (m1 - 1) * rs, actp, actp + blocks_bytes, &y[m1 - 1], aux);
            }});
        if (g)
            sides.push_back({"ggml", [&](int64_t m0, int64_t m1) {
                for (int64_t m = m0; m < m1; ++m) g->vec_dot((int)K, &y[m], 0, W + m * rs, 0, gact.data(), 0, 1);
            }});
        // the driver's one-column path again, on 4 KiB pages
        const Dot1xFn d1x = cols == 1 ? kr.dot1x[(int)t] : nullptr;
        sides.push_back({d1x ? "dot1x4K" : "dot4K", [&](int64_t m0, int64_t m1) {
            for (int64_t m = m0; m < m1; ++m)
                if (d1x) d1x(K, W4 + m * rs, actp, actp + blocks_bytes, &y[m], aux);
                else {
                    float o[4];
                    kr.dot[(int)t](K, W4 + m * rs, actp, 0, cols, o, aux);
                    y[m] = o[0];
                }
        }});
        if (g)
            sides.push_back({"ggml4K", [&](int64_t m0, int64_t m1) {
                for (int64_t m = m0; m < m1; ++m) g->vec_dot((int)K, &y[m], 0, W4 + m * rs, 0, gact.data(), 0, 1);
            }});
        const size_t n_compute = sides.size();
        sides.push_back({"read4K", [&](int64_t m0, int64_t m1) { y[m0] = (float)read_rows(W4 + m0 * rs, size_t(m1 - m0) * rs); }});
        sides.push_back({"read", [&](int64_t m0, int64_t m1) { y[m0] = (float)read_rows(W + m0 * rs, size_t(m1 - m0) * rs); }});
        // same bits: every pyggml path against "dot" over the first 64 rows
        std::vector<float> ref(64);
        sides[0].rows(0, 64);
        std::copy(y.begin(), y.begin() + 64, ref.begin());
        std::string differ;
        for (size_t s = 1; s < n_compute; ++s) {
            if (!strncmp(sides[s].name, "ggml", 4)) continue;
            sides[s].rows(0, 64);
            if (memcmp(ref.data(), y.data(), 64 * sizeof(float))) differ += std::string(" ") + sides[s].name;
        }
        // the prologue every thread runs before its first unit: the column's quantization (and extras)
        std::vector<double> pro;
        for (int r = 0; r < 201; ++r) {
            const uint64_t t0 = __rdtsc();
            kr.quantize[(int)vt](x.data(), actp, K);
            if (kr.dot1x[(int)t]) cpu::mm::act_extras(t, (const BlockQ8_0*)actp, K, actp + blocks_bytes);
            pro.push_back(double(__rdtsc() - t0));
        }
        // cache: 8 rows, cycles per block
        std::vector<std::vector<double>> cyc(sides.size());
        for (int r = 0; r < 201; ++r)
            for (size_t i = 0; i < sides.size(); ++i) {
                const size_t s = (r + i) % sides.size();
                const uint64_t t0 = __rdtsc();
                for (int k = 0; k < 10; ++k) sides[s].rows(0, 8);
                cyc[s].push_back(double(__rdtsc() - t0) / (10 * 8 * blocks));
            }
        // stream
        std::atomic<int64_t> next{0};
        const int64_t units = (M + kUnit - 1) / kUnit;
        std::vector<std::vector<double>> whole(sides.size()), per_unit(sides.size()), skew(sides.size());
        size_t cur = 0;
        auto job = [&](int ith) {
            for (int64_t un; (un = next.fetch_add(1)) < units;) {
                const uint64_t t0 = __rdtsc();
                sides[cur].rows(un * kUnit, std::min(M, (un + 1) * kUnit));
                if (ith == 0) per_unit[cur].push_back(double(kUnit * rs) / double(__rdtsc() - t0));
            }
        };
        for (int r = 0; r < reps; ++r)
            for (size_t i = 0; i < sides.size(); ++i) {
                cur = (r + i) % sides.size();
                memcpy(cd, cs, cp_n);
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                next = 0;
                whole[cur].push_back(pool.go(job));
                skew[cur].push_back(*std::max_element(pool.secs.begin(), pool.secs.end()) /
                                    *std::min_element(pool.secs.begin(), pool.secs.end()));
            }
        const double read_bpc = pct(per_unit.back(), 0.5);
        for (size_t s = 0; s < sides.size(); ++s)
            printf("%-7s %-6s %9.2f %9.2f | %8.2f %8.2f %8.2f %8.2f %6.2f%s\n", tt.name, sides[s].name,
                   pct(cyc[s], 0.5), pct(cyc[s], 0.0), nb / pct(whole[s], 0.5) / 1e9, pct(per_unit[s], 0.5),
                   pct(per_unit[s], 0.9), rs / blocks / read_bpc, pct(skew[s], 0.5),
                   s == 0 && !differ.empty() ? ("  DIFFER:" + differ).c_str() : "");
        printf("#   need cyc = block bytes / read's B/cyc (median): the cycles per block a path may take to keep up;"
               " prologue (quantize the column%s) %.0f TSC cycles = %.4f of the GEMV's dot cycles on %d threads\n",
               kr.dot1x[(int)t] ? " + extras" : "", pct(pro, 0.5), pct(pro, 0.5) / (pct(cyc[0], 0.5) * blocks * M / T), T);
        fflush(stdout);
        free(W), free(W4);
    }
    free(cs), free(cd);
}
