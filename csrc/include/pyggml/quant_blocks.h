// Byte layouts of the block types (ggml's, so GGUF tensors load as they are) and their row
// quantizers / dequantizers. Implemented in core/types.cpp (q8_0, q4_0), core/quant_legacy.cpp
// (q4_1, q5_0, q5_1, q8_1, iq4_nl, mxfp4), core/quant_nvfp4.cpp and core/quant_kquants.cpp.
#pragma once
#include <cstdint>

namespace pyggml {

constexpr int kQK = 32;    // elements per legacy block
constexpr int kQK_K = 256; // elements per K-quant super-block

struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ8_1 { uint16_t d, s; int8_t qs[32]; };          // s = d * sum(qs)
struct BlockIQ4NL { uint16_t d; uint8_t qs[16]; };            // nibbles index kIQ4NLValues
struct BlockMXFP4 { uint8_t e; uint8_t qs[16]; };             // E8M0 scale, E2M1 nibbles
struct BlockNVFP4 { uint8_t d[4]; uint8_t qs[32]; };
// K-quants: 256 values in 16 or 8 sub-blocks with quantized sub-block scales.
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct BlockQ8_K { float d; int8_t qs[256]; int16_t bsums[16]; };  // bsums: sums of 16 qs

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20, "legacy blocks");
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_1) == 36, "legacy blocks");
static_assert(sizeof(BlockIQ4NL) == 18 && sizeof(BlockMXFP4) == 17 && sizeof(BlockNVFP4) == 36, "fp4 blocks");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144, "k blocks");
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292, "k blocks");

// The 16 non-linear levels of iq4_nl, and E2M1 values doubled (bit 3 = sign) for mxfp4/nvfp4.
constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
constexpr int8_t kE2M1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// mxfp4's E8M0 scale halved (to match the doubled E2M1 values): 2^(e-128), exact.
float mxfp4_e8m0_to_scale(uint8_t e);
float nvfp4_ue4m3_to_scale(uint8_t u);  // decoded and halved

// K-quant 6-bit scale/min pair j (0..7) of q4_K / q5_K.
inline void kquant_scale_min(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
    if (j < 4) {
        d = q[j] & 63; m = q[j + 4] & 63;
    } else {
        d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}
// q3_K's 16 signed 6-bit scales (already minus 32).
void q3_K_scales(const uint8_t* packed12, int8_t* out16);

#define PYGGML_ROW_CODEC(name, Block)                                  \
    void quantize_row_##name##_ref(const float* x, Block* y, int64_t n); \
    void dequantize_row_##name(const Block* x, float* y, int64_t n);
PYGGML_ROW_CODEC(q8_0, BlockQ8_0)
PYGGML_ROW_CODEC(q4_0, BlockQ4_0)
PYGGML_ROW_CODEC(q4_1, BlockQ4_1)
PYGGML_ROW_CODEC(q5_0, BlockQ5_0)
PYGGML_ROW_CODEC(q5_1, BlockQ5_1)
PYGGML_ROW_CODEC(q8_1, BlockQ8_1)
PYGGML_ROW_CODEC(iq4_nl, BlockIQ4NL)
PYGGML_ROW_CODEC(mxfp4, BlockMXFP4)
PYGGML_ROW_CODEC(nvfp4, BlockNVFP4)
PYGGML_ROW_CODEC(q2_K, BlockQ2_K)
PYGGML_ROW_CODEC(q3_K, BlockQ3_K)
PYGGML_ROW_CODEC(q4_K, BlockQ4_K)
PYGGML_ROW_CODEC(q5_K, BlockQ5_K)
PYGGML_ROW_CODEC(q6_K, BlockQ6_K)
PYGGML_ROW_CODEC(q8_K, BlockQ8_K)
#undef PYGGML_ROW_CODEC
// The CPU forms behind CPY/SET_ROWS that differ from the reference: q8_0 / q8_1 use
// id = 127/amax (the SIMD quantizers' rounding) instead of 1/d.
void quantize_row_q8_0_cpu(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q8_1_cpu(const float* x, BlockQ8_1* y, int64_t n);

}  // namespace pyggml
