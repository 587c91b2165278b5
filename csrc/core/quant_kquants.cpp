// K-quants: 256-value super-blocks split into 16 (q2_K, q3_K, q6_K) or 8 (q4_K, q5_K)
// sub-blocks whose scales (and mins) are themselves quantized against one f16 d (and dmin).
// q8_K is the activation form their dot products consume (f32 d, int8 values, sums of 16).
// The quantizers are ggml's reference ones, scale searches included (quant_kquant_search.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant_kquant_search.h"
#include "pyggml/types.h"

namespace pyggml {

using kquant::clamp_int;
using kquant::nearest_int;

namespace {
inline float f16(uint16_t h) { return fp16_to_fp32(h); }
inline uint16_t to_f16(float f) { return fp32_to_fp16(f); }

// Levels of 128 values into 32 bytes, four 2-bit fields per byte: field s of byte l holds l+32s.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
    for (int j = 0; j < kQK_K; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = uint8_t(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// q4_K / q5_K: 8 scales and 8 mins of 6 bits in 12 bytes.
void pack_scale_min(const float* scales, const float* mins, float max_scale, float max_min, uint8_t* out) {
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; ++j) {
        const uint8_t ls = std::min<uint8_t>(63, (uint8_t)nearest_int(inv_scale * scales[j]));
        const uint8_t lm = std::min<uint8_t>(63, (uint8_t)nearest_int(inv_min * mins[j]));
        if (j < 4) {
            out[j] = ls;
            out[j + 4] = lm;
        } else {
            out[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
            out[j - 4] |= uint8_t((ls >> 4) << 6);
            out[j] |= uint8_t((lm >> 4) << 6);
        }
    }
}

// Shared by q4_K (nmax 15) and q5_K (nmax 31): per 32-value sub-block an affine search with
// weights rms + |x|, then the levels again against the quantized scale and min.
void quantize_affine_k(const float* x, int nmax, float rmin, int nstep, uint16_t* d, uint16_t* dmin,
                       uint8_t* packed_scales, uint8_t* L) {
    float mins[8], scales[8], weights[32];
    uint8_t Laux[32];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
        const float* v = x + 32 * j;
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; ++l) sum_x2 += v[l] * v[l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(v[l]);
        scales[j] = kquant::search_affine(32, nmax, v, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    pack_scale_min(scales, mins, max_scale, max_min, packed_scales);
    *d = to_f16(max_scale / 63.0f);
    *dmin = to_f16(max_min / 63.0f);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        kquant_scale_min(j, packed_scales, sc, m);
        const float dd = f16(*d) * sc;
        if (dd == 0.0f) continue;
        const float dm = f16(*dmin) * m;
        for (int i = 0; i < 32; ++i) L[32 * j + i] = uint8_t(clamp_int(nearest_int((x[32 * j + i] + dm) / dd), 0, nmax));
    }
}
}  // namespace

void q3_K_scales(const uint8_t* p, int8_t* out) {
    for (int j = 0; j < 16; ++j) {
        const int lo = j < 8 ? p[j] & 0xF : p[j - 8] >> 4;
        const int hi = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = int8_t((lo | (hi << 4)) - 32);
    }
}

// ---- q2_K: d * sc * q - dmin * m, q in 0..3, 4-bit sc and m per 16 values ----
void quantize_row_q2_K_ref(const float* x, BlockQ2_K* y, int64_t n) {
    uint8_t L[kQK_K], Laux[16];
    float weights[16], mins[16], scales[16];
    for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
        float max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = kquant::search_affine(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        BlockQ2_K& o = y[b];
        if (max_scale > 0) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; ++j) o.scales[j] = uint8_t(nearest_int(iscale * scales[j]));
            o.d = to_f16(max_scale / 15.0f);
        } else {
            for (int j = 0; j < 16; ++j) o.scales[j] = 0;
            o.d = to_f16(0.0f);
        }
        if (max_min > 0) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; ++j) o.scales[j] |= uint8_t(nearest_int(iscale * mins[j]) << 4);
            o.dmin = to_f16(max_min / 15.0f);
        } else {
            o.dmin = to_f16(0.0f);
        }
        for (int j = 0; j < 16; ++j) {
            const float d = f16(o.d) * (o.scales[j] & 0xF);
            if (d == 0.0f) continue;
            const float dm = f16(o.dmin) * (o.scales[j] >> 4);
            for (int i = 0; i < 16; ++i) L[16 * j + i] = uint8_t(clamp_int(nearest_int((x[16 * j + i] + dm) / d), 0, 3));
        }
        pack_2bit(L, o.qs);
    }
}

void dequantize_row_q2_K(const BlockQ2_K* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = f16(x[b].d), dmin = f16(x[b].dmin);
        for (int i = 0; i < kQK_K; ++i) {
            const int sub = i / 16, q = (x[b].qs[(i / 128) * 32 + i % 32] >> (2 * ((i % 128) / 32))) & 3;
            const uint8_t sc = x[b].scales[sub];
            const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
            y[b * kQK_K + i] = dl * q - ml;
        }
    }
}

// ---- q3_K: d * sc * (q - 4), q in 0..7 (2 low bits in qs, the high bit in hmask) ----
void quantize_row_q3_K_ref(const float* x, BlockQ3_K* y, int64_t n) {
    int8_t L[kQK_K];
    float scales[16];
    for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
        BlockQ3_K& o = y[b];
        float max_scale = 0.0f, amax = 0.0f;
        for (int j = 0; j < 16; ++j) {
            scales[j] = kquant::search_symmetric_greedy(16, 4, x + 16 * j, L + 16 * j);
            if (std::fabs(scales[j]) > amax) { amax = std::fabs(scales[j]); max_scale = scales[j]; }
        }
        std::memset(o.scales, 0, 12);
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; ++j) {
                int8_t l = int8_t(nearest_int(iscale * scales[j]));
                l = int8_t(clamp_int(l, -32, 31) + 32);
                if (j < 8) o.scales[j] = l & 0xF;
                else o.scales[j - 8] |= uint8_t((l & 0xF) << 4);
                l = int8_t(l >> 4);
                o.scales[j % 4 + 8] |= uint8_t(l << (2 * (j / 4)));
            }
            o.d = to_f16(1.0f / iscale);
        } else {
            o.d = to_f16(0.0f);
        }
        int8_t sc[16];
        q3_K_scales(o.scales, sc);
        for (int j = 0; j < 16; ++j) {
            const float d = f16(o.d) * sc[j];
            if (d == 0.0f) continue;
            for (int i = 0; i < 16; ++i) L[16 * j + i] = int8_t(clamp_int(nearest_int(x[16 * j + i] / d), -4, 3) + 4);
        }
        std::memset(o.hmask, 0, 32);
        for (int j = 0; j < kQK_K; ++j) {
            if (L[j] > 3) {
                o.hmask[j % 32] |= uint8_t(1 << (j / 32));
                L[j] -= 4;
            }
        }
        pack_2bit((const uint8_t*)L, o.qs);
    }
}

void dequantize_row_q3_K(const BlockQ3_K* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = f16(x[b].d);
        int8_t sc[16];
        q3_K_scales(x[b].scales, sc);
        for (int i = 0; i < kQK_K; ++i) {
            const int low = (x[b].qs[(i / 128) * 32 + i % 32] >> (2 * ((i % 128) / 32))) & 3;
            const int high = (x[b].hmask[i % 32] >> (i / 32)) & 1;
            const float dl = d * sc[i / 16];
            y[b * kQK_K + i] = dl * (low - (high ? 0 : 4));
        }
    }
}

// ---- q4_K: d * sc * q - dmin * m, q in 0..15, 6-bit sc and m per 32 values ----
void quantize_row_q4_K_ref(const float* x, BlockQ4_K* y, int64_t n) {
    uint8_t L[kQK_K];
    for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
        quantize_affine_k(x, 15, -1.0f, 20, &y[b].d, &y[b].dmin, y[b].scales, L);
        for (int j = 0; j < kQK_K; j += 64)
            for (int l = 0; l < 32; ++l) y[b].qs[j / 2 + l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
    }
}

void dequantize_row_q4_K(const BlockQ4_K* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = f16(x[b].d), dmin = f16(x[b].dmin);
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            kquant_scale_min(j, x[b].scales, sc, m);
            const float dl = d * sc, ml = dmin * m;
            const uint8_t* q = x[b].qs + 32 * (j / 2);
            for (int l = 0; l < 32; ++l) *y++ = dl * ((j & 1) ? q[l] >> 4 : q[l] & 0xF) - ml;
        }
    }
}

// ---- q5_K: q4_K with a fifth bit per value in qh ----
void quantize_row_q5_K_ref(const float* x, BlockQ5_K* y, int64_t n) {
    uint8_t L[kQK_K];
    for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
        quantize_affine_k(x, 31, -0.5f, 15, &y[b].d, &y[b].dmin, y[b].scales, L);
        std::memset(y[b].qh, 0, 32);
        for (int j = 0; j < 8; j += 2) {  // sub-blocks j, j+1 share 32 bytes of qs
            for (int l = 0; l < 32; ++l) {
                int l1 = L[32 * j + l], l2 = L[32 * j + 32 + l];
                if (l1 > 15) { l1 -= 16; y[b].qh[l] |= uint8_t(1 << j); }
                if (l2 > 15) { l2 -= 16; y[b].qh[l] |= uint8_t(2 << j); }
                y[b].qs[16 * j + l] = uint8_t(l1 | (l2 << 4));
            }
        }
    }
}

void dequantize_row_q5_K(const BlockQ5_K* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = f16(x[b].d), dmin = f16(x[b].dmin);
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            kquant_scale_min(j, x[b].scales, sc, m);
            const float dl = d * sc, ml = dmin * m;
            const uint8_t* q = x[b].qs + 32 * (j / 2);
            for (int l = 0; l < 32; ++l) {
                const int low = (j & 1) ? q[l] >> 4 : q[l] & 0xF;
                *y++ = dl * (low + ((x[b].qh[l] >> j) & 1 ? 16 : 0)) - ml;
            }
        }
    }
}

// ---- q6_K: d * sc * (q - 32), q in 0..63 (4 low bits in ql, 2 high bits in qh), int8 sc ----
void quantize_row_q6_K_ref(const float* x, BlockQ6_K* y, int64_t n) {
    int8_t L[kQK_K];
    float scales[16];
    for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
        BlockQ6_K& o = y[b];
        float max_scale = 0.0f, max_abs_scale = 0.0f;
        for (int j = 0; j < 16; ++j) {
            scales[j] = kquant::search_symmetric(16, 32, x + 16 * j, L + 16 * j);
            if (std::fabs(scales[j]) > max_abs_scale) { max_abs_scale = std::fabs(scales[j]); max_scale = scales[j]; }
        }
        if (max_abs_scale < kquant::kGroupMaxEps) {
            std::memset(&o, 0, sizeof(o));
            continue;
        }
        const float iscale = -128.0f / max_scale;
        o.d = to_f16(1.0f / iscale);
        for (int j = 0; j < 16; ++j) o.scales[j] = int8_t(std::min(127, nearest_int(iscale * scales[j])));
        for (int j = 0; j < 16; ++j) {
            const float d = f16(o.d) * o.scales[j];
            if (d == 0.0f) continue;
            for (int i = 0; i < 16; ++i) L[16 * j + i] = int8_t(clamp_int(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
        }
        for (int j = 0; j < kQK_K; j += 128) {
            uint8_t* ql = o.ql + j / 2;
            uint8_t* qh = o.qh + j / 4;
            for (int l = 0; l < 32; ++l) {
                const int a = L[j + l], bq = L[j + l + 32], c = L[j + l + 64], e = L[j + l + 96];
                ql[l] = uint8_t((a & 0xF) | ((c & 0xF) << 4));
                ql[l + 32] = uint8_t((bq & 0xF) | ((e & 0xF) << 4));
                qh[l] = uint8_t((a >> 4) | ((bq >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6));
            }
        }
    }
}

void dequantize_row_q6_K(const BlockQ6_K* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = f16(x[b].d);
        for (int i = 0; i < kQK_K; ++i) {
            const int half = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
            const uint8_t ql = x[b].ql[64 * half + l + 32 * (quarter & 1)];
            const int low = quarter < 2 ? ql & 0xF : ql >> 4;
            const int high = (x[b].qh[32 * half + l] >> (2 * quarter)) & 3;
            const int q = (low | (high << 4)) - 32;
            y[b * kQK_K + i] = d * x[b].scales[i / 16] * q;
        }
    }
}

// ---- q8_K: d * q with d = max / -127 (the signed extreme maps to -127) ----
void quantize_row_q8_K_ref(const float* x, BlockQ8_K* y, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < kQK_K; ++j)
            if (std::fabs(x[j]) > amax) { amax = std::fabs(x[j]); max = x[j]; }
        if (amax == 0.0f) {
            std::memset(&y[b], 0, sizeof(BlockQ8_K));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < kQK_K; ++j) y[b].qs[j] = int8_t(std::min(127, nearest_int(iscale * x[j])));
        for (int j = 0; j < 16; ++j) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += y[b].qs[16 * j + i];
            y[b].bsums[j] = int16_t(sum);
        }
        y[b].d = 1.0f / iscale;
    }
}

void dequantize_row_q8_K(const BlockQ8_K* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b)
        for (int j = 0; j < kQK_K; ++j) y[b * kQK_K + j] = x[b].d * x[b].qs[j];
}

}  // namespace pyggml
