// Inner kernels of the CPU flash attention (csrc/cpu/flash_attn.cpp): Q·K tiles, P·V
// accumulation, the online-softmax row step, mask scans and K/V row widening.
// Three variants with the same contract: a plain loop (the reference), AVX2+FMA+F16C and
// AVX-512 (F/BW/VL/DQ), the last two in flash_attn_kernels_avx2.h / _avx512.h, picked by the
// SIMD level of cpu/simd/isa.h. Included by the dense and the sparse kernels (flash_attn.cpp,
// flash_attn_sparse.cpp); each gets its own internal copies.
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

#include "cpu/flash_attn_kernels_avx512.h"
#include "cpu/flash_attn_kernels_avx2.h"
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
    static const Kernels k512{"avx512", avx512::qk_t<float>, avx512::pv_t<float>,
                              avx512::qk_t<uint16_t>, avx512::pv_t<uint16_t>, avx512::logits, avx512::exp_sum,
                              avx512::lane_sum, avx512::scale, avx512::f16_to_f32, avx512::scan, avx512::count_finite};
    static const Kernels k2{"avx2", avx2::qk_t<float>, avx2::pv_t<float>,
                            avx2::qk_t<uint16_t>, avx2::pv_t<uint16_t>, avx2::logits, avx2::exp_sum,
                            avx2::lane_sum, avx2::scale, avx2::f16_to_f32, avx2::scan, avx2::count_finite};
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
