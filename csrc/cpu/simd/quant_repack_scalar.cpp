// Scalar tile kernels of the repacked MUL_MAT path: the reference of simd/quant_repack_avx2.cpp
// (the same integer dots and the same float operations in the same order, so the same bits).
#include <cmath>
#include <cstring>

#include "cpu/quant_repack_kernels.h"
#include "pyggml/quant_blocks.h"

namespace pyggml::cpu::rp {
namespace {

// Value k of row r of a q4 record: its level 0..15 (slot k / 4; even slots in low nibbles).
inline int q4_level(const uint8_t* qs, int r, int k) {
    const int slot = k / 4, byte = 32 * (slot / 2) + 4 * r + k % 4;
    return slot % 2 ? qs[byte] >> 4 : qs[byte] & 15;
}

// Integer dot of row r of the record with the activation block.
template <class Rec>
int32_t row_dot(const Rec& w, int r, const Act& y) {
    int32_t sum = 0;
    for (int k = 0; k < 32; ++k) {
        int v;
        if constexpr (sizeof(Rec) == sizeof(Q8_0x8)) v = w.qs[32 * (k / 4) + 4 * r + k % 4];
        else v = q4_level(w.qs, r, k);
        sum += v * y.qs[k];
    }
    return sum;
}

template <class Rec>
void tile(int64_t nb, const void* group, const Act* const* cols, int nc, float* out) {
    const Rec* g = (const Rec*)group;
    for (int c = 0; c < nc; ++c) {
        float acc[kRows] = {};
        for (int64_t ib = 0; ib < nb; ++ib) {
            const Rec& w = g[ib];
            const Act& y = cols[c][ib];
            for (int r = 0; r < kRows; ++r) {
                int32_t isum = row_dot(w, r, y);
                if constexpr (sizeof(Rec) == sizeof(Q4_0x8)) isum -= y.bias;
                const float scale = fp16_to_fp32(w.d[r]) * y.d;
                acc[r] = std::fma((float)isum, scale, acc[r]);
                if constexpr (sizeof(Rec) == sizeof(Q4_1x8)) acc[r] = std::fma(fp16_to_fp32(w.m[r]), y.s, acc[r]);
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
        s.tile[(int)Type::Q8_0] = tile<Q8_0x8>;
        return s;
    }();
    return k;
}

}  // namespace pyggml::cpu::rp
