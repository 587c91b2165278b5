// FLASH_ATTN_EXT over F16 K/V for few query rows (fewer than 64 tokens, the dense case), one
// query vector at a time over the whole KV range, in ggml's CPU order of operations: Q rounded
// to F16; each score a dot of F16 rows with four 8-lane F32 accumulators, reduced pairwise;
// scale, soft cap (tanh), mask; an online softmax whose V accumulator is kept in F16 (each
// update rounds to F16); the sum divided out at the end. Its results are then bit-identical
// to ggml's for those shapes, which matters for quantized models: their matmuls re-quantize
// the attention output, and any rounding difference is amplified layer after layer.
//
// Used on AVX2 CPUs at the default precision when the op has no sparse hint and ggml would
// not split the KV range (a single query over 512+ KV rows); flash_attn.cpp is the general
// kernel (F32 accumulation, which GGML_PREC_F32 asks for; tiles, sparse columns, KV splits).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/flash_attn_rowwise.h"
#include "cpu/simd/isa.h"
#include "pyggml/ops/flash_attn.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PYGGML_FA_ROWWISE 1
#endif

namespace pyggml::cpu {

constexpr int64_t kRowwiseMaxTokens = 64;   // from here on ggml tiles the queries
constexpr int64_t kRowwiseSplitKv = 512;    // a single query over this many rows: KV split

bool fa_rowwise_applies(const Tensor* dst) {
#ifdef PYGGML_FA_ROWWISE
    const Tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3];
    if (simd::cpu_isa() == simd::Isa::Scalar) return false;
    if (q->type != Type::F32 || k->type != Type::F16 || v->type != Type::F16) return false;
    if (mask && mask->type != Type::F16) return false;
    if (dst->param_i32(kFaNKvMax) > 0 || dst->param_i32(kFaPrec) == kPrecF32) return false;
    if (q->ne[1] >= kRowwiseMaxTokens) return false;
    if (q->ne[1] == 1 && q->ne[3] == 1 && k->ne[1] >= kRowwiseSplitKv) return false;
    return q->nb[0] == sizeof(float) && k->nb[0] == 2 && v->nb[0] == 2;
#else
    (void)dst;
    return false;
#endif
}

size_t fa_rowwise_work_size(const Tensor* dst, int n_threads) {
    const int64_t D = dst->src[0]->ne[0], Dv = dst->src[2]->ne[0];
    return size_t(n_threads) * size_t(D + 2 * Dv + 64) * sizeof(float);
}

#ifdef PYGGML_FA_ROWWISE
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace {

// F16 dot of n values: lanes j*8..j*8+7 of every 32 go to accumulator j, then (a0 + a2) +
// (a1 + a3), halves, two horizontal adds; the last n % 32 products are added one by one in f64.
float dot_f16(int64_t n, const uint16_t* x, const uint16_t* y) {
    const int64_t np = n & ~int64_t(31);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; ++j) {
            const __m256 ax = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(x + i + 8 * j)));
            const __m256 ay = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(y + i + 8 * j)));
            acc[j] = _mm256_fmadd_ps(ax, ay, acc[j]);
        }
    acc[0] = _mm256_add_ps(acc[0], acc[2]);
    acc[1] = _mm256_add_ps(acc[1], acc[3]);
    acc[0] = _mm256_add_ps(acc[0], acc[1]);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(acc[0]), _mm256_extractf128_ps(acc[0], 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    double sum = (double)_mm_cvtss_f32(_mm_hadd_ps(t1, t1));
    for (int64_t i = np; i < n; ++i) {
        const float prod = _cvtsh_ss(x[i]) * _cvtsh_ss(y[i]);
        sum += (double)prod;
    }
    return (float)sum;
}

// y = f16(y + x*v), elementwise (fused multiply-add, 32 at a time and then one by one).
void mad_f16(int64_t n, uint16_t* y, const uint16_t* x, float v) {
    const int64_t np = n & ~int64_t(31);
    const __m256 vv = _mm256_set1_ps(v);
    for (int64_t i = 0; i < np; i += 8) {
        const __m256 ax = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(x + i)));
        const __m256 ay = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(y + i)));
        _mm_storeu_si128((__m128i*)(y + i), _mm256_cvtps_ph(_mm256_fmadd_ps(ax, vv, ay), 0));
    }
    for (int64_t i = np; i < n; ++i)
        y[i] = _cvtss_sh(std::fma(_cvtsh_ss(x[i]), v, _cvtsh_ss(y[i])), _MM_FROUND_TO_NEAREST_INT);
}

// y = f16(y*v), elementwise.
void scale_f16(int64_t n, uint16_t* y, float v) {
    const int64_t np = n & ~int64_t(31);
    const __m256 vv = _mm256_set1_ps(v);
    for (int64_t i = 0; i < np; i += 8) {
        const __m256 ay = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(y + i)));
        _mm_storeu_si128((__m128i*)(y + i), _mm256_cvtps_ph(_mm256_mul_ps(ay, vv), 0));
    }
    for (int64_t i = np; i < n; ++i) y[i] = _cvtss_sh(_cvtsh_ss(y[i]) * v, _MM_FROUND_TO_NEAREST_INT);
}

float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

void one_row(const Tensor* dst, int64_t ir, float scale, float cap, float m0, float m1,
             uint32_t n_head_log2, float max_bias, float* scratch) {
    const Tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3],
                 *sinks = dst->src[4];
    const int64_t D = q->ne[0], Dv = v->ne[0], N = q->ne[1], H = q->ne[2], KV = k->ne[1];
    const int64_t iq3 = ir / (H * N), iq2 = (ir - iq3 * H * N) / N, iq1 = ir - iq3 * H * N - iq2 * N;
    const int64_t ik2 = iq2 / (H / k->ne[2]), ik3 = iq3 / (q->ne[3] / k->ne[3]);
    const int64_t iv2 = iq2 / (H / v->ne[2]), iv3 = iq3 / (q->ne[3] / v->ne[3]);
    const uint32_t h = (uint32_t)iq2;
    const float slope = max_bias > 0.0f
        ? (h < n_head_log2 ? std::pow(m0, (float)(h + 1)) : std::pow(m1, (float)(2 * (h - n_head_log2) + 1)))
        : 1.0f;

    float* out32 = scratch;                              // Dv
    uint16_t* acc16 = (uint16_t*)(scratch + Dv);         // Dv halves
    uint16_t* q16 = (uint16_t*)(scratch + 2 * Dv);       // D halves
    std::memset(acc16, 0, size_t(Dv) * sizeof(uint16_t));
    const float* pq = (const float*)q->ptr(0, iq1, iq2, iq3);
    for (int64_t i = 0; i < D; ++i) q16[i] = _cvtss_sh(pq[i], _MM_FROUND_TO_NEAREST_INT);
    const uint16_t* mp = mask ? (const uint16_t*)mask->ptr(0, iq1, iq2 % mask->ne[2], iq3 % mask->ne[3]) : nullptr;

    float S = 0.0f, M = -std::numeric_limits<float>::infinity();
    for (int64_t ic = 0; ic < KV; ++ic) {
        const float mv = mp ? slope * f16_to_f32(mp[ic]) : 0.0f;
        if (mv == -std::numeric_limits<float>::infinity()) continue;
        float s = dot_f16(D, (const uint16_t*)k->ptr(0, ic, ik2, ik3), q16);
        s = s * scale;
        if (cap != 0.0f) s = cap * tanhf(s);
        s += mv;
        const float Mold = M;
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            M = s;
            ms = expf(Mold - M);
            scale_f16(Dv, acc16, ms);
        } else {
            vs = expf(s - M);
        }
        mad_f16(Dv, acc16, (const uint16_t*)v->ptr(0, ic, iv2, iv3), vs);
        S = S * ms + vs;
    }
    for (int64_t d = 0; d < Dv; ++d) out32[d] = f16_to_f32(acc16[d]);
    if (sinks) {
        const float s = ((const float*)sinks->data)[h];
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            ms = expf(M - s);
            for (int64_t d = 0; d < Dv; ++d) out32[d] *= ms;
        } else {
            vs = expf(s - M);
        }
        S = S * ms + vs;
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    float* o = (float*)dst->ptr(0, iq2, iq1, iq3);
    for (int64_t d = 0; d < Dv; ++d) o[d] = out32[d] * inv;
}

}  // namespace

void fa_rowwise_forward(const ComputeParams& p, Tensor* dst) {
    const Tensor* q = dst->src[0];
    float scale = dst->param_f32(kFaScale);
    const float max_bias = dst->param_f32(kFaMaxBias), cap = dst->param_f32(kFaLogitSoftcap);
    if (cap != 0.0f) scale /= cap;
    const uint32_t n_head = (uint32_t)q->ne[2];
    const uint32_t n_head_log2 = 1u << (uint32_t)std::floor(std::log2((double)n_head));
    const float m0 = std::pow(2.0f, -(max_bias) / (float)n_head_log2);
    const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / (float)n_head_log2);
    const int64_t D = q->ne[0], Dv = dst->src[2]->ne[0];
    float* scratch = (float*)p.wdata + size_t(p.ith) * size_t(D + 2 * Dv + 64);
    const int64_t nr = q->ne[1] * q->ne[2] * q->ne[3];
    // rows are independent: a static split keeps every result the same for any thread count
    const int64_t per = (nr + p.nth - 1) / p.nth;
    const int64_t r0 = per * p.ith, r1 = std::min(nr, r0 + per);
    for (int64_t ir = r0; ir < r1; ++ir) one_row(dst, ir, scale, cap, m0, m1, n_head_log2, max_bias, scratch);
}

#pragma GCC pop_options
#else
void fa_rowwise_forward(const ComputeParams&, Tensor*) {}
#endif

}  // namespace pyggml::cpu
