// Plain unpacking of block types into unsigned levels and integer scales (the scalar dot
// kernels' view of the formats, quant_dot_scalar.cpp).
#pragma once
#include <cstring>

#include "pyggml/types.h"

namespace pyggml::cpu::mm {

// One K-quant super-block: value i = d_x * (scale[i/16] * (u[i] - off)) - dmin_x * min[i/16].
struct KUnpacked {
    uint8_t u[256];
    int16_t scale[16], min[16];
    int off;
    float d, dmin;  // the block's f16 d and dmin, widened
};

// 32 five-bit levels: low nibbles (j, j+16 share a byte) plus bit j of qh.
inline void unpack_q5(const uint8_t* qs, const uint8_t* qh4, uint8_t* u) {
    uint32_t qh;
    std::memcpy(&qh, qh4, 4);
    for (int i = 0; i < 16; ++i) {
        u[i] = uint8_t((qs[i] & 0xF) | (((qh >> i) & 1) << 4));
        u[i + 16] = uint8_t((qs[i] >> 4) | (((qh >> (i + 16)) & 1) << 4));
    }
}

// 2-bit field of value i in 64 bytes of qs (four fields per byte, 128 values per 32 bytes).
inline int two_bits(const uint8_t* qs, int i) { return (qs[(i / 128) * 32 + i % 32] >> (2 * ((i % 128) / 32))) & 3; }

inline void unpack_q2_K(const BlockQ2_K& b, KUnpacked& w) {
    for (int i = 0; i < 256; ++i) w.u[i] = uint8_t(two_bits(b.qs, i));
    for (int g = 0; g < 16; ++g) { w.scale[g] = b.scales[g] & 0xF; w.min[g] = b.scales[g] >> 4; }
    w.off = 0;
    w.d = fp16_to_fp32(b.d);
    w.dmin = fp16_to_fp32(b.dmin);
}

inline void unpack_q3_K(const BlockQ3_K& b, KUnpacked& w) {
    for (int i = 0; i < 256; ++i) w.u[i] = uint8_t(two_bits(b.qs, i) | (((b.hmask[i % 32] >> (i / 32)) & 1) << 2));
    int8_t sc[16];
    q3_K_scales(b.scales, sc);
    for (int g = 0; g < 16; ++g) { w.scale[g] = sc[g]; w.min[g] = 0; }
    w.off = 4;
    w.d = fp16_to_fp32(b.d);
    w.dmin = 0.0f;
}

template <bool kFifthBit, class Block>
inline void unpack_q45_K(const Block& b, const uint8_t* qh, KUnpacked& w) {
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        kquant_scale_min(j, b.scales, sc, m);
        w.scale[2 * j] = w.scale[2 * j + 1] = sc;
        w.min[2 * j] = w.min[2 * j + 1] = m;
        const uint8_t* q = b.qs + 32 * (j / 2);
        for (int l = 0; l < 32; ++l) {
            int v = (j & 1) ? q[l] >> 4 : q[l] & 0xF;
            if (kFifthBit) v |= ((qh[l] >> j) & 1) << 4;
            w.u[32 * j + l] = uint8_t(v);
        }
    }
    w.off = 0;
    w.d = fp16_to_fp32(b.d);
    w.dmin = fp16_to_fp32(b.dmin);
}
inline void unpack_q4_K(const BlockQ4_K& b, KUnpacked& w) { unpack_q45_K<false>(b, nullptr, w); }
inline void unpack_q5_K(const BlockQ5_K& b, KUnpacked& w) { unpack_q45_K<true>(b, b.qh, w); }

inline void unpack_q6_K(const BlockQ6_K& b, KUnpacked& w) {
    for (int i = 0; i < 256; ++i) {
        const int half = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
        const uint8_t ql = b.ql[64 * half + l + 32 * (quarter & 1)];
        const int low = quarter < 2 ? ql & 0xF : ql >> 4;
        w.u[i] = uint8_t(low | (((b.qh[32 * half + l] >> (2 * quarter)) & 3) << 4));
    }
    for (int g = 0; g < 16; ++g) { w.scale[g] = b.scales[g]; w.min[g] = 0; }
    w.off = 32;
    w.d = fp16_to_fp32(b.d);
    w.dmin = 0.0f;
}

}  // namespace pyggml::cpu::mm
