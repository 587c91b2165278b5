// Shared harness of the C++ benchmarks: cases register themselves; the runner prints one
// table (case, pyggml, reference, ratio). No benchmark asserts a time.
#pragma once
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "pyggml/graph.h"
#include "pyggml/ops.h"

namespace bench {

struct Row {
    std::string name;    // case name
    double ours;         // measured value of pyggml
    std::string unit;    // "GFLOP/s", "GB/s", "ms"
    double ref;          // reference value measured in the same run (0 if none)
    std::string ref_name;
};

struct Context {
    int n_threads = 2;
    double copy_gbs = 0.0;  // memcpy bandwidth measured at start, GB/s
    std::string filter;     // substring filter on case names
    std::vector<Row> rows;
    void report(const std::string& name, double ours, const std::string& unit, double ref = 0.0,
                const std::string& ref_name = "") {
        rows.push_back({name, ours, unit, ref, ref_name});
    }
    bool wants(const std::string& name) const { return filter.empty() || name.find(filter) != std::string::npos; }
};

using Fn = void (*)(Context&);
struct Registry {
    static std::vector<std::pair<std::string, Fn>>& cases() {
        static std::vector<std::pair<std::string, Fn>> c;
        return c;
    }
};
struct Registrar {
    Registrar(const char* name, Fn fn) { Registry::cases().push_back({name, fn}); }
};

// Median wall time in seconds of fn() over `reps` runs after one warm-up.
inline double time_median(const std::function<void()>& fn, int reps = 5) {
    fn();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        fn();
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

}  // namespace bench

// Define a benchmark case group: PYGGML_BENCH(matmul) { bc.report(...); }
#define PYGGML_BENCH(name)                                                   \
    static void bench_case_##name(bench::Context& bc);                       \
    static bench::Registrar bench_reg_##name(#name, bench_case_##name);     \
    static void bench_case_##name(bench::Context& bc)
