// Plain-loop dot kernels of the block types added to the type table after q8_0 / q4_0 / nvfp4:
// the reference the 256-bit kernels (quant_dot256.h, built for AVX2 and AVX-512) are tested against.
//
// Legacy 32-value blocks dot q8_0 (q5_0, iq4_nl, mxfp4) or q8_1 (q4_1, q5_1: the block min
// times q8_1's s = d * sum(q) adds the min once per block) activations.
// K-quants dot q8_K. Every K-quant value is scale16[j] * (u - off) - min16[j] * (dmin/d) with
// an unsigned level u and 16 integer (scale, min) pairs per 256 values, so one integer sum per
// block serves all five formats:
//   d * (sum_j scale16[j] * (sum u*y over group j  -  off * bsums[j]))  -  dmin * sum_j min16[j] * bsums[j]
// with d = d_x * d_y, dmin = dmin_x * d_y (bsums: q8_K's sums of 16 values).
#include <cstring>

#include "cpu/mul_mat_kernels.h"
#include "cpu/simd/quant_unpack.h"

namespace pyggml::cpu::mm {

namespace {

inline float f16(uint16_t h) { return fp16_to_fp32(h); }

// ---- legacy blocks: values decoded to int8 (or unsigned levels plus the min) ----
template <class Block, class Decode>
float dot_row_q8_0(int64_t k, const Block* x, const BlockQ8_0* y, Decode decode) {
    float s = 0.0f;
    int8_t v[32];
    for (int64_t ib = 0; ib < k / 32; ++ib) {
        const float dx = decode(x[ib], v);
        int32_t is = 0;
        for (int i = 0; i < 32; ++i) is += int32_t(v[i]) * y[ib].qs[i];
        s += float(is) * (dx * f16(y[ib].d));
    }
    return s;
}

template <class Block, class Decode>
float dot_row_q8_1(int64_t k, const Block* x, const BlockQ8_1* y, Decode decode) {
    float s = 0.0f;
    uint8_t u[32];
    for (int64_t ib = 0; ib < k / 32; ++ib) {
        decode(x[ib], u);
        int32_t is = 0;
        for (int i = 0; i < 32; ++i) is += int32_t(u[i]) * y[ib].qs[i];
        s += (f16(x[ib].d) * f16(y[ib].d)) * float(is) + f16(x[ib].m) * f16(y[ib].s);
    }
    return s;
}

float decode_q5_0(const BlockQ5_0& b, int8_t* v) {
    uint8_t u[32];
    unpack_q5(b.qs, b.qh, u);
    for (int i = 0; i < 32; ++i) v[i] = int8_t(u[i] - 16);
    return f16(b.d);
}
float decode_iq4_nl(const BlockIQ4NL& b, int8_t* v) {
    for (int i = 0; i < 16; ++i) {
        v[i] = kIQ4NLValues[b.qs[i] & 0xF];
        v[i + 16] = kIQ4NLValues[b.qs[i] >> 4];
    }
    return f16(b.d);
}
float decode_mxfp4(const BlockMXFP4& b, int8_t* v) {
    for (int i = 0; i < 16; ++i) {
        v[i] = kE2M1Doubled[b.qs[i] & 0xF];
        v[i + 16] = kE2M1Doubled[b.qs[i] >> 4];
    }
    return mxfp4_e8m0_to_scale(b.e);
}
void decode_q4_1(const BlockQ4_1& b, uint8_t* u) {
    for (int i = 0; i < 16; ++i) { u[i] = b.qs[i] & 0xF; u[i + 16] = b.qs[i] >> 4; }
}
void decode_q5_1(const BlockQ5_1& b, uint8_t* u) { unpack_q5(b.qs, b.qh, u); }

template <class Block, float (*Decode)(const Block&, int8_t*)>
void dot_legacy(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float*) {
    for (int j = 0; j < nc; ++j)
        out[j] = dot_row_q8_0(k, (const Block*)a, (const BlockQ8_0*)((const char*)b + j * bs), Decode);
}
template <class Block, void (*Decode)(const Block&, uint8_t*)>
void dot_legacy_min(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float*) {
    for (int j = 0; j < nc; ++j)
        out[j] = dot_row_q8_1(k, (const Block*)a, (const BlockQ8_1*)((const char*)b + j * bs), Decode);
}

// ---- K-quants ----
template <class Block, void (*Unpack)(const Block&, KUnpacked&)>
void dot_kquant(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float*) {
    const Block* x = (const Block*)a;
    KUnpacked w;
    for (int j = 0; j < nc; ++j) out[j] = 0.0f;
    for (int64_t ib = 0; ib < k / kQK_K; ++ib) {
        Unpack(x[ib], w);
        for (int j = 0; j < nc; ++j) {
            const BlockQ8_K& y = ((const BlockQ8_K*)((const char*)b + j * bs))[ib];
            int32_t isum = 0, imin = 0;
            for (int g = 0; g < 16; ++g) {
                int32_t s = 0;
                for (int i = 0; i < 16; ++i) s += int32_t(w.u[16 * g + i]) * y.qs[16 * g + i];
                isum += w.scale[g] * (s - w.off * y.bsums[g]);
                imin += w.min[g] * y.bsums[g];
            }
            out[j] += (w.d * y.d) * float(isum) - (w.dmin * y.d) * float(imin);
        }
    }
}

void quantize_q8_1(const float* x, void* y, int64_t n) { quantize_row_q8_1_cpu(x, (BlockQ8_1*)y, n); }
void quantize_q8_K(const float* x, void* y, int64_t n) { quantize_row_q8_K_ref(x, (BlockQ8_K*)y, n); }

}  // namespace

void add_quant_dots_scalar(Kernels& k) {
    k.dot[(int)Type::Q4_1] = dot_legacy_min<BlockQ4_1, decode_q4_1>;
    k.dot[(int)Type::Q5_1] = dot_legacy_min<BlockQ5_1, decode_q5_1>;
    k.dot[(int)Type::Q5_0] = dot_legacy<BlockQ5_0, decode_q5_0>;
    k.dot[(int)Type::IQ4_NL] = dot_legacy<BlockIQ4NL, decode_iq4_nl>;
    k.dot[(int)Type::MXFP4] = dot_legacy<BlockMXFP4, decode_mxfp4>;
    k.dot[(int)Type::Q2_K] = dot_kquant<BlockQ2_K, unpack_q2_K>;
    k.dot[(int)Type::Q3_K] = dot_kquant<BlockQ3_K, unpack_q3_K>;
    k.dot[(int)Type::Q4_K] = dot_kquant<BlockQ4_K, unpack_q4_K>;
    k.dot[(int)Type::Q5_K] = dot_kquant<BlockQ5_K, unpack_q5_K>;
    k.dot[(int)Type::Q6_K] = dot_kquant<BlockQ6_K, unpack_q6_K>;
    k.quantize[(int)Type::Q8_1] = quantize_q8_1;
    k.quantize[(int)Type::Q8_K] = quantize_q8_K;
}

}  // namespace pyggml::cpu::mm
