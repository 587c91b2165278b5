// CPU kernels of the 'mul_mat' family.
//
// Numerics follow ggml's CPU: b is first converted to the weights' vec_dot_type (f16 / bf16
// rounding, or q8_0 / q8_1 / q8_K quantization for block weights), products accumulate in f32.
// Two paths:
//   - dot path (few columns; MUL_MAT_ID's in mul_mat_id.cpp): b converted once into wdata, barrier, then
//     chunks of weight rows are taken from a shared counter (small b: converted by every
//     thread and no barrier, the chunks taken from the node's own counter, which the backend
//     zeroes); each row, or pair of rows where the kernel set has two-row dots, is dotted with
//     up to 4 columns at a time (kernels in simd/, picked at run time);
//   - GEMM path (many columns): mul_mat_qgemm.h for block weights (bit-identical to their
//     dot path);
//   - K-quant tile path (q2_K..q6_K, the avx512 level, from kt::kMinColumns columns on):
//     quant_ktile.h, another summation order (llama.cpp's AVX-512 one), never for narrower
//     products, whose columns keep the dot path's bits.
// Weights with a live repacked copy (quant_repack.h) take its driver for every other column
// count.
// Float weights (f32 / f16 / bf16) have their own driver, mul_mat_float.cpp: one summation
// order per output whatever the column count.
#include <algorithm>
#include <limits>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/mul_mat_common.h"
#include "cpu/mul_mat_float.h"
#include "cpu/mul_mat_qgemm.h"
#include "cpu/quant_ktile.h"
#include "cpu/quant_repack.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

using namespace mm;

namespace {

// Columns per unit of the dot path (a multiple of the kernels' 4 columns).
constexpr int64_t kDotColBlock = 64;

// Activations need converting unless the weights are f32 and b is f32 already.
bool dot_needs_conversion(const Tensor* dst) {
    return !(dst->src[0]->type == Type::F32 && dst->src[1]->type == Type::F32);
}

// Rows per work unit: enough units for dynamic balance, at most 64 rows. Even, so the two-row
// kernels pair every row of a unit but an odd M's last (the two-row and one-row kernels give the
// same bits, so results never depend on the pairing or the thread count).
int64_t rows_per_unit(int64_t M, int64_t nbatch, int nth) {
    const int64_t want_units = int64_t(nth) * 16;
    const int64_t r = std::clamp<int64_t>(M * nbatch / want_units, 1, std::min<int64_t>(64, std::max<int64_t>(M, 1)));
    return r + (r & 1);
}

size_t dot_conv_bytes(const Kernels& kr, const Tensor* dst) {
    const Tensor* b = dst->src[1];
    return size_t(b->ne[1] * b->ne[2] * b->ne[3]) * dot_col_bytes(kr, dst->src[0]->type, b->ne[0]);
}

void dot_forward(const ComputeParams& p, Tensor* dst, const Kernels& kr, const float* nvfp4_scale) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const Type w = a->type;
    const int64_t K = a->ne[0], M = a->ne[1], N = dst->ne[1];
    const int64_t ne12 = b->ne[2], ne13 = b->ne[3], r2 = ne12 / a->ne[2], r3 = ne13 / a->ne[3];
    const bool convert = dot_needs_conversion(dst);
    const bool priv = private_conversion(dst);
    const size_t colb = dot_col_bytes(kr, w, K), blocks_bytes = act_col_bytes(w, K);
    char* conv = (char*)p.wdata + kCounterBytes + (priv ? size_t(p.ith) * align64(dot_conv_bytes(kr, dst)) : 0);
    const DotChoice dots = choose_dots(kr, w, K, M, N, convert);

    if (convert) {
        std::vector<float> tmp;
        convert_columns(p, b, priv, conv, colb, [&](const char* src, char* out) {
            convert_act(kr, w, b->type, src, K, out, tmp);
            if (dots.extras()) act_extras(w, (const BlockQ8_0*)out, K, out + blocks_bytes);
        });
    }
    // A unit: a chunk of rows times a block of columns; the block's activations stay in L2
    // while the chunk's weight rows stream past them once.
    const int64_t col_blocks = (N + kDotColBlock - 1) / kDotColBlock;
    const int64_t rows = rows_per_unit(M, ne12 * ne13 * col_blocks, p.nth);
    const int64_t chunks = (M + rows - 1) / rows, units = chunks * col_blocks * ne12 * ne13;
    float out[8];
    auto run_unit = [&](int64_t u) {
        const int64_t bt = u / (chunks * col_blocks), cb = (u / chunks) % col_blocks;
        const int64_t i12 = bt % ne12, i13 = bt / ne12;
        const int64_t m0 = (u % chunks) * rows, m1 = std::min(M, m0 + rows);
        const int64_t n0 = cb * kDotColBlock, n1 = std::min(N, n0 + kDotColBlock);
        const char* abase = (const char*)a->data + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
        char* dbase = (char*)dst->data + i12 * dst->nb[2] + i13 * dst->nb[3];
        visit_row_pairs(m0, m1, dots.pairs(), [&](int64_t m, int64_t half) {
            const char* arow = abase + m * a->nb[1];
            for (int64_t n = n0; n < n1; n += 4) {
                const int nc = (int)std::min<int64_t>(4, n1 - n);
                const char* bp = convert ? conv + (bt * N + n) * colb : b->row(n, i12, i13);
                const size_t bs = convert ? colb : b->nb[1];
                char* d = dbase + m * sizeof(float) + n * dst->nb[1];
                dots.run(kr, w, K, arow, half * a->nb[1], bp, bs, blocks_bytes, nc, out, nvfp4_scale);
                for (int j = 0; j < nc; ++j) {
                    float* dj = (float*)(d + j * dst->nb[1]);
                    dj[0] = out[j];
                    if (half) dj[half] = out[4 + j];
                }
            }
        });
    };
    if (priv || !convert) run_barrier_free_units(p, units, run_unit);
    else run_mul_mat_units(p, units, false, run_unit);
}

}  // namespace

void cpu_forward_MUL_MAT(const ComputeParams& p, Tensor* dst) {
    if (is_float_weight(dst->src[0]->type)) return float_mul_mat_forward(p, dst);
    if (use_ktile(dst)) return ktile_mul_mat_forward(p, dst);  // before the repacked copy too
    if (RepackHandle rw = repack_for_mul_mat(dst)) return repack_mul_mat_forward(p, dst, *rw);
    const Kernels& kr = kernels_for(simd::cpu_isa());
    float scale[256];
    if (dst->src[0]->type == Type::NVFP4) nvfp4_scale_table(scale);  // every thread, before any barrier
    if (use_qgemm(kr, dst)) qgemm_forward(p, dst, kr, scale);
    else dot_forward(p, dst, kr, scale);
}

// The dot path with no shared conversion has no barrier (see dot_forward); the quantized GEMM
// is counted as having one.
bool mul_mat_barrier_free(const Tensor* dst) {
    if (is_float_weight(dst->src[0]->type)) return float_mul_mat_barrier_free(dst);
    if (use_ktile(dst)) return ktile_mul_mat_barrier_free(dst);
    if (repack_for_mul_mat(dst)) return repack_mul_mat_barrier_free(dst);
    if (use_qgemm(kernels_for(simd::cpu_isa()), dst)) return false;
    return private_conversion(dst) || !dot_needs_conversion(dst);
}

size_t cpu_work_size_MUL_MAT(const Tensor* dst, int n_threads) {
    if (is_float_weight(dst->src[0]->type)) return float_mul_mat_work_size(dst, n_threads);
    if (use_ktile(dst)) return ktile_mul_mat_work_size(dst, n_threads);  // taken whether repacked or not
    // room for both paths: a repacked copy made or dropped between sizing and running is safe
    const size_t repacked = repack_supported(dst->src[0]) ? repack_mul_mat_work_size(dst, n_threads) : 0;
    const Kernels& kr = kernels_for(simd::cpu_isa());
    if (use_qgemm(kr, dst)) return std::max(repacked, qgemm_work_size(kr, dst, n_threads));
    if (!dot_needs_conversion(dst)) return std::max(repacked, kCounterBytes);
    const size_t one = align64(dot_conv_bytes(kr, dst));
    return std::max(repacked, kCounterBytes + (private_conversion(dst) ? size_t(std::max(1, n_threads)) * one : one));
}

}  // namespace pyggml::cpu
