// CPU kernel of GATED_DELTA_NET. (head, sequence) pairs are split across threads. The state of a
// pair is held as M = S^T (row j = value channel j, contiguous over key channels i), in the
// result's slot 0, updated in place token by token. Each row is independent within a token, so
// one row does all four steps in two passes over its S values:
//   pass 1: decay (scalar or per-key exp(g)) and dot with k -> delta_j = (v_j - M_j . k) * beta
//   pass 2: M_j += delta_j * k and dot with q -> out_j = M_j . q / sqrt(S)
// (ggml makes four passes over the whole matrix; the arithmetic per element is the same.)
// With AVX2 and S % 8 == 0 four rows go together, sharing the loads of k, q and the decay.
// Snapshot slot j (1 <= j < K) receives a copy after token T-1-j; slots j >= T are zeroed.

#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/simd/exp_simd.h"
#include "cpu/simd/isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PG_X86 1
#else
#define PG_X86 0  // cpu_isa() is always Scalar here: the AVX2 helpers are stubs never called
#endif

namespace pyggml::cpu {

namespace {

#define PG_DN_AVX2 __attribute__((target("avx2,fma")))

// Pass 1 on a row: m *= decay (vector, or scalar when dvec is null); returns m . k.
inline float decay_dot(float* m, const float* dvec, float ds, const float* k, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        m[i] *= dvec ? dvec[i] : ds;
        s += m[i] * k[i];
    }
    return s;
}
// Pass 2: m += d * k; returns m . q.
inline float update_dot(float* m, float d, const float* k, const float* q, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        m[i] += d * k[i];
        s += m[i] * q[i];
    }
    return s;
}

#if PG_X86
PG_DN_AVX2 inline float decay_dot_avx2(float* m, const float* dvec, float ds, const float* k, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const __m256 vds = _mm256_set1_ps(ds);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 d0 = dvec ? _mm256_loadu_ps(dvec + i) : vds, d1 = dvec ? _mm256_loadu_ps(dvec + i + 8) : vds;
        const __m256 m0 = _mm256_mul_ps(_mm256_loadu_ps(m + i), d0), m1 = _mm256_mul_ps(_mm256_loadu_ps(m + i + 8), d1);
        _mm256_storeu_ps(m + i, m0);
        _mm256_storeu_ps(m + i + 8, m1);
        acc0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(k + i), acc0);
        acc1 = _mm256_fmadd_ps(m1, _mm256_loadu_ps(k + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 m0 = _mm256_mul_ps(_mm256_loadu_ps(m + i), dvec ? _mm256_loadu_ps(dvec + i) : vds);
        _mm256_storeu_ps(m + i, m0);
        acc0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(k + i), acc0);
    }
    float s = simd::hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) {
        m[i] *= dvec ? dvec[i] : ds;
        s += m[i] * k[i];
    }
    return s;
}
#else
float decay_dot_avx2(float* m, const float* dvec, float ds, const float* k, int64_t n) { __builtin_trap(); }
#endif

#if PG_X86
PG_DN_AVX2 inline float update_dot_avx2(float* m, float d, const float* k, const float* q, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const __m256 vd = _mm256_set1_ps(d);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 m0 = _mm256_fmadd_ps(vd, _mm256_loadu_ps(k + i), _mm256_loadu_ps(m + i));
        const __m256 m1 = _mm256_fmadd_ps(vd, _mm256_loadu_ps(k + i + 8), _mm256_loadu_ps(m + i + 8));
        _mm256_storeu_ps(m + i, m0);
        _mm256_storeu_ps(m + i + 8, m1);
        acc0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(q + i), acc0);
        acc1 = _mm256_fmadd_ps(m1, _mm256_loadu_ps(q + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 m0 = _mm256_fmadd_ps(vd, _mm256_loadu_ps(k + i), _mm256_loadu_ps(m + i));
        _mm256_storeu_ps(m + i, m0);
        acc0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(q + i), acc0);
    }
    float s = simd::hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) {
        m[i] += d * k[i];
        s += m[i] * q[i];
    }
    return s;
}
#else
float update_dot_avx2(float* m, float d, const float* k, const float* q, int64_t n) { __builtin_trap(); }
#endif

// Four rows j..j+3 at once (S a multiple of 8): k, q and the decay are loaded once per 8 keys
// for all four rows, which halves the loads of the single-row passes.
#if PG_X86
PG_DN_AVX2 void rows4_avx2(float* m, int64_t S, const float* dvec, float ds, const float* k, const float* q,
                           const float* v, float beta, float scale, float* out) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256 vds = _mm256_set1_ps(ds);
    for (int64_t i = 0; i < S; i += 8) {
        const __m256 d = dvec ? _mm256_loadu_ps(dvec + i) : vds, kk = _mm256_loadu_ps(k + i);
        for (int r = 0; r < 4; ++r) {
            const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(m + r * S + i), d);
            _mm256_storeu_ps(m + r * S + i, x);
            acc[r] = _mm256_fmadd_ps(x, kk, acc[r]);
        }
    }
    __m256 dl[4];
    for (int r = 0; r < 4; ++r) {
        dl[r] = _mm256_set1_ps((v[r] - simd::hsum_ps(acc[r])) * beta);
        acc[r] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < S; i += 8) {
        const __m256 kk = _mm256_loadu_ps(k + i), qq = _mm256_loadu_ps(q + i);
        for (int r = 0; r < 4; ++r) {
            const __m256 x = _mm256_fmadd_ps(dl[r], kk, _mm256_loadu_ps(m + r * S + i));
            _mm256_storeu_ps(m + r * S + i, x);
            acc[r] = _mm256_fmadd_ps(x, qq, acc[r]);
        }
    }
    for (int r = 0; r < 4; ++r) out[r] = simd::hsum_ps(acc[r]) * scale;
}
#else
void rows4_avx2(float* m, int64_t S, const float* dvec, float ds, const float* k, const float* q,
                           const float* v, float beta, float scale, float* out) { __builtin_trap(); }
#endif

}  // namespace

void cpu_forward_GATED_DELTA_NET(const ComputeParams& p, Tensor* dst) {
    const Tensor* q = dst->src[0];
    const Tensor* k = dst->src[1];
    const Tensor* v = dst->src[2];
    const Tensor* g = dst->src[3];
    const Tensor* beta = dst->src[4];
    const Tensor* state = dst->src[5];
    const int64_t K = dst->param_i32(0);
    const int64_t S = v->ne[0], H = v->ne[1], T = v->ne[2], B = v->ne[3];
    const int64_t Hk = q->ne[1], rb = B / q->ne[3];
    const bool kda = g->ne[0] == S && S > 1;
    const int64_t SS = S * S;
    float* out = (float*)dst->data;
    float* slots = out + S * H * T * B;
    const int64_t slot_floats = SS * H * B;
    const float scale = 1.0f / std::sqrt((float)S);
    const bool avx2 = simd::cpu_isa() != simd::Isa::Scalar;
    std::vector<float> decay(kda ? S : 0);
    int64_t r0, r1;
    split_range(H * B, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t h = r % H, b = r / H, hk = h % Hk, bk = b / rb;
        float* M = slots + (b * H + h) * SS;
        std::memcpy(M, state->ptr(0, 0, h, b), SS * sizeof(float));
        for (int64_t t = 0; t < T; ++t) {
            const float* qt = (const float*)q->ptr(0, hk, t, bk);
            const float* kt = (const float*)k->ptr(0, hk, t, bk);
            const float* vt = (const float*)v->ptr(0, h, t, b);
            const float* gt = (const float*)g->ptr(0, h, t, b);
            const float bt = *(const float*)beta->ptr(0, h, t, b);
            float ds = 0.0f;
            if (kda) for (int64_t i = 0; i < S; ++i) decay[i] = std::exp(gt[i]);
            else ds = std::exp(gt[0]);
            const float* dv = kda ? decay.data() : nullptr;
            float* ot = out + ((b * T + t) * H + h) * S;
            int64_t j = 0;
            if (avx2 && S % 8 == 0)
                for (; j + 4 <= S; j += 4) rows4_avx2(M + j * S, S, dv, ds, kt, qt, vt + j, bt, scale, ot + j);
            for (; j < S; ++j) {
                float* mj = M + j * S;
                if (avx2) {
                    const float d = (vt[j] - decay_dot_avx2(mj, dv, ds, kt, S)) * bt;
                    ot[j] = update_dot_avx2(mj, d, kt, qt, S) * scale;
                } else {
                    const float d = (vt[j] - decay_dot(mj, dv, ds, kt, S)) * bt;
                    ot[j] = update_dot(mj, d, kt, qt, S) * scale;
                }
            }
            const int64_t slot = T - 1 - t;
            if (slot >= 1 && slot < K) std::memcpy(slots + slot * slot_floats + (b * H + h) * SS, M, SS * sizeof(float));
        }
        for (int64_t slot = std::max<int64_t>(1, T); slot < K; ++slot)
            std::memset(slots + slot * slot_floats + (b * H + h) * SS, 0, SS * sizeof(float));
    }
}
size_t cpu_work_size_GATED_DELTA_NET(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
