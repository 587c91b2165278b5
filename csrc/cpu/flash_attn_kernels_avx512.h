// The AVX-512 (F/BW/VL/DQ) variant of the CPU flash attention's inner kernels. flash_attn_kernels.h
// holds the contract (struct Kernels) and the plain reference, and includes this file inside
// its namespace and x86 guard: it is not meant to be included on its own.
#pragma once

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
