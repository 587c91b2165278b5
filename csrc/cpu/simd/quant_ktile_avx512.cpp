// The K-quant tile kernels of quant_ktile.h for AVX-512 with VNNI: super-block decoding into
// panel records, and the 16-row x 8-column tile (one zmm of 16 rows' 32-bit sums per column,
// the column's 4 activation bytes broadcast from memory).
#include "cpu/quant_ktile.h"

#include <cstring>

#include "pyggml/quant_blocks.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

namespace pyggml::cpu::kt {
namespace {

// One row's super-block, decoded: unsigned levels, sub-block scales and mins, d and dmin.
struct RowSb {
    uint8_t lv[256];
    int32_t sc[16];
    int32_t mn[16];
    float d, dmin;
};

// The 6-bit scale and min of sub-block j of a q4_K / q5_K block.
inline void k4_scale_min(const uint8_t* s, int j, int32_t& sc, int32_t& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

void row_q4_5(const uint8_t* qs, const uint8_t* qh, const uint8_t* scales, uint16_t d, uint16_t dmin, RowSb& o) {
    o.d = fp16_to_fp32(d);
    o.dmin = fp16_to_fp32(dmin);
    for (int j = 0; j < 8; ++j) k4_scale_min(scales, j, o.sc[j], o.mn[j]);
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            uint8_t lo = qs[32 * c + l] & 15, hi = qs[32 * c + l] >> 4;
            if (qh) {
                lo |= uint8_t(((qh[l] >> (2 * c)) & 1) << 4);
                hi |= uint8_t(((qh[l] >> (2 * c + 1)) & 1) << 4);
            }
            o.lv[64 * c + l] = lo;
            o.lv[64 * c + 32 + l] = hi;
        }
}

void row_of(Type t, const char* blk, RowSb& o) {
    switch (t) {
        case Type::Q4_K: {
            const BlockQ4_K& x = *(const BlockQ4_K*)blk;
            row_q4_5(x.qs, nullptr, x.scales, x.d, x.dmin, o);
            break;
        }
        case Type::Q5_K: {
            const BlockQ5_K& x = *(const BlockQ5_K*)blk;
            row_q4_5(x.qs, x.qh, x.scales, x.d, x.dmin, o);
            break;
        }
        case Type::Q6_K: {  // levels 0..63 (value = level - 32), signed scale per 16
            const BlockQ6_K& x = *(const BlockQ6_K*)blk;
            o.d = fp16_to_fp32(x.d);
            o.dmin = 0.0f;
            for (int s = 0; s < 16; ++s) o.sc[s] = x.scales[s];
            for (int half = 0; half < 2; ++half) {
                const uint8_t* ql = x.ql + 64 * half;
                const uint8_t* qh = x.qh + 32 * half;
                uint8_t* lv = o.lv + 128 * half;
                for (int l = 0; l < 32; ++l) {
                    lv[l] = uint8_t((ql[l] & 15) | ((qh[l] & 3) << 4));
                    lv[l + 32] = uint8_t((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4));
                    lv[l + 64] = uint8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                    lv[l + 96] = uint8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
                }
            }
            break;
        }
        case Type::Q3_K: {  // levels 0..7 (value = level - 4), 6-bit scales - 32 per 16
            const BlockQ3_K& x = *(const BlockQ3_K*)blk;
            o.d = fp16_to_fp32(x.d);
            o.dmin = 0.0f;
            for (int j = 0; j < 16; ++j) {
                const int low = j < 8 ? x.scales[j] & 15 : x.scales[j - 8] >> 4;
                const int high = (x.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
                o.sc[j] = (low | (high << 4)) - 32;
            }
            for (int half = 0; half < 2; ++half)
                for (int g = 0; g < 4; ++g)
                    for (int l = 0; l < 32; ++l)
                        o.lv[128 * half + 32 * g + l] = uint8_t(((x.qs[32 * half + l] >> (2 * g)) & 3) |
                                                                (((x.hmask[l] >> (4 * half + g)) & 1) << 2));
            break;
        }
        case Type::Q2_K: {  // levels 0..3, 4-bit scale and min per 16
            const BlockQ2_K& x = *(const BlockQ2_K*)blk;
            o.d = fp16_to_fp32(x.d);
            o.dmin = fp16_to_fp32(x.dmin);
            for (int s = 0; s < 16; ++s) {
                o.sc[s] = x.scales[s] & 15;
                o.mn[s] = x.scales[s] >> 4;
            }
            for (int half = 0; half < 2; ++half)
                for (int g = 0; g < 4; ++g)
                    for (int l = 0; l < 32; ++l) o.lv[128 * half + 32 * g + l] = (x.qs[32 * half + l] >> (2 * g)) & 3;
            break;
        }
        default: break;
    }
}

inline int32_t pair16(int32_t lo, int32_t hi) { return int32_t(uint32_t(uint16_t(lo)) | (uint32_t(hi) << 16)); }

// Sub-block size, whether the type has mins, and the level offset (taken out of the integer
// dot as offset * sum_s sc_s * bsum_s).
template <Type T> struct Shape;
template <> struct Shape<Type::Q2_K> { static constexpr int kSub = 16, kOffset = 0; static constexpr bool kMin = true; };
template <> struct Shape<Type::Q3_K> { static constexpr int kSub = 16, kOffset = 4; static constexpr bool kMin = false; };
template <> struct Shape<Type::Q4_K> { static constexpr int kSub = 32, kOffset = 0; static constexpr bool kMin = true; };
template <> struct Shape<Type::Q5_K> { static constexpr int kSub = 32, kOffset = 0; static constexpr bool kMin = true; };
template <> struct Shape<Type::Q6_K> { static constexpr int kSub = 16, kOffset = 32; static constexpr bool kMin = false; };

template <Type T>
void decode(const char* const* rows, size_t block_bytes, int nrows, int64_t ib, PanelSb* out) {
    using S = Shape<T>;
    constexpr int kSubs = 256 / S::kSub;
    std::memset(out, 0, sizeof(PanelSb));
    RowSb v;
    for (int r = 0; r < nrows; ++r) {
        row_of(T, rows[r] + ib * block_bytes, v);
        for (int k = 0; k < 64; ++k) std::memcpy(out->q[k][r], v.lv + 4 * k, 4);
        for (int s = 0; s < kSubs; ++s) out->sc[s][r] = v.sc[s];
        for (int p = 0; p < kSubs / 2; ++p)
            out->pairs[p][r] = S::kMin ? pair16(v.mn[2 * p], v.mn[2 * p + 1]) : pair16(v.sc[2 * p], v.sc[2 * p + 1]);
        out->d[r] = v.d;
        out->dmin[r] = v.dmin;
    }
}

inline __m512i bcast(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

template <Type T, int NC>
void tile(int64_t nsb, const PanelSb* panel, const ActSb* const* cols, float* out) {
    using S = Shape<T>;
    constexpr int kSubs = 256 / S::kSub, kGroups = S::kSub / 4;
    __m512 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nsb; ++ib) {
        const PanelSb& w = panel[ib];
        const ActSb* y[NC];
        for (int c = 0; c < NC; ++c) y[c] = cols[c] + ib;
        if (ib + 1 < nsb) {
            const char* nx = (const char*)(panel + ib + 1);
            for (int l = 0; l < 4; ++l) _mm_prefetch(nx + 64 * l, _MM_HINT_T0);
        }
        __m512i s1[NC];
        for (int c = 0; c < NC; ++c) s1[c] = _mm512_setzero_si512();
        for (int s = 0; s < kSubs; ++s) {
            __m512i raw[NC];
            for (int c = 0; c < NC; ++c) raw[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int g = 0; g < kGroups; ++g) {
                const int k = s * kGroups + g;
                const __m512i wq = _mm512_load_si512((const void*)w.q[k]);
#pragma GCC unroll 8
                for (int c = 0; c < NC; ++c) raw[c] = _mm512_dpbusd_epi32(raw[c], wq, bcast(y[c]->qs + 4 * k));
            }
            const __m512i sc = _mm512_load_si512((const void*)w.sc[s]);
            for (int c = 0; c < NC; ++c) s1[c] = _mm512_add_epi32(s1[c], _mm512_mullo_epi32(raw[c], sc));
        }
        const __m512 d0 = _mm512_load_ps(w.d);
        for (int c = 0; c < NC; ++c) {
            const int32_t* bp = S::kSub == 32 ? y[c]->bp32 : y[c]->bp16;
            __m512 v;
            if constexpr (S::kMin) {
                __m512i s2 = _mm512_setzero_si512();
                for (int p = 0; p < kSubs / 2; ++p)
                    s2 = _mm512_dpwssd_epi32(s2, _mm512_load_si512((const void*)w.pairs[p]), _mm512_set1_epi32(bp[p]));
                v = _mm512_fnmadd_ps(_mm512_load_ps(w.dmin), _mm512_cvtepi32_ps(s2),
                                     _mm512_mul_ps(_mm512_cvtepi32_ps(s1[c]), d0));
            } else {
                __m512i off = _mm512_setzero_si512();
                for (int p = 0; p < kSubs / 2; ++p)
                    off = _mm512_dpwssd_epi32(off, _mm512_load_si512((const void*)w.pairs[p]), _mm512_set1_epi32(bp[p]));
                const __m512i is = _mm512_sub_epi32(s1[c], _mm512_mullo_epi32(off, _mm512_set1_epi32(S::kOffset)));
                v = _mm512_mul_ps(_mm512_cvtepi32_ps(is), d0);
            }
            acc[c] = _mm512_fmadd_ps(v, _mm512_set1_ps(y[c]->d), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(out + kRows * c, acc[c]);
}

template <Type T>
void tile_n(int64_t nsb, const PanelSb* panel, const ActSb* const* cols, int nc, float* out) {
    switch (nc) {
        case 1: return tile<T, 1>(nsb, panel, cols, out);
        case 2: return tile<T, 2>(nsb, panel, cols, out);
        case 3: return tile<T, 3>(nsb, panel, cols, out);
        case 4: return tile<T, 4>(nsb, panel, cols, out);
        case 5: return tile<T, 5>(nsb, panel, cols, out);
        case 6: return tile<T, 6>(nsb, panel, cols, out);
        case 7: return tile<T, 7>(nsb, panel, cols, out);
        default: return tile<T, 8>(nsb, panel, cols, out);
    }
}

}  // namespace
}  // namespace pyggml::cpu::kt

#pragma GCC diagnostic pop
#pragma GCC pop_options

namespace pyggml::cpu::kt {
const Kernels& kernels_avx512() {
    static const Kernels k = [] {
        Kernels s{};
        s.decode[(int)Type::Q2_K] = decode<Type::Q2_K>;
        s.decode[(int)Type::Q3_K] = decode<Type::Q3_K>;
        s.decode[(int)Type::Q4_K] = decode<Type::Q4_K>;
        s.decode[(int)Type::Q5_K] = decode<Type::Q5_K>;
        s.decode[(int)Type::Q6_K] = decode<Type::Q6_K>;
        s.tile[(int)Type::Q2_K] = tile_n<Type::Q2_K>;
        s.tile[(int)Type::Q3_K] = tile_n<Type::Q3_K>;
        s.tile[(int)Type::Q4_K] = tile_n<Type::Q4_K>;
        s.tile[(int)Type::Q5_K] = tile_n<Type::Q5_K>;
        s.tile[(int)Type::Q6_K] = tile_n<Type::Q6_K>;
        return s;
    }();
    return k;
}
}  // namespace pyggml::cpu::kt
#else
namespace pyggml::cpu::kt {
const Kernels& kernels_avx512() {
    static const Kernels k{};
    return k;
}
}  // namespace pyggml::cpu::kt
#endif
