// AVX2 + FMA + F16C MUL_MAT kernels (256-bit). Selected at run time (simd/isa.h).
#include <algorithm>
#include <cstring>

#include "cpu/mul_mat_float.h"
#include "cpu/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace pyggml::cpu::mm {

namespace {
inline __m256i mm_udot(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
// sum of (u - off) * s per 4-byte group, exact: the offset's products are taken off the
// 16-bit pair sums (|u * s pair| <= 31 * 127 * 2 and |off * s pair| <= 16 * 254, no saturation),
// one instruction fewer than the sign trick on u - off.
inline __m256i mm_udot_offset(__m256i u, __m256i s, __m256i off) {
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, s), _mm256_maddubs_epi16(off, s));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
}  // namespace
#include "cpu/simd/mm_quant256.h"

namespace {

// ---- Float weights in the canonical order (cpu/mul_mat_float.h): 8 lanes, blocks of kFloatKB.
constexpr int kLanes = 8;
constexpr int64_t kFloatKB = 512;

// Horizontal sums of four accumulators, lane r of the result from v_r, by one tree:
// s_i = v_i + v_{i+4}; t_0 = s_0 + s_2, t_1 = s_1 + s_3; y = t_0 + t_1.
inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    const __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
    // ab = [s_a | s_b], cd = [s_c | s_d]
    const __m256 t = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
    // t = [ta0 ta1 tc0 tc1 | tb0 tb1 td0 td1]
    const __m256 y = _mm256_add_ps(_mm256_shuffle_ps(t, t, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(t, t, _MM_SHUFFLE(3, 1, 3, 1)));
    // y = [ya yc ya yc | yb yd yb yd]
    return _mm_unpacklo_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
}

// The same tree for eight accumulators at once, lane r of the result from v_r: s_i = v_i +
// v_{i+4}; t_0 = s_0 + s_2, t_1 = s_1 + s_3; y = t_0 + t_1 (bit-identical to hsum4 per lane).
inline __m256 halves(__m256 x, __m256 y) {  // [s_x | s_y]
    return _mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31));
}
inline __m256 hsum8(const __m256* v) {
    const __m256 ae = halves(v[0], v[4]), bf = halves(v[1], v[5]), cg = halves(v[2], v[6]), dh = halves(v[3], v[7]);
    // [t_a0 t_a1 t_b0 t_b1 | t_e0 t_e1 t_f0 t_f1] and the same for c, d | g, h
    const __m256 ab = _mm256_add_ps(_mm256_shuffle_ps(ae, bf, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(ae, bf, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 cd = _mm256_add_ps(_mm256_shuffle_ps(cg, dh, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(cg, dh, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
}

inline __m256i tail_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// 8 weights as f32 (`tail`: the first n < 8, the rest zero).
struct WF32 {
    static constexpr int kSize = 4;
    static __m256 load(const char* p, int64_t i) { return _mm256_loadu_ps((const float*)p + i); }
    static __m256 tail(const char* p, int64_t i, int n) { return _mm256_maskload_ps((const float*)p + i, tail_mask(n)); }
};
// 8 16-bit values from value i of p as they are stored (`tail`: the first n < 8, the rest zero).
struct U16x8 {
    static __m128i load(const char* p, int64_t i) { return _mm_loadu_si128((const __m128i*)((const uint16_t*)p + i)); }
    static __m128i tail(const char* p, int64_t i, int n) {
        alignas(16) uint16_t t[8] = {};
        std::memcpy(t, (const uint16_t*)p + i, size_t(n) * 2);
        return _mm_load_si128((const __m128i*)t);
    }
};
struct WF16 {
    static constexpr int kSize = 2;
    static __m256 load(const char* p, int64_t i) { return _mm256_cvtph_ps(U16x8::load(p, i)); }
    static __m256 tail(const char* p, int64_t i, int n) { return _mm256_cvtph_ps(U16x8::tail(p, i, n)); }
};
struct WBF16 {
    static constexpr int kSize = 2;
    static __m256 cvt(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
    static __m256 load(const char* p, int64_t i) { return cvt(U16x8::load(p, i)); }
    static __m256 tail(const char* p, int64_t i, int n) { return cvt(U16x8::tail(p, i, n)); }
};

// R rows x C columns read in place; the smaller side is held in registers, the other streamed.
template <class W, class B, int R, int C>
void direct_tile(int64_t k, const char* a, size_t as, const char* b, size_t bs, float* out) {
    float sum[R][C] = {};  // k == 0: zeros
    for (int64_t k0 = 0; k0 < k; k0 += kFloatKB) {
        const int64_t k1 = std::min(k, k0 + kFloatKB);
        __m256 acc[R][C];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
        auto step = [&](auto wload, auto bload) {
            if constexpr (R <= C) {
                __m256 av[R];
                for (int r = 0; r < R; ++r) av[r] = wload(a + r * as);
                for (int c = 0; c < C; ++c) {
                    const __m256 bv = bload(b + c * bs);
                    for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(av[r], bv, acc[r][c]);
                }
            } else {
                __m256 bv[C];
                for (int c = 0; c < C; ++c) bv[c] = bload(b + c * bs);
                for (int r = 0; r < R; ++r) {
                    const __m256 av = wload(a + r * as);
                    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(av, bv[c], acc[r][c]);
                }
            }
        };
        int64_t i = k0;
        for (; i + kLanes <= k1; i += kLanes)
            step([&](const char* w) { return W::load(w, i); }, [&](const char* y) { return B::load(y, i); });
        if (i < k1) {
            const int n = int(k1 - i);
            step([&](const char* w) { return W::tail(w, i, n); }, [&](const char* y) { return B::tail(y, i, n); });
        }
        for (int c = 0; c < C; ++c)
            for (int r0 = 0; r0 < R; r0 += 4) {
                alignas(16) float h[4];
                _mm_store_ps(h, hsum4(acc[r0][c], acc[std::min(r0 + 1, R - 1)][c], acc[std::min(r0 + 2, R - 1)][c],
                                      acc[std::min(r0 + 3, R - 1)][c]));
                for (int r = r0; r < std::min(r0 + 4, R); ++r) sum[r][c] = k0 == 0 ? h[r - r0] : sum[r][c] + h[r - r0];
            }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) out[r * 4 + c] = sum[r][c];
}

// Eight rows of one column (the GEMV tile): the eight block values reduced together and
// kept as one vector of running sums.
template <class W, class B>
void direct_tile_8x1(int64_t k, const char* a, size_t as, const char* b, float* out) {
    __m256 sum = _mm256_setzero_ps();  // k == 0: zeros
    for (int64_t k0 = 0; k0 < k; k0 += kFloatKB) {
        const int64_t k1 = std::min(k, k0 + kFloatKB);
        __m256 acc[8];
        for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
        int64_t i = k0;
        for (; i + kLanes <= k1; i += kLanes) {
            const __m256 bv = B::load(b, i);
            for (int r = 0; r < 8; ++r) acc[r] = _mm256_fmadd_ps(W::load(a + r * as, i), bv, acc[r]);
        }
        if (i < k1) {
            const int n = int(k1 - i);
            const __m256 bv = B::tail(b, i, n);
            for (int r = 0; r < 8; ++r) acc[r] = _mm256_fmadd_ps(W::tail(a + r * as, i, n), bv, acc[r]);
        }
        const __m256 h = hsum8(acc);
        sum = k0 == 0 ? h : _mm256_add_ps(sum, h);
    }
    alignas(32) float y[8];
    _mm256_store_ps(y, sum);
    for (int r = 0; r < 8; ++r) out[r * 4] = y[r];
}

template <class W, class B, int C>
void direct_rows(int64_t k, const char* a, size_t as, int rows, const char* b, size_t bs, float* out) {
    switch (rows) {
        case 1: direct_tile<W, B, 1, C>(k, a, as, b, bs, out); break;
        case 2: direct_tile<W, B, 2, C>(k, a, as, b, bs, out); break;
        case 3: direct_tile<W, B, 3, C>(k, a, as, b, bs, out); break;
        case 4: direct_tile<W, B, 4, C>(k, a, as, b, bs, out); break;
        case 8:
            if constexpr (C == 1) {  // one column: 8 independent chains
                direct_tile_8x1<W, B>(k, a, as, b, out);
                break;
            }
            [[fallthrough]];
        default:  // a tile of 4, then the rest
            direct_tile<W, B, 4, C>(k, a, as, b, bs, out);
            direct_rows<W, B, C>(k, a + 4 * as, as, rows - 4, b, bs, out + 16);
            break;
    }
}

template <class W, class B = WF32>
void direct(int64_t k, const void* a, size_t as, int rows, const void* b, size_t bs, int cols, float* out) {
    const char* ap = (const char*)a;
    const char* bp = (const char*)b;
    switch (cols) {
        case 1: direct_rows<W, B, 1>(k, ap, as, rows, bp, bs, out); break;
        case 2: direct_rows<W, B, 2>(k, ap, as, rows, bp, bs, out); break;
        case 3: direct_rows<W, B, 3>(k, ap, as, rows, bp, bs, out); break;
        default: direct_rows<W, B, 4>(k, ap, as, rows, bp, bs, out); break;
    }
}

// The packed GEMM as eight GEMMs, one per lane. Lane l of an output's accumulator only ever
// multiplies values l of each 8-value chunk of K, so its chain, acc_l = fma(a[8q + l], b[8q + l],
// acc_l) over q, can be run for 16 rows at once with the rows in a vector and b's value
// broadcast: an outer-product tile of 16 rows x 6 columns (12 accumulators) that loads 2 weight
// vectors and 6 scalars per 12 multiply-adds, against 7 vectors for a dot-product tile. The
// multiply-adds and their order are those of the dot tiles; the eight lane results of a block
// are then summed by the same tree as hsum4 (s_i = v_i + v_{i+4}; t_0 = s_0 + s_2, t_1 = s_1 +
// s_3; y = t_0 + t_1), 16 outputs per vector.
// Packed layouts (per K block of nq chunks): a panel ap[l * a_slice_values<T>(nq) + q * 16 + r]
// of T values (f32, or f16 for f16 weights; slices one cache line apart past their values, as
// kFloatSlicePad), a column panel bp[(l * nq + q) * 6 + j], so one lane's pass reads both
// contiguously.
constexpr int kFloatMR = 16, kFloatNR = 6;
template <class T>
constexpr int64_t a_slice_values(int64_t nq) { return nq * kFloatMR + 64 / int64_t(sizeof(T)); }
static_assert(a_slice_values<float>(0) == kFloatSlicePad, "one cache line past the f32 values");
constexpr int64_t kBlockChunks = kFloatKB / kLanes;

// Weight panels of f32 values (F32A) or of f16 values widened as the lane pass loads them
// (F16A: half the bytes packed and streamed; a 16 x 512 block and a column panel then fit L1
// together, and the widening runs beside the multiply-adds).
struct F32A {
    using T = float;
    static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
};
struct F16A {
    using T = uint16_t;
    static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }
};

// 16 rows x 6 columns of lane-l sums over nq chunks, into acc[2 j + h] (rows 8 h .. 8 h + 7).
template <class A>
inline void lane_pass(int64_t nq, const typename A::T* a, const float* b, __m256* acc) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#pragma GCC unroll 2
    for (int64_t q = 0; q < nq; ++q, a += kFloatMR, b += kFloatNR) {
        const __m256 a0 = A::load(a), a1 = A::load(a + 8);
        __m256 bv = _mm256_broadcast_ss(b);
        c00 = _mm256_fmadd_ps(a0, bv, c00), c01 = _mm256_fmadd_ps(a1, bv, c01);
        bv = _mm256_broadcast_ss(b + 1);
        c10 = _mm256_fmadd_ps(a0, bv, c10), c11 = _mm256_fmadd_ps(a1, bv, c11);
        bv = _mm256_broadcast_ss(b + 2);
        c20 = _mm256_fmadd_ps(a0, bv, c20), c21 = _mm256_fmadd_ps(a1, bv, c21);
        bv = _mm256_broadcast_ss(b + 3);
        c30 = _mm256_fmadd_ps(a0, bv, c30), c31 = _mm256_fmadd_ps(a1, bv, c31);
        bv = _mm256_broadcast_ss(b + 4);
        c40 = _mm256_fmadd_ps(a0, bv, c40), c41 = _mm256_fmadd_ps(a1, bv, c41);
        bv = _mm256_broadcast_ss(b + 5);
        c50 = _mm256_fmadd_ps(a0, bv, c50), c51 = _mm256_fmadd_ps(a1, bv, c51);
    }
    acc[0] = c00, acc[1] = c01, acc[2] = c10, acc[3] = c11, acc[4] = c20, acc[5] = c21;
    acc[6] = c30, acc[7] = c31, acc[8] = c40, acc[9] = c41, acc[10] = c50, acc[11] = c51;
}

template <class A>
void float_micro(int64_t nq, const float* apf, const float* bp, float* c, int64_t ldc, int mv, int nv, bool accumulate,
                 const char* pf, int pf_lines) {
    constexpr int kAcc = 2 * kFloatNR;
    const typename A::T* ap = (const typename A::T*)apf;
    const int64_t as = a_slice_values<typename A::T>(nq), bs = nq * kFloatNR;  // between two lanes' slices
    if (accumulate)  // the outputs read back at the end
        for (int j = 0; j < nv; ++j) {
            _mm_prefetch((const char*)(c + j * ldc), _MM_HINT_T0);
            _mm_prefetch((const char*)(c + j * ldc + mv - 1), _MM_HINT_T0);
        }
    __m256 x[kAcc], y[kAcc], t0[kAcc];
    int pass = 0;
    // the tree's pairs: t_0 from lanes 0, 4 and 2, 6; t_1 from lanes 1, 5 and 3, 7
    auto pair = [&](int l, __m256* s) {
        for (int i = 0; i < 2; ++i, ++pass)  // a share of the prefetches before each pass
            for (int k = pass * pf_lines / 8; k < (pass + 1) * pf_lines / 8; ++k) _mm_prefetch(pf + k * 64, _MM_HINT_T0);
        lane_pass<A>(nq, ap + l * as, bp + l * bs, x);
        lane_pass<A>(nq, ap + (l + 4) * as, bp + (l + 4) * bs, s);
        for (int i = 0; i < kAcc; ++i) s[i] = _mm256_add_ps(x[i], s[i]);
    };
    pair(0, t0);
    pair(2, y);
    for (int i = 0; i < kAcc; ++i) t0[i] = _mm256_add_ps(t0[i], y[i]);
    __m256 t1[kAcc];
    pair(1, t1);
    pair(3, y);
    for (int i = 0; i < kAcc; ++i) y[i] = _mm256_add_ps(t0[i], _mm256_add_ps(t1[i], y[i]));
    if (mv == kFloatMR && nv == kFloatNR) {
        for (int j = 0; j < kFloatNR; ++j) {
            float* cj = c + j * ldc;
            for (int h = 0; h < 2; ++h) {
                const __m256 v = y[2 * j + h];
                _mm256_storeu_ps(cj + 8 * h, accumulate ? _mm256_add_ps(_mm256_loadu_ps(cj + 8 * h), v) : v);
            }
        }
        return;
    }
    alignas(32) float h[kAcc][kLanes];
    for (int i = 0; i < kAcc; ++i) _mm256_store_ps(h[i], y[i]);
    for (int j = 0; j < nv; ++j) {
        float* cj = c + j * ldc;
        for (int r = 0; r < mv; ++r) {
            const float v = h[2 * j + r / 8][r % 8];
            cj[r] = accumulate ? cj[r] + v : v;
        }
    }
}

// 8 x 8 transpose: out[l] lane r = in[r] lane l.
inline void transpose8(__m256* v) {
    const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
    const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
    const __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
    const __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)), u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)), u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    v[0] = _mm256_permute2f128_ps(u0, u4, 0x20), v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    v[1] = _mm256_permute2f128_ps(u1, u5, 0x20), v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    v[2] = _mm256_permute2f128_ps(u2, u6, 0x20), v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    v[3] = _mm256_permute2f128_ps(u3, u7, 0x20), v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// 8 x 8 transpose of 16-bit values: out[l] value r = in[r] value l.
inline void transpose8_epi16(__m128i* v) {
    __m128i a[8], b[8];
    for (int i = 0; i < 4; ++i) {  // a[2i], a[2i+1]: values 0-3 / 4-7 of rows 2i, 2i+1 interleaved
        a[2 * i] = _mm_unpacklo_epi16(v[2 * i], v[2 * i + 1]);
        a[2 * i + 1] = _mm_unpackhi_epi16(v[2 * i], v[2 * i + 1]);
    }
    for (int g = 0; g < 2; ++g) {  // b[4g + c]: values 2c, 2c + 1 of rows 4g .. 4g + 3
        const __m128i* x = a + 4 * g;
        b[4 * g + 0] = _mm_unpacklo_epi32(x[0], x[2]);
        b[4 * g + 1] = _mm_unpackhi_epi32(x[0], x[2]);
        b[4 * g + 2] = _mm_unpacklo_epi32(x[1], x[3]);
        b[4 * g + 3] = _mm_unpackhi_epi32(x[1], x[3]);
    }
    for (int c = 0; c < 4; ++c) {
        v[2 * c] = _mm_unpacklo_epi64(b[c], b[4 + c]);
        v[2 * c + 1] = _mm_unpackhi_epi64(b[c], b[4 + c]);
    }
}

// One weight panel of 16 rows in the layout above, through P: P::load / P::tail read a chunk of
// a row (8 values; the first n), P::transpose turns 8 of them into 8 lane vectors, P::store puts
// one at a value offset of the panel; with P::kPrefetch, the same row of the next panel is asked
// for (its first lines would otherwise miss before the hardware prefetcher catches up with a new
// stream).
template <class P>
void pack_rows(const void* a, size_t as, int rows, int64_t k0, int64_t kc, float* apf) {
    using T = typename P::T;
    T* ap = (T*)apf;
    const int64_t full = kc / kLanes, nq = (kc + kLanes - 1) / kLanes;
    const int tail = int(kc % kLanes);
    const int64_t slice = a_slice_values<T>(nq);
    for (int r0 = 0; r0 < kFloatMR; r0 += kLanes) {
        const char* row = (const char*)a + r0 * as;
        const int n = std::clamp(rows - r0, 0, kLanes);
        for (int64_t q = 0; q < nq; ++q) {
            typename P::Vec v[kLanes];
            for (int r = 0; r < kLanes; ++r) {
                const char* p = row + r * as;
                if (r >= n) {
                    v[r] = P::zero();
                } else if (q < full) {
                    if constexpr (P::kPrefetch) _mm_prefetch(p + kFloatMR * as + (k0 + q * kLanes) * P::kSize, _MM_HINT_T0);
                    v[r] = P::load(p, k0 + q * kLanes);
                } else {
                    v[r] = P::tail(p, k0 + q * kLanes, tail);
                }
            }
            P::transpose(v);
            for (int l = 0; l < kLanes; ++l) P::store(ap + l * slice + q * kFloatMR + r0, v[l]);
        }
    }
}

// Weights widened to f32 as they are read (W: WF32, WF16, WBF16), transposed as f32.
template <class W>
struct PackWidened {
    using T = float;
    using Vec = __m256;
    static constexpr int kSize = W::kSize;
    static constexpr bool kPrefetch = true;
    static Vec zero() { return _mm256_setzero_ps(); }
    static Vec load(const char* p, int64_t i) { return W::load(p, i); }
    static Vec tail(const char* p, int64_t i, int n) { return W::tail(p, i, n); }
    static void transpose(Vec* v) { transpose8(v); }
    static void store(float* o, Vec v) { _mm256_storeu_ps(o, v); }
};

// f16 weights for float_micro<F16A>: kept as f16, transposed as 16-bit values. No prefetch of
// the next panel's rows: the driver already fetches the next K block into L2 during the sweep,
// and the prefetches doubled the packing of a block from L2 (bench/float_gemm_phases f16 14336
// 128 4096: 14.2 -> 7.2 ms; from memory 14.8 -> 14.0 ms). The f32 / bf16 packing keeps them
// (without, 3-7% slower from memory).
struct PackF16 {
    using T = uint16_t;
    using Vec = __m128i;
    static constexpr int kSize = 2;
    static constexpr bool kPrefetch = false;
    static Vec zero() { return _mm_setzero_si128(); }
    static Vec load(const char* p, int64_t i) { return U16x8::load(p, i); }
    static Vec tail(const char* p, int64_t i, int n) { return U16x8::tail(p, i, n); }
    static void transpose(Vec* v) { transpose8_epi16(v); }
    static void store(uint16_t* o, Vec v) { _mm_storeu_si128((__m128i*)o, v); }
};

// A panel of whole K: block i (chunks [i * 64, ...), nq of them) starts at float i * 64 * 48 and
// holds the block's layout above; per chunk the six columns' vectors are transposed so that
// lane l's six values are stored together.
void pack_b(const float* const* cols, int64_t kq, float* bp) {
    for (int64_t q0 = 0; q0 < kq; q0 += kBlockChunks) {
        const int64_t nq = std::min(kBlockChunks, kq - q0);
        float* blk = bp + q0 * kFloatNR * kLanes;
        for (int64_t q = 0; q < nq; ++q) {
            __m256 v[kLanes];
            for (int j = 0; j < kLanes; ++j)
                v[j] = j < kFloatNR && cols[j] ? _mm256_loadu_ps(cols[j] + (q0 + q) * kLanes) : _mm256_setzero_ps();
            transpose8(v);
            for (int l = 0; l < kLanes; ++l) {
                float* out = blk + (l * nq + q) * kFloatNR;
                _mm_storeu_ps(out, _mm256_castps256_ps128(v[l]));
                _mm_storel_pi((__m64*)(out + 4), _mm256_extractf128_ps(v[l], 1));
            }
        }
    }
}

// MUL_MAT_ID's dots on float weights, in the same order (one row; two rows).
template <class W>
void dot_float(int64_t k, const void* a, const void* b, size_t bs, int nc, float* o, const float*) {
    float out[4 * 4];
    direct<W>(k, a, 0, 1, b, bs, nc, out);
    for (int j = 0; j < nc; ++j) o[j] = out[j];
}
template <class W>
void dot2_float(int64_t k, const void* a, size_t as, const void* b, size_t bs, int nc, float* o, const float*) {
    direct<W>(k, a, as, 2, b, bs, nc, o);  // out[r * 4 + c] is Dot2Fn's layout
}


void f16_to_f32(const void* src, float* dst, int64_t n) {
    const uint16_t* h = (const uint16_t*)src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(h + i))));
    for (; i < n; ++i) dst[i] = _cvtsh_ss(h[i]);
}
void round_f16(const void* src, float* dst, int64_t n) {
    const float* x = (const float*)src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; ++i) dst[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

// mul_mat activations (ties to even, as ggml); casts use mm_quantize_q8_0 (s.quantize_q8_0)
void quantize_q8_0_fn(const float* x, void* y, int64_t n) { mm_quantize_q8_0_even(x, (BlockQ8_0*)y, n); }

}  // namespace


}  // namespace pyggml::cpu::mm

#pragma GCC pop_options

// Built outside the target region: constructing the table must run on any CPU (the
// registry lists every set, detected or not).
namespace pyggml::cpu::mm {
const Kernels& kernels_avx2() {
    static const Kernels k = [] {
        Kernels s = kernels_scalar();  // types without a kernel here keep the previous set's
        s.isa = simd::Isa::Avx2;
        s.dot[(int)Type::F32] = dot_float<WF32>;
        s.dot[(int)Type::F16] = dot_float<WF16>;
        s.dot[(int)Type::BF16] = dot_float<WBF16>;
        s.dot2[(int)Type::F32] = dot2_float<WF32>;
        s.dot2[(int)Type::F16] = dot2_float<WF16>;
        s.dot2[(int)Type::BF16] = dot2_float<WBF16>;
        s.dot[(int)Type::Q8_0] = mm_dot_q8_0_fn;
        s.dot[(int)Type::Q4_0] = mm_dot_q4_0_fn;
        s.dot[(int)Type::NVFP4] = mm_dot_nvfp4_fn;
        s.quantize[(int)Type::Q8_0] = quantize_q8_0_fn;
        s.f16_to_f32 = f16_to_f32;
        s.round_f16 = round_f16;
        s.quantize_q8_0 = mm_quantize_q8_0;
        add_quant_dots_avx2(s);
        add_quant_dot2_avx2(s);
        return s;
    }();
    return k;
}
const FloatKernels& float_kernels_avx2() {
    static const FloatKernels k = [] {
        FloatKernels f{};
        f.lanes = kLanes;
        f.kb = kFloatKB;
        f.mr = kFloatMR;
        f.nr = kFloatNR;
        f.mc = 6 * kFloatMR;     // 96 x 512 f32 weights: 192 KiB in L2
        f.nc = 340 * kFloatNR;   // each packed weight block serves up to 2040 columns (packed once for most N)
        f.a_panel_pad = kLanes * kFloatSlicePad;
        f.direct[kFloatF32] = direct<WF32>;
        f.direct[kFloatF16] = direct<WF16>;
        f.direct[kFloatBF16] = direct<WBF16>;
        f.direct_f16b = direct<WF16, WF16>;
        f.micro = float_micro<F32A>;
        f.micro_f16 = float_micro<F16A>;
        f.pack_a[kFloatF32] = pack_rows<PackWidened<WF32>>;
        f.pack_a[kFloatF16] = pack_rows<PackF16>;
        f.pack_a[kFloatBF16] = pack_rows<PackWidened<WBF16>>;
        f.pack_b = pack_b;
        const int rows[] = {0, 8, 4, 4, 3};  // the largest tile that stays in 16 registers
        f.direct_cols = 3;
        for (int c = 0; c <= kMaxDirectCols; ++c) f.direct_rows[c] = rows[c];
        return f;
    }();
    return k;
}
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
const Kernels& kernels_avx2() { return kernels_scalar(); }
const FloatKernels& float_kernels_avx2() { return float_kernels_scalar(); }
}
#endif
