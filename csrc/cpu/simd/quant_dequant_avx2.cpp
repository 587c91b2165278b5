// AVX2 dequantization of the newer block types' weight rows for the GEMM path, bit exact with
// the type table's to_float (the same products and subtractions, in the same order).
#include <cstring>

#include "cpu/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace pyggml::cpu::mm {
#include "cpu/simd/quant_decode_avx2.h"

namespace {

// ---- dequantization of weight rows for the GEMM path (bit exact with the type table's) ----
// 32 int8 values times d.
inline void store_scaled(__m256i v, __m256 d, float* y) {
    const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
}
// 16 unsigned levels (bytes 0..15 of v) as l * a - b, with a separate multiply and subtract.
inline void store_affine16(__m128i v, __m256 a, __m256 b, float* y) {
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)), a), b));
    _mm256_storeu_ps(y + 8, _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))), a), b));
}

template <class Dec>
void dequant_signed(const void* src, float* y, int64_t n) {
    const typename Dec::Block* x = (const typename Dec::Block*)src;
    for (int64_t ib = 0; ib < n / 32; ++ib, y += 32) {
        float d;
        const __m256i v = Dec::values(x[ib], d);
        store_scaled(v, _mm256_set1_ps(d), y);
    }
}

// q4_1 / q5_1: l * d + m (the table computes it as a multiply, then an add).
template <class Dec>
void dequant_with_min(const void* src, float* y, int64_t n) {
    const typename Dec::Block* x = (const typename Dec::Block*)src;
    for (int64_t ib = 0; ib < n / 32; ++ib, y += 32) {
        const __m256i u = Dec::levels(x[ib]);
        const __m256 d = _mm256_set1_ps(f16(x[ib].d)), m = _mm256_set1_ps(-f16(x[ib].m));
        store_affine16(_mm256_castsi256_si128(u), d, m, y);
        store_affine16(_mm256_extracti128_si256(u, 1), d, m, y + 16);
    }
}

// K-quants: value = (d * sc) * (u - off) - dmin * m; the offset is folded into the levels
// (small integers, exact) so each value is one multiply and one subtract, as in the table.
template <class Unp>
void dequant_kquant(const void* src, float* y, int64_t n) {
    const typename Unp::Block* x = (const typename Unp::Block*)src;
    KBlock w;
    alignas(16) int8_t sc[16];
    alignas(16) uint8_t mn[16];
    for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
        Unp::run(x[ib], w);
        _mm_store_si128((__m128i*)sc, w.scales);
        _mm_store_si128((__m128i*)mn, w.mins);
        const int off = Unp::kOffShift >= 0 ? 1 << Unp::kOffShift : 0;
        for (int c = 0; c < 8; ++c, y += 32) {
            const __m256i v = _mm256_sub_epi8(w.u[c], _mm256_set1_epi8((char)off));  // signed now
            const __m128i half[2] = {_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)};
            for (int h = 0; h < 2; ++h) {
                const int g = 2 * c + h;
                const __m256 a = _mm256_set1_ps(w.d * sc[g]);
                const __m256 b = _mm256_set1_ps(w.dmin * mn[g]);
                float* out = y + 16 * h;
                _mm256_storeu_ps(out, _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(half[h])), a), b));
                _mm256_storeu_ps(out + 8, _mm256_sub_ps(_mm256_mul_ps(
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(half[h], 8))), a), b));
            }
        }
    }
}

}  // namespace

}  // namespace pyggml::cpu::mm

#pragma GCC pop_options

// Outside the target region: filling the table must run on any CPU.
namespace pyggml::cpu::mm {
void add_quant_dequant_avx2(Kernels& k) {
    k.dequant[(int)Type::Q4_1] = dequant_with_min<DecQ4_1>;
    k.dequant[(int)Type::Q5_1] = dequant_with_min<DecQ5_1>;
    k.dequant[(int)Type::Q5_0] = dequant_signed<DecQ5_0>;
    k.dequant[(int)Type::IQ4_NL] = dequant_signed<DecIQ4NL>;
    k.dequant[(int)Type::MXFP4] = dequant_signed<DecMXFP4>;
    k.dequant[(int)Type::Q2_K] = dequant_kquant<UnpQ2_K>;
    k.dequant[(int)Type::Q3_K] = dequant_kquant<UnpQ3_K>;
    k.dequant[(int)Type::Q4_K] = dequant_kquant<UnpQ4_K>;
    k.dequant[(int)Type::Q5_K] = dequant_kquant<UnpQ5_K>;
    k.dequant[(int)Type::Q6_K] = dequant_kquant<UnpQ6_K>;
}
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
void add_quant_dequant_avx2(Kernels&) {}
}  // namespace pyggml::cpu::mm
#endif
