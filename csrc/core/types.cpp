// The type table, bit-exact F16/BF16 conversions, Q8_0/Q4_0 block (de)quantization.
#include "pyggml/types.h"

#include <cmath>
#include <cstring>

#include "pyggml/error.h"

namespace pyggml {

namespace {
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

// ---- the type table ----
template <class Block, void (*F)(const Block*, float*, int64_t)>
void to_float_as(const void* src, float* dst, int64_t n) { F((const Block*)src, dst, n); }
template <class Block, void (*F)(const float*, Block*, int64_t)>
void from_float_as(const float* src, void* dst, int64_t n) { F(src, (Block*)dst, n); }

void f32_to_float(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, n * 4); }
void f32_from_float(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, n * 4); }
void f16_to_float(const void* src, float* dst, int64_t n) {
    const uint16_t* s = (const uint16_t*)src;
    const float* tab = fp16_table().v;
    for (int64_t i = 0; i < n; ++i) dst[i] = tab[s[i]];
}
void f16_from_float(const float* src, void* dst, int64_t n) {
    uint16_t* d = (uint16_t*)dst;
    for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
}
void bf16_to_float(const void* src, float* dst, int64_t n) {
    const uint16_t* s = (const uint16_t*)src;
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
}
void bf16_from_float(const float* src, void* dst, int64_t n) {
    uint16_t* d = (uint16_t*)dst;
    for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
}

#define PG_PLAIN(id, name, size, to, from) {Type::id, {name, 1, size, false, true, Type::id, true, to, from, from}}
#define PG_BLOCK(id, name, qk, Block, codec, cpu_from, dot, weight)                                          \
    {Type::id, {name, qk, sizeof(Block), true, true, Type::dot, weight, to_float_as<Block, dequantize_row_##codec>, \
                from_float_as<Block, cpu_from>, from_float_as<Block, quantize_row_##codec##_ref>}}

struct Row { Type id; TypeTraits traits; };
const Row kRows[] = {
    PG_PLAIN(F32, "f32", 4, f32_to_float, f32_from_float),
    PG_PLAIN(F16, "f16", 2, f16_to_float, f16_from_float),
    PG_PLAIN(BF16, "bf16", 2, bf16_to_float, bf16_from_float),
    {Type::I32, {"i32", 1, 4, false, true, Type::I32, false, nullptr, nullptr, nullptr}},
    {Type::I64, {"i64", 1, 8, false, true, Type::I64, false, nullptr, nullptr, nullptr}},
    PG_BLOCK(Q4_0, "q4_0", 32, BlockQ4_0, q4_0, quantize_row_q4_0_ref, Q8_0, true),
    PG_BLOCK(Q4_1, "q4_1", 32, BlockQ4_1, q4_1, quantize_row_q4_1_ref, Q8_1, true),
    PG_BLOCK(Q5_0, "q5_0", 32, BlockQ5_0, q5_0, quantize_row_q5_0_ref, Q8_0, true),
    PG_BLOCK(Q5_1, "q5_1", 32, BlockQ5_1, q5_1, quantize_row_q5_1_ref, Q8_1, true),
    PG_BLOCK(Q8_0, "q8_0", 32, BlockQ8_0, q8_0, quantize_row_q8_0_cpu, Q8_0, true),
    PG_BLOCK(Q8_1, "q8_1", 32, BlockQ8_1, q8_1, quantize_row_q8_1_cpu, Q8_1, false),
    PG_BLOCK(Q2_K, "q2_K", 256, BlockQ2_K, q2_K, quantize_row_q2_K_ref, Q8_K, true),
    PG_BLOCK(Q3_K, "q3_K", 256, BlockQ3_K, q3_K, quantize_row_q3_K_ref, Q8_K, true),
    PG_BLOCK(Q4_K, "q4_K", 256, BlockQ4_K, q4_K, quantize_row_q4_K_ref, Q8_K, true),
    PG_BLOCK(Q5_K, "q5_K", 256, BlockQ5_K, q5_K, quantize_row_q5_K_ref, Q8_K, true),
    PG_BLOCK(Q6_K, "q6_K", 256, BlockQ6_K, q6_K, quantize_row_q6_K_ref, Q8_K, true),
    PG_BLOCK(Q8_K, "q8_K", 256, BlockQ8_K, q8_K, quantize_row_q8_K_ref, Q8_K, false),
    PG_BLOCK(IQ4_NL, "iq4_nl", 32, BlockIQ4NL, iq4_nl, quantize_row_iq4_nl_ref, Q8_0, true),
    PG_BLOCK(MXFP4, "mxfp4", 32, BlockMXFP4, mxfp4, quantize_row_mxfp4_ref, Q8_0, true),
    PG_BLOCK(NVFP4, "nvfp4", 64, BlockNVFP4, nvfp4, quantize_row_nvfp4_ref, Q8_0, true),
};
#undef PG_PLAIN
#undef PG_BLOCK

struct Table {
    TypeTraits by_id[kTypeIdLimit];
    Table() {
        for (auto& t : by_id) t = TypeTraits{"invalid", 1, 0, false, false, Type::F32, false, nullptr, nullptr, nullptr};
        for (const Row& r : kRows) by_id[(int)r.id] = r.traits;
    }
};
const Table& table() { static const Table t; return t; }
}  // namespace

const TypeTraits& type_traits(Type t) {
    const int id = (int)t;
    static const TypeTraits invalid{"invalid", 1, 0, false, false, Type::F32, false, nullptr, nullptr, nullptr};
    return id >= 0 && id < kTypeIdLimit ? table().by_id[id] : invalid;
}

int valid_types(Type* out) {
    int n = 0;
    for (int id = 0; id < kTypeIdLimit; ++id)
        if (table().by_id[id].is_valid) out[n++] = (Type)id;
    return n;
}

bool type_id_is_valid(int32_t id) {
    return id >= 0 && id < kTypeIdLimit && table().by_id[id].is_valid;
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
void to_float_row(Type t, const void* src, float* dst, int64_t n) {
    const TypeTraits& tt = type_traits(t);
    if (!tt.to_float) throw UnsupportedError(std::string("to_float: no conversion from ") + tt.name);
    tt.to_float(src, dst, n);
}

void from_float_row(Type t, const float* src, void* dst, int64_t n) {
    const TypeTraits& tt = type_traits(t);
    if (!tt.from_float) throw UnsupportedError(std::string("from_float: no conversion to ") + tt.name);
    tt.from_float(src, dst, n);
}

}  // namespace pyggml
