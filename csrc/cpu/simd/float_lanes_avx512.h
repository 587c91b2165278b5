// The outer-product tile of the AVX-512 float kernels' canonical order (described in
// simd/float_gemm_avx512.cpp), shared by the f32 multiply-add form (that file) and the bf16-pair
// form (simd/float_bf16_avx512.cpp): lane passes, the lanes' tree, the 16 x 16 transpose of the
// packing. `Mac` is one lane step: Mac::load(p) reads 16 packed units (f32 values or bf16
// pairs, 4 bytes each) of a weight panel, Mac::mac(c, a, b) adds a times the unit at b
// (broadcast) to c; Mac::kChunkFloats is the floats one chunk of a panel's 32 rows takes (32
// for 4-byte units, 16 for f16 weights packed as f16). Included inside an avx512 target
// region, in an anonymous namespace, after simd/float_avx512.h.
#pragma once

constexpr int kMR = 32, kNR = 12;
// A weight panel's 16 lane slices are a_slice_floats(nq) apart: one cache line past their
// nq * 32 values (kFloatSlicePad), so that a packing step's 16 stores (one per slice) fall in 16
// cache sets; with slices of 4 KiB (blocks of 512 values) they shared one set of the 8-way L1 and
// the packing of f16 weights took 1.6x as long (bench/float_micro_cycles.cpp).
constexpr int64_t a_slice_floats(int64_t nq, int chunk_floats = kMR) { return nq * chunk_floats + kFloatSlicePad; }

// Slice of lane l in a packed panel: the tree's pass order.
constexpr int slice_of(int l) { return ((l & 1) << 3) | ((l & 2) << 1) | ((l & 4) >> 1) | ((l & 8) >> 3); }

// 16 rows (one vector of each packed chunk) x NC columns of lane-l sums over nq chunks, into
// acc[j]: at most 12 accumulators, so that the lanes' tree keeps a partial sum in registers
// beside them (see simd/float_gemm_avx512.cpp).
template <class Mac, int NC>
inline void lane_pass(int64_t nq, const float* a, const float* b, __m512* acc) {
    __m512 c[NC];
#pragma GCC unroll 12
    for (int j = 0; j < NC; ++j) c[j] = _mm512_setzero_ps();
    for (int64_t q = 0; q < nq; ++q, a += Mac::kChunkFloats, b += kNR) {
        const auto a0 = Mac::load(a);
#pragma GCC unroll 12
        for (int j = 0; j < NC; ++j) c[j] = Mac::mac(c[j], a0, b + j);
    }
#pragma GCC unroll 12
    for (int j = 0; j < NC; ++j) acc[j] = c[j];
}

// The tile for the first NC columns of the panel (nv <= NC valid), 16 rows at a time: per half,
// t_0 and then t_1 of the tree, each from 8 lane passes with p (the partial sum) in registers and
// m0..m2 (the compiler's choice: registers or stack) for the others.
template <class Mac, int NC>
void micro_cols(int64_t nq, const float* ap, const float* bp, float* c, int64_t ldc, int mv, int nv, bool accumulate,
                const char* pf, int pf_lines) {
    const int64_t as = a_slice_floats(nq, Mac::kChunkFloats), bs = nq * kNR;  // floats between two lanes' slices
    if (accumulate)  // the outputs read back at the end
        for (int j = 0; j < nv; ++j) {
            _mm_prefetch((const char*)(c + j * ldc), _MM_HINT_T0);
            _mm_prefetch((const char*)(c + j * ldc + mv - 1), _MM_HINT_T0);
        }
    const int halves = mv > 16 ? 2 : 1;  // rows past mv are zero: a half of none is skipped
    const int passes = 16 * halves;
    int pass = 0;
    for (int h = 0; h < halves; ++h) {
        const float* a = ap + Mac::kChunkFloats / 2 * h;
        __m512 p[NC], acc[NC];
        alignas(64) __m512 m0[NC], m1[NC], m2[NC];
        auto run = [&](int l, __m512* out) {  // a share of the next column panel's prefetches first
            for (int k = pass * pf_lines / passes; k < (pass + 1) * pf_lines / passes; ++k) _mm_prefetch(pf + k * 64, _MM_HINT_T0);
            ++pass;
            lane_pass<Mac, NC>(nq, a + slice_of(l) * as, bp + slice_of(l) * bs, out);
        };
        for (int t = 0; t < 2; ++t) {  // t_t = s_t + s_{t+2}
            const int i0 = t, i1 = t + 2;
            run(i0, p);
            run(i0 + 8, acc);
            for (int j = 0; j < NC; ++j) p[j] = _mm512_add_ps(p[j], acc[j]);  // u_i0
            run(i0 + 4, m1);
            run(i0 + 12, acc);
            for (int j = 0; j < NC; ++j) p[j] = _mm512_add_ps(p[j], _mm512_add_ps(m1[j], acc[j]));  // s_i0
            run(i1, m1);
            run(i1 + 8, acc);
            for (int j = 0; j < NC; ++j) m1[j] = _mm512_add_ps(m1[j], acc[j]);  // u_i1
            run(i1 + 4, m2);
            run(i1 + 12, acc);
            for (int j = 0; j < NC; ++j) p[j] = _mm512_add_ps(p[j], _mm512_add_ps(m1[j], _mm512_add_ps(m2[j], acc[j])));  // t_t
            if (t == 0)
                for (int j = 0; j < NC; ++j) m0[j] = p[j];
        }
        const int mh = std::min(mv - 16 * h, 16);
        const __mmask16 m = tail_mask(mh);
        for (int j = 0; j < nv; ++j) {
            float* cj = c + j * ldc + 16 * h;
            const __m512 y = _mm512_add_ps(m0[j], p[j]);
            if (mh == 16) _mm512_storeu_ps(cj, accumulate ? _mm512_add_ps(_mm512_loadu_ps(cj), y) : y);
            else _mm512_mask_storeu_ps(cj, m, accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, cj), y) : y);
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

