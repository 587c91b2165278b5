// bench_ops: throughput of the core kernels. Usage: bench_ops [-t THREADS] [FILTER]
// Cases live in bench/cases/*.cpp and register themselves with PYGGML_BENCH.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../bench/bench_args.h"
#include "../bench/bench_common.h"

static double measure_copy_gbs() {
    const size_t n = size_t(256) << 20;
    std::vector<char> a(n, 1), b(n, 0);
    double t = bench::time_median([&] { std::memcpy(b.data(), a.data(), n); }, 5);
    return 2.0 * n / t / 1e9;  // read + write
}

int main(int argc, char** argv) {
    const bench::Args args{"bench_ops [-t THREADS] [FILTER]   (FILTER: a substring of the case names)"};
    args.help_if_asked(argc, argv);
    bench::Context bc;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "-t")) {
            if (i + 1 == argc) args.fail("-t needs a thread count", argv[i]);
            bc.n_threads = (int)args.positive(argv[++i], "-t takes a positive thread count");
        } else if (argv[i][0] == '-') {
            args.fail("unknown option", argv[i]);
        } else if (!bc.filter.empty()) {
            args.fail("one FILTER at most", argv[i]);
        } else {
            bc.filter = argv[i];
        }
    }
    bc.copy_gbs = measure_copy_gbs();
    std::printf("# threads=%d  copy bandwidth (memcpy, read+write) = %.2f GB/s\n", bc.n_threads, bc.copy_gbs);
    for (auto& c : bench::Registry::cases()) c.second(bc);
    std::printf("%-48s %12s %-9s %12s %-14s %7s\n", "case", "pyggml", "unit", "reference", "ref", "ratio");
    for (auto& r : bc.rows) {
        if (r.ref > 0)
            std::printf("%-48s %12.3f %-9s %12.3f %-14s %7.3f\n", r.name.c_str(), r.ours, r.unit.c_str(),
                        r.ref, r.ref_name.c_str(), r.ours / r.ref);
        else
            std::printf("%-48s %12.3f %-9s %12s %-14s %7s\n", r.name.c_str(), r.ours, r.unit.c_str(), "-", "", "-");
    }
    return 0;
}
