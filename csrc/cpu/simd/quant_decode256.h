// 256-bit decoders of the newer block types, shared by the dot kernels (quant_dot256.h,
// quant_dot2_256.h) and the quantized GEMM (quant_gemm256.h). Include inside idot256.h's
// target region (its integer dots udot, udot_offset), in namespace pyggml::cpu::mm.
//   - legacy 32-value blocks: Dec*::values gives signed int8 values and d (q8_0, q4_0, q5_0,
//     iq4_nl, mxfp4); Dec*::levels gives unsigned levels (q4_1, q5_1: value = d * l + m);
//   - K-quants: Unp*::run gives a KBlock of unsigned levels u with value =
//     d * scale[i/16] * (u - off) - dmin * min[i/16], off = 1 << kOffShift (none when < 0).
#pragma once

namespace {

inline float f16(uint16_t h) { return _cvtsh_ss(h); }
inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
// The f16 pair at p (a block's d and m, or q8_1's d and s) in lanes 0 and 1, converted by one
// load-and-convert; lanes 2, 3 hold the next 4 bytes converted (the caller ignores them, every
// block has them). Fewer instructions than one scalar conversion per half.
inline __m128 f16_pair(const void* p) { return _mm_cvtph_ps(_mm_loadl_epi64((const __m128i*)p)); }
// lane 0 of a times lane 0 of b, broadcast: the combined block scale, as dx * dy in floats.
inline __m256 scale_product(__m128 a, __m128 b) { return _mm256_broadcastss_ps(_mm_mul_ss(a, b)); }
// Byte j is 0xFF where bit j of x is set.
inline __m256i bits_to_bytes(uint32_t x) {
    const __m256i spread = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202,
                                              0x0303030303030303);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}
// 16 bytes of packed nibbles -> 32 levels: low nibbles are values 0..15, high ones 16..31.
// (The 16 bytes broadcast to both lanes, the high lane's 32-bit words shifted right by 4: its
// bytes' high nibbles land in their low nibbles. One shuffle fewer than shift-then-insert.)
inline __m256i nibbles(const uint8_t* qs) {
    const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)qs));
    return _mm256_and_si256(_mm256_srlv_epi32(q, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
}
inline __m256i lut16(const int8_t* table) {
    const __m128i t = _mm_loadu_si128((const __m128i*)table);
    return _mm256_set_m128i(t, t);
}
// A lookup table of 16 levels: the type's values plus its offset (the kernels with extras).
struct OffsetLevels {
    int8_t v[16];
    constexpr OffsetLevels(const int8_t* values, int offset) : v() {
        for (int i = 0; i < 16; ++i) v[i] = int8_t(values[i] + offset);
    }
};
// E2M1 values (doubled) plus kE2M1Offset: the unsigned levels 0..24 (maddubs then never
// saturates: 2 * 24 * 128 < 2^15).
inline constexpr OffsetLevels kE2M1Levels{kE2M1Doubled, kE2M1Offset};
inline constexpr OffsetLevels kIQ4NLLevels{kIQ4NLValues, kIQ4NLOffset};
// 0x10 in byte j where bit j of qh4's 32 bits is set. AVX-512BW takes the bits as a byte
// mask: one masked move instead of bits_to_bytes' broadcast, shuffle, and, compare and and.
inline __m256i fifth_bits(const uint8_t* qh4) {
    uint32_t qh;
    std::memcpy(&qh, qh4, 4);
#if defined(PYGGML_IDOT_VNNI)
    return _mm256_maskz_mov_epi8((__mmask32)qh, _mm256_set1_epi8(0x10));
#else
    return _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
#endif
}

// ---- legacy blocks: signed values (scale(): d in lane 0) ----
struct DecQ8_0 {
    using Block = BlockQ8_0;
    static __m128 scale(const Block& b) { return f16_pair(&b.d); }  // lane 0: d
    static __m256i values(const Block& b, float& d) {
        d = f16(b.d);
        return _mm256_loadu_si256((const __m256i*)b.qs);
    }
};
struct DecQ4_0 {
    using Block = BlockQ4_0;
    static __m128 scale(const Block& b) { return f16_pair(&b.d); }  // lane 0: d
    static __m256i values(const Block& b, float& d) {
        d = f16(b.d);
        return _mm256_sub_epi8(levels(b), _mm256_set1_epi8(kOffset));
    }
    static constexpr int kOffset = 8;  // values = levels - kOffset
    static __m256i levels(const Block& b) { return nibbles(b.qs); }
};
struct DecQ5_0 {
    using Block = BlockQ5_0;
    static __m128 scale(const Block& b) { return f16_pair(&b.d); }  // lane 0: d
    static __m256i values(const Block& b, float& d) {
        d = f16(b.d);
        return _mm256_sub_epi8(levels(b), _mm256_set1_epi8(kOffset));
    }
    static constexpr int kOffset = 16;  // values = levels - kOffset
    static __m256i levels(const Block& b) { return _mm256_or_si256(nibbles(b.qs), fifth_bits(b.qh)); }
};
// Whether Dec's values are unsigned levels minus a constant kOffset (Dec::levels gives them).
template <class Dec>
constexpr auto has_offset(int) -> decltype(Dec::kOffset, bool()) { return true; }
template <class Dec>
constexpr bool has_offset(long) { return false; }

// Types whose dot kernels keep two accumulators, one for the even blocks and one for the odd
// ones (an odd last block goes to the even one), summed lane by lane before the horizontal
// sum: two FMA chains per output, so the kernel is not bound by one chain's latency. Every
// kernel of such a type (dots, two-row dots, GEMM tiles) keeps that order.
template <class Dec>
constexpr auto passes_of(int) -> decltype(Dec::kPasses, int()) { return Dec::kPasses; }
template <class Dec>
constexpr int passes_of(long) { return 1; }

struct DecIQ4NL {
    using Block = BlockIQ4NL;
    static constexpr int kPasses = 2;
    static __m128 scale(const Block& b) { return f16_pair(&b.d); }  // lane 0: d
    static __m256i values(const Block& b, float& d) {
        d = f16(b.d);
        return _mm256_shuffle_epi8(lut16(kIQ4NLValues), nibbles(b.qs));
    }
};
// mxfp4's scale 2^(e-128) for every E8M0 byte e (powers of two, so the halvings and doublings
// from 1 are exact, 2^-127 and 2^-128 included): one load instead of building the bits.
struct E8M0HalfTable {
    float v[256];
    constexpr E8M0HalfTable() : v() {
        v[128] = 1.0f;
        for (int e = 129; e < 256; ++e) v[e] = v[e - 1] * 2.0f;
        for (int e = 127; e >= 0; --e) v[e] = v[e + 1] * 0.5f;
    }
};
inline constexpr E8M0HalfTable kE8M0Half{};
struct DecMXFP4 {
    using Block = BlockMXFP4;
    static constexpr int kPasses = 2;
    static __m128 scale(const Block& b) { return _mm_load_ss(&kE8M0Half.v[b.e]); }
    static __m256i values(const Block& b, float& d) {
        d = kE8M0Half.v[b.e];
        return _mm256_shuffle_epi8(lut16(kE2M1Doubled), nibbles(b.qs));
    }
};

// ---- legacy blocks with a min: unsigned levels ----
struct DecQ4_1 {
    using Block = BlockQ4_1;
    static __m256i levels(const Block& b) { return nibbles(b.qs); }
};
struct DecQ5_1 {
    using Block = BlockQ5_1;
    static __m256i levels(const Block& b) { return _mm256_or_si256(nibbles(b.qs), fifth_bits(b.qh)); }
};

// ---- K-quants ----
// One decoded super-block: 8 vectors of 32 levels (values 32c..32c+31 in vector c), the 16
// scales and mins (int8, natural order: value i uses entry i/16), d and dmin. Unp::run fills
// all of it; Unp::run_scales all but the levels, which Unp::level(b, Unp::chunk_source(b), c)
// gives one chunk at a time (the dot kernel builds each right before its products).
inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
// Types whose scales are unsigned (q2_K, q4_K, q5_K) also give them as bytes in both 128-bit
// lanes (sbytes): chunk c's int16 scale pair is then one zero-extending byte shuffle away,
// lane 0 taking byte kPickStep * c and lane 1 byte kPickStep * c + kPickOdd.
struct KBlock {
    __m256i u[8];
    __m128i scales, mins;
    __m256i sbytes;
    float d, dmin;
    __m128 d_dmin;  // types with mins: d and dmin in lanes 0 and 1, one conversion for both
};
// The f16 pair d, dmin (adjacent in q2_K, q4_K, q5_K blocks), widened.
inline __m128 f16_pair_at(const uint16_t* d) { return _mm_cvtph_ps(_mm_cvtsi32_si128((int)load_u32((const uint8_t*)d))); }

inline __m256i low_bits(__m256i v, int shift, int mask) {
    return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8((char)mask));
}
inline __m128i low_bits128(__m128i v, int shift, int mask) {
    return _mm_and_si128(_mm_srli_epi16(v, shift), _mm_set1_epi8((char)mask));
}
inline uint64_t load_u64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

struct UnpQ2_K {
    using Block = BlockQ2_K;
    static constexpr int kOffShift = -1;  // no offset
    static constexpr bool kMins = true;
    static constexpr int kPickStep = 2, kPickOdd = 1;  // chunk c: groups 2c, 2c+1
    static __m256i chunk_source(const Block&) { return _mm256_setzero_si256(); }
    static __m256i level(const Block& b, __m256i, int c) {
        return low_bits(_mm256_loadu_si256((const __m256i*)(b.qs + 32 * (c / 4))), 2 * (c % 4), 3);
    }
    // The dots' levels: odd chunks' as 4 * level, by one mask of bits 2..3 where level() shifts
    // first (chunk c's bits sit at 2 * (c % 4); chunks 2, 3 share one shift by 4): 4 shifts
    // fewer per block. The dot sums the odd chunks apart and divides that sum by 4
    // (kOddChunkShift; exact, every term is a multiple of 4). maddubs stays below 2^15:
    // 2 * 12 * 128.
    static constexpr int kOddChunkShift = 2;
    static __m256i dot_level(const Block& b, __m256i, int c) {
        const __m256i q = _mm256_loadu_si256((const __m256i*)(b.qs + 32 * (c / 4)));
        return _mm256_and_si256(c % 4 < 2 ? q : _mm256_srli_epi16(q, 4), _mm256_set1_epi8(c % 2 ? 0x0C : 0x03));
    }
    // The 16 mins as int16, by one widening load and one shift (the high nibbles).
    static __m256i mins16(const Block& b) {
        return _mm256_srli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)b.scales)), 4);
    }
    static void run(const Block& b, KBlock& w) {
        for (int c = 0; c < 8; ++c) w.u[c] = level(b, chunk_source(b), c);
        run_scales(b, w);
    }
    static void run_scales(const Block& b, KBlock& w) {
        const __m128i sm = _mm_loadu_si128((const __m128i*)b.scales);
        w.scales = low_bits128(sm, 0, 0xF);
        w.mins = low_bits128(sm, 4, 0xF);
        w.sbytes = _mm256_and_si256(_mm256_broadcastsi128_si256(sm), _mm256_set1_epi8(0xF));
        w.d = f16(b.d);
        w.dmin = f16(b.dmin);
        w.d_dmin = f16_pair_at(&b.d);
    }
#if defined(PYGGML_IDOT_VNNI)
    // Scaled levels (VNNI): chunk c's bytes scale * level, by one in-lane table lookup, so one
    // vpdpbusd per chunk gives the same 32-bit sums as maddubs then vpdpwssd by the scale (the
    // sum of scale * (u * y) over the same 4 values; scale * u <= 45). Chunk 4h + k takes group
    // 8h + 2k in its low lane, 8h + 2k + 1 in its high one (L = 0, 1 below). tab[2h]: byte
    // 4j + u = u * scale of group 8h + 4j + L (chunks k = 0, 2 as j = 0, 1; index: the level
    // in bits 0..1). tab[2h + 1]: byte 4u + j = u * scale of group 8h + 4j + 2 + L (chunks
    // k = 1, 3 as j = 0, 1; index: the level in bits 2..3). Each table is one byte shuffle of
    // the scales and one multiply (no carries: every product fits its byte).
    static constexpr bool kScaledLevels = true;
    struct ScaleTableShuffles {
        alignas(32) int8_t v[4][32];
        constexpr ScaleTableShuffles() : v() {
            for (int h = 0; h < 2; ++h)
                for (int i = 0; i < 32; ++i) {
                    const int lane = i / 16, p = i % 16, g = 8 * h + lane;
                    v[2 * h][i] = int8_t(p % 4 == 0 && p < 8 ? g + p : -128);        // dword j: scale, zero-extended
                    v[2 * h + 1][i] = int8_t(p % 4 < 2 ? g + 2 + 4 * (p % 4) : -128);  // dword u: scales j = 0, 1
                }
        }
    };
    static void scaled_tables(const Block& b, __m256i tab[4]) {
        static constexpr ScaleTableShuffles kShuffles{};
        const __m256i sc = _mm256_and_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)b.scales)),
                                            _mm256_set1_epi8(0xF));
        for (int h = 0; h < 2; ++h) {
            const __m256i even = _mm256_shuffle_epi8(sc, _mm256_load_si256((const __m256i*)kShuffles.v[2 * h]));
            const __m256i odd = _mm256_shuffle_epi8(sc, _mm256_load_si256((const __m256i*)kShuffles.v[2 * h + 1]));
            tab[2 * h] = _mm256_mullo_epi32(even, _mm256_set1_epi32(0x03020100));
            tab[2 * h + 1] = _mm256_mullo_epi16(odd, _mm256_setr_epi16(0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 1, 2, 2, 3, 3));
        }
    }
    static __m256i scaled_level(const Block& b, const __m256i tab[4], int c) {
        const int h = c / 4, k = c % 4;
        const __m256i q = _mm256_loadu_si256((const __m256i*)(b.qs + 32 * h));
        const __m256i src = k < 2 ? q : _mm256_srli_epi16(q, 4);
        // (src & mask) | j: bit 7 clear, so the shuffle never zeroes a byte
        const __m256i mask = _mm256_set1_epi8(k % 2 ? 0x0C : 0x03);
        const __m256i idx = k < 2 ? _mm256_and_si256(src, mask)
                                  : _mm256_ternarylogic_epi32(src, mask, _mm256_set1_epi8(k == 2 ? 4 : 1), 0xEA);
        return _mm256_shuffle_epi8(tab[2 * h + k % 2], idx);
    }
#endif
};
struct UnpQ3_K {
    using Block = BlockQ3_K;
    static constexpr int kOffShift = 2;
    static constexpr bool kMins = false;
    static __m256i chunk_source(const Block& b) { return _mm256_loadu_si256((const __m256i*)b.hmask); }
    // Levels of chunk c (values 32c..32c+31): two bits from qs, the third from bit c of each
    // hmask byte, moved to bit 2 by one 16-bit shift (no bit crosses into bit 2 from the
    // neighbouring byte for c <= 7), then masked.
    static __m256i level(const Block& b, __m256i hm, int c) {
        const int half = c / 4, s = c % 4;
        const __m256i q = _mm256_loadu_si256((const __m256i*)(b.qs + 32 * half));
        const __m256i h = c < 2 ? _mm256_slli_epi16(hm, 2 - c) : c > 2 ? _mm256_srli_epi16(hm, c - 2) : hm;
        return _mm256_or_si256(low_bits(q, 2 * s, 3), _mm256_and_si256(h, _mm256_set1_epi8(4)));
    }
    // The dots' levels (see UnpQ2_K::dot_level): odd chunks' as 4 * level, their two low bits
    // by a mask of bits 2..3 (chunks 2, 3 of a half share one shift of qs by 4) and the third
    // moved to bit 4 instead of 2 (one shift of hmask either way). maddubs: 2 * 28 * 128 < 2^15.
    static constexpr int kOddChunkShift = 2;
    static __m256i dot_level(const Block& b, __m256i hm, int c) {
        const __m256i q = _mm256_loadu_si256((const __m256i*)(b.qs + 32 * (c / 4)));
        const __m256i lo = _mm256_and_si256(c % 4 < 2 ? q : _mm256_srli_epi16(q, 4), _mm256_set1_epi8(c % 2 ? 0x0C : 0x03));
        const int to = c % 2 ? 4 : 2;  // bit c of each hmask byte goes to bit `to` of the same byte
        const __m256i h = c < to ? _mm256_slli_epi16(hm, to - c) : c > to ? _mm256_srli_epi16(hm, c - to) : hm;
        return _mm256_or_si256(lo, _mm256_and_si256(h, _mm256_set1_epi8((char)(1 << to))));
    }
    // Everything but the levels.
    static void run_scales(const Block& b, KBlock& w) {
        // low nibbles: bytes 0..7 (scales 0..7), then their high nibbles (scales 8..15); the two
        // high bits of scale j are bits 2*(j/4) of byte 8 + j%4. Both by per-element shifts of
        // broadcast words (what crosses from a neighbouring byte lands outside the masks).
        const __m128i lo8 = _mm_set1_epi64x((long long)load_u64(b.scales));
        const __m128i lo = _mm_and_si128(_mm_srlv_epi64(lo8, _mm_setr_epi32(0, 0, 4, 0)), _mm_set1_epi8(0xF));
        const __m128i h = _mm_set1_epi32((int)load_u32(b.scales + 8));
        const __m128i hi = _mm_and_si128(_mm_slli_epi16(_mm_srlv_epi32(h, _mm_setr_epi32(0, 2, 4, 6)), 4),
                                         _mm_set1_epi8(0x30));
        w.scales = _mm_sub_epi8(_mm_or_si128(lo, hi), _mm_set1_epi8(32));
        w.mins = _mm_setzero_si128();
        w.d = f16(b.d);
        w.dmin = 0.0f;
    }
    static void run(const Block& b, KBlock& w) {
        const __m256i hm = chunk_source(b);
        for (int c = 0; c < 8; ++c) w.u[c] = level(b, hm, c);
        run_scales(b, w);
    }
};
// q4_K / q5_K: 8 six-bit scales and mins in 12 bytes; words w0, w1 hold the low 6 bits of
// scales / mins 0..3 (their top 2 bits: the high 2 bits of scales / mins 4..7), w2 the low
// nibbles of scales 4..7 and, in its high nibbles, of mins 4..7.
inline void scales_mins_k4(const uint8_t* q, __m128i& scales, __m128i& mins, __m256i& sbytes) {
    const uint32_t w0 = load_u32(q), w1 = load_u32(q + 4), w2 = load_u32(q + 8);
    const uint32_t sc_lo = w0 & 0x3f3f3f3fu, mn_lo = w1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | (((w0 >> 6) & 0x03030303u) << 4);
    const uint32_t mn_hi = ((w2 >> 4) & 0x0f0f0f0fu) | (((w1 >> 6) & 0x03030303u) << 4);
    const __m128i s8 = _mm_setr_epi32((int)sc_lo, (int)sc_hi, 0, 0), m8 = _mm_setr_epi32((int)mn_lo, (int)mn_hi, 0, 0);
    scales = _mm_unpacklo_epi8(s8, s8);  // one scale per 32 values: two groups of 16 each
    mins = _mm_unpacklo_epi8(m8, m8);
    sbytes = _mm256_broadcastsi128_si256(s8);  // scale c in byte c of both lanes
}
template <bool kFifth, class B>
struct UnpQ45_K {
    using Block = B;
    static constexpr int kOffShift = -1;
    static constexpr bool kMins = true;
    static constexpr int kPickStep = 1, kPickOdd = 0;  // chunk c: one scale for both groups
    static __m256i chunk_source(const Block& b) {
        if constexpr (kFifth) return _mm256_loadu_si256((const __m256i*)((const BlockQ5_K&)b).qh);
        return _mm256_setzero_si256();
    }
    // chunk c: the low (c even) or high nibbles of qs bytes 32 * (c / 2).., plus bit c of qh
    static __m256i level(const Block& b, __m256i hb, int c) {
        const __m256i u = low_bits(_mm256_loadu_si256((const __m256i*)(b.qs + 32 * (c / 2))), 4 * (c & 1), 0xF);
        if constexpr (kFifth) return _mm256_or_si256(u, _mm256_slli_epi16(low_bits(hb, c, 1), 4));
        return u;
    }
    static void run(const Block& b, KBlock& w) {
        const __m256i hb = chunk_source(b);
        for (int c = 0; c < 8; ++c) w.u[c] = level(b, hb, c);
        run_scales(b, w);
    }
    static void run_scales(const Block& b, KBlock& w) {
        scales_mins_k4(b.scales, w.scales, w.mins, w.sbytes);
        w.d = f16(b.d);
        w.dmin = f16(b.dmin);
        w.d_dmin = f16_pair_at(&b.d);
    }
};
using UnpQ4_K = UnpQ45_K<false, BlockQ4_K>;
using UnpQ5_K = UnpQ45_K<true, BlockQ5_K>;
struct UnpQ6_K {
    using Block = BlockQ6_K;
    static constexpr int kOffShift = 5;
    static constexpr bool kMins = false;
    static constexpr bool kEvenOddLanes = true;  // (measured as fast as the lane permutes here)
    static __m256i chunk_source(const Block&) { return _mm256_setzero_si256(); }
    // chunk c = 4h + s: low nibbles (s < 2) or high ones of ql bytes 64h + 32(s & 1).., and
    // bits 2s, 2s+1 of qh bytes 32h.. moved to bits 4, 5 by one 16-bit shift (what crosses from
    // the neighbouring byte lands outside them), then masked
    static __m256i level(const Block& b, __m256i, int c) {
        const int h = c / 4, s = c % 4;
        const __m256i l = _mm256_loadu_si256((const __m256i*)(b.ql + 64 * h + 32 * (s & 1)));
        const __m256i qh = _mm256_loadu_si256((const __m256i*)(b.qh + 32 * h));
        const __m256i v = s < 2 ? _mm256_slli_epi16(qh, 4 - 2 * s) : s > 2 ? _mm256_srli_epi16(qh, 2) : qh;
        return _mm256_or_si256(low_bits(l, s < 2 ? 0 : 4, 0xF), _mm256_and_si256(v, _mm256_set1_epi8(0x30)));
    }
    static void run(const Block& b, KBlock& w) {
        for (int c = 0; c < 8; ++c) w.u[c] = level(b, chunk_source(b), c);
        run_scales(b, w);
    }
    static void run_scales(const Block& b, KBlock& w) {
        w.scales = _mm_loadu_si128((const __m128i*)b.scales);
        w.mins = _mm_setzero_si128();
        w.d = f16(b.d);
        w.dmin = 0.0f;
    }
};

}  // namespace
