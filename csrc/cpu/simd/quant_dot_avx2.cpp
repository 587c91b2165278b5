// AVX2 dot kernels of the newer block types (the scalar ones in quant_dot_scalar.cpp are the
// reference). One weight block is decoded once into 32-byte vectors of levels and dotted with
// up to 4 activation columns.
//   - legacy 32-value blocks: signed values (q5_0, iq4_nl, mxfp4: |a| times y with a's sign)
//     against q8_0, or unsigned levels plus the block min (q4_1, q5_1) against q8_1;
//   - K-quants: unsigned levels u (values scale16 * (u - off) - min16 * dmin/d) against q8_K;
//     the offset and the mins are applied once per block through q8_K's sums of 16 (bsums).
#include <immintrin.h>

#include "cpu/mul_mat_kernels.h"
#include "cpu/simd/quant_unpack.h"

#if defined(__x86_64__) || defined(__i386__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace pyggml::cpu::mm {

namespace {

inline float f16(uint16_t h) { return _cvtsh_ss(h); }
inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
// 8 x i32, each the sum of 4 products of unsigned u and signed s bytes.
inline __m256i udot(__m256i u, __m256i s) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)); }
// Byte j is 0xFF where bit j of x is set.
inline __m256i bits_to_bytes(uint32_t x) {
    const __m256i spread = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202,
                                              0x0303030303030303);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}
// 16 bytes of packed nibbles -> 32 levels: low nibbles are values 0..15, high ones 16..31.
inline __m256i nibbles(const uint8_t* qs) {
    const __m128i q = _mm_loadu_si128((const __m128i*)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}
inline __m256i lut16(const int8_t* table) {
    const __m128i t = _mm_loadu_si128((const __m128i*)table);
    return _mm256_set_m128i(t, t);
}
inline __m256i fifth_bits(const uint8_t* qh4) {
    uint32_t qh;
    std::memcpy(&qh, qh4, 4);
    return _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
}

// ---- legacy blocks against q8_0: signed values ----
struct DecQ5_0 {
    using Block = BlockQ5_0;
    static __m256i values(const Block& b, float& d) {
        d = f16(b.d);
        return _mm256_sub_epi8(_mm256_or_si256(nibbles(b.qs), fifth_bits(b.qh)), _mm256_set1_epi8(16));
    }
};
struct DecIQ4NL {
    using Block = BlockIQ4NL;
    static __m256i values(const Block& b, float& d) {
        d = f16(b.d);
        return _mm256_shuffle_epi8(lut16(kIQ4NLValues), nibbles(b.qs));
    }
};
struct DecMXFP4 {
    using Block = BlockMXFP4;
    static __m256i values(const Block& b, float& d) {
        const uint32_t bits = b.e < 2 ? (0x00200000u << b.e) : (uint32_t(b.e) - 1) << 23;  // 2^(e-128)
        std::memcpy(&d, &bits, 4);
        return _mm256_shuffle_epi8(lut16(kE2M1Doubled), nibbles(b.qs));
    }
};

// Two accumulator sets (even / odd blocks) hide the FMA latency.
template <class Dec, int NC>
void dot_signed(int64_t k, const void* av, const void* bv, size_t bs, float* out) {
    using Block = typename Dec::Block;
    const Block* x = (const Block*)av;
    const char* b = (const char*)bv;
    __m256 acc0[NC], acc1[NC];
    for (int j = 0; j < NC; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
    auto step = [&](int64_t ib, __m256* acc) __attribute__((always_inline)) {
        float dx;
        const __m256i a = Dec::values(x[ib], dx);
        const __m256i ua = _mm256_sign_epi8(a, a);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_0& y = ((const BlockQ8_0*)(b + j * bs))[ib];
            const __m256i sy = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i*)y.qs), a);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(ua, sy)), _mm256_set1_ps(dx * f16(y.d)), acc[j]);
        }
    };
    const int64_t nb = k / 32;
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {
        _mm_prefetch((const char*)(x + ib) + 1024, _MM_HINT_T0);
        step(ib, acc0);
        step(ib + 1, acc1);
    }
    if (ib < nb) step(ib, acc0);
    for (int j = 0; j < NC; ++j) out[j] = hsum(_mm256_add_ps(acc0[j], acc1[j]));
}

// ---- legacy blocks with a min against q8_1: unsigned levels ----
struct DecQ4_1 {
    using Block = BlockQ4_1;
    static __m256i levels(const Block& b) { return nibbles(b.qs); }
};
struct DecQ5_1 {
    using Block = BlockQ5_1;
    static __m256i levels(const Block& b) { return _mm256_or_si256(nibbles(b.qs), fifth_bits(b.qh)); }
};

template <class Dec, int NC>
void dot_with_min(int64_t k, const void* av, const void* bv, size_t bs, float* out) {
    using Block = typename Dec::Block;
    const Block* x = (const Block*)av;
    const char* b = (const char*)bv;
    __m256 acc0[NC], acc1[NC];
    float mins[NC];
    for (int j = 0; j < NC; ++j) { acc0[j] = acc1[j] = _mm256_setzero_ps(); mins[j] = 0.0f; }
    auto step = [&](int64_t ib, __m256* acc) __attribute__((always_inline)) {
        const __m256i u = Dec::levels(x[ib]);
        const float dx = f16(x[ib].d), mx = f16(x[ib].m);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_1& y = ((const BlockQ8_1*)(b + j * bs))[ib];
            const __m256i q = _mm256_loadu_si256((const __m256i*)y.qs);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(u, q)), _mm256_set1_ps(dx * f16(y.d)), acc[j]);
            mins[j] += mx * f16(y.s);
        }
    };
    const int64_t nb = k / 32;
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {
        _mm_prefetch((const char*)(x + ib) + 1024, _MM_HINT_T0);
        step(ib, acc0);
        step(ib + 1, acc1);
    }
    if (ib < nb) step(ib, acc0);
    for (int j = 0; j < NC; ++j) out[j] = hsum(_mm256_add_ps(acc0[j], acc1[j])) + mins[j];
}

// ---- K-quants ----
// One decoded super-block: 8 vectors of 32 levels (values 32c..32c+31 in vector c), the 16
// scales and mins (int8, natural order: value i uses entry i/16), d and dmin.
struct KBlock {
    __m256i u[8];
    __m128i scales, mins;
    float d, dmin;
};

inline __m256i low_bits(__m256i v, int shift, int mask) {
    return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8((char)mask));
}
inline __m128i low_bits128(__m128i v, int shift, int mask) {
    return _mm_and_si128(_mm_srli_epi16(v, shift), _mm_set1_epi8((char)mask));
}
inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

struct UnpQ2_K {
    using Block = BlockQ2_K;
    static constexpr int kOffShift = -1;  // no offset
    static constexpr bool kMins = true;
    static void run(const Block& b, KBlock& w) {
        for (int h = 0; h < 2; ++h) {
            const __m256i q = _mm256_loadu_si256((const __m256i*)(b.qs + 32 * h));
            for (int s = 0; s < 4; ++s) w.u[4 * h + s] = low_bits(q, 2 * s, 3);
        }
        const __m128i sm = _mm_loadu_si128((const __m128i*)b.scales);
        w.scales = low_bits128(sm, 0, 0xF);
        w.mins = low_bits128(sm, 4, 0xF);
        w.d = f16(b.d);
        w.dmin = f16(b.dmin);
    }
};
struct UnpQ3_K {
    using Block = BlockQ3_K;
    static constexpr int kOffShift = 2;
    static constexpr bool kMins = false;
    static void run(const Block& b, KBlock& w) {
        const __m256i hm = _mm256_loadu_si256((const __m256i*)b.hmask);
        for (int h = 0; h < 2; ++h) {
            const __m256i q = _mm256_loadu_si256((const __m256i*)(b.qs + 32 * h));
            for (int s = 0; s < 4; ++s) {
                const int c = 4 * h + s;
                w.u[c] = _mm256_or_si256(low_bits(q, 2 * s, 3), _mm256_slli_epi16(low_bits(hm, c, 1), 2));
            }
        }
        // low nibbles: bytes 0..7 (scales 0..7), then their high nibbles (scales 8..15); the two
        // high bits of scale j are bits 2*(j/4) of byte 8 + j%4
        const __m128i lo8 = _mm_loadl_epi64((const __m128i*)b.scales);
        const __m128i lo = _mm_unpacklo_epi64(low_bits128(lo8, 0, 0xF), low_bits128(lo8, 4, 0xF));
        const uint32_t h = load_u32(b.scales + 8);
        const __m128i hi = _mm_and_si128(_mm_setr_epi32((int)h, (int)(h >> 2), (int)(h >> 4), (int)(h >> 6)),
                                         _mm_set1_epi8(3));
        w.scales = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
        w.mins = _mm_setzero_si128();
        w.d = f16(b.d);
        w.dmin = 0.0f;
    }
};
// q4_K / q5_K: 8 six-bit scales and mins in 12 bytes; words w0, w1 hold the low 6 bits of
// scales / mins 0..3 (their top 2 bits: the high 2 bits of scales / mins 4..7), w2 the low
// nibbles of scales 4..7 and, in its high nibbles, of mins 4..7.
inline void scales_mins_k4(const uint8_t* q, __m128i& scales, __m128i& mins) {
    const uint32_t w0 = load_u32(q), w1 = load_u32(q + 4), w2 = load_u32(q + 8);
    const uint32_t sc_lo = w0 & 0x3f3f3f3fu, mn_lo = w1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | (((w0 >> 6) & 0x03030303u) << 4);
    const uint32_t mn_hi = ((w2 >> 4) & 0x0f0f0f0fu) | (((w1 >> 6) & 0x03030303u) << 4);
    const __m128i s8 = _mm_setr_epi32((int)sc_lo, (int)sc_hi, 0, 0), m8 = _mm_setr_epi32((int)mn_lo, (int)mn_hi, 0, 0);
    scales = _mm_unpacklo_epi8(s8, s8);  // one scale per 32 values: two groups of 16 each
    mins = _mm_unpacklo_epi8(m8, m8);
}
template <bool kFifth, class B>
struct UnpQ45_K {
    using Block = B;
    static constexpr int kOffShift = -1;
    static constexpr bool kMins = true;
    static void run(const Block& b, KBlock& w) {
        __m256i hb = _mm256_setzero_si256();
        if constexpr (kFifth) hb = _mm256_loadu_si256((const __m256i*)((const BlockQ5_K&)b).qh);
        for (int p = 0; p < 4; ++p) {
            const __m256i q = _mm256_loadu_si256((const __m256i*)(b.qs + 32 * p));
            w.u[2 * p] = low_bits(q, 0, 0xF);
            w.u[2 * p + 1] = low_bits(q, 4, 0xF);
            if constexpr (kFifth) {
                w.u[2 * p] = _mm256_or_si256(w.u[2 * p], _mm256_slli_epi16(low_bits(hb, 2 * p, 1), 4));
                w.u[2 * p + 1] = _mm256_or_si256(w.u[2 * p + 1], _mm256_slli_epi16(low_bits(hb, 2 * p + 1, 1), 4));
            }
        }
        scales_mins_k4(b.scales, w.scales, w.mins);
        w.d = f16(b.d);
        w.dmin = f16(b.dmin);
    }
};
using UnpQ4_K = UnpQ45_K<false, BlockQ4_K>;
using UnpQ5_K = UnpQ45_K<true, BlockQ5_K>;
struct UnpQ6_K {
    using Block = BlockQ6_K;
    static constexpr int kOffShift = 5;
    static constexpr bool kMins = false;
    static void run(const Block& b, KBlock& w) {
        for (int h = 0; h < 2; ++h) {
            const __m256i la = _mm256_loadu_si256((const __m256i*)(b.ql + 64 * h));
            const __m256i lb = _mm256_loadu_si256((const __m256i*)(b.ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i*)(b.qh + 32 * h));
            auto hi = [&](int s) { return _mm256_slli_epi16(low_bits(qh, 2 * s, 3), 4); };
            w.u[4 * h + 0] = _mm256_or_si256(low_bits(la, 0, 0xF), hi(0));
            w.u[4 * h + 1] = _mm256_or_si256(low_bits(lb, 0, 0xF), hi(1));
            w.u[4 * h + 2] = _mm256_or_si256(low_bits(la, 4, 0xF), hi(2));
            w.u[4 * h + 3] = _mm256_or_si256(low_bits(lb, 4, 0xF), hi(3));
        }
        w.scales = _mm_loadu_si128((const __m128i*)b.scales);
        w.mins = _mm_setzero_si128();
        w.d = f16(b.d);
        w.dmin = 0.0f;
    }
};

template <class Unp, int NC>
void dot_kquant(int64_t k, const void* av, const void* bv, size_t bs, float* out) {
    using Block = typename Unp::Block;
    const Block* x = (const Block*)av;
    const char* b = (const char*)bv;
    // Chunk c (values 32c..32c+31) spans groups 2c (low 128-bit lane) and 2c+1 (high lane):
    // with the even groups' scales in the low lane and the odd ones' in the high lane, one
    // in-lane shuffle per chunk broadcasts the pair.
    const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256i pick[8];
    for (int c = 0; c < 8; ++c) pick[c] = _mm256_set1_epi16((short)((2 * c) | ((2 * c + 1) << 8)));
    __m256 acc[NC];
    for (int j = 0; j < NC; ++j) acc[j] = _mm256_setzero_ps();
    KBlock w;
    for (int64_t ib = 0; ib < k / kQK_K; ++ib) {
        _mm_prefetch((const char*)(x + ib + 2), _MM_HINT_T0);
        _mm_prefetch((const char*)(x + ib + 2) + 64, _MM_HINT_T0);
        Unp::run(x[ib], w);
        const __m128i eo = _mm_shuffle_epi8(w.scales, even_odd);
        const __m256i lanes = _mm256_set_m128i(_mm_cvtepi8_epi16(_mm_srli_si128(eo, 8)), _mm_cvtepi8_epi16(eo));
        const __m256i scales = _mm256_cvtepi8_epi16(w.scales);
        const __m256i mins = _mm256_cvtepu8_epi16(w.mins);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_K& y = ((const BlockQ8_K*)(b + j * bs))[ib];
            __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int c = 0; c < 8; ++c) {
                const __m256i p = _mm256_maddubs_epi16(w.u[c], _mm256_loadu_si256((const __m256i*)(y.qs + 32 * c)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(lanes, pick[c])));
            }
            const __m256i bsums = _mm256_loadu_si256((const __m256i*)y.bsums);
            if constexpr (Unp::kOffShift >= 0)
                isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales), Unp::kOffShift));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(w.d * y.d), acc[j]);
            if constexpr (Unp::kMins)
                acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mins)),
                                          _mm256_set1_ps(w.dmin * y.d), acc[j]);
        }
    }
    for (int j = 0; j < NC; ++j) out[j] = hsum(acc[j]);
}

// ---- dequantization of weight rows for the GEMM path (bit exact with the type table's) ----
// 32 int8 values times d.
inline void store_scaled(__m256i v, __m256 d, float* y) {
    const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
}
// 16 unsigned levels (bytes 0..15 of v) as l * a - b, with a separate multiply and subtract.
inline void store_affine16(__m128i v, __m256 a, __m256 b, float* y) {
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)), a), b));
    _mm256_storeu_ps(y + 8, _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))), a), b));
}

template <class Dec>
void dequant_signed(const void* src, float* y, int64_t n) {
    const typename Dec::Block* x = (const typename Dec::Block*)src;
    for (int64_t ib = 0; ib < n / 32; ++ib, y += 32) {
        float d;
        const __m256i v = Dec::values(x[ib], d);
        store_scaled(v, _mm256_set1_ps(d), y);
    }
}

// q4_1 / q5_1: l * d + m (the table computes it as a multiply, then an add).
template <class Dec>
void dequant_with_min(const void* src, float* y, int64_t n) {
    const typename Dec::Block* x = (const typename Dec::Block*)src;
    for (int64_t ib = 0; ib < n / 32; ++ib, y += 32) {
        const __m256i u = Dec::levels(x[ib]);
        const __m256 d = _mm256_set1_ps(f16(x[ib].d)), m = _mm256_set1_ps(-f16(x[ib].m));
        store_affine16(_mm256_castsi256_si128(u), d, m, y);
        store_affine16(_mm256_extracti128_si256(u, 1), d, m, y + 16);
    }
}

// K-quants: value = (d * sc) * (u - off) - dmin * m; the offset is folded into the levels
// (small integers, exact) so each value is one multiply and one subtract, as in the table.
template <class Unp>
void dequant_kquant(const void* src, float* y, int64_t n) {
    const typename Unp::Block* x = (const typename Unp::Block*)src;
    KBlock w;
    alignas(16) int8_t sc[16];
    alignas(16) uint8_t mn[16];
    for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
        Unp::run(x[ib], w);
        _mm_store_si128((__m128i*)sc, w.scales);
        _mm_store_si128((__m128i*)mn, w.mins);
        const int off = Unp::kOffShift >= 0 ? 1 << Unp::kOffShift : 0;
        for (int c = 0; c < 8; ++c, y += 32) {
            const __m256i v = _mm256_sub_epi8(w.u[c], _mm256_set1_epi8((char)off));  // signed now
            const __m128i half[2] = {_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)};
            for (int h = 0; h < 2; ++h) {
                const int g = 2 * c + h;
                const __m256 a = _mm256_set1_ps(w.d * sc[g]);
                const __m256 b = _mm256_set1_ps(w.dmin * mn[g]);
                float* out = y + 16 * h;
                _mm256_storeu_ps(out, _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(half[h])), a), b));
                _mm256_storeu_ps(out + 8, _mm256_sub_ps(_mm256_mul_ps(
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(half[h], 8))), a), b));
            }
        }
    }
}

// DotFn adapters: nc (1..4) to the compile-time column count.
template <template <class, int> class K, class D>
void dispatch(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float*) {
    switch (nc) {
        case 1: K<D, 1>::run(k, a, b, bs, out); break;
        case 2: K<D, 2>::run(k, a, b, bs, out); break;
        case 3: K<D, 3>::run(k, a, b, bs, out); break;
        default: K<D, 4>::run(k, a, b, bs, out); break;
    }
}
template <class D, int NC> struct Signed { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o) { dot_signed<D, NC>(k, a, b, bs, o); } };
template <class D, int NC> struct WithMin { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o) { dot_with_min<D, NC>(k, a, b, bs, o); } };
template <class D, int NC> struct KQuant { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o) { dot_kquant<D, NC>(k, a, b, bs, o); } };

}  // namespace


}  // namespace pyggml::cpu::mm

#pragma GCC pop_options

// Outside the target region: filling the table must run on any CPU.
namespace pyggml::cpu::mm {
void add_quant_dots_avx2(Kernels& k) {
    k.dot[(int)Type::Q4_1] = dispatch<WithMin, DecQ4_1>;
    k.dot[(int)Type::Q5_1] = dispatch<WithMin, DecQ5_1>;
    k.dot[(int)Type::Q5_0] = dispatch<Signed, DecQ5_0>;
    k.dot[(int)Type::IQ4_NL] = dispatch<Signed, DecIQ4NL>;
    k.dot[(int)Type::MXFP4] = dispatch<Signed, DecMXFP4>;
    k.dot[(int)Type::Q2_K] = dispatch<KQuant, UnpQ2_K>;
    k.dot[(int)Type::Q3_K] = dispatch<KQuant, UnpQ3_K>;
    k.dot[(int)Type::Q4_K] = dispatch<KQuant, UnpQ4_K>;
    k.dot[(int)Type::Q5_K] = dispatch<KQuant, UnpQ5_K>;
    k.dot[(int)Type::Q6_K] = dispatch<KQuant, UnpQ6_K>;
    k.dequant[(int)Type::Q4_1] = dequant_with_min<DecQ4_1>;
    k.dequant[(int)Type::Q5_1] = dequant_with_min<DecQ5_1>;
    k.dequant[(int)Type::Q5_0] = dequant_signed<DecQ5_0>;
    k.dequant[(int)Type::IQ4_NL] = dequant_signed<DecIQ4NL>;
    k.dequant[(int)Type::MXFP4] = dequant_signed<DecMXFP4>;
    k.dequant[(int)Type::Q2_K] = dequant_kquant<UnpQ2_K>;
    k.dequant[(int)Type::Q3_K] = dequant_kquant<UnpQ3_K>;
    k.dequant[(int)Type::Q4_K] = dequant_kquant<UnpQ4_K>;
    k.dequant[(int)Type::Q5_K] = dequant_kquant<UnpQ5_K>;
    k.dequant[(int)Type::Q6_K] = dequant_kquant<UnpQ6_K>;
}
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
void add_quant_dots_avx2(Kernels&) {}
}  // namespace pyggml::cpu::mm
#endif
