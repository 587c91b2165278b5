// Scalar tile kernels of the repacked MUL_MAT path: the reference of simd/quant_repack*256.h
// (the same integer dots and the same float operations in the same order, so the same bits).
#include <cmath>
#include <cstring>

#include "cpu/quant_repack_kernels.h"
#include "pyggml/quant_blocks.h"

namespace pyggml::cpu::rp {
namespace {

// Value k (0..31) of row r of 128 nibble bytes: its low 4 bits (slot k / 4; even slots in low
// nibbles).
inline int nibble(const uint8_t* qs, int r, int k) {
    const int slot = k / 4, byte = 32 * (slot / 2) + 4 * r + k % 4;
    return slot % 2 ? qs[byte] >> 4 : qs[byte] & 15;
}
// Its fifth bit (qh: 32 bytes, bit s for slot s), as 16 or 0.
inline int bit4(const uint8_t* qh, int r, int k) { return ((qh[4 * r + k % 4] >> (k / 4)) & 1) << 4; }
// Its bits 4 and 5 (qh: 64 bytes, two bits per slot), as 0..48.
inline int bits45(const uint8_t* qh, int r, int k) {
    const int s = k / 4;
    return ((qh[32 * (s / 4) + 4 * r + k % 4] >> (2 * (s % 4))) & 3) << 4;
}

// Integer dot of row r of a 32-value record with the activation block.
template <class Rec>
int32_t row_dot(const Rec& w, int r, const Act& y) {
    int32_t sum = 0;
    for (int k = 0; k < 32; ++k) {
        int v;
        if constexpr (sizeof(Rec) == sizeof(Q8_0x8)) v = w.qs[32 * (k / 4) + 4 * r + k % 4];
        else if constexpr (sizeof(Rec) == sizeof(Q5_0x8)) v = nibble(w.qs, r, k) | bit4(w.qh, r, k);
        else v = nibble(w.qs, r, k);
        sum += v * y.qs[k];
    }
    return sum;
}

template <class Rec>
void tile(int64_t nb, const void* group, const void* const* cols, int nc, float* out) {
    const Rec* g = (const Rec*)group;
    constexpr bool offset_levels = sizeof(Rec) == sizeof(Q4_0x8) || sizeof(Rec) == sizeof(Q5_0x8);
    for (int c = 0; c < nc; ++c) {
        float acc[kRows] = {};
        for (int64_t ib = 0; ib < nb; ++ib) {
            const Rec& w = g[ib];
            const Act& y = ((const Act*)cols[c])[ib];
            for (int r = 0; r < kRows; ++r) {
                int32_t isum = row_dot(w, r, y);
                if constexpr (offset_levels) isum -= y.bias;
                const float scale = fp16_to_fp32(w.d[r]) * y.d;
                acc[r] = std::fma((float)isum, scale, acc[r]);
                if constexpr (sizeof(Rec) == sizeof(Q4_1x8)) acc[r] = std::fma(fp16_to_fp32(w.m[r]), y.s, acc[r]);
            }
        }
        std::memcpy(out + kRows * c, acc, sizeof acc);
    }
}

// q4_K / q5_K: isum = sum_j sc_j * dot_j, summ = sum_j m_j * bs32_j (exact integers).
template <class Rec>
void tile_k4(int64_t nb, const void* group, const void* const* cols, int nc, float* out) {
    const Rec* g = (const Rec*)group;
    for (int c = 0; c < nc; ++c) {
        float acc[kRows] = {};
        for (int64_t ib = 0; ib < nb; ++ib) {
            const Rec& w = g[ib];
            const ActK& y = ((const ActK*)cols[c])[ib];
            for (int r = 0; r < kRows; ++r) {
                int32_t isum = 0, summ = 0;
                for (int j = 0; j < 8; ++j) {
                    int32_t dot = 0;
                    for (int k = 0; k < 32; ++k) {
                        int v = nibble(w.qs + 128 * j, r, k);
                        if constexpr (sizeof(Rec) == sizeof(Q5_Kx8)) v |= bit4(w.qh + 32 * j, r, k);
                        dot += v * y.qs[32 * j + k];
                    }
                    isum += int32_t(w.sc[8 * j + r]) * dot;
                    summ += int32_t(w.m[16 * (j / 2) + 2 * r + j % 2]) * y.bs32[j];
                }
                acc[r] = std::fma((float)isum, fp16_to_fp32(w.d[r]) * y.d, acc[r]);
                acc[r] = std::fma(-(float)summ, fp16_to_fp32(w.dmin[r]) * y.d, acc[r]);
            }
        }
        std::memcpy(out + kRows * c, acc, sizeof acc);
    }
}

// q6_K: isum = sum_g sc_g * (dot_g - 32 * bs16_g) over the 16 groups of 16 values.
void tile_q6_k(int64_t nb, const void* group, const void* const* cols, int nc, float* out) {
    const Q6_Kx8* g = (const Q6_Kx8*)group;
    for (int c = 0; c < nc; ++c) {
        float acc[kRows] = {};
        for (int64_t ib = 0; ib < nb; ++ib) {
            const Q6_Kx8& w = g[ib];
            const ActK& y = ((const ActK*)cols[c])[ib];
            for (int r = 0; r < kRows; ++r) {
                int32_t isum = 0, offs = 0;
                for (int j = 0; j < 8; ++j)
                    for (int h = 0; h < 2; ++h) {
                        int32_t dot = 0;
                        for (int k = 16 * h; k < 16 * h + 16; ++k) {
                            const int v = nibble(w.qs + 128 * j, r, k) | bits45(w.qh + 64 * j, r, k);
                            dot += v * y.qs[32 * j + k];
                        }
                        const int32_t sc = w.sc[8 * (2 * j + h) + r];
                        isum += sc * dot;
                        offs += sc * y.bs16[2 * j + h];
                    }
                isum -= 32 * offs;
                acc[r] = std::fma((float)isum, fp16_to_fp32(w.d[r]) * y.d, acc[r]);
            }
        }
        std::memcpy(out + kRows * c, acc, sizeof acc);
    }
}

}  // namespace

const Kernels& kernels_scalar() {
    static const Kernels k = [] {
        Kernels s{};
        s.tile[(int)Type::Q4_0] = tile<Q4_0x8>;
        s.tile[(int)Type::Q4_1] = tile<Q4_1x8>;
        s.tile[(int)Type::Q5_0] = tile<Q5_0x8>;
        s.tile[(int)Type::Q8_0] = tile<Q8_0x8>;
        s.tile[(int)Type::Q4_K] = tile_k4<Q4_Kx8>;
        s.tile[(int)Type::Q5_K] = tile_k4<Q5_Kx8>;
        s.tile[(int)Type::Q6_K] = tile_q6_k;
        return s;
    }();
    return k;
}

}  // namespace pyggml::cpu::rp
