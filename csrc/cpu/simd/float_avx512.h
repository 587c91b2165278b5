// Shared pieces of the AVX-512 float kernels: the horizontal-sum tree of the canonical order and
// the weight loaders (16 weights as f32; `tail`: the first n < 16, the rest zero). Included
// inside an avx512 target region (simd/mul_mat_avx512.cpp, simd/float_gemm_avx512.cpp,
// simd/float_bf16_avx512.cpp), in an anonymous namespace.
#pragma once

// Horizontal sums of four accumulators, lane r of the result from v_r, by one tree: the two
// 256-bit halves added (u_i = v_i + v_{i+8}), then s_i = u_i + u_{i+4}; t_0 = s_0 + s_2,
// t_1 = s_1 + s_3; y = t_0 + t_1.
inline __m256 fold(__m512 v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }
inline __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
    const __m256 ua = fold(a), ub = fold(b), uc = fold(c), ud = fold(d);
    const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(ua, ub, 0x20), _mm256_permute2f128_ps(ua, ub, 0x31));
    const __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(uc, ud, 0x20), _mm256_permute2f128_ps(uc, ud, 0x31));
    const __m256 t = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 y = _mm256_add_ps(_mm256_shuffle_ps(t, t, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(t, t, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm_unpacklo_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
}

// A direct tile's accumulators folded into its running sums, four rows per tree (one order
// for every direct tile, so f32 and bf16 forms share it).
template <int R, int C>
inline void add_tile_sums(const __m512 (&acc)[R][C], float (&sum)[R][C], bool first) {
    for (int c = 0; c < C; ++c)
        for (int r0 = 0; r0 < R; r0 += 4) {
            alignas(16) float h[4];
            _mm_store_ps(h, hsum4(acc[r0][c], acc[std::min(r0 + 1, R - 1)][c], acc[std::min(r0 + 2, R - 1)][c],
                                  acc[std::min(r0 + 3, R - 1)][c]));
            for (int r = r0; r < std::min(r0 + 4, R); ++r) sum[r][c] = first ? h[r - r0] : sum[r][c] + h[r - r0];
        }
}

inline __mmask16 tail_mask(int n) { return (__mmask16)((1u << n) - 1); }

struct WF32 {
    static constexpr size_t kBytes = 4;
    static __m512 load(const char* p, int64_t i) { return _mm512_loadu_ps((const float*)p + i); }
    static __m512 tail(const char* p, int64_t i, int n) { return _mm512_maskz_loadu_ps(tail_mask(n), (const float*)p + i); }
};
struct WF16 {
    static constexpr size_t kBytes = 2;
    static __m512 load(const char* p, int64_t i) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)((const uint16_t*)p + i))); }
    static __m512 tail(const char* p, int64_t i, int n) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(n), (const uint16_t*)p + i));
    }
};
struct WBF16 {
    static constexpr size_t kBytes = 2;
    static __m512 cvt(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
    static __m512 load(const char* p, int64_t i) { return cvt(_mm256_loadu_si256((const __m256i*)((const uint16_t*)p + i))); }
    static __m512 tail(const char* p, int64_t i, int n) { return cvt(_mm256_maskz_loadu_epi16(tail_mask(n), (const uint16_t*)p + i)); }
};
