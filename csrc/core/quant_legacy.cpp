// 32-value block types besides q8_0 / q4_0: q4_1, q5_0, q5_1 (4/5-bit, with or without a
// min), q8_1 (the activation form of q4_1 / q5_1 dots), iq4_nl (non-linear 4-bit levels) and
// mxfp4 (E2M1 values with a power-of-two E8M0 scale). Elements j and j+16 share a byte.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "pyggml/types.h"

namespace pyggml {

namespace {

inline float f16(uint16_t h) { return fp16_to_fp32(h); }
inline uint16_t to_f16(float f) { return fp32_to_fp16(f); }

void min_max(const float* v, int n, float& lo, float& hi) {
    lo = FLT_MAX;
    hi = -FLT_MAX;
    for (int j = 0; j < n; ++j) {
        if (v[j] < lo) lo = v[j];
        if (v[j] > hi) hi = v[j];
    }
}

// The element of largest magnitude (the first one on ties), with its sign.
float signed_absmax(const float* v, int n) {
    float amax = 0.0f, m = 0.0f;
    for (int j = 0; j < n; ++j)
        if (amax < std::fabs(v[j])) { amax = std::fabs(v[j]); m = v[j]; }
    return m;
}

// Index of the level closest to x in an ascending table (the lower one on ties).
int nearest_level(const int8_t* values, int n, float x) {
    if (x <= values[0]) return 0;
    if (x >= values[n - 1]) return n - 1;
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < values[mid]) hi = mid; else lo = mid;
    }
    return x - values[hi - 1] < values[hi] - x ? hi - 1 : hi;
}

}  // namespace

// ---- q4_1: d * q + m, q in 0..15 ----
void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* v = x + b * 32;
        float lo, hi;
        min_max(v, 32, lo, hi);
        const float d = (hi - lo) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = to_f16(d);
        y[b].m = to_f16(lo);
        for (int j = 0; j < 16; ++j) {
            const int q0 = std::min(15, (int)(int8_t)((v[j] - lo) * id + 0.5f));
            const int q1 = std::min(15, (int)(int8_t)((v[16 + j] - lo) * id + 0.5f));
            y[b].qs[j] = uint8_t(q0 | (q1 << 4));
        }
    }
}

void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, y += 32) {
        const float d = f16(x[b].d), m = f16(x[b].m);
        for (int j = 0; j < 16; ++j) {
            y[j] = (x[b].qs[j] & 0x0F) * d + m;
            y[j + 16] = (x[b].qs[j] >> 4) * d + m;
        }
    }
}

// ---- q5_0: d * (q - 16), q in 0..31; bit 4 of element j is bit j of qh ----
void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* v = x + b * 32;
        const float d = signed_absmax(v, 32) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; ++j) {
            const int q0 = std::min(31, (int)(int8_t)(v[j] * id + 16.5f));
            const int q1 = std::min(31, (int)(int8_t)(v[16 + j] * id + 16.5f));
            y[b].qs[j] = uint8_t((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= uint32_t((q0 >> 4) & 1) << j;
            qh |= uint32_t((q1 >> 4) & 1) << (j + 16);
        }
        std::memcpy(y[b].qh, &qh, 4);
    }
}

void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, y += 32) {
        const float d = f16(x[b].d);
        uint32_t qh;
        std::memcpy(&qh, x[b].qh, 4);
        for (int j = 0; j < 16; ++j) {
            const int q0 = (x[b].qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
            const int q1 = (x[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            y[j] = (q0 - 16) * d;
            y[j + 16] = (q1 - 16) * d;
        }
    }
}

// ---- q5_1: d * q + m, q in 0..31 ----
void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* v = x + b * 32;
        float lo, hi;
        min_max(v, 32, lo, hi);
        const float d = (hi - lo) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = to_f16(d);
        y[b].m = to_f16(lo);
        uint32_t qh = 0;
        for (int j = 0; j < 16; ++j) {
            const int q0 = (uint8_t)((v[j] - lo) * id + 0.5f);
            const int q1 = (uint8_t)((v[16 + j] - lo) * id + 0.5f);
            y[b].qs[j] = uint8_t((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= uint32_t((q0 >> 4) & 1) << j;
            qh |= uint32_t((q1 >> 4) & 1) << (j + 16);
        }
        std::memcpy(y[b].qh, &qh, 4);
    }
}

void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, y += 32) {
        const float d = f16(x[b].d), m = f16(x[b].m);
        uint32_t qh;
        std::memcpy(&qh, x[b].qh, 4);
        for (int j = 0; j < 16; ++j) {
            const int q0 = (x[b].qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
            const int q1 = (x[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            y[j] = q0 * d + m;
            y[j + 16] = q1 * d + m;
        }
    }
}

// ---- q8_1: q8_0 plus s = d * sum(q) (lets q4_1 / q5_1 dots add their min once per block) ----
namespace {
template <bool kCpuForm>
void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* v = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(v[j]));
        const float d = amax / 127.0f;
        const float id = kCpuForm ? (amax != 0.0f ? 127.0f / amax : 0.0f) : (d != 0.0f ? 1.0f / d : 0.0f);
        y[b].d = to_f16(d);
        int sum = 0;
        for (int j = 0; j < 32; ++j) {
            y[b].qs[j] = (int8_t)std::round(v[j] * id);
            sum += y[b].qs[j];
        }
        y[b].s = to_f16(float(sum) * d);
    }
}
}  // namespace

void quantize_row_q8_1_ref(const float* x, BlockQ8_1* y, int64_t n) { quantize_q8_1<false>(x, y, n); }
void quantize_row_q8_1_cpu(const float* x, BlockQ8_1* y, int64_t n) { quantize_q8_1<true>(x, y, n); }

void dequantize_row_q8_1(const BlockQ8_1* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = f16(x[b].d);
        for (int j = 0; j < 32; ++j) y[b * 32 + j] = x[b].qs[j] * d;
    }
}

// ---- iq4_nl: d * kIQ4NLValues[q] ----
// The row quantizer behind cpy / set_rows: scale from the extreme element, levels chosen by
// nearest value, then d refit by weighted least squares (weights x^2); no scale search.
void quantize_row_iq4_nl_ref(const float* x, BlockIQ4NL* y, int64_t n) {
    uint8_t L[32] = {};  // a block of zeros keeps the previous block's levels, as ggml's does
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* v = x + b * 32;
        float amax = 0.0f, mx = 0.0f;
        for (int j = 0; j < 32; ++j)
            if (std::fabs(v[j]) > amax) { amax = std::fabs(v[j]); mx = v[j]; }
        float d = 0.0f;
        if (amax >= 1e-15f) {
            const float id = 1.0f / (mx / kIQ4NLValues[0]);
            float sumqx = 0.0f, sumq2 = 0.0f;
            for (int j = 0; j < 32; ++j) {
                const int l = nearest_level(kIQ4NLValues, 16, id * v[j]);
                L[j] = uint8_t(l);
                const float q = kIQ4NLValues[l], w = v[j] * v[j];
                sumqx += w * q * v[j];
                sumq2 += w * q * q;
            }
            d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
        }
        y[b].d = to_f16(d);
        for (int j = 0; j < 16; ++j) y[b].qs[j] = uint8_t(L[j] | (L[j + 16] << 4));
    }
}

void dequantize_row_iq4_nl(const BlockIQ4NL* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, y += 32) {
        const float d = f16(x[b].d);
        for (int j = 0; j < 16; ++j) {
            y[j] = d * kIQ4NLValues[x[b].qs[j] & 0x0F];
            y[j + 16] = d * kIQ4NLValues[x[b].qs[j] >> 4];
        }
    }
}

// ---- mxfp4: E2M1 value * 2^(e-127); stored as doubled values times 2^(e-128) ----
float mxfp4_e8m0_to_scale(uint8_t e) {
    const uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t(e) - 1) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

void quantize_row_mxfp4_ref(const float* x, BlockMXFP4* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* v = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j)
            if (amax < std::fabs(v[j])) amax = std::fabs(v[j]);
        const uint8_t e = amax > 0.0f ? (uint8_t)(std::floor(std::log2(amax)) - 2 + 127) : 0;
        const float d = mxfp4_e8m0_to_scale(e);
        y[b].e = e;
        auto nearest = [d](float t) {
            int best = 0;
            float best_err = std::fabs(kE2M1Doubled[0] * d - t);
            for (int i = 1; i < 16; ++i) {
                const float err = std::fabs(kE2M1Doubled[i] * d - t);
                if (err < best_err) { best = i; best_err = err; }
            }
            return best;
        };
        for (int j = 0; j < 16; ++j) y[b].qs[j] = uint8_t(nearest(v[j]) | (nearest(v[16 + j]) << 4));
    }
}

void dequantize_row_mxfp4(const BlockMXFP4* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, y += 32) {
        const float d = mxfp4_e8m0_to_scale(x[b].e);
        for (int j = 0; j < 16; ++j) {
            y[j] = kE2M1Doubled[x[b].qs[j] & 0x0F] * d;
            y[j + 16] = kE2M1Doubled[x[b].qs[j] >> 4] * d;
        }
    }
}

}  // namespace pyggml
