// flash_attn_ext throughput (head size 128, 32 query heads / 8 KV heads, F16 K/V):
// * dense, n_kv 4096, batch 1 and 32: GFLOP/s (4·N·H·KV·D) against our own naive attention
//   (mul_mat K·Q, soft_max_ext, mul_mat with a transposed V cache, permute + cont), and GB/s of
//   K/V read (once per KV head) against the memcpy bandwidth;
// (the sparse hint, n_kv_max set, is bench/cases/flash_attn_sparse.cpp).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "../bench/bench_common.h"
#include "pyggml/error.h"

namespace {

using pyggml::Tensor;
using pyggml::Type;

constexpr uint16_t kF16Zero = 0x0000;

struct FaCase {
    int64_t D = 128, H = 32, Hkv = 8, KV, N;
    pyggml::Context ctx;
    Tensor *q, *k, *v, *vt, *mask;
    FaCase(int64_t kv, int64_t n)
        : KV(kv), N(n), ctx(size_t(3) * D * kv * 8 * 2 + size_t(D) * n * 32 * 8 + size_t(kv) * n * 2 +
                            size_t(kv) * n * 32 * 4 * 2 + (size_t(64) << 20)) {
        std::mt19937 rng(1);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        q = ctx.new_tensor(Type::F32, {D, N, H, 1});
        k = ctx.new_tensor(Type::F16, {D, KV, Hkv, 1});
        v = ctx.new_tensor(Type::F16, {D, KV, Hkv, 1});
        vt = ctx.new_tensor(Type::F16, {KV, D, Hkv, 1});  // the non-FA cache layout (V transposed)
        mask = ctx.new_tensor(Type::F16, {KV, N, 1, 1});
        for (int64_t i = 0; i < q->nelements(); ++i) ((float*)q->data)[i] = u(rng);
        for (Tensor* t : {k, v, vt}) {
            uint16_t* p = (uint16_t*)t->data;
            for (int64_t i = 0; i < t->nelements(); ++i) p[i] = pyggml::fp32_to_fp16(u(rng));
        }
        std::fill((uint16_t*)mask->data, (uint16_t*)mask->data + mask->nelements(), kF16Zero);
    }
    float scale() const { return 1.0f / std::sqrt((float)D); }
    double seconds(Tensor* out, int n_threads, int reps) {
        pyggml::Graph g(&ctx);
        g.build_forward_expand(out);
        return bench::time_median([&] { g.compute(n_threads); }, reps);
    }
    Tensor* fa() { return pyggml::flash_attn_ext(&ctx, q, k, v, mask, scale(), 0.0f, 0.0f); }
    Tensor* naive() {
        Tensor* kq = pyggml::mul_mat(&ctx, k, q);                         // [KV, N, H, 1]
        kq = pyggml::soft_max_ext(&ctx, kq, mask, scale(), 0.0f);
        Tensor* kqv = pyggml::mul_mat(&ctx, vt, kq);                      // [D, N, H, 1]
        return pyggml::cont(&ctx, pyggml::permute(&ctx, kqv, 0, 2, 1, 3));  // [D, H, N, 1]
    }
    double flops() const { return 4.0 * N * H * KV * D; }
    double kv_bytes() const { return 2.0 * KV * Hkv * D * 2; }
};

}  // namespace

PYGGML_BENCH(flash_attn) {
    for (int64_t n : {1, 32}) {
        const std::string name = "flash_attn f16 D128 kv4096 h32/8 n" + std::to_string(n);
        if (!bc.wants(name)) continue;
        FaCase c(4096, n);
        const int reps = n == 1 ? 21 : 7;
        const double t = c.seconds(c.fa(), bc.n_threads, reps);
        double t_ref = 0.0;
        try {
            t_ref = c.seconds(c.naive(), bc.n_threads, reps);
        } catch (const pyggml::Error&) {  // naive path ops not available on this build
        }
        bc.report(name + " GFLOP/s", c.flops() / t / 1e9, "GFLOP/s", t_ref > 0 ? c.flops() / t_ref / 1e9 : 0.0,
                  "naive mm+sm+mm");
        bc.report(name + " GB/s", c.kv_bytes() / t / 1e9, "GB/s", bc.copy_gbs, "copy");
    }
}
