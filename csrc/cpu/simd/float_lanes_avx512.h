// The outer-product tile of the AVX-512 float kernels' canonical order (described in
// simd/float_gemm_avx512.cpp), shared by the f32 multiply-add form (that file) and the bf16-pair
// form (simd/float_bf16_avx512.cpp): lane passes, the lanes' tree, the 16 x 16 transpose of the
// packing. `Mac` is one lane step: Mac::load(p) reads 16 packed units (f32 values or bf16
// pairs, 4 bytes each) of a weight panel, Mac::mac(c, a, b) adds a times the unit at b
// (broadcast) to c. Included inside an avx512 target region, in an anonymous namespace, after
// simd/float_avx512.h.
#pragma once

constexpr int kMR = 32, kNR = 12;
// A weight panel's 16 lane slices are a_slice_floats(nq) apart: one cache line past their
// nq * 32 values (kFloatSlicePad), so that a packing step's 16 stores (one per slice) fall in 16
// cache sets; with slices of 4 KiB (blocks of 512 values) they shared one set of the 8-way L1 and
// the packing of f16 weights took 1.6x as long (bench/float_micro_cycles.cpp).
constexpr int64_t a_slice_floats(int64_t nq) { return nq * kMR + kFloatSlicePad; }

// Slice of lane l in a packed panel: the tree's pass order.
constexpr int slice_of(int l) { return ((l & 1) << 3) | ((l & 2) << 1) | ((l & 4) >> 1) | ((l & 8) >> 3); }

// How a lane pass leaves its 24 sums: stored, added to out, or added to out + other.
enum Finish { kStore, kAdd, kAdd2 };

// 32 rows x NC (at most 12) columns of lane-l sums over nq chunks; acc[2 j + h] holds rows
// 16 h .. 16 h + 15 of column j.
template <class Mac, Finish F, int NC>
inline void lane_pass(int64_t nq, const float* a, const float* b, __m512* out, const __m512* other) {
    __m512 c[2 * NC];
#pragma GCC unroll 24
    for (int i = 0; i < 2 * NC; ++i) c[i] = _mm512_setzero_ps();
    for (int64_t q = 0; q < nq; ++q, a += kMR, b += kNR) {
        const auto a0 = Mac::load(a), a1 = Mac::load(a + 16);
#pragma GCC unroll 12
        for (int j = 0; j < NC; ++j) {
            c[2 * j] = Mac::mac(c[2 * j], a0, b + j);
            c[2 * j + 1] = Mac::mac(c[2 * j + 1], a1, b + j);
        }
    }
#pragma GCC unroll 24
    for (int i = 0; i < 2 * NC; ++i) {
        if constexpr (F == kStore) out[i] = c[i];
        else if constexpr (F == kAdd) out[i] = _mm512_add_ps(out[i], c[i]);
        else out[i] = _mm512_add_ps(out[i], _mm512_add_ps(other[i], c[i]));
    }
}

// The tile for the first NC columns of the panel (nv <= NC valid).
template <class Mac, int NC>
void micro_cols(int64_t nq, const float* ap, const float* bp, float* c, int64_t ldc, int mv, int nv, bool accumulate,
                const char* pf, int pf_lines) {
    constexpr int kA = 2 * NC;
    const int64_t as = a_slice_floats(nq), bs = nq * kNR;  // floats between two lanes' slices
    if (accumulate)  // the outputs read back at the end
        for (int j = 0; j < nv; ++j) {
            _mm_prefetch((const char*)(c + j * ldc), _MM_HINT_T0);
            _mm_prefetch((const char*)(c + j * ldc + mv - 1), _MM_HINT_T0);
        }
    int pass = 0;
    auto prefetch_share = [&] {  // a share of the next column panel's lines before each pass
        for (int k = pass * pf_lines / 16; k < (pass + 1) * pf_lines / 16; ++k) _mm_prefetch(pf + k * 64, _MM_HINT_T0);
        ++pass;
    };
    alignas(64) __m512 t0[kA], t1[kA], tmp[kA];
    // s_i (i < 4) into s: u_i = v_i + v_{i+8} in s, u_{i+4} in tmp, s = u_i + u_{i+4}
    auto s_of = [&](int i, __m512* s) {
        for (int k = 0; k < 4; ++k) prefetch_share();
        auto at = [&](int l, const float* base, int64_t stride) { return base + slice_of(l) * stride; };
        lane_pass<Mac, kStore, NC>(nq, at(i, ap, as), at(i, bp, bs), s, nullptr);
        lane_pass<Mac, kAdd, NC>(nq, at(i + 8, ap, as), at(i + 8, bp, bs), s, nullptr);
        lane_pass<Mac, kStore, NC>(nq, at(i + 4, ap, as), at(i + 4, bp, bs), tmp, nullptr);
        lane_pass<Mac, kAdd2, NC>(nq, at(i + 12, ap, as), at(i + 12, bp, bs), s, tmp);
    };
    alignas(64) __m512 x[kA];
    s_of(0, t0);
    s_of(2, x);
    for (int i = 0; i < kA; ++i) t0[i] = _mm512_add_ps(t0[i], x[i]);
    s_of(1, t1);
    s_of(3, x);
    for (int i = 0; i < kA; ++i) x[i] = _mm512_add_ps(t0[i], _mm512_add_ps(t1[i], x[i]));  // y
    const __mmask16 m0 = tail_mask(std::min(mv, 16)), m1 = tail_mask(std::max(mv - 16, 0));
    for (int j = 0; j < nv; ++j) {
        float* cj = c + j * ldc;
        if (mv == kMR) {
            for (int h = 0; h < 2; ++h) {
                const __m512 v = x[2 * j + h];
                _mm512_storeu_ps(cj + 16 * h, accumulate ? _mm512_add_ps(_mm512_loadu_ps(cj + 16 * h), v) : v);
            }
        } else {
            const __m512 v0 = x[2 * j], v1 = x[2 * j + 1];
            _mm512_mask_storeu_ps(cj, m0, accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(m0, cj), v0) : v0);
            if (m1) _mm512_mask_storeu_ps(cj + 16, m1, accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(m1, cj + 16), v1) : v1);
        }
    }
}

// A panel's last columns may be fewer than 12 (N = 128: 8 of the 11th panel): the narrower
// tiles skip the padding columns' multiply-adds (3% of that GEMM) and compute the same sums.
template <class Mac>
void micro(int64_t nq, const float* ap, const float* bp, float* c, int64_t ldc, int mv, int nv, bool accumulate,
           const char* pf, int pf_lines) {
    if (nv <= 4) micro_cols<Mac, 4>(nq, ap, bp, c, ldc, mv, nv, accumulate, pf, pf_lines);
    else if (nv <= 8) micro_cols<Mac, 8>(nq, ap, bp, c, ldc, mv, nv, accumulate, pf, pf_lines);
    else micro_cols<Mac, kNR>(nq, ap, bp, c, ldc, mv, nv, accumulate, pf, pf_lines);
}

// 16 x 16 transpose: out[l] lane r = in[r] lane l.
inline void transpose16(__m512* r) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4 i + e], 128-bit chunk L: column 4 L + e of rows 4 i .. 4 i + 3
    for (int i = 0; i < 4; ++i) {
        u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    // column 4 L + e gathers chunk L of u[e], u[4 + e], u[8 + e], u[12 + e]
    for (int e = 0; e < 4; ++e) {
        const __m512 v0 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x44), v1 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xEE);
        const __m512 v2 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x44), v3 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xEE);
        r[e] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[4 + e] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        r[8 + e] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[12 + e] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
}

