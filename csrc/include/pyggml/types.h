// Tensor element types, their traits and the scalar/row conversions (spec 1.3-1.5).
#pragma once
#include <cstddef>
#include <cstdint>

namespace pyggml {

// Numbering follows ggml so GGUF type ids map directly.
enum class Type : int32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, I32 = 26, I64 = 27, BF16 = 30, NVFP4 = 40,
};
constexpr int kTypeIdLimit = 43;

struct TypeTraits {
    const char* name;      // ggml spelling: "f32", "q8_0", ...
    int64_t blck_size;     // elements per block (1 for plain types)
    size_t type_size;      // bytes per block
    bool is_quantized;
    bool is_valid;         // implemented by pyggml
};

const TypeTraits& type_traits(Type t);
bool type_id_is_valid(int32_t id);
const char* type_name(Type t);
inline int64_t blck_size(Type t) { return type_traits(t).blck_size; }
inline size_t type_size(Type t) { return type_traits(t).type_size; }
inline bool is_quantized(Type t) { return type_traits(t).is_quantized; }
size_t row_size(Type t, int64_t ne0);  // requires ne0 % blck_size == 0

// ---- scalar conversions (bit exact, spec 1.4) ----
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
inline float bf16_to_fp32(uint16_t h) {
    uint32_t u = uint32_t(h) << 16; float f; __builtin_memcpy(&f, &u, 4); return f;
}
uint16_t fp32_to_bf16(float f);

// ---- block layouts (spec 1.5) ----
struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockNVFP4 { uint8_t d[4]; uint8_t qs[32]; };
static_assert(sizeof(BlockQ8_0) == 34, "q8_0 block");
static_assert(sizeof(BlockQ4_0) == 18, "q4_0 block");
static_assert(sizeof(BlockNVFP4) == 36, "nvfp4 block");

// ---- row conversions: n elements (a multiple of the block size) ----
// to_float works for every valid type except I32/I64 (those are not float types).
void to_float_row(Type t, const void* src, float* dst, int64_t n);
// from_float uses the CPU backend's quantizers (the ones behind CPY/SET_ROWS).
void from_float_row(Type t, const float* src, void* dst, int64_t n);
bool has_to_float(Type t);
bool has_from_float(Type t);

// Reference block quantizers exactly as spec 1.5 (used by tests through Python).
void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q8_0_cpu(const float* x, BlockQ8_0* y, int64_t n);  // id = 127/amax
void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t n);
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n);
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n);
// NVFP4 lives in core/quant_nvfp4.cpp.
void quantize_row_nvfp4_ref(const float* x, BlockNVFP4* y, int64_t n);
void dequantize_row_nvfp4(const BlockNVFP4* x, float* y, int64_t n);
float nvfp4_ue4m3_to_scale(uint8_t u);  // decoded and halved (spec 1.5)

}  // namespace pyggml
