// Tensor element types: one table row per type (traits, conversions), scalar conversions.
#pragma once
#include <cstddef>
#include <cstdint>

namespace pyggml {

// Numbering follows ggml so GGUF type ids map directly.
enum class Type : int32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ4_NL = 20,
    I32 = 26, I64 = 27, BF16 = 30, MXFP4 = 39, NVFP4 = 40,
};
constexpr int kTypeIdLimit = 43;

using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);      // n: multiple of blck_size
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);

// One row of the type table (what ggml splits into type_traits and type_traits_cpu's
// from_float / vec_dot_type; the CPU mul_mat kernels per type live in cpu/mul_mat_kernels.h).
struct TypeTraits {
    const char* name;      // ggml spelling: "f32", "q8_0", "q4_K", ...
    int64_t blck_size;     // elements per block (1 for plain types)
    size_t type_size;      // bytes per block
    bool is_quantized;
    bool is_valid;         // implemented by pyggml
    Type vec_dot_type;     // the layout mul_mat converts activations to for weights of this type
    bool is_weight;        // mul_mat / flash attention may read it (false for activation-only q8_1/q8_K)
    ToFloatFn to_float;          // null for i32/i64
    FromFloatFn from_float;      // the CPU quantizer behind cpy / set_rows
    FromFloatFn from_float_ref;  // ggml's reference quantizer (equal to from_float except q8_0)
};

const TypeTraits& type_traits(Type t);
bool type_id_is_valid(int32_t id);
const char* type_name(Type t);
inline int64_t blck_size(Type t) { return type_traits(t).blck_size; }
inline size_t type_size(Type t) { return type_traits(t).type_size; }
inline bool is_quantized(Type t) { return type_traits(t).is_quantized; }
inline Type vec_dot_type(Type t) { return type_traits(t).vec_dot_type; }
size_t row_size(Type t, int64_t ne0);  // requires ne0 % blck_size == 0
// Every valid type, in id order.
int valid_types(Type* out);  // out has room for kTypeIdLimit entries; returns the count

// ---- scalar conversions (bit exact) ----
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
inline float bf16_to_fp32(uint16_t h) {
    uint32_t u = uint32_t(h) << 16; float f; __builtin_memcpy(&f, &u, 4); return f;
}
uint16_t fp32_to_bf16(float f);

// ---- row conversions: n elements (a multiple of the block size), through the table ----
// to_float works for every valid type except I32/I64 (those are not float types).
void to_float_row(Type t, const void* src, float* dst, int64_t n);
// from_float uses the CPU backend's quantizers (the ones behind CPY/SET_ROWS).
void from_float_row(Type t, const float* src, void* dst, int64_t n);
inline bool has_to_float(Type t) { return type_traits(t).to_float != nullptr; }
inline bool has_from_float(Type t) { return type_traits(t).from_float != nullptr; }

}  // namespace pyggml

#include "pyggml/quant_blocks.h"
