// NVFP4 blocks: 64 values, four 16-element sub-blocks with UE4M3 scales.
// Each nibble is an E2M1 code looked up in a doubled table; the sub-block scale is the
// UE4M3 value halved to compensate.
#include <cmath>
#include <cstring>

#include "pyggml/error.h"
#include "pyggml/types.h"

namespace pyggml {

namespace {

// E2M1 values times two; bit 3 of the code is the sign.
constexpr int8_t kE2M1x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Encode a non-negative float as UE4M3 (bias 7), rounding the 3-bit mantissa half up; values above 448 saturate to 0x7E.
uint8_t fp32_to_ue4m3(float x) {
    if (!(x > 0.0f)) return 0;  // zero, negative and NaN
    if (x > 448.0f) x = 448.0f;
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    const int exp = int((bits >> 23) & 0xFF) - 127 + 7;
    if (exp <= 0) {  // subnormal range: multiples of 2^-9
        int m = int(x * 512.0f + 0.5f);
        if (m > 7) m = 7;
        return m < 1 ? 0 : uint8_t(m);
    }
    if (exp >= 15) return 0x7E;
    int man = int((bits >> 20) & 0x7) + int((bits >> 19) & 1);
    int e = exp;
    if (man > 7) { man = 0; ++e; }
    if (e >= 15) return 0x7E;
    return uint8_t((e << 3) | man);
}

}  // namespace

float nvfp4_ue4m3_to_scale(uint8_t u) {
    if (u == 0x00 || u == 0x7F) return 0.0f;
    const int e = (u >> 3) & 0xF;
    const int m = u & 7;
    const float v = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.0f + float(m) / 8.0f, e - 7);
    return 0.5f * v;
}

void quantize_row_nvfp4_ref(const float* x, BlockNVFP4* y, int64_t n) {
    const int64_t nb = n / 64;
    for (int64_t b = 0; b < nb; ++b) {
        for (int s = 0; s < 4; ++s) {
            const float* v = x + b * 64 + s * 16;
            float amax = 0.0f;
            for (int j = 0; j < 16; ++j) {
                const float a = std::fabs(v[j]);
                if (a > amax) amax = a;
            }
            const uint8_t code = fp32_to_ue4m3(amax / 6.0f);
            const float scale = nvfp4_ue4m3_to_scale(code);
            y[b].d[s] = code;
            uint8_t q[16];
            for (int j = 0; j < 16; ++j) {
                int best = 0;
                float best_err = std::fabs(float(kE2M1x2[0]) * scale - v[j]);
                for (int i = 1; i < 16; ++i) {
                    const float err = std::fabs(float(kE2M1x2[i]) * scale - v[j]);
                    if (err < best_err) { best_err = err; best = i; }
                }
                q[j] = uint8_t(best);
            }
            for (int j = 0; j < 8; ++j) y[b].qs[8 * s + j] = uint8_t(q[j] | (q[j + 8] << 4));
        }
    }
}

void dequantize_row_nvfp4(const BlockNVFP4* x, float* y, int64_t n) {
    const int64_t nb = n / 64;
    for (int64_t b = 0; b < nb; ++b) {
        for (int s = 0; s < 4; ++s) {
            const float scale = nvfp4_ue4m3_to_scale(x[b].d[s]);
            float* out = y + b * 64 + s * 16;
            for (int j = 0; j < 8; ++j) {
                const uint8_t q = x[b].qs[8 * s + j];
                out[j] = float(kE2M1x2[q & 0x0F]) * scale;
                out[j + 8] = float(kE2M1x2[q >> 4]) * scale;
            }
        }
    }
}

}  // namespace pyggml
