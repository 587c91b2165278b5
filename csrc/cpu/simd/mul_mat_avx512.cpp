// AVX-512 (F/BW/VL/DQ + VNNI) MUL_MAT kernels: 512-bit float dots (direct tiles; the packed GEMM
// is simd/float_gemm_avx512.cpp), VNNI integer dots for the block types (q8_0, q4_0, nvfp4 here;
// the others, the two-row dots and the GEMM tiles from simd/quant_*_avx512.cpp). Selected at
// run time (simd/isa.h).
#include <algorithm>
#include <cstring>

#include "cpu/mul_mat_float.h"
#include "cpu/mul_mat_kernels.h"
#include "cpu/simd/float_bf16_avx512.h"
#include "cpu/simd/float_gemm_avx512.h"

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
// sum of (u - off) * s per 4-byte group: the sign trick on u - off
inline __m256i mm_udot_offset(__m256i u, __m256i s, __m256i off) {
    const __m256i a = _mm256_sub_epi8(u, off);
    return mm_udot(_mm256_sign_epi8(a, a), _mm256_sign_epi8(s, a));
}
}  // namespace
#include "cpu/simd/mm_quant256.h"

namespace {

// ---- Float weights in the canonical order (cpu/mul_mat_float.h): 16 lanes, blocks of kFloatKB.
constexpr int kLanes = 16;
constexpr int64_t kFloatKB = kFloatKB512;

#include "cpu/simd/float_avx512.h"

// R rows x C columns read in place; the smaller side is held in registers, the other streamed.
template <class W, class B, int R, int C>
void direct_tile(int64_t k, const char* a, size_t as, const char* b, size_t bs, float* out) {
    float sum[R][C] = {};  // k == 0: zeros
    for (int64_t k0 = 0; k0 < k; k0 += kFloatKB) {
        const int64_t k1 = std::min(k, k0 + kFloatKB);
        __m512 acc[R][C];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
        auto step = [&](auto wload, auto bload) {
            if constexpr (R <= C) {
                __m512 av[R];
                for (int r = 0; r < R; ++r) av[r] = wload(a + r * as);
                for (int c = 0; c < C; ++c) {
                    const __m512 bv = bload(b + c * bs);
                    for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(av[r], bv, acc[r][c]);
                }
            } else {
                __m512 bv[C];
                for (int c = 0; c < C; ++c) bv[c] = bload(b + c * bs);
                for (int r = 0; r < R; ++r) {
                    const __m512 av = wload(a + r * as);
                    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(av, bv[c], acc[r][c]);
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
        add_tile_sums<R, C>(acc, sum, k0 == 0);
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) out[r * 4 + c] = sum[r][c];
}

template <class W, class B, int C>
void direct_rows(int64_t k, const char* a, size_t as, int rows, const char* b, size_t bs, float* out) {
    switch (rows) {
        case 1: direct_tile<W, B, 1, C>(k, a, as, b, bs, out); break;
        case 2: direct_tile<W, B, 2, C>(k, a, as, b, bs, out); break;
        case 3: direct_tile<W, B, 3, C>(k, a, as, b, bs, out); break;
        case 4: direct_tile<W, B, 4, C>(k, a, as, b, bs, out); break;
        case 8:
            if constexpr (C <= 2) {  // 8 or 16 independent chains
                direct_tile<W, B, 8, C>(k, a, as, b, bs, out);
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
    if (cols == 1 && row_at_a_time(as, W::kBytes)) {  // one row at a time (simd/float_gemm_avx512.h)
        for (int r = 0; r < rows; ++r) direct_tile<W, B, 1, 1>(k, ap + r * as, as, bp, bs, out + r * 4);
        return;
    }
    switch (cols) {
        case 1: direct_rows<W, B, 1>(k, ap, as, rows, bp, bs, out); break;
        case 2: direct_rows<W, B, 2>(k, ap, as, rows, bp, bs, out); break;
        case 3: direct_rows<W, B, 3>(k, ap, as, rows, bp, bs, out); break;
        default: direct_rows<W, B, 4>(k, ap, as, rows, bp, bs, out); break;
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
    direct<W>(k, a, as, 2, b, bs, nc, o);
}
// bf16 weights: the pair form where the CPU has it (the order MUL_MAT uses, mul_mat_float.h)
void dot_bf16(int64_t k, const void* a, const void* b, size_t bs, int nc, float* o, const float* aux) {
    if (simd::avx512_bf16()) dot_bf16_pairs(k, a, b, bs, nc, o, aux);
    else dot_float<WBF16>(k, a, b, bs, nc, o, aux);
}
void dot2_bf16(int64_t k, const void* a, size_t as, const void* b, size_t bs, int nc, float* o, const float* aux) {
    if (simd::avx512_bf16()) dot2_bf16_pairs(k, a, as, b, bs, nc, o, aux);
    else dot2_float<WBF16>(k, a, as, b, bs, nc, o, aux);
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
        s.dot[(int)Type::F32] = dot_float<WF32>;
        s.dot[(int)Type::F16] = dot_float<WF16>;
        s.dot[(int)Type::BF16] = dot_bf16;
        s.dot2[(int)Type::F32] = dot2_float<WF32>;
        s.dot2[(int)Type::F16] = dot2_float<WF16>;
        s.dot2[(int)Type::BF16] = dot2_bf16;
        s.dot[(int)Type::Q8_0] = mm_dot_q8_0_fn;
        s.dot[(int)Type::Q4_0] = mm_dot_q4_0_fn;
        s.dot[(int)Type::NVFP4] = mm_dot_nvfp4_fn;
        s.quantize[(int)Type::Q8_0] = quantize_q8_0_fn;
        add_quant_dots_avx512(s);  // every other block type, dot1x and the GEMM tiles (VNNI)
        add_quant_dot2_avx512(s);
        s.f16_to_f32 = f16_to_f32;
        s.round_f16 = round_f16;
        s.quantize_q8_0 = mm_quantize_q8_0;
        return s;
    }();
    return k;
}
const FloatKernels& float_kernels_avx512() {
    static const FloatKernels k = [] {
        FloatKernels f{};
        f.lanes = kLanes;
        f.kb = kFloatKB;
        f.direct[kFloatF32] = direct<WF32>;
        f.direct[kFloatF16] = direct<WF16>;
        f.direct[kFloatBF16] = direct<WBF16>;
        f.direct_f16b = direct<WF16, WF16>;
        float_gemm_avx512(f);
        const int rows[] = {0, 8, 8, 4, 4};
        f.direct_cols = 4;
        for (int c = 0; c <= kMaxDirectCols; ++c) f.direct_rows[c] = rows[c];
        return f;
    }();
    return k;
}
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
const Kernels& kernels_avx512() { return kernels_scalar(); }
const FloatKernels& float_kernels_avx512() { return float_kernels_scalar(); }
}
#endif
