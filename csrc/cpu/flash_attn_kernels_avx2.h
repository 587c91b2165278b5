// The AVX2+FMA+F16C variant of the CPU flash attention's inner kernels. flash_attn_kernels.h
// holds the contract (struct Kernels) and the plain reference, and includes this file inside
// its namespace and x86 guard: it is not meant to be included on its own.
#pragma once

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

// 8 elements as F32 from F32 or F16 storage (K/V rows are read in place when F16: the
// conversion is exact, so the bits are those of the row widened first). The tail forms read
// the first r (< 8) elements and zero the rest.
PG_AVX2 static inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
PG_AVX2 static inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }
PG_AVX2 static inline __m256 load8(__m256i m, int64_t, const float* p) { return _mm256_maskload_ps(p, m); }
PG_AVX2 static inline __m256 load8(__m256i, int64_t r, const uint16_t* p) {
    alignas(16) uint16_t b[8] = {0};
    std::memcpy(b, p, size_t(r) * sizeof(uint16_t));
    return _mm256_cvtph_ps(_mm_load_si128((const __m128i*)b));
}

// NQ query rows x 4 key rows.
template <int NQ, class T>
PG_AVX2 static inline void qk_block(const float* const* q, const T* k0, const T* k1, const T* k2, const T* k3,
                                    int64_t D, float* S, int lds, int nk) {
    __m256 acc[NQ][4];
    for (int i = 0; i < NQ; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_ps();
    int64_t d = 0;
    for (; d + 8 <= D; d += 8) {
        const __m256 b0 = load8(k0 + d), b1 = load8(k1 + d), b2 = load8(k2 + d), b3 = load8(k3 + d);
        for (int i = 0; i < NQ; ++i) {
            const __m256 a = _mm256_loadu_ps(q[i] + d);
            acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
            acc[i][2] = _mm256_fmadd_ps(a, b2, acc[i][2]);
            acc[i][3] = _mm256_fmadd_ps(a, b3, acc[i][3]);
        }
    }
    if (d < D) {
        const int64_t r = D - d;
        const __m256i m = tail_mask(r);
        const __m256 b0 = load8(m, r, k0 + d), b1 = load8(m, r, k1 + d);
        const __m256 b2 = load8(m, r, k2 + d), b3 = load8(m, r, k3 + d);
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

template <class T>
PG_AVX2 static inline void qk_t(const float* const* q, int nq, const T* const* k, int nk, int64_t D, float* S,
                                int lds) {
    for (int i = 0; i < nq; i += 2) {
        const int mq = std::min(2, nq - i);
        for (int j = 0; j < nk; j += 4) {
            const int mk = std::min(4, nk - j);
            const T* k0 = k[j];
            const T* k1 = k[j + std::min(1, mk - 1)];
            const T* k2 = k[j + std::min(2, mk - 1)];
            const T* k3 = k[j + std::min(3, mk - 1)];
            float* s = S + (int64_t)i * lds + j;
            if (mq == 2) qk_block<2>(q + i, k0, k1, k2, k3, D, s, lds, mk);
            else qk_block<1>(q + i, k0, k1, k2, k3, D, s, lds, mk);
        }
    }
}

// NQ rows of O, NZ full vectors of 8 columns starting at d (plain loads and stores: masked
// moves are slow on some cores and their mask registers made GCC spill the accumulators).
template <int NQ, int NZ, class T>
PG_AVX2 static inline void pv_block(const float* P, int ldp, const T* const* v, int nk, int64_t d, float* O,
                                    int ldo) {
    __m256 acc[NQ][NZ];
    for (int i = 0; i < NQ; ++i)
        for (int z = 0; z < NZ; ++z) acc[i][z] = _mm256_loadu_ps(O + (int64_t)i * ldo + d + 8 * z);
    for (int j = 0; j < nk; ++j) {
        const T* vj = v[j] + d;
        __m256 b[NZ];
        for (int z = 0; z < NZ; ++z) b[z] = load8(vj + 8 * z);
        for (int i = 0; i < NQ; ++i) {
            const __m256 p = _mm256_broadcast_ss(P + (int64_t)i * ldp + j);
            for (int z = 0; z < NZ; ++z) acc[i][z] = _mm256_fmadd_ps(p, b[z], acc[i][z]);
        }
    }
    for (int i = 0; i < NQ; ++i)
        for (int z = 0; z < NZ; ++z) _mm256_storeu_ps(O + (int64_t)i * ldo + d + 8 * z, acc[i][z]);
}

// NQ (1 or 2) rows of O, 32 columns starting at d, in named registers (an array of eight
// accumulators made GCC store them to the stack on every step). The same operations as
// pv_block<NQ, 4>.
template <int NQ, class T>
PG_AVX2 static inline void pv_block32(const float* P, int ldp, const T* const* v, int nk, int64_t d, float* O,
                                      int ldo) {
    float* o0 = O + d;
    float* o1 = O + ldo + d;
    __m256 a0 = _mm256_loadu_ps(o0), a1 = _mm256_loadu_ps(o0 + 8);
    __m256 a2 = _mm256_loadu_ps(o0 + 16), a3 = _mm256_loadu_ps(o0 + 24);
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
    if constexpr (NQ == 2) {
        c0 = _mm256_loadu_ps(o1);
        c1 = _mm256_loadu_ps(o1 + 8);
        c2 = _mm256_loadu_ps(o1 + 16);
        c3 = _mm256_loadu_ps(o1 + 24);
    }
    for (int j = 0; j < nk; ++j) {
        const T* vj = v[j] + d;
        const __m256 b0 = load8(vj), b1 = load8(vj + 8), b2 = load8(vj + 16), b3 = load8(vj + 24);
        const __m256 p = _mm256_broadcast_ss(P + j);
        a0 = _mm256_fmadd_ps(p, b0, a0);
        a1 = _mm256_fmadd_ps(p, b1, a1);
        a2 = _mm256_fmadd_ps(p, b2, a2);
        a3 = _mm256_fmadd_ps(p, b3, a3);
        if constexpr (NQ == 2) {
            const __m256 p1 = _mm256_broadcast_ss(P + ldp + j);
            c0 = _mm256_fmadd_ps(p1, b0, c0);
            c1 = _mm256_fmadd_ps(p1, b1, c1);
            c2 = _mm256_fmadd_ps(p1, b2, c2);
            c3 = _mm256_fmadd_ps(p1, b3, c3);
        }
    }
    _mm256_storeu_ps(o0, a0);
    _mm256_storeu_ps(o0 + 8, a1);
    _mm256_storeu_ps(o0 + 16, a2);
    _mm256_storeu_ps(o0 + 24, a3);
    if constexpr (NQ == 2) {
        _mm256_storeu_ps(o1, c0);
        _mm256_storeu_ps(o1 + 8, c1);
        _mm256_storeu_ps(o1 + 16, c2);
        _mm256_storeu_ps(o1 + 24, c3);
    }
}

// The last r < 8 columns.
template <int NQ, class T>
PG_AVX2 static inline void pv_tail(const float* P, int ldp, const T* const* v, int nk, int64_t d, int64_t r,
                                   float* O, int ldo) {
    const __m256i last = tail_mask(r);
    __m256 acc[NQ];
    for (int i = 0; i < NQ; ++i) acc[i] = _mm256_maskload_ps(O + (int64_t)i * ldo + d, last);
    for (int j = 0; j < nk; ++j) {
        const __m256 b = load8(last, r, v[j] + d);
        for (int i = 0; i < NQ; ++i) acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(P + (int64_t)i * ldp + j), b, acc[i]);
    }
    for (int i = 0; i < NQ; ++i) _mm256_maskstore_ps(O + (int64_t)i * ldo + d, last, acc[i]);
}

template <int NQ, class T>
PG_AVX2 static inline void pv_rows(const float* P, int ldp, const T* const* v, int nk, int64_t Dv, float* O,
                                   int ldo) {
    int64_t d = 0;
    for (; d + 32 <= Dv; d += 32) pv_block32<NQ>(P, ldp, v, nk, d, O, ldo);
    switch ((Dv - d) / 8) {
        case 3: pv_block<NQ, 3>(P, ldp, v, nk, d, O, ldo); d += 24; break;
        case 2: pv_block<NQ, 2>(P, ldp, v, nk, d, O, ldo); d += 16; break;
        case 1: pv_block<NQ, 1>(P, ldp, v, nk, d, O, ldo); d += 8; break;
        default: break;
    }
    if (d < Dv) pv_tail<NQ>(P, ldp, v, nk, d, Dv - d, O, ldo);
}

template <class T>
PG_AVX2 static inline void pv_t(const float* P, int ldp, int nq, const T* const* v, int nk, int64_t Dv, float* O,
                                int ldo) {
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
