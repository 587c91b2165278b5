// AVX2 + FMA + F16C MUL_MAT kernels (256-bit). Selected at run time (simd/isa.h).
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
}  // namespace
#include "cpu/simd/mm_quant256.h"

namespace {

// Loads 8 weights of each kind as f32.
struct LoadF32 { static __m256 load(const void* p, int64_t i) { return _mm256_loadu_ps((const float*)p + i); }
                 static float one(const void* p, int64_t i) { return ((const float*)p)[i]; } };
struct LoadF16 { static __m256 load(const void* p, int64_t i) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)((const uint16_t*)p + i))); }
                 static float one(const void* p, int64_t i) { return _cvtsh_ss(((const uint16_t*)p)[i]); } };
struct LoadBF16 { static __m256 load(const void* p, int64_t i) {
                      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)((const uint16_t*)p + i))), 16)); }
                  static float one(const void* p, int64_t i) { return bf16_to_fp32(((const uint16_t*)p)[i]); } };

template <class L, int NC>
void dot_float(int64_t k, const void* a, const void* bv, size_t bs, float* out) {
    const char* b = (const char*)bv;
    __m256 acc[NC][2];
    for (int j = 0; j < NC; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        const __m256 x0 = L::load(a, i), x1 = L::load(a, i + 8);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const float* y = (const float*)(b + j * bs) + i;
            acc[j][0] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(y), acc[j][0]);
            acc[j][1] = _mm256_fmadd_ps(x1, _mm256_loadu_ps(y + 8), acc[j][1]);
        }
    }
    for (; i + 8 <= k; i += 8) {
        const __m256 x0 = L::load(a, i);
        for (int j = 0; j < NC; ++j)
            acc[j][0] = _mm256_fmadd_ps(x0, _mm256_loadu_ps((const float*)(b + j * bs) + i), acc[j][0]);
    }
    for (int j = 0; j < NC; ++j) {
        float s = mm_hsum256(_mm256_add_ps(acc[j][0], acc[j][1]));
        const float* y = (const float*)(b + j * bs);
        for (int64_t t = i; t < k; ++t) s += L::one(a, t) * y[t];
        out[j] = s;
    }
}
template <int NC> struct DF32 { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o, const float*) { dot_float<LoadF32, NC>(k, a, b, bs, o); } };
template <int NC> struct DF16 { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o, const float*) { dot_float<LoadF16, NC>(k, a, b, bs, o); } };
template <int NC> struct DBF16 { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o, const float*) { dot_float<LoadBF16, NC>(k, a, b, bs, o); } };
void dot_f32(int64_t k, const void* a, const void* b, size_t bs, int nc, float* o, const float* x) { mm_dispatch_nc<DF32>(nc, k, a, b, bs, o, x); }
void dot_f16(int64_t k, const void* a, const void* b, size_t bs, int nc, float* o, const float* x) { mm_dispatch_nc<DF16>(nc, k, a, b, bs, o, x); }
void dot_bf16(int64_t k, const void* a, const void* b, size_t bs, int nc, float* o, const float* x) { mm_dispatch_nc<DBF16>(nc, k, a, b, bs, o, x); }

// 16 x 6 tile: 12 accumulators.
constexpr int MR = 16, NR = 6;
void micro(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, bool accumulate) {
    __m256 acc[NR][2];
#pragma GCC unroll 6
    for (int j = 0; j < NR; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; ++k, ap += MR, bp += NR) {
        const __m256 a0 = _mm256_loadu_ps(ap), a1 = _mm256_loadu_ps(ap + 8);
#pragma GCC unroll 6
        for (int j = 0; j < NR; ++j) {
            const __m256 bj = _mm256_broadcast_ss(bp + j);
            acc[j][0] = _mm256_fmadd_ps(a0, bj, acc[j][0]);
            acc[j][1] = _mm256_fmadd_ps(a1, bj, acc[j][1]);
        }
    }
#pragma GCC unroll 6
    for (int j = 0; j < NR; ++j) {
        float* cj = c + j * ldc;
        if (accumulate) {
            acc[j][0] = _mm256_add_ps(acc[j][0], _mm256_loadu_ps(cj));
            acc[j][1] = _mm256_add_ps(acc[j][1], _mm256_loadu_ps(cj + 8));
        }
        _mm256_storeu_ps(cj, acc[j][0]);
        _mm256_storeu_ps(cj + 8, acc[j][1]);
    }
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
        s.dot[(int)Type::F32] = dot_f32;
        s.dot[(int)Type::F16] = dot_f16;
        s.dot[(int)Type::BF16] = dot_bf16;
        s.dot[(int)Type::Q8_0] = mm_dot_q8_0_fn;
        s.dot[(int)Type::Q4_0] = mm_dot_q4_0_fn;
        s.dot[(int)Type::NVFP4] = mm_dot_nvfp4_fn;
        s.quantize[(int)Type::Q8_0] = quantize_q8_0_fn;
        s.mr = MR;
        s.nr = NR;
        s.micro = micro;
        s.f16_to_f32 = f16_to_f32;
        s.round_f16 = round_f16;
        s.quantize_q8_0 = mm_quantize_q8_0;
        add_quant_dots_avx2(s);
        add_quant_dequant_avx2(s);
        add_quant_dot2_avx2(s);
        return s;
    }();
    return k;
}
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
const Kernels& kernels_avx2() { return kernels_scalar(); }
}
#endif
