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

// One row's super-block, decoded: sub-block scales and mins, d and dmin (the levels go
// straight to the caller's buffer).
struct RowSb {
    int32_t sc[16];
    int32_t mn[16];
    float d, dmin;
};

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256((const __m256i*)p); }
// (x >> shift) & mask in every byte: a 16-bit shift, whose bits from the next byte the mask
// drops (mask < 2^(8 - shift) at every call).
inline __m256i bits(__m256i x, int shift, int mask) {
    return _mm256_and_si256(_mm256_srli_epi16(x, shift), _mm256_set1_epi8((char)mask));
}
inline __m256i put(__m256i lo, __m256i hi_bits, int at) { return _mm256_or_si256(lo, _mm256_slli_epi16(hi_bits, at)); }
inline void store32(uint8_t* p, __m256i v) { _mm256_store_si256((__m256i*)p, v); }

void row_q4_5(const uint8_t* qs, const uint8_t* qh, const uint8_t* scales, uint16_t d, uint16_t dmin, uint8_t* lv,
              RowSb& o) {
    o.d = _cvtsh_ss(d);
    o.dmin = _cvtsh_ss(dmin);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        kquant_scale_min(j, scales, sc, m);
        o.sc[j] = sc;
        o.mn[j] = m;
    }
    const __m256i h = qh ? load32(qh) : _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
        const __m256i x = load32(qs + 32 * c);
        store32(lv + 64 * c, put(bits(x, 0, 15), bits(h, 2 * c, 1), 4));
        store32(lv + 64 * c + 32, put(bits(x, 4, 15), bits(h, 2 * c + 1, 1), 4));
    }
}

// Row levels (lv, 64-byte aligned) and scalars of one super-block of type t.
void row_of(Type t, const char* blk, uint8_t* lv, RowSb& o) {
    switch (t) {
        case Type::Q4_K: {
            const BlockQ4_K& x = *(const BlockQ4_K*)blk;
            row_q4_5(x.qs, nullptr, x.scales, x.d, x.dmin, lv, o);
            break;
        }
        case Type::Q5_K: {
            const BlockQ5_K& x = *(const BlockQ5_K*)blk;
            row_q4_5(x.qs, x.qh, x.scales, x.d, x.dmin, lv, o);
            break;
        }
        case Type::Q6_K: {  // levels 0..63 (value = level - 32), signed scale per 16
            const BlockQ6_K& x = *(const BlockQ6_K*)blk;
            o.d = _cvtsh_ss(x.d);
            o.dmin = 0.0f;
            for (int s = 0; s < 16; ++s) o.sc[s] = x.scales[s];
            for (int half = 0; half < 2; ++half) {
                const __m256i l0 = load32(x.ql + 64 * half), l1 = load32(x.ql + 64 * half + 32);
                const __m256i h = load32(x.qh + 32 * half);
                uint8_t* v = lv + 128 * half;
                store32(v, put(bits(l0, 0, 15), bits(h, 0, 3), 4));
                store32(v + 32, put(bits(l1, 0, 15), bits(h, 2, 3), 4));
                store32(v + 64, put(bits(l0, 4, 15), bits(h, 4, 3), 4));
                store32(v + 96, put(bits(l1, 4, 15), bits(h, 6, 3), 4));
            }
            break;
        }
        case Type::Q3_K: {  // levels 0..7 (value = level - 4), 6-bit scales - 32 per 16
            const BlockQ3_K& x = *(const BlockQ3_K*)blk;
            o.d = _cvtsh_ss(x.d);
            o.dmin = 0.0f;
            for (int j = 0; j < 16; ++j) {
                const int low = j < 8 ? x.scales[j] & 15 : x.scales[j - 8] >> 4;
                const int high = (x.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
                o.sc[j] = (low | (high << 4)) - 32;
            }
            const __m256i hm = load32(x.hmask);
            for (int half = 0; half < 2; ++half) {
                const __m256i q = load32(x.qs + 32 * half);
                for (int g = 0; g < 4; ++g) store32(lv + 128 * half + 32 * g, put(bits(q, 2 * g, 3), bits(hm, 4 * half + g, 1), 2));
            }
            break;
        }
        case Type::Q2_K: {  // levels 0..3, 4-bit scale and min per 16
            const BlockQ2_K& x = *(const BlockQ2_K*)blk;
            o.d = _cvtsh_ss(x.d);
            o.dmin = _cvtsh_ss(x.dmin);
            for (int s = 0; s < 16; ++s) {
                o.sc[s] = x.scales[s] & 15;
                o.mn[s] = x.scales[s] >> 4;
            }
            for (int half = 0; half < 2; ++half) {
                const __m256i q = load32(x.qs + 32 * half);
                for (int g = 0; g < 4; ++g) store32(lv + 128 * half + 32 * g, bits(q, 2 * g, 3));
            }
            break;
        }
        default: break;
    }
}

// v[r] lane c -> v[c] lane r (16 x 16 dwords): phase k swaps bit k of the row with bit k of
// the lane, for the rows i, i + 2^k.
inline void transpose16(__m512i* v) {
    // lane c of phase k's index vectors: a (row i) and b (row i + 2^k)
    alignas(64) static constexpr int32_t kIdx[4][2][16] = {
        {{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30}, {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}},
        {{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29}, {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}},
        {{0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27}, {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}},
        {{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}, {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}}};
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
        const int d = 1 << k;
        const __m512i xa = _mm512_load_si512(kIdx[k][0]), xb = _mm512_load_si512(kIdx[k][1]);
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) {
            if (i & d) continue;
            const __m512i a = v[i], b = v[i + d];
            v[i] = _mm512_permutex2var_epi32(a, xa, b);
            v[i + d] = _mm512_permutex2var_epi32(a, xb, b);
        }
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
    alignas(64) uint8_t lv[kRows][256];
    RowSb v;
    for (int r = 0; r < kRows; ++r) {
        if (r < nrows) {
            row_of(T, rows[r] + ib * block_bytes, lv[r], v);
        } else {  // a padding row: zero levels and scales
            std::memset(lv[r], 0, 256);
            std::memset(&v, 0, sizeof v);
        }
        for (int s = 0; s < kSubs; ++s) out->sc[s][r] = v.sc[s];
        for (int p = 0; p < kSubs / 2; ++p)
            out->pairs[p][r] = S::kMin ? pair16(v.mn[2 * p], v.mn[2 * p + 1]) : pair16(v.sc[2 * p], v.sc[2 * p + 1]);
        out->d[r] = v.d;
        out->dmin[r] = v.dmin;
    }
    for (int blk = 0; blk < 4; ++blk) {  // 16 groups of 4 levels a step
        __m512i x[kRows];
        for (int r = 0; r < kRows; ++r)  // two 32-byte loads: each forwards from one store of row_of
            x[r] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_load_si256((const __m256i*)(lv[r] + 64 * blk))),
                                      _mm256_load_si256((const __m256i*)(lv[r] + 64 * blk + 32)), 1);
        transpose16(x);
        for (int i = 0; i < kRows; ++i) _mm512_store_si512((void*)out->q[16 * blk + i], x[i]);
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
