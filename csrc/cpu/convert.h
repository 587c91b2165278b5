// Row and strided element conversions between f32/f16/bf16/i32 used by the copy, rows and
// misc kernels. Bit exact with the scalar rules of spec 1.4 (types.h); the contiguous
// f32 -> f16/bf16 rows have AVX2 variants picked at run time (the plain loops stay the
// reference path).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu/mul_mat_kernels.h"
#include "pyggml/types.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PYGGML_CONVERT_X86 1
#endif

namespace pyggml::cpu::conv {

// F32 -> I32 (pyggml's documented choice, spec 3.2): truncate toward zero; NaN -> 0;
// values >= 2^31 (and +inf) -> INT32_MAX, values < -2^31 (and -inf) -> INT32_MIN.
inline int32_t f32_to_i32(float x) {
    if (x != x) return 0;
    if (x >= 2147483648.0f) return INT32_MAX;
    if (x < -2147483648.0f) return INT32_MIN;
    return (int32_t)x;
}

inline uint16_t bf16_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint32_t q = (u >> 16) | 64u;                          // NaN: keep upper bits, quiet
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;   // round to nearest even
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

// ---- contiguous rows: f32 -> bf16 ----
inline void f32_to_bf16_plain(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = bf16_bits(x[i]);
}
#ifdef PYGGML_CONVERT_X86
__attribute__((target("avx2"))) inline void f32_to_bf16_avx2(const float* x, uint16_t* y, int64_t n) {
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
#endif

// ---- contiguous rows: f32 -> f16 ----
inline void f32_to_f16_plain(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}
#ifdef PYGGML_CONVERT_X86
// F16C rounds to nearest even, overflows to inf and produces subnormals like spec 1.4; only
// NaN differs (hardware keeps payload bits), so blocks holding a NaN take the scalar path.
__attribute__((target("avx2,f16c"))) inline void f32_to_f16_f16c(const float* x, uint16_t* y, int64_t n) {
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
#endif

using RowFn16 = void (*)(const float*, uint16_t*, int64_t);

inline RowFn16 pick_f32_to_f16() {
#ifdef PYGGML_CONVERT_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return f32_to_f16_f16c;
#endif
    return f32_to_f16_plain;
}
inline RowFn16 pick_f32_to_bf16() {
#ifdef PYGGML_CONVERT_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) return f32_to_bf16_avx2;
#endif
    return f32_to_bf16_plain;
}

inline void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) {
    static const RowFn16 fn = pick_f32_to_f16();
    fn(x, y, n);
}
inline void f32_to_bf16_row(const float* x, uint16_t* y, int64_t n) {
    static const RowFn16 fn = pick_f32_to_bf16();
    fn(x, y, n);
}
inline void bf16_to_f32_row(const uint16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const uint32_t u = uint32_t(x[i]) << 16;
        std::memcpy(&y[i], &u, 4);
    }
}
inline void f16_to_f32_plain(const uint16_t* x, float* y, int64_t n) { to_float_row(Type::F16, x, y, n); }
#ifdef PYGGML_CONVERT_X86
// F16C widening is exact except that it quiets signalling NaNs; chunks holding an inf/NaN
// pattern take the table path so NaN payloads stay bit exact.
__attribute__((target("avx2,f16c"))) inline void f16_to_f32_f16c(const uint16_t* x, float* y, int64_t n) {
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
#endif
using RowFnF16In = void (*)(const uint16_t*, float*, int64_t);
inline RowFnF16In pick_f16_to_f32() {
#ifdef PYGGML_CONVERT_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return f16_to_f32_f16c;
#endif
    return f16_to_f32_plain;
}
inline void f16_to_f32_row(const uint16_t* x, float* y, int64_t n) {
    static const RowFnF16In fn = pick_f16_to_f32();
    fn(x, y, n);
}

// from_float_row (types.h) with the fast row converters where one exists.
inline void from_float_row_fast(Type t, const float* x, void* y, int64_t n) {
    if (t == Type::Q8_0) {  // the SIMD row quantizer of mul_mat (bit exact with quantize_row_q8_0_cpu)
        mm::kernels_for(simd::cpu_isa()).quantize_q8_0(x, (BlockQ8_0*)y, n);
    } else if (t == Type::F16) {
        f32_to_f16_row(x, (uint16_t*)y, n);
    } else if (t == Type::BF16) {
        f32_to_bf16_row(x, (uint16_t*)y, n);
    } else {
        from_float_row(t, x, y, n);
    }
}

// ---- scalar loads/stores by type (f32, f16, bf16, i32) ----
inline float load_f32(Type t, const char* p) {
    switch (t) {
        case Type::F32: { float v; std::memcpy(&v, p, 4); return v; }
        case Type::F16: { uint16_t h; std::memcpy(&h, p, 2); return fp16_to_fp32(h); }
        case Type::BF16: { uint16_t h; std::memcpy(&h, p, 2); return bf16_to_fp32(h); }
        case Type::I32: { int32_t v; std::memcpy(&v, p, 4); return (float)v; }
        default: return 0.0f;
    }
}

template <class U>
inline void copy_units(const char* s, size_t ss, char* d, size_t ds, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        U v;
        std::memcpy(&v, s + i * ss, sizeof(U));
        std::memcpy(d + i * ds, &v, sizeof(U));
    }
}

// Raw copy of n units of `es` bytes with any strides (memmove when both are packed).
inline void copy_strided(size_t es, const char* s, size_t ss, char* d, size_t ds, int64_t n) {
    if (ss == es && ds == es) { std::memmove(d, s, (size_t)n * es); return; }
    switch (es) {
        case 2: copy_units<uint16_t>(s, ss, d, ds, n); return;
        case 4: copy_units<uint32_t>(s, ss, d, ds, n); return;
        case 8: copy_units<uint64_t>(s, ss, d, ds, n); return;
        default:
            for (int64_t i = 0; i < n; ++i) std::memmove(d + i * ds, s + i * ss, es);
    }
}

template <class Load, class Store>
inline void convert_loop(const char* s, size_t ss, char* d, size_t ds, int64_t n, Load ld, Store st) {
    for (int64_t i = 0; i < n; ++i) st(d + i * ds, ld(s + i * ss));
}

template <class Store>
inline void convert_from(Type st, const char* s, size_t ss, char* d, size_t ds, int64_t n, Store store) {
    switch (st) {
        case Type::F32:
            convert_loop(s, ss, d, ds, n, [](const char* p) { float v; std::memcpy(&v, p, 4); return v; }, store);
            return;
        case Type::F16:
            convert_loop(s, ss, d, ds, n, [](const char* p) { uint16_t h; std::memcpy(&h, p, 2); return fp16_to_fp32(h); }, store);
            return;
        case Type::BF16:
            convert_loop(s, ss, d, ds, n, [](const char* p) { uint16_t h; std::memcpy(&h, p, 2); return bf16_to_fp32(h); }, store);
            return;
        case Type::I32:
            convert_loop(s, ss, d, ds, n, [](const char* p) { int32_t v; std::memcpy(&v, p, 4); return (float)v; }, store);
            return;
        default: return;
    }
}

// Strided conversion of n elements between two non-block types (src -> dst), any strides.
// Same-type pairs are raw byte copies (bit exact, NaN payloads kept). Callers check the pair
// is supported (f32/f16/bf16 among themselves, f32 <-> i32).
inline void convert_strided(Type st, const char* s, size_t ss, Type dt, char* d, size_t ds, int64_t n) {
    if (st == dt) { copy_strided(type_size(st), s, ss, d, ds, n); return; }
    if (ss == type_size(st) && ds == type_size(dt)) {
        if (st == Type::F32 && dt == Type::F16) { f32_to_f16_row((const float*)s, (uint16_t*)d, n); return; }
        if (st == Type::F32 && dt == Type::BF16) { f32_to_bf16_row((const float*)s, (uint16_t*)d, n); return; }
        if (st == Type::F16 && dt == Type::F32) { f16_to_f32_row((const uint16_t*)s, (float*)d, n); return; }
        if (st == Type::BF16 && dt == Type::F32) { bf16_to_f32_row((const uint16_t*)s, (float*)d, n); return; }
    }
    switch (dt) {
        case Type::F32:
            convert_from(st, s, ss, d, ds, n, [](char* p, float v) { std::memcpy(p, &v, 4); });
            return;
        case Type::F16:
            convert_from(st, s, ss, d, ds, n, [](char* p, float v) { uint16_t h = fp32_to_fp16(v); std::memcpy(p, &h, 2); });
            return;
        case Type::BF16:
            convert_from(st, s, ss, d, ds, n, [](char* p, float v) { uint16_t h = bf16_bits(v); std::memcpy(p, &h, 2); });
            return;
        case Type::I32:
            convert_from(st, s, ss, d, ds, n, [](char* p, float v) { int32_t i = f32_to_i32(v); std::memcpy(p, &i, 4); });
            return;
        default: return;
    }
}

// Contiguous conversion of n elements (float-convertible non-block types).
inline void convert_contig(Type st, const void* s, Type dt, void* d, int64_t n) {
    convert_strided(st, (const char*)s, type_size(st), dt, (char*)d, type_size(dt), n);
}

}  // namespace pyggml::cpu::conv
