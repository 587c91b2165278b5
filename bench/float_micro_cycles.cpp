// GFLOP/s of each kernel set's packed float GEMM inner loops (one K block of a weight block of
// mc rows swept by the column panels of nc columns, as packed_forward runs them; everything
// in L1/L2) against the core's FMA peak (256-bit and 512-bit chains), all on one thread timed
// by the thread's CPU clock, so the figures hold on a loaded machine (the ratio to the peak is
// the figure to read; a bf16-pair step counts as two multiply-adds per lane). Optional arguments:
// the weight kind (f32, f16, bf16; bf16 also runs the AVX512-BF16 pair form), the columns swept.
// Built with the other bench binaries (CMake target float_micro_cycles).
//   build/float_micro_cycles [f32|f16|bf16] [240]
#include <immintrin.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "bench_args.h"
#include "cpu/mul_mat_float.h"
#include "fma_chains.h"
#include "pyggml/types.h"
#include "thread_clock.h"

using namespace pyggml;
using namespace pyggml::cpu;

using bench::thread_seconds;

int main(int argc, char** argv) {
    const bench::Args args{"float_micro_cycles [f32|f16|bf16] [COLUMNS]   (defaults: f32 240)"};
    args.help_if_asked(argc, argv);
    if (argc > 3) args.fail("too many arguments", argv[3]);
    const char* kind_name = argc > 1 ? args.one_of(argv[1], {"f32", "f16", "bf16"}, "the weight type is f32, f16 or bf16") : "f32";
    const int64_t cols = argc > 2 ? args.positive(argv[2], "COLUMNS is a positive count") : 240;
    const int kind = !strcmp(kind_name, "f16") ? mm::kFloatF16 : !strcmp(kind_name, "bf16") ? mm::kFloatBF16 : mm::kFloatF32;
    volatile float sink = 0;
    const int64_t iters = 20000000;
    double t0 = thread_seconds();
    sink = sink + bench::fma_chains256(iters);
    const double p256 = 12.0 * 8 * 2 * iters / (thread_seconds() - t0) / 1e9;
    double p512 = 0;
    if (simd::detected_isa() == simd::Isa::Avx512) {
        t0 = thread_seconds();
        sink = sink + bench::fma_chains512(iters / 2);
        p512 = 12.0 * 16 * 2 * (iters / 2) / (thread_seconds() - t0) / 1e9;
    }
    printf("# FMA peak, one core (thread CPU time): 256-bit %.1f GFLOP/s, 512-bit %.1f GFLOP/s\n", p256, p512);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    // (level, pair form): the avx512 level's bf16 weights also in the AVX512-BF16 pair form
    for (auto [isa, pairs] : {std::pair{simd::Isa::Avx2, false}, {simd::Isa::Avx512, false}, {simd::Isa::Avx512, true}}) {
        if ((int)isa > (int)simd::detected_isa() || (pairs && (kind != mm::kFloatBF16 || !simd::detected_avx512_bf16()))) continue;
        simd::IsaPin pin(isa, pairs);
        const mm::FloatKernels& fk = pairs ? mm::float_kernels_avx512_bf16() : mm::float_kernels_for(isa);
        const int V = fk.lanes, CF = mm::chunk_floats(fk), MR = fk.mr, NR = fk.nr;
        const int64_t K = fk.kb, M = fk.mc, N = std::min<int64_t>(fk.nc, (cols + NR - 1) / NR * NR);
        const int64_t nq = K / V, mp = M / MR, np = N / NR;
        // weights in the kind's storage, rows of K values
        std::vector<uint16_t> w16(size_t(M * K));
        std::vector<float> w32(size_t(M * K));
        for (size_t i = 0; i < w32.size(); ++i) {
            w32[i] = u(rng);
            w16[i] = kind == mm::kFloatF16 ? fp32_to_fp16(w32[i]) : fp32_to_bf16(w32[i]);
        }
        const void* wa = kind == mm::kFloatF32 ? (const void*)w32.data() : (const void*)w16.data();
        const size_t as = size_t(K) * (kind == mm::kFloatF32 ? 4 : 2);
        std::vector<float> ap(size_t(mp) * mm::a_panel_floats(fk, nq) + 64), bp(size_t(np * nq * NR * CF) + 64);
        std::vector<float> col(size_t(K) * NR), c(size_t(M * N));
        for (auto& v : col) v = u(rng);
        for (int64_t ip = 0; ip < mp; ++ip) fk.pack_a[kind]((const char*)wa + ip * MR * as, as, MR, 0, K, ap.data() + ip * mm::a_panel_floats(fk, nq));
        for (int64_t jp = 0; jp < np; ++jp) {
            const float* cols[mm::kMaxFloatNR];
            for (int j = 0; j < NR; ++j) cols[j] = col.data() + j * K;
            fk.pack_b(cols, nq, bp.data() + jp * nq * NR * CF);
        }
        const mm::FloatMicroFn micro = kind == mm::kFloatF16 && fk.micro_f16 ? fk.micro_f16 : fk.micro;
        auto sweep = [&] {
            for (int64_t jp = 0; jp < np; ++jp)
                for (int64_t ip = 0; ip < mp; ++ip)
                    micro(nq, ap.data() + ip * mm::a_panel_floats(fk, nq), bp.data() + jp * nq * NR * CF, c.data() + jp * NR * M + ip * MR,
                             M, MR, NR, false, nullptr, 0);
        };
        auto pack = [&] {
            for (int64_t ip = 0; ip < mp; ++ip) fk.pack_a[kind]((const char*)wa + ip * MR * as, as, MR, 0, K, ap.data() + ip * mm::a_panel_floats(fk, nq));
        };
        sweep();
        double best = 1e30, best_pack = 1e30;
        for (int r = 0; r < 21; ++r) {
            t0 = thread_seconds();
            for (int i = 0; i < 5; ++i) sweep();
            best = std::min(best, (thread_seconds() - t0) / 5);
            t0 = thread_seconds();
            for (int i = 0; i < 5; ++i) pack();
            best_pack = std::min(best_pack, (thread_seconds() - t0) / 5);
        }
        const double gf = 2.0 * M * N * K / best / 1e9;
        const double peak = isa == simd::Isa::Avx512 ? p512 : p256;
        printf("%-7s%s %s micro %dx%d lanes %d kb %lld mc %lld nc %lld: %.1f GFLOP/s = %.2f of the peak; "
               "pack_a of the weight block %.1f us (the sweep of %lld columns %.1f us)\n",
               simd::isa_name(isa), pairs ? " pairs" : "", kind_name, MR, NR, V, (long long)fk.kb, (long long)fk.mc, (long long)fk.nc, gf, gf / peak,
               best_pack * 1e6, (long long)N, best * 1e6);
    }
    return sink == 12345.0f;
}
