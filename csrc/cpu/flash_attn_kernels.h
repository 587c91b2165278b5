// Inner kernels of the CPU flash attention (csrc/cpu/flash_attn.cpp): Q·K tiles, P·V
// accumulation, the online-softmax row step, mask scans and K/V row widening.
// Three variants with the same contract: a plain loop (the reference), AVX2+FMA+F16C and
// AVX-512 (F/BW/VL/DQ), picked by the SIMD level of cpu/simd/isa.h. Included by the dense and
// the sparse kernels (flash_attn.cpp, flash_attn_sparse.cpp); each gets its own internal copies.
#pragma once
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "cpu/simd/exp_simd.h"
#include "cpu/simd/isa.h"
#include "pyggml/types.h"

// GCC 12 reports its own AVX-512 intrinsics (_mm512_undefined_*) as "maybe uninitialized".
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace pyggml::cpu::fa {

constexpr uint16_t kF16NegInf = 0xFC00;
constexpr int kLanes = 64;  // columns of a dense tile (flash_attn.cpp's kTile)

// The contract every variant implements.
struct Kernels {
    const char* name;
    // S[i*lds + j] = dot(q[i][0:D], k[j][0:D]) for i < nq, j < nk.
    void (*qk)(const float* const* q, int nq, const float* const* k, int nk, int64_t D, float* S, int lds);
    // O[i*ldo + d] += sum_j P[i*ldp + j] * v[j][d] for i < nq, d < Dv.
    void (*pv)(const float* P, int ldp, int nq, const float* const* v, int nk, int64_t Dv, float* O, int ldo);
    // The same reading F16 K/V rows in place (null where a variant has none: rows are widened
    // to F32 first). Used for few query vectors, where widening a tile would cost more than
    // converting while loading.
    void (*qk_f16)(const float* const* q, int nq, const uint16_t* const* k, int nk, int64_t D, float* S, int lds);
    void (*pv_f16)(const float* P, int ldp, int nq, const uint16_t* const* v, int nk, int64_t Dv, float* O, int ldo);
    // Logits of one row in place: x = s*scale (or cap*tanh(s*scale) when cap != 0; scale is then
    // already divided by cap); with a mask m: m == -inf gives -inf, else x + slope*m.
    // Returns the row maximum (-inf when every entry is -inf or n == 0).
    float (*logits)(float* s, const float* m, int n, float scale, float cap, float slope);
    // x = exp(x - M) in place (M finite); returns the sum.
    float (*exp_sum)(float* x, int n, float M);
    // Sum of x[0:n] with x[jj] put in lane idx[jj] - j0 of kLanes lanes (the others 0), added
    // in an order fixed by the lanes: entries that are exact zeros change nothing, wherever
    // they sit in x. lanes: kLanes floats of scratch.
    float (*lane_sum)(const float* x, const int32_t* idx, int n, int32_t j0, float* lanes);
    // x *= f
    void (*scale)(float* x, int64_t n, float f);
    void (*f16_to_f32)(const uint16_t* src, float* dst, int64_t n);
    // Appends to out every j in [j0, j1) where some row r < nrows has rows[r][j] != -inf;
    // returns the number appended (ascending order).
    int (*scan)(const uint16_t* const* rows, int nrows, int64_t j0, int64_t j1, int32_t* out);
    // Number of entries of row[0:n] that are not -inf.
    int64_t (*count_finite)(const uint16_t* row, int64_t n);
};

// ------------------------------------------------------------------------------------------
// Plain loops (reference)
// ------------------------------------------------------------------------------------------
namespace ref {

inline void qk(const float* const* q, int nq, const float* const* k, int nk, int64_t D, float* S, int lds) {
    for (int i = 0; i < nq; ++i)
        for (int j = 0; j < nk; ++j) {
            float acc = 0.0f;
            for (int64_t d = 0; d < D; ++d) acc += q[i][d] * k[j][d];
            S[(int64_t)i * lds + j] = acc;
        }
}

inline void pv(const float* P, int ldp, int nq, const float* const* v, int nk, int64_t Dv, float* O, int ldo) {
    for (int i = 0; i < nq; ++i) {
        float* o = O + (int64_t)i * ldo;
        for (int j = 0; j < nk; ++j) {
            const float p = P[(int64_t)i * ldp + j];
            for (int64_t d = 0; d < Dv; ++d) o[d] += p * v[j][d];
        }
    }
}

inline float logits(float* s, const float* m, int n, float scale, float cap, float slope) {
    const float ninf = -std::numeric_limits<float>::infinity();
    float mx = ninf;
    for (int j = 0; j < n; ++j) {
        float x = s[j] * scale;
        if (cap != 0.0f) x = cap * std::tanh(x);
        if (m) x = (m[j] == ninf) ? ninf : x + slope * m[j];
        s[j] = x;
        mx = std::max(mx, x);
    }
    return mx;
}

inline float exp_sum(float* x, int n, float M) {
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) { x[j] = std::exp(x[j] - M); sum += x[j]; }
    return sum;
}

inline void scale(float* x, int64_t n, float f) { for (int64_t i = 0; i < n; ++i) x[i] *= f; }

inline float lane_sum(const float* x, const int32_t* idx, int n, int32_t j0, float* lanes) {
    std::fill(lanes, lanes + kLanes, 0.0f);
    for (int jj = 0; jj < n; ++jj) lanes[idx[jj] - j0] = x[jj];
    float s = 0.0f;
    for (int l = 0; l < kLanes; ++l) s += lanes[l];
    return s;
}

inline void f16_to_f32(const uint16_t* s, float* d, int64_t n) {
    for (int64_t i = 0; i < n; ++i) d[i] = fp16_to_fp32(s[i]);
}

inline int scan(const uint16_t* const* rows, int nrows, int64_t j0, int64_t j1, int32_t* out) {
    int cnt = 0;
    for (int64_t j = j0; j < j1; ++j) {
        bool any = false;
        for (int r = 0; r < nrows && !any; ++r) any = rows[r][j] != kF16NegInf;
        if (any) out[cnt++] = (int32_t)j;
    }
    return cnt;
}

inline int64_t count_finite(const uint16_t* row, int64_t n) {
    int64_t c = 0;
    for (int64_t j = 0; j < n; ++j) c += row[j] != kF16NegInf;
    return c;
}

}  // namespace ref

#if defined(__x86_64__) || defined(__i386__)
#define PG_FA_X86 1
#define PG_AVX2 __attribute__((target("avx2,fma,f16c")))
#define PG_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

// ------------------------------------------------------------------------------------------
// AVX-512
// ------------------------------------------------------------------------------------------
namespace avx512 {

PG_AVX512 static inline __mmask16 tail_mask(int64_t r) { return (__mmask16)((1u << r) - 1u); }

// 4 vectors -> their 4 horizontal sums.
PG_AVX512 static inline __m128 reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
    __m512 t0 = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    __m512 t1 = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    __m512d x0 = _mm512_castps_pd(t0), x1 = _mm512_castps_pd(t1);
    __m512 x = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x0, x1)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(x0, x1)));  // lane l: [a,b,c,d]
    x = _mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(1, 0, 3, 2)));
    x = _mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castps512_ps128(x);
}

// 16 elements as F32 from F32 or F16 storage (K/V rows are read in place when F16).
PG_AVX512 static inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
PG_AVX512 static inline __m512 load16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p));
}
PG_AVX512 static inline __m512 load16(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
PG_AVX512 static inline __m512 load16(__mmask16 m, const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// NQ query rows x 4 key rows.
template <int NQ, class T>
PG_AVX512 static inline void qk_block(const float* const* q, const T* k0, const T* k1, const T* k2,
                                      const T* k3, int64_t D, float* S, int lds, int nk) {
    __m512 acc[NQ][4];
    for (int i = 0; i < NQ; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
    int64_t d = 0;
    for (; d + 16 <= D; d += 16) {
        const __m512 b0 = load16(k0 + d), b1 = load16(k1 + d), b2 = load16(k2 + d), b3 = load16(k3 + d);
        for (int i = 0; i < NQ; ++i) {
            const __m512 a = _mm512_loadu_ps(q[i] + d);
            acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
            acc[i][2] = _mm512_fmadd_ps(a, b2, acc[i][2]);
            acc[i][3] = _mm512_fmadd_ps(a, b3, acc[i][3]);
        }
    }
    if (d < D) {
        const __mmask16 m = tail_mask(D - d);
        const __m512 b0 = load16(m, k0 + d), b1 = load16(m, k1 + d), b2 = load16(m, k2 + d), b3 = load16(m, k3 + d);
        for (int i = 0; i < NQ; ++i) {
            const __m512 a = _mm512_maskz_loadu_ps(m, q[i] + d);
            acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
            acc[i][2] = _mm512_fmadd_ps(a, b2, acc[i][2]);
            acc[i][3] = _mm512_fmadd_ps(a, b3, acc[i][3]);
        }
    }
    const __mmask8 sm = (__mmask8)((1u << nk) - 1u);
    for (int i = 0; i < NQ; ++i)
        _mm_mask_storeu_ps(S + (int64_t)i * lds, sm, reduce4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
}

template <class T>
PG_AVX512 static inline void qk_t(const float* const* q, int nq, const T* const* k, int nk, int64_t D, float* S,
                                  int lds) {
    for (int i = 0; i < nq; i += 4) {
        const int mq = std::min(4, nq - i);
        for (int j = 0; j < nk; j += 4) {
            const int mk = std::min(4, nk - j);
            const T* k0 = k[j];
            const T* k1 = k[j + std::min(1, mk - 1)];
            const T* k2 = k[j + std::min(2, mk - 1)];
            const T* k3 = k[j + std::min(3, mk - 1)];
            float* s = S + (int64_t)i * lds + j;
            switch (mq) {
                case 4: qk_block<4>(q + i, k0, k1, k2, k3, D, s, lds, mk); break;
                case 3: qk_block<3>(q + i, k0, k1, k2, k3, D, s, lds, mk); break;
                case 2: qk_block<2>(q + i, k0, k1, k2, k3, D, s, lds, mk); break;
                default: qk_block<1>(q + i, k0, k1, k2, k3, D, s, lds, mk); break;
            }
        }
    }
}

// NQ rows of O, NZ vectors of 16 columns starting at d. Full blocks use plain loads; the
// tail block (one vector, masked by `last`) is separate: mixing the two in one template made
// GCC keep the accumulators in memory.
template <int NQ, int NZ, class T>
PG_AVX512 static inline void pv_block(const float* P, int ldp, const T* const* v, int nk, int64_t d,
                                      float* O, int ldo) {
    __m512 acc[NQ][NZ];
    for (int i = 0; i < NQ; ++i)
        for (int z = 0; z < NZ; ++z) acc[i][z] = _mm512_loadu_ps(O + (int64_t)i * ldo + d + 16 * z);
    for (int j = 0; j < nk; ++j) {
        const T* vj = v[j] + d;
        __m512 b[NZ];
        for (int z = 0; z < NZ; ++z) b[z] = load16(vj + 16 * z);
        for (int i = 0; i < NQ; ++i) {
            const __m512 p = _mm512_set1_ps(P[(int64_t)i * ldp + j]);
            for (int z = 0; z < NZ; ++z) acc[i][z] = _mm512_fmadd_ps(p, b[z], acc[i][z]);
        }
    }
    for (int i = 0; i < NQ; ++i)
        for (int z = 0; z < NZ; ++z) _mm512_storeu_ps(O + (int64_t)i * ldo + d + 16 * z, acc[i][z]);
}

template <int NQ, class T>
PG_AVX512 static inline void pv_tail(const float* P, int ldp, const T* const* v, int nk, int64_t d,
                                     __mmask16 last, float* O, int ldo) {
    __m512 acc[NQ];
    for (int i = 0; i < NQ; ++i) acc[i] = _mm512_maskz_loadu_ps(last, O + (int64_t)i * ldo + d);
    for (int j = 0; j < nk; ++j) {
        const __m512 b = load16(last, v[j] + d);
        for (int i = 0; i < NQ; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(P[(int64_t)i * ldp + j]), b, acc[i]);
    }
    for (int i = 0; i < NQ; ++i) _mm512_mask_storeu_ps(O + (int64_t)i * ldo + d, last, acc[i]);
}

template <int NQ, class T>
PG_AVX512 static inline void pv_rows(const float* P, int ldp, const T* const* v, int nk, int64_t Dv,
                                     float* O, int ldo) {
    int64_t d = 0;
    for (; d + 64 <= Dv; d += 64) pv_block<NQ, 4>(P, ldp, v, nk, d, O, ldo);
    if (d + 32 <= Dv) { pv_block<NQ, 2>(P, ldp, v, nk, d, O, ldo); d += 32; }
    if (d + 16 <= Dv) { pv_block<NQ, 1>(P, ldp, v, nk, d, O, ldo); d += 16; }
    if (d < Dv) pv_tail<NQ>(P, ldp, v, nk, d, tail_mask(Dv - d), O, ldo);
}

template <class T>
PG_AVX512 static inline void pv_t(const float* P, int ldp, int nq, const T* const* v, int nk, int64_t Dv, float* O,
                                  int ldo) {
    for (int i = 0; i < nq; i += 4) {
        const float* p = P + (int64_t)i * ldp;
        float* o = O + (int64_t)i * ldo;
        switch (std::min(4, nq - i)) {
            case 4: pv_rows<4>(p, ldp, v, nk, Dv, o, ldo); break;
            case 3: pv_rows<3>(p, ldp, v, nk, Dv, o, ldo); break;
            case 2: pv_rows<2>(p, ldp, v, nk, Dv, o, ldo); break;
            default: pv_rows<1>(p, ldp, v, nk, Dv, o, ldo); break;
        }
    }
}

PG_AVX512 static void qk(const float* const* q, int nq, const float* const* k, int nk, int64_t D, float* S, int lds) {
    qk_t(q, nq, k, nk, D, S, lds);
}
PG_AVX512 static void qk_f16(const float* const* q, int nq, const uint16_t* const* k, int nk, int64_t D, float* S,
                             int lds) {
    qk_t(q, nq, k, nk, D, S, lds);
}
PG_AVX512 static void pv(const float* P, int ldp, int nq, const float* const* v, int nk, int64_t Dv, float* O, int ldo) {
    pv_t(P, ldp, nq, v, nk, Dv, O, ldo);
}
PG_AVX512 static void pv_f16(const float* P, int ldp, int nq, const uint16_t* const* v, int nk, int64_t Dv, float* O,
                             int ldo) {
    pv_t(P, ldp, nq, v, nk, Dv, O, ldo);
}

using simd::exp_ps;  // simd/exp_simd.h

// tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|).
PG_AVX512 static inline __m512 tanh_ps(__m512 x) {
    const __m512 ax = _mm512_abs_ps(x);
    const __m512 e = exp_ps(_mm512_mul_ps(ax, _mm512_set1_ps(-2.0f)));
    const __m512 t = _mm512_div_ps(_mm512_sub_ps(_mm512_set1_ps(1.0f), e), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), sign));
}

PG_AVX512 static float logits(float* s, const float* m, int n, float scale, float cap, float slope) {
    const __m512 vs = _mm512_set1_ps(scale), vc = _mm512_set1_ps(cap), vsl = _mm512_set1_ps(slope);
    const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __m512 mx = ninf;
    for (int j = 0; j < n; j += 16) {
        const __mmask16 k = n - j >= 16 ? (__mmask16)0xFFFF : tail_mask(n - j);
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + j), vs);
        if (cap != 0.0f) x = _mm512_mul_ps(vc, tanh_ps(x));
        if (m) {
            const __m512 mv = _mm512_maskz_loadu_ps(k, m + j);
            const __mmask16 masked = _mm512_cmp_ps_mask(mv, ninf, _CMP_EQ_OQ);
            x = _mm512_mask_mov_ps(_mm512_fmadd_ps(vsl, mv, x), masked, ninf);
        }
        _mm512_mask_storeu_ps(s + j, k, x);
        mx = _mm512_mask_max_ps(mx, k, mx, x);
    }
    return _mm512_reduce_max_ps(mx);
}

PG_AVX512 static float exp_sum(float* x, int n, float M) {
    const __m512 vm = _mm512_set1_ps(M);
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16) {
        const __mmask16 k = n - j >= 16 ? (__mmask16)0xFFFF : tail_mask(n - j);
        const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), vm));
        _mm512_mask_storeu_ps(x + j, k, e);
        sum = _mm512_mask_add_ps(sum, k, sum, e);
    }
    return _mm512_reduce_add_ps(sum);
}

PG_AVX512 static float lane_sum(const float* x, const int32_t* idx, int n, int32_t j0, float* lanes) {
    const float* src = x;
    if (n < kLanes) {
        for (int l = 0; l < kLanes; l += 16) _mm512_storeu_ps(lanes + l, _mm512_setzero_ps());
        for (int jj = 0; jj < n; ++jj) lanes[idx[jj] - j0] = x[jj];
        src = lanes;
    }
    const __m512 a = _mm512_add_ps(_mm512_loadu_ps(src), _mm512_loadu_ps(src + 16));
    const __m512 b = _mm512_add_ps(_mm512_loadu_ps(src + 32), _mm512_loadu_ps(src + 48));
    return _mm512_reduce_add_ps(_mm512_add_ps(a, b));
}

PG_AVX512 static void scale(float* x, int64_t n, float f) {
    const __m512 vf = _mm512_set1_ps(f);
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 k = n - j >= 16 ? (__mmask16)0xFFFF : tail_mask(n - j);
        _mm512_mask_storeu_ps(x + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + j), vf));
    }
}

PG_AVX512 static void f16_to_f32(const uint16_t* s, float* d, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(s + i))));
    if (i < n) {
        const __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_ps(d + i, k, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, s + i)));
    }
}

PG_AVX512 static int scan(const uint16_t* const* rows, int nrows, int64_t j0, int64_t j1, int32_t* out) {
    const __m512i ninf = _mm512_set1_epi16((short)kF16NegInf);
    int cnt = 0;
    for (int64_t j = j0; j < j1; j += 32) {
        const __mmask32 lim = j1 - j >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << (j1 - j)) - 1u);
        uint32_t bits = 0;
        for (int r = 0; r < nrows; ++r)
            bits |= (uint32_t)_mm512_mask_cmpneq_epi16_mask(lim, _mm512_maskz_loadu_epi16(lim, rows[r] + j), ninf);
        while (bits) {
            out[cnt++] = (int32_t)(j + __builtin_ctz(bits));
            bits &= bits - 1;
        }
    }
    return cnt;
}

PG_AVX512 static int64_t count_finite(const uint16_t* row, int64_t n) {
    const __m512i ninf = _mm512_set1_epi16((short)kF16NegInf);
    int64_t c = 0;
    for (int64_t j = 0; j < n; j += 32) {
        const __mmask32 lim = n - j >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << (n - j)) - 1u);
        c += __builtin_popcount((uint32_t)_mm512_mask_cmpneq_epi16_mask(lim, _mm512_maskz_loadu_epi16(lim, row + j), ninf));
    }
    return c;
}

}  // namespace avx512

// ------------------------------------------------------------------------------------------
// AVX2 + FMA + F16C
// ------------------------------------------------------------------------------------------
namespace avx2 {

PG_AVX2 static inline __m256i tail_mask(int64_t r) {  // first r (< 8) lanes set
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), idx);
}

PG_AVX2 static inline __m128 reduce4(__m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));  // [a,b,c,d | a,b,c,d]
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

template <int NQ>
PG_AVX2 static inline void qk_block(const float* const* q, const float* k0, const float* k1, const float* k2,
                                    const float* k3, int64_t D, float* S, int lds, int nk) {
    __m256 acc[NQ][4];
    for (int i = 0; i < NQ; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_ps();
    int64_t d = 0;
    for (; d + 8 <= D; d += 8) {
        const __m256 b0 = _mm256_loadu_ps(k0 + d), b1 = _mm256_loadu_ps(k1 + d);
        const __m256 b2 = _mm256_loadu_ps(k2 + d), b3 = _mm256_loadu_ps(k3 + d);
        for (int i = 0; i < NQ; ++i) {
            const __m256 a = _mm256_loadu_ps(q[i] + d);
            acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
            acc[i][2] = _mm256_fmadd_ps(a, b2, acc[i][2]);
            acc[i][3] = _mm256_fmadd_ps(a, b3, acc[i][3]);
        }
    }
    if (d < D) {
        const __m256i m = tail_mask(D - d);
        const __m256 b0 = _mm256_maskload_ps(k0 + d, m), b1 = _mm256_maskload_ps(k1 + d, m);
        const __m256 b2 = _mm256_maskload_ps(k2 + d, m), b3 = _mm256_maskload_ps(k3 + d, m);
        for (int i = 0; i < NQ; ++i) {
            const __m256 a = _mm256_maskload_ps(q[i] + d, m);
            acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
            acc[i][2] = _mm256_fmadd_ps(a, b2, acc[i][2]);
            acc[i][3] = _mm256_fmadd_ps(a, b3, acc[i][3]);
        }
    }
    for (int i = 0; i < NQ; ++i) {
        alignas(16) float r[4];
        _mm_store_ps(r, reduce4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
        for (int j = 0; j < nk; ++j) S[(int64_t)i * lds + j] = r[j];
    }
}

PG_AVX2 static void qk(const float* const* q, int nq, const float* const* k, int nk, int64_t D, float* S, int lds) {
    for (int i = 0; i < nq; i += 2) {
        const int mq = std::min(2, nq - i);
        for (int j = 0; j < nk; j += 4) {
            const int mk = std::min(4, nk - j);
            const float* k0 = k[j];
            const float* k1 = k[j + std::min(1, mk - 1)];
            const float* k2 = k[j + std::min(2, mk - 1)];
            const float* k3 = k[j + std::min(3, mk - 1)];
            float* s = S + (int64_t)i * lds + j;
            if (mq == 2) qk_block<2>(q + i, k0, k1, k2, k3, D, s, lds, mk);
            else qk_block<1>(q + i, k0, k1, k2, k3, D, s, lds, mk);
        }
    }
}

// NQ rows of O, NZ full vectors of 8 columns starting at d (plain loads and stores: masked
// moves are slow on some cores and their mask registers made GCC spill the accumulators).
template <int NQ, int NZ>
PG_AVX2 static inline void pv_block(const float* P, int ldp, const float* const* v, int nk, int64_t d,
                                    float* O, int ldo) {
    __m256 acc[NQ][NZ];
    for (int i = 0; i < NQ; ++i)
        for (int z = 0; z < NZ; ++z) acc[i][z] = _mm256_loadu_ps(O + (int64_t)i * ldo + d + 8 * z);
    for (int j = 0; j < nk; ++j) {
        const float* vj = v[j] + d;
        __m256 b[NZ];
        for (int z = 0; z < NZ; ++z) b[z] = _mm256_loadu_ps(vj + 8 * z);
        for (int i = 0; i < NQ; ++i) {
            const __m256 p = _mm256_broadcast_ss(P + (int64_t)i * ldp + j);
            for (int z = 0; z < NZ; ++z) acc[i][z] = _mm256_fmadd_ps(p, b[z], acc[i][z]);
        }
    }
    for (int i = 0; i < NQ; ++i)
        for (int z = 0; z < NZ; ++z) _mm256_storeu_ps(O + (int64_t)i * ldo + d + 8 * z, acc[i][z]);
}

// The last r < 8 columns.
template <int NQ>
PG_AVX2 static inline void pv_tail(const float* P, int ldp, const float* const* v, int nk, int64_t d,
                                   __m256i last, float* O, int ldo) {
    __m256 acc[NQ];
    for (int i = 0; i < NQ; ++i) acc[i] = _mm256_maskload_ps(O + (int64_t)i * ldo + d, last);
    for (int j = 0; j < nk; ++j) {
        const __m256 b = _mm256_maskload_ps(v[j] + d, last);
        for (int i = 0; i < NQ; ++i) acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(P + (int64_t)i * ldp + j), b, acc[i]);
    }
    for (int i = 0; i < NQ; ++i) _mm256_maskstore_ps(O + (int64_t)i * ldo + d, last, acc[i]);
}

template <int NQ>
PG_AVX2 static inline void pv_rows(const float* P, int ldp, const float* const* v, int nk, int64_t Dv,
                                   float* O, int ldo) {
    int64_t d = 0;
    for (; d + 32 <= Dv; d += 32) pv_block<NQ, 4>(P, ldp, v, nk, d, O, ldo);
    switch ((Dv - d) / 8) {
        case 3: pv_block<NQ, 3>(P, ldp, v, nk, d, O, ldo); d += 24; break;
        case 2: pv_block<NQ, 2>(P, ldp, v, nk, d, O, ldo); d += 16; break;
        case 1: pv_block<NQ, 1>(P, ldp, v, nk, d, O, ldo); d += 8; break;
        default: break;
    }
    if (d < Dv) pv_tail<NQ>(P, ldp, v, nk, d, tail_mask(Dv - d), O, ldo);
}

PG_AVX2 static void pv(const float* P, int ldp, int nq, const float* const* v, int nk, int64_t Dv, float* O, int ldo) {
    for (int i = 0; i < nq; i += 2) {
        if (nq - i >= 2) pv_rows<2>(P + (int64_t)i * ldp, ldp, v, nk, Dv, O + (int64_t)i * ldo, ldo);
        else pv_rows<1>(P + (int64_t)i * ldp, ldp, v, nk, Dv, O + (int64_t)i * ldo, ldo);
    }
}

using simd::exp_ps;  // simd/exp_simd.h

PG_AVX2 static inline __m256 tanh_ps(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 ax = _mm256_andnot_ps(sign, x);
    const __m256 e = exp_ps(_mm256_mul_ps(ax, _mm256_set1_ps(-2.0f)));
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
    return _mm256_or_ps(t, _mm256_and_ps(sign, x));
}

PG_AVX2 static inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
PG_AVX2 static inline float hsum(__m256 v) {
    __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

PG_AVX2 static float logits(float* s, const float* m, int n, float scale, float cap, float slope) {
    const float ninf_s = -std::numeric_limits<float>::infinity();
    const __m256 vs = _mm256_set1_ps(scale), vc = _mm256_set1_ps(cap), vsl = _mm256_set1_ps(slope);
    const __m256 ninf = _mm256_set1_ps(ninf_s);
    __m256 mx = ninf;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + j), vs);
        if (cap != 0.0f) x = _mm256_mul_ps(vc, tanh_ps(x));
        if (m) {
            const __m256 mv = _mm256_loadu_ps(m + j);
            x = _mm256_blendv_ps(_mm256_fmadd_ps(vsl, mv, x), ninf, _mm256_cmp_ps(mv, ninf, _CMP_EQ_OQ));
        }
        _mm256_storeu_ps(s + j, x);
        mx = _mm256_max_ps(mx, x);
    }
    if (j < n) {  // the same operations, masked: a column's logit must not depend on its lane
        const __m256i k = tail_mask(n - j);
        __m256 x = _mm256_mul_ps(_mm256_maskload_ps(s + j, k), vs);
        if (cap != 0.0f) x = _mm256_mul_ps(vc, tanh_ps(x));
        if (m) {
            const __m256 mv = _mm256_maskload_ps(m + j, k);
            x = _mm256_blendv_ps(_mm256_fmadd_ps(vsl, mv, x), ninf, _mm256_cmp_ps(mv, ninf, _CMP_EQ_OQ));
        }
        _mm256_maskstore_ps(s + j, k, x);
        mx = _mm256_max_ps(mx, _mm256_blendv_ps(ninf, x, _mm256_castsi256_ps(k)));
    }
    return hmax(mx);
}

PG_AVX2 static float exp_sum(float* x, int n, float M) {
    const __m256 vm = _mm256_set1_ps(M);
    __m256 sum = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
        _mm256_storeu_ps(x + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    float s = hsum(sum);
    if (j < n) {
        const __m256i k = tail_mask(n - j);
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_maskload_ps(x + j, k), vm));
        _mm256_maskstore_ps(x + j, k, e);
        s += hsum(_mm256_and_ps(e, _mm256_castsi256_ps(k)));
    }
    return s;
}

PG_AVX2 static float lane_sum(const float* x, const int32_t* idx, int n, int32_t j0, float* lanes) {
    const float* src = x;  // n == kLanes: every lane present, in order
    if (n < kLanes) {
        for (int l = 0; l < kLanes; l += 8) _mm256_storeu_ps(lanes + l, _mm256_setzero_ps());
        for (int jj = 0; jj < n; ++jj) lanes[idx[jj] - j0] = x[jj];
        src = lanes;
    }
    __m256 v[8];
    for (int z = 0; z < 8; ++z) v[z] = _mm256_loadu_ps(src + 8 * z);
    const __m256 a = _mm256_add_ps(_mm256_add_ps(v[0], v[1]), _mm256_add_ps(v[2], v[3]));
    const __m256 b = _mm256_add_ps(_mm256_add_ps(v[4], v[5]), _mm256_add_ps(v[6], v[7]));
    return hsum(_mm256_add_ps(a, b));
}

PG_AVX2 static void scale(float* x, int64_t n, float f) {
    const __m256 vf = _mm256_set1_ps(f);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), vf));
    for (; j < n; ++j) x[j] *= f;
}

PG_AVX2 static void f16_to_f32(const uint16_t* s, float* d, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(s + i))));
    for (; i < n; ++i) d[i] = _cvtsh_ss(s[i]);
}

PG_AVX2 static int scan(const uint16_t* const* rows, int nrows, int64_t j0, int64_t j1, int32_t* out) {
    const __m256i ninf = _mm256_set1_epi16((short)kF16NegInf);
    int cnt = 0;
    int64_t j = j0;
    for (; j + 16 <= j1; j += 16) {
        uint32_t bits = 0;
        for (int r = 0; r < nrows; ++r) {
            const __m256i eq = _mm256_cmpeq_epi16(_mm256_loadu_si256((const __m256i*)(rows[r] + j)), ninf);
            bits |= ~(uint32_t)_mm256_movemask_epi8(eq);
        }
        bits &= 0x55555555u;  // one bit per 16-bit lane
        while (bits) {
            out[cnt++] = (int32_t)(j + (__builtin_ctz(bits) >> 1));
            bits &= bits - 1;
        }
    }
    if (j < j1) cnt += ref::scan(rows, nrows, j, j1, out + cnt);
    return cnt;
}

PG_AVX2 static int64_t count_finite(const uint16_t* row, int64_t n) {
    const __m256i ninf = _mm256_set1_epi16((short)kF16NegInf);
    int64_t c = 0, j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m256i eq = _mm256_cmpeq_epi16(_mm256_loadu_si256((const __m256i*)(row + j)), ninf);
        c += 16 - (__builtin_popcount((uint32_t)_mm256_movemask_epi8(eq)) >> 1);
    }
    return c + ref::count_finite(row + j, n - j);
}

}  // namespace avx2
#endif  // x86

static inline const Kernels& ref_kernels() {
    static const Kernels k{"scalar", ref::qk, ref::pv, nullptr, nullptr, ref::logits, ref::exp_sum, ref::lane_sum, ref::scale,
                           ref::f16_to_f32, ref::scan, ref::count_finite};
    return k;
}

// The variant of the current SIMD level (simd/isa.h: the CPU's, capped by PYGGML_ISA or
// gg.set_isa).
static inline const Kernels& select_kernels() {
#ifdef PG_FA_X86
    static const Kernels k512{"avx512", avx512::qk, avx512::pv, avx512::qk_f16, avx512::pv_f16, avx512::logits, avx512::exp_sum,
                              avx512::lane_sum, avx512::scale, avx512::f16_to_f32, avx512::scan, avx512::count_finite};
    static const Kernels k2{"avx2", avx2::qk, avx2::pv, nullptr, nullptr, avx2::logits, avx2::exp_sum, avx2::lane_sum,
                            avx2::scale,
                            avx2::f16_to_f32, avx2::scan, avx2::count_finite};
    switch (simd::cpu_isa()) {
        case simd::Isa::Avx512: return k512;
        case simd::Isa::Avx2: return k2;
        default: break;
    }
#endif
    return ref_kernels();
}

}  // namespace pyggml::cpu::fa

#pragma GCC diagnostic pop
