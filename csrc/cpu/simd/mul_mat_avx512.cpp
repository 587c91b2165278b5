// AVX-512 (F/BW/VL/DQ + VNNI) MUL_MAT kernels: 512-bit float dots, a 32 x 12 GEMM
// micro-kernel, VNNI integer dots for the block types. Selected at run time (simd/isa.h).
#include "cpu/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#pragma GCC push_options
// GCC 12 flags the _mm512_undefined_* inside its own intrinsic headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

namespace pyggml::cpu::mm {

namespace {
inline __m256i mm_udot(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
}  // namespace
#include "cpu/simd/mm_quant256.h"

namespace {

// Loads 16 weights (or the first `m` of them under a mask) as f32.
struct LoadF32 {
    static constexpr int kSize = 4;
    static __m512 load(const void* p, int64_t i) { return _mm512_loadu_ps((const float*)p + i); }
    static __m512 load(const void* p, int64_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, (const float*)p + i); }
};
struct LoadF16 {
    static constexpr int kSize = 2;
    static __m512 load(const void* p, int64_t i) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)((const uint16_t*)p + i))); }
    static __m512 load(const void* p, int64_t i, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t*)p + i)); }
};
struct LoadBF16 {
    static constexpr int kSize = 2;
    static __m512 cvt(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
    static __m512 load(const void* p, int64_t i) { return cvt(_mm256_loadu_si256((const __m256i*)((const uint16_t*)p + i))); }
    static __m512 load(const void* p, int64_t i, __mmask16 m) { return cvt(_mm256_maskz_loadu_epi16(m, (const uint16_t*)p + i)); }
};

template <class L, int NC>
void dot_float(int64_t k, const void* a, const void* bv, size_t bs, float* out) {
    const char* b = (const char*)bv;
    __m512 acc[NC][2];
    for (int j = 0; j < NC; ++j) acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
        // the weights stream from memory once: prefetch ~1 KiB ahead (more misses in flight)
        const char* pa = (const char*)a + i * L::kSize;
        _mm_prefetch(pa + 1024, _MM_HINT_T0);
        if (L::kSize == 4) _mm_prefetch(pa + 1088, _MM_HINT_T0);
        const __m512 x0 = L::load(a, i), x1 = L::load(a, i + 16);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const float* y = (const float*)(b + j * bs) + i;
            acc[j][0] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(y), acc[j][0]);
            acc[j][1] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(y + 16), acc[j][1]);
        }
    }
    for (; i < k; i += 16) {
        const __mmask16 m = k - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (k - i)) - 1);
        const __m512 x0 = L::load(a, i, m);
        for (int j = 0; j < NC; ++j)
            acc[j][0] = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(m, (const float*)(b + j * bs) + i), acc[j][0]);
    }
    for (int j = 0; j < NC; ++j) out[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]));
}
template <int NC> struct DF32 { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o, const float*) { dot_float<LoadF32, NC>(k, a, b, bs, o); } };
template <int NC> struct DF16 { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o, const float*) { dot_float<LoadF16, NC>(k, a, b, bs, o); } };
template <int NC> struct DBF16 { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o, const float*) { dot_float<LoadBF16, NC>(k, a, b, bs, o); } };
void dot_f32(int64_t k, const void* a, const void* b, size_t bs, int nc, float* o, const float* x) { mm_dispatch_nc<DF32>(nc, k, a, b, bs, o, x); }
void dot_f16(int64_t k, const void* a, const void* b, size_t bs, int nc, float* o, const float* x) { mm_dispatch_nc<DF16>(nc, k, a, b, bs, o, x); }
void dot_bf16(int64_t k, const void* a, const void* b, size_t bs, int nc, float* o, const float* x) { mm_dispatch_nc<DBF16>(nc, k, a, b, bs, o, x); }

// 32 x 12 tile: 24 zmm accumulators, 2 zmm of A, broadcasts of B from memory.
constexpr int MR = 32, NR = 12;
void micro(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, bool accumulate) {
    __m512 acc[NR][2];
#pragma GCC unroll 12
    for (int j = 0; j < NR; ++j) acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; ++k, ap += MR, bp += NR) {
        const __m512 a0 = _mm512_loadu_ps(ap), a1 = _mm512_loadu_ps(ap + 16);
        _mm_prefetch((const char*)(ap + 8 * MR), _MM_HINT_T0);
#pragma GCC unroll 12
        for (int j = 0; j < NR; ++j) {
            const __m512 bj = _mm512_set1_ps(bp[j]);
            acc[j][0] = _mm512_fmadd_ps(a0, bj, acc[j][0]);
            acc[j][1] = _mm512_fmadd_ps(a1, bj, acc[j][1]);
        }
    }
#pragma GCC unroll 12
    for (int j = 0; j < NR; ++j) {
        float* cj = c + j * ldc;
        if (accumulate) {
            acc[j][0] = _mm512_add_ps(acc[j][0], _mm512_loadu_ps(cj));
            acc[j][1] = _mm512_add_ps(acc[j][1], _mm512_loadu_ps(cj + 16));
        }
        _mm512_storeu_ps(cj, acc[j][0]);
        _mm512_storeu_ps(cj + 16, acc[j][1]);
    }
}

void f16_to_f32(const void* src, float* dst, int64_t n) {
    const uint16_t* h = (const uint16_t*)src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(h + i))));
    for (; i < n; ++i) dst[i] = _cvtsh_ss(h[i]);
}
void round_f16(const void* src, float* dst, int64_t n) {
    const float* x = (const float*)src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; ++i) dst[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

// mul_mat activations (ties to even, as ggml); casts use mm_quantize_q8_0 (s.quantize_q8_0)
void quantize_q8_0_fn(const float* x, void* y, int64_t n) { mm_quantize_q8_0_even(x, (BlockQ8_0*)y, n); }

}  // namespace


}  // namespace pyggml::cpu::mm

#pragma GCC diagnostic pop
#pragma GCC pop_options

// Built outside the target region: constructing the table must run on any CPU (the
// registry lists every set, detected or not).
namespace pyggml::cpu::mm {
const Kernels& kernels_avx512() {
    static const Kernels k = [] {
        Kernels s = kernels_avx2();  // types without a kernel here keep the previous set's
        s.isa = simd::Isa::Avx512;
        s.dot[(int)Type::F32] = dot_f32;
        s.dot[(int)Type::F16] = dot_f16;
        s.dot[(int)Type::BF16] = dot_bf16;
        s.dot[(int)Type::Q8_0] = mm_dot_q8_0_fn;
        s.dot[(int)Type::Q4_0] = mm_dot_q4_0_fn;
        s.dot[(int)Type::NVFP4] = mm_dot_nvfp4_fn;
        s.dot2[(int)Type::Q8_0] = s.dot2[(int)Type::Q4_0] = nullptr;  // this set's own dots, row by row
        s.quantize[(int)Type::Q8_0] = quantize_q8_0_fn;
        s.mr = MR;
        s.nr = NR;
        s.micro = micro;
        s.f16_to_f32 = f16_to_f32;
        s.round_f16 = round_f16;
        s.quantize_q8_0 = mm_quantize_q8_0;
        return s;
    }();
    return k;
}
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
const Kernels& kernels_avx512() { return kernels_scalar(); }
}
#endif
