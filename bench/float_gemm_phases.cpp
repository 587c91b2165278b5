// The packed float GEMM of mul_mat by phase, on one thread timed by the thread's CPU clock
// (figures that hold on a loaded machine; minima of rounds that alternate the phases): the whole
// product (graph.compute(1)), the weight packing (pack_a) of every weight block from memory and of
// one block repeated (in L2), and the tiles' sweep of one block in cache, scaled to the product,
// with the running sums written to columns mc floats apart (as in cache), M floats apart (dst's
// layout) and mc + 16 floats apart (the driver's scratch). The product less packing and tiles is
// what the driver adds (b's packing, prefetches, misses the in-cache figures do not see).
// Built with the other bench binaries (CMake target float_gemm_phases).
//   build/float_gemm_phases [f16|bf16|f32] [M 4096] [N 128] [K 4096]

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_args.h"
#include "cpu/mul_mat_float.h"
#include "pyggml/graph.h"
#include "pyggml/ops.h"
#include "pyggml/types.h"
#include "thread_clock.h"

using namespace pyggml;
using namespace pyggml::cpu;

using bench::thread_seconds;

int main(int argc, char** argv) {
    const bench::Args args{"float_gemm_phases [f16|bf16|f32] [M] [N] [K]   (defaults: bf16 4096 128 4096)"};
    args.help_if_asked(argc, argv);
    if (argc > 5) args.fail("too many arguments", argv[5]);
    const char* kind_name = argc > 1 ? args.one_of(argv[1], {"f16", "bf16", "f32"}, "the weight type is f16, bf16 or f32") : "bf16";
    const Type wt = !strcmp(kind_name, "f16") ? Type::F16 : !strcmp(kind_name, "f32") ? Type::F32 : Type::BF16;
    const int kind = mm::float_kind(wt);
    const int64_t M = argc > 2 ? args.positive(argv[2], "M is a positive row count") : 4096;
    const int64_t N = argc > 3 ? args.positive(argv[3], "N is a positive column count") : 128;
    const int64_t K = argc > 4 ? args.positive(argv[4], "K is a positive length") : 4096;
    Context ctx(size_t(K) * M * type_size(wt) + size_t(K) * N * 4 + size_t(M) * N * 4 + (size_t(64) << 20));
    Graph g(&ctx);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    Tensor* a = ctx.new_tensor(wt, {K, M});
    Tensor* b = ctx.new_tensor(Type::F32, {K, N});
    std::vector<float> row(K);
    for (int64_t m = 0; m < M; ++m) {
        for (auto& v : row) v = u(rng);
        from_float_row(wt, row.data(), a->row(m), K);
    }
    for (int64_t i = 0; i < K * N; ++i) ((float*)b->data)[i] = u(rng);
    g.build_forward_expand(mul_mat(&ctx, a, b));

    const mm::FloatKernels& fk = mm::float_kernels_for(simd::cpu_isa(), wt);
    const int V = fk.lanes, CF = mm::chunk_floats(fk), MR = fk.mr, NR = fk.nr;
    if (M < MR) args.fail(("M is at least the tile's " + std::to_string(MR) + " rows").c_str(), argv[2]);
    const int64_t mc = std::min(fk.mc, M), nq = fk.kb / V, mp = mc / MR, np = (N + NR - 1) / NR;
    std::vector<float> ap(size_t(mp) * mm::a_panel_floats(fk, nq) + 64), bp(size_t(np * nq * NR * CF) + 64);
    std::vector<float> col(size_t(fk.kb) * NR), c_mc(size_t(mc) * N), c_m(size_t(M) * N), c_pad(size_t(mc + 16) * N);
    for (auto& v : col) v = u(rng);
    for (int64_t jp = 0; jp < np; ++jp) {
        const float* cols[mm::kMaxFloatNR];
        for (int j = 0; j < NR; ++j) cols[j] = col.data() + j * fk.kb;
        fk.pack_b(cols, nq, bp.data() + jp * nq * NR * CF);
    }
    const mm::FloatMicroFn micro = kind == mm::kFloatF16 && fk.micro_f16 ? fk.micro_f16 : fk.micro;
    const size_t as = a->nb[1];
    auto pack_block = [&](int64_t m0, int64_t k0) {
        for (int64_t ip = 0; ip < mp; ++ip)
            fk.pack_a[kind]((const char*)a->data + (m0 + ip * MR) * as, as, MR, k0, std::min(fk.kb, K - k0),
                            ap.data() + ip * mm::a_panel_floats(fk, nq));
    };
    auto sweep = [&](float* c, int64_t ldc) {  // one weight block, all N columns, sums added
        for (int64_t jp = 0; jp < np; ++jp)
            for (int64_t ip = 0; ip < mp; ++ip)
                micro(nq, ap.data() + ip * mm::a_panel_floats(fk, nq), bp.data() + jp * nq * NR * CF,
                      c + jp * NR * ldc + ip * MR, ldc, MR, (int)std::min<int64_t>(NR, N - jp * NR), true, nullptr, 0);
    };
    const double blocks = double(M / mc) * double((K + fk.kb - 1) / fk.kb);
    enum { kFull, kPackMem, kPackL2, kSweepMc, kSweepM, kSweepPad, kPhases };
    double best[kPhases];
    std::fill(best, best + kPhases, 1e30);
    auto timed = [&](int phase, double scale, auto&& f) {
        const double t0 = thread_seconds();
        f();
        best[phase] = std::min(best[phase], (thread_seconds() - t0) * scale);
    };
    g.compute(1);
    pack_block(0, 0);
    for (int r = 0; r < 15; ++r) {
        timed(kFull, 1, [&] { g.compute(1); });
        timed(kPackMem, 1, [&] {
            for (int64_t m0 = 0; m0 + mc <= M; m0 += mc)
                for (int64_t k0 = 0; k0 < K; k0 += fk.kb) pack_block(m0, k0);
        });
        timed(kPackL2, blocks / 8, [&] { for (int i = 0; i < 8; ++i) pack_block(0, 0); });
        timed(kSweepMc, blocks / 8, [&] { for (int i = 0; i < 8; ++i) sweep(c_mc.data(), mc); });
        timed(kSweepM, blocks / 8, [&] { for (int i = 0; i < 8; ++i) sweep(c_m.data(), M); });
        timed(kSweepPad, blocks / 8, [&] { for (int i = 0; i < 8; ++i) sweep(c_pad.data(), mc + 16); });
    }
    const double fl = 2.0 * K * M * N, ms = 1e3;
    printf("# %s K%lld M%lld N%lld, one thread (thread CPU time, minima of 15 rounds)\n", kind_name, (long long)K, (long long)M,
           (long long)N);
    printf("product %.2f ms (%.1f GFLOP/s)\n", best[kFull] * ms, fl / best[kFull] / 1e9);
    printf("pack_a: every block from memory %.2f ms, one block in L2 (x%.0f) %.2f ms\n", best[kPackMem] * ms, blocks, best[kPackL2] * ms);
    printf("tiles in cache (x%.0f), sums columns %lld / %lld / %lld floats apart: %.2f / %.2f / %.2f ms (%.1f GFLOP/s at %lld)\n",
           blocks, (long long)mc, (long long)M, (long long)mc + 16, best[kSweepMc] * ms, best[kSweepM] * ms, best[kSweepPad] * ms,
           fl / best[kSweepPad] / 1e9, (long long)mc + 16);
    printf("product - pack_a (memory) - tiles (mc + 16): %.2f ms\n", (best[kFull] - best[kPackMem] - best[kSweepPad]) * ms);
    return 0;
}
