// Type traits, bit-exact F16/BF16 conversions, Q8_0/Q4_0 block (de)quantization.
#include "pyggml/types.h"

#include <cmath>
#include <cstring>

#include "pyggml/error.h"

namespace pyggml {

namespace {
const TypeTraits kInvalid{"invalid", 1, 0, false, false};
const TypeTraits kF32{"f32", 1, 4, false, true};
const TypeTraits kF16{"f16", 1, 2, false, true};
const TypeTraits kBF16{"bf16", 1, 2, false, true};
const TypeTraits kI32{"i32", 1, 4, false, true};
const TypeTraits kI64{"i64", 1, 8, false, true};
const TypeTraits kQ8_0{"q8_0", 32, 34, true, true};
const TypeTraits kQ4_0{"q4_0", 32, 18, true, true};
const TypeTraits kNVFP4{"nvfp4", 64, 36, true, true};

inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// f16 -> f32 through a table built once: exact, and fast for the hot paths.
struct Fp16Table {
    float v[65536];
    Fp16Table() {
        for (uint32_t h = 0; h < 65536; ++h) {
            uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
            uint32_t bits;
            if (exp == 0) {
                if (man == 0) {
                    bits = sign;
                } else {  // subnormal: normalise
                    int e = -1;
                    do { ++e; man <<= 1; } while (!(man & 0x400));
                    bits = sign | (uint32_t(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
                }
            } else if (exp == 31) {
                bits = sign | 0x7f800000u | (man << 13);
            } else {
                bits = sign | ((exp + 112) << 23) | (man << 13);
            }
            v[h] = bits_f32(bits);
        }
    }
};
const Fp16Table& fp16_table() { static const Fp16Table t; return t; }
}  // namespace

const TypeTraits& type_traits(Type t) {
    switch (t) {
        case Type::F32: return kF32;
        case Type::F16: return kF16;
        case Type::BF16: return kBF16;
        case Type::I32: return kI32;
        case Type::I64: return kI64;
        case Type::Q8_0: return kQ8_0;
        case Type::Q4_0: return kQ4_0;
        case Type::NVFP4: return kNVFP4;
    }
    return kInvalid;
}

bool type_id_is_valid(int32_t id) {
    return type_traits(static_cast<Type>(id)).is_valid;
}

const char* type_name(Type t) { return type_traits(t).name; }

size_t row_size(Type t, int64_t ne0) {
    const TypeTraits& tt = type_traits(t);
    return tt.type_size * (size_t)(ne0 / tt.blck_size);
}

float fp16_to_fp32(uint16_t h) { return fp16_table().v[h]; }

uint16_t fp32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN -> quiet NaN
    if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u); // rounds to >= 65520 -> inf
    if (ax < 0x38800000u) {                                 // result is subnormal or zero
        // value * 2^24 rounded to nearest even gives the subnormal mantissa
        float v = bits_f32(ax);
        float scaled = v * 16777216.0f;  // exact (power of two)
        float r = std::nearbyint(scaled);  // default rounding mode: nearest even
        return uint16_t(sign | (uint32_t)r);
    }
    uint32_t mant_odd = (ax >> 13) & 1u;
    ax += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return uint16_t(sign | (ax >> 13));
}

uint16_t fp32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 64);  // quiet NaN
    return uint16_t((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

// ---- Q8_0 ----
void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* v = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(v[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        for (int j = 0; j < 32; ++j) y[b].qs[j] = (int8_t)std::round(v[j] * id);
    }
}

void quantize_row_q8_0_cpu(const float* x, BlockQ8_0* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* v = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(v[j]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[b].d = fp32_to_fp16(d);
        for (int j = 0; j < 32; ++j) y[b].qs[j] = (int8_t)std::round(v[j] * id);
    }
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < 32; ++j) y[b * 32 + j] = x[b].qs[j] * d;
    }
}

// ---- Q4_0 ----
void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* v = x + b * 32;
        float amax = 0.0f, m = 0.0f;
        for (int j = 0; j < 32; ++j) {
            if (amax < std::fabs(v[j])) { amax = std::fabs(v[j]); m = v[j]; }
        }
        const float d = m / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        for (int j = 0; j < 16; ++j) {
            const float x0 = v[j] * id, x1 = v[16 + j] * id;
            const uint8_t q0 = (uint8_t)std::min(15, (int)(x0 + 8.5f));
            const uint8_t q1 = (uint8_t)std::min(15, (int)(x1 + 8.5f));
            y[b].qs[j] = q0 | (uint8_t)(q1 << 4);
        }
    }
}

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < 16; ++j) {
            y[b * 32 + j] = ((x[b].qs[j] & 0x0f) - 8) * d;
            y[b * 32 + j + 16] = ((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

// ---- rows ----
bool has_to_float(Type t) {
    switch (t) {
        case Type::F32: case Type::F16: case Type::BF16: case Type::Q8_0: case Type::Q4_0:
        case Type::NVFP4: return true;
        default: return false;
    }
}

bool has_from_float(Type t) { return has_to_float(t); }

void to_float_row(Type t, const void* src, float* dst, int64_t n) {
    switch (t) {
        case Type::F32: std::memcpy(dst, src, n * 4); return;
        case Type::F16: {
            const uint16_t* s = (const uint16_t*)src;
            const float* tab = fp16_table().v;
            for (int64_t i = 0; i < n; ++i) dst[i] = tab[s[i]];
            return;
        }
        case Type::BF16: {
            const uint16_t* s = (const uint16_t*)src;
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
            return;
        }
        case Type::Q8_0: dequantize_row_q8_0((const BlockQ8_0*)src, dst, n); return;
        case Type::Q4_0: dequantize_row_q4_0((const BlockQ4_0*)src, dst, n); return;
        case Type::NVFP4: dequantize_row_nvfp4((const BlockNVFP4*)src, dst, n); return;
        default: break;
    }
    throw UnsupportedError(std::string("to_float: no conversion from ") + type_name(t));
}

void from_float_row(Type t, const float* src, void* dst, int64_t n) {
    switch (t) {
        case Type::F32: std::memcpy(dst, src, n * 4); return;
        case Type::F16: {
            uint16_t* d = (uint16_t*)dst;
            for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
            return;
        }
        case Type::BF16: {
            uint16_t* d = (uint16_t*)dst;
            for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
            return;
        }
        case Type::Q8_0: quantize_row_q8_0_cpu(src, (BlockQ8_0*)dst, n); return;
        case Type::Q4_0: quantize_row_q4_0_ref(src, (BlockQ4_0*)dst, n); return;
        case Type::NVFP4: quantize_row_nvfp4_ref(src, (BlockNVFP4*)dst, n); return;
        default: break;
    }
    throw UnsupportedError(std::string("from_float: no conversion to ") + type_name(t));
}

}  // namespace pyggml
