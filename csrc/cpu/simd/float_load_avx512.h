// Float weight loaders of the AVX-512 float kernels: 16 weights as f32 (`tail`: the first n < 16,
// the rest zero). Included inside an avx512 target region (simd/mul_mat_avx512.cpp,
// simd/float_gemm_avx512.cpp), in an anonymous namespace.
#pragma once

inline __mmask16 tail_mask(int n) { return (__mmask16)((1u << n) - 1); }

struct WF32 {
    static __m512 load(const char* p, int64_t i) { return _mm512_loadu_ps((const float*)p + i); }
    static __m512 tail(const char* p, int64_t i, int n) { return _mm512_maskz_loadu_ps(tail_mask(n), (const float*)p + i); }
};
struct WF16 {
    static __m512 load(const char* p, int64_t i) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)((const uint16_t*)p + i))); }
    static __m512 tail(const char* p, int64_t i, int n) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(n), (const uint16_t*)p + i));
    }
};
struct WBF16 {
    static __m512 cvt(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
    static __m512 load(const char* p, int64_t i) { return cvt(_mm256_loadu_si256((const __m256i*)((const uint16_t*)p + i))); }
    static __m512 tail(const char* p, int64_t i, int n) { return cvt(_mm256_maskz_loadu_epi16(tail_mask(n), (const uint16_t*)p + i)); }
};
