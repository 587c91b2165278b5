// AVX2 + F16C row conversions (the ConvertOps contract of cpu/convert.h).
#include "cpu/convert.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,f16c")

namespace pyggml::cpu::conv {

namespace {
void f32_to_bf16_avx2(const float* x, uint16_t* y, int64_t n) {
    int64_t i = 0;
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), qb = _mm256_set1_epi32(64);
    for (; i + 16 <= n; i += 16) {
        __m256i r2[2];
        for (int h = 0; h < 2; ++h) {
            const __m256i u = _mm256_loadu_si256((const __m256i*)(x + i + 8 * h));
            const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
            const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), lsb), 16);
            const __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), qb);
            const __m256i isnan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absm), inf);
            r2[h] = _mm256_blendv_epi8(r, q, isnan);
        }
        // pack 2x8 u32 (values < 65536) to 16 u16, fixing the lane interleave
        const __m256i packed = _mm256_packus_epi32(r2[0], r2[1]);
        _mm256_storeu_si256((__m256i*)(y + i), _mm256_permute4x64_epi64(packed, 0xD8));
    }
    for (; i < n; ++i) y[i] = bf16_bits(x[i]);
}

// F16C rounds to nearest even, overflows to inf and produces subnormals like fp32_to_fp16 (types.h); only
// NaN differs (hardware keeps payload bits), so blocks holding a NaN take the scalar path.
void f32_to_f16_f16c(const float* x, uint16_t* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            for (int j = 0; j < 8; ++j) y[i + j] = fp32_to_fp16(x[i + j]);
        } else {
            _mm_storeu_si128((__m128i*)(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
    }
    for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

// F16C widening is exact except that it quiets signalling NaNs; chunks holding an inf/NaN
// pattern take the table path so NaN payloads stay bit exact.
void f16_to_f32_f16c(const uint16_t* x, float* y, int64_t n) {
    int64_t i = 0;
    const __m128i expm = _mm_set1_epi16(0x7c00);
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128((const __m128i*)(x + i));
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, expm), expm))) {
            to_float_row(Type::F16, x + i, y + i, 8);
        } else {
            _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
        }
    }
    if (i < n) to_float_row(Type::F16, x + i, y + i, n - i);
}
}  // namespace

const ConvertOps& convert_avx2() {
    static const ConvertOps k{f32_to_f16_f16c, f32_to_bf16_avx2, f16_to_f32_f16c};
    return k;
}

}  // namespace pyggml::cpu::conv

#pragma GCC pop_options
#else
namespace pyggml::cpu::conv {
const ConvertOps& convert_avx2() { return convert_scalar(); }
}
#endif
