// Q·K and P·V kernels of the sparse FLASH_ATTN_EXT path (flash_attn_sparse.cpp), reading K/V
// rows as F32 or, in place, as F16. Include from that file only (internal functions).
#pragma once
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>

#include "cpu/flash_attn_kernels.h"

namespace pyggml::cpu::fa_sparse {

// ------------------------------------------------------------------------------------------
// Q·K and P·V reading K/V as F32 or F16 (AVX2). One template for both element types, so a
// row read in place gives the same bits as the row widened first.
// ------------------------------------------------------------------------------------------
#if defined(__x86_64__) || defined(__i386__)
#define PG_SPARSE_X86 1
#define PG_SP_AVX2 __attribute__((target("avx2,fma,f16c")))

PG_SP_AVX2 static inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
PG_SP_AVX2 static inline __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p));
}

// NQ query rows x 4 key rows; D a multiple of 8.
template <int NQ, class T>
PG_SP_AVX2 static inline void qk_block(const float* const* q, const T* k0, const T* k1, const T* k2, const T* k3,
                                       int64_t D, float* S, int lds, int nk) {
    __m256 acc[NQ][4];
    for (int i = 0; i < NQ; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; d += 8) {
        const __m256 b0 = load8(k0 + d), b1 = load8(k1 + d), b2 = load8(k2 + d), b3 = load8(k3 + d);
        for (int i = 0; i < NQ; ++i) {
            const __m256 a = _mm256_loadu_ps(q[i] + d);
            acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
            acc[i][2] = _mm256_fmadd_ps(a, b2, acc[i][2]);
            acc[i][3] = _mm256_fmadd_ps(a, b3, acc[i][3]);
        }
    }
    for (int i = 0; i < NQ; ++i) {
        const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[i][0], acc[i][1]), _mm256_hadd_ps(acc[i][2], acc[i][3]));
        alignas(16) float r[4];
        _mm_store_ps(r, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
        for (int j = 0; j < nk; ++j) S[(int64_t)i * lds + j] = r[j];
    }
}

template <class T>
PG_SP_AVX2 static void qk_avx2(const float* const* q, int nq, const T* const* k, int nk, int64_t D, float* S,
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

// NQ rows of O, NZ vectors of 8 columns starting at d.
template <int NQ, int NZ, class T>
PG_SP_AVX2 static inline void pv_block(const float* P, int ldp, const T* const* v, int nk, int64_t d, float* O,
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

// NQ (1 or 2) rows of O, 32 columns starting at d, in named registers (an array of
// accumulators made GCC store them to the stack on every step).
template <int NQ, class T>
PG_SP_AVX2 static inline void pv_block32(const float* P, int ldp, const T* const* v, int nk, int64_t d, float* O,
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

template <int NQ, class T>
PG_SP_AVX2 static inline void pv_rows(const float* P, int ldp, const T* const* v, int nk, int64_t Dv, float* O,
                                      int ldo) {
    int64_t d = 0;
    for (; d + 32 <= Dv; d += 32) pv_block32<NQ>(P, ldp, v, nk, d, O, ldo);
    switch ((Dv - d) / 8) {
        case 3: pv_block<NQ, 3>(P, ldp, v, nk, d, O, ldo); break;
        case 2: pv_block<NQ, 2>(P, ldp, v, nk, d, O, ldo); break;
        case 1: pv_block<NQ, 1>(P, ldp, v, nk, d, O, ldo); break;
        default: break;
    }
}

// Dv a multiple of 8.
template <class T>
PG_SP_AVX2 static void pv_avx2(const float* P, int ldp, int nq, const T* const* v, int nk, int64_t Dv, float* O,
                               int ldo) {
    for (int i = 0; i < nq; i += 2) {
        if (nq - i >= 2) pv_rows<2>(P + (int64_t)i * ldp, ldp, v, nk, Dv, O + (int64_t)i * ldo, ldo);
        else pv_rows<1>(P + (int64_t)i * ldp, ldp, v, nk, Dv, O + (int64_t)i * ldo, ldo);
    }
}
#endif

// The Q·K and P·V kernels of the sparse path: F32 rows, and F16 rows in place where the
// variant has them with the same bits (null: rows are widened first).
struct MatKernels {
    void (*qk)(const float* const*, int, const float* const*, int, int64_t, float*, int);
    void (*pv)(const float*, int, int, const float* const*, int, int64_t, float*, int);
    void (*qk_f16)(const float* const*, int, const uint16_t* const*, int, int64_t, float*, int);
    void (*pv_f16)(const float*, int, int, const uint16_t* const*, int, int64_t, float*, int);
};

static inline MatKernels select_mat_kernels(const fa::Kernels& k, int64_t D, int64_t Dv) {
#ifdef PG_SPARSE_X86
    if (simd::cpu_isa() == simd::Isa::Avx2 && D % 8 == 0 && Dv % 8 == 0)
        return {qk_avx2<float>, pv_avx2<float>, qk_avx2<uint16_t>, pv_avx2<uint16_t>};
#endif
    return {k.qk, k.pv, k.qk_f16, k.pv_f16};
}

}  // namespace pyggml::cpu::fa_sparse
