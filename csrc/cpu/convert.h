// Row and strided element conversions between f32/f16/bf16/i32 used by the copy, rows and
// misc kernels. Bit exact with the scalar rules of types.h; the contiguous f32 <-> f16/bf16
// rows go through a function table per SIMD level (simd/isa.h; the AVX2 one lives in
// simd/convert_avx2.cpp), the plain loops here stay the reference path.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu/mul_mat_kernels.h"
#include "pyggml/types.h"

namespace pyggml::cpu::conv {

// F32 -> I32 (pyggml's documented choice; ggml leaves it to the C cast): truncate toward zero; NaN -> 0;
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

// ---- contiguous rows: f32 -> f16 ----
inline void f32_to_f16_plain(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

inline void bf16_to_f32_row(const uint16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const uint32_t u = uint32_t(x[i]) << 16;
        std::memcpy(&y[i], &u, 4);
    }
}
inline void f16_to_f32_plain(const uint16_t* x, float* y, int64_t n) { to_float_row(Type::F16, x, y, n); }

// The contract every level implements: bit exact with the plain loops above.
struct ConvertOps {
    void (*f32_to_f16)(const float* x, uint16_t* y, int64_t n);
    void (*f32_to_bf16)(const float* x, uint16_t* y, int64_t n);
    void (*f16_to_f32)(const uint16_t* x, float* y, int64_t n);
};

const ConvertOps& convert_scalar();  // simd/convert_scalar.cpp
const ConvertOps& convert_avx2();    // simd/convert_avx2.cpp (the scalar table off x86)
// No AVX-512 variants: conversions are memory bound, the AVX2 table serves that level too.
inline const ConvertOps& kernels_for(simd::Isa l) {
    return l == simd::Isa::Scalar ? convert_scalar() : convert_avx2();
}

inline void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) {
    kernels_for(simd::cpu_isa()).f32_to_f16(x, y, n);
}
inline void f32_to_bf16_row(const float* x, uint16_t* y, int64_t n) {
    kernels_for(simd::cpu_isa()).f32_to_bf16(x, y, n);
}
inline void f16_to_f32_row(const uint16_t* x, float* y, int64_t n) {
    kernels_for(simd::cpu_isa()).f16_to_f32(x, y, n);
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
