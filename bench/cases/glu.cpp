// GLU family, split form, F32 [4096 x 256] gate and up: GB/s of data read + written against
// the memcpy bandwidth measured at start; the "scalar" row is the same op with the SIMD
// level capped to the scalar table, timed in the same run (alternated with the native one).
#include <random>
#include <string>
#include <utility>

#include "../bench/bench_common.h"
#include "cpu/simd/isa.h"
#include "pyggml/ops/glu.h"

PYGGML_BENCH(glu) {
    using pyggml::Tensor;
    using pyggml::Type;
    namespace simd = pyggml::cpu::simd;
    const std::pair<const char*, pyggml::GluOp> ops[] = {
        {"reglu", pyggml::GluOp::REGLU},        {"swiglu", pyggml::GluOp::SWIGLU},
        {"geglu", pyggml::GluOp::GEGLU},        {"geglu_erf", pyggml::GluOp::GEGLU_ERF},
        {"geglu_quick", pyggml::GluOp::GEGLU_QUICK}, {"swiglu_oai", pyggml::GluOp::SWIGLU_OAI},
        {"swiglu_clamp", pyggml::GluOp::SWIGLU_CLAMP}};
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-8.0f, 8.0f);
    for (const auto& [name, op] : ops) {
        const std::string case_name = std::string("glu ") + name + " f32 4096x256";
        if (!bc.wants(case_name)) continue;
        pyggml::Context ctx(size_t(64) << 20);
        Tensor* g = ctx.new_tensor(Type::F32, {4096, 256});
        Tensor* up = ctx.new_tensor(Type::F32, {4096, 256});
        for (Tensor* t : {g, up})
            for (int64_t i = 0; i < t->nelements(); ++i) ((float*)t->data)[i] = u(rng);
        Tensor* r = op == pyggml::GluOp::SWIGLU_OAI    ? pyggml::swiglu_oai(&ctx, g, up, 1.702f, 7.0f)
                    : op == pyggml::GluOp::SWIGLU_CLAMP ? pyggml::swiglu_clamp(&ctx, g, up, 7.0f)
                                                        : pyggml::glu_split(&ctx, g, up, op);
        pyggml::Graph graph(&ctx);
        graph.build_forward_expand(r);
        const double bytes = 3.0 * g->nbytes();
        const simd::Isa cap = simd::isa_cap();
        double t_native = 1e30, t_scalar = 1e30;
        for (int round = 0; round < 3; ++round) {  // alternate the two levels, keep the best
            simd::set_isa_cap(cap);
            t_native = std::min(t_native, bench::time_median([&] { graph.compute(bc.n_threads); }, 5));
            simd::set_isa_cap(simd::Isa::Scalar);
            t_scalar = std::min(t_scalar, bench::time_median([&] { graph.compute(bc.n_threads); }, 5));
        }
        simd::set_isa_cap(cap);
        bc.report(case_name, bytes / t_native / 1e9, "GB/s", bc.copy_gbs, "copy");
        bc.report(case_name + " scalar", bytes / t_scalar / 1e9, "GB/s", bc.copy_gbs, "copy");
    }
}
