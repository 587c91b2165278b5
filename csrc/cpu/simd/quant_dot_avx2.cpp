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
        d = mxfp4_e8m0_to_scale(b.e);
        return _mm256_shuffle_epi8(lut16(kE2M1Doubled), nibbles(b.qs));
    }
};

template <class Dec, int NC>
void dot_signed(int64_t k, const void* av, const void* bv, size_t bs, float* out) {
    using Block = typename Dec::Block;
    const Block* x = (const Block*)av;
    const char* b = (const char*)bv;
    __m256 acc[NC];
    for (int j = 0; j < NC; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < k / 32; ++ib) {
        _mm_prefetch((const char*)(x + ib) + 512, _MM_HINT_T0);
        float dx;
        const __m256i a = Dec::values(x[ib], dx);
        const __m256i ua = _mm256_sign_epi8(a, a);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_0& y = ((const BlockQ8_0*)(b + j * bs))[ib];
            const __m256i sy = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i*)y.qs), a);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(ua, sy)), _mm256_set1_ps(dx * f16(y.d)), acc[j]);
        }
    }
    for (int j = 0; j < NC; ++j) out[j] = hsum(acc[j]);
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
    __m256 acc[NC];
    float mins[NC];
    for (int j = 0; j < NC; ++j) { acc[j] = _mm256_setzero_ps(); mins[j] = 0.0f; }
    for (int64_t ib = 0; ib < k / 32; ++ib) {
        _mm_prefetch((const char*)(x + ib) + 512, _MM_HINT_T0);
        const __m256i u = Dec::levels(x[ib]);
        const float dx = f16(x[ib].d), mx = f16(x[ib].m);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_1& y = ((const BlockQ8_1*)(b + j * bs))[ib];
            const __m256i q = _mm256_loadu_si256((const __m256i*)y.qs);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(u, q)), _mm256_set1_ps(dx * f16(y.d)), acc[j]);
            mins[j] += mx * f16(y.s);
        }
    }
    for (int j = 0; j < NC; ++j) out[j] = hsum(acc[j]) + mins[j];
}

// ---- K-quants ----
// One decoded super-block: 8 vectors of 32 levels (values 32c..32c+31 in vector c), 16 scales
// and mins as int16, the level offset as a shift (off = 1 << off_shift, or 0).
struct KBlock {
    __m256i u[8];
    alignas(32) int16_t scale[16];
    alignas(32) int16_t min[16];
    float d, dmin;
};

inline __m256i low_bits(__m256i v, int shift, int mask) {
    return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8((char)mask));
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
        for (int g = 0; g < 16; ++g) { w.scale[g] = b.scales[g] & 0xF; w.min[g] = b.scales[g] >> 4; }
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
        int8_t sc[16];
        q3_K_scales(b.scales, sc);
        for (int g = 0; g < 16; ++g) w.scale[g] = sc[g];
        w.d = f16(b.d);
        w.dmin = 0.0f;
    }
};
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
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            kquant_scale_min(j, b.scales, sc, m);
            w.scale[2 * j] = w.scale[2 * j + 1] = sc;
            w.min[2 * j] = w.min[2 * j + 1] = m;
        }
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
        for (int g = 0; g < 16; ++g) w.scale[g] = b.scales[g];
        w.d = f16(b.d);
        w.dmin = 0.0f;
    }
};

template <class Unp, int NC>
void dot_kquant(int64_t k, const void* av, const void* bv, size_t bs, float* out) {
    using Block = typename Unp::Block;
    const Block* x = (const Block*)av;
    const char* b = (const char*)bv;
    __m256 acc[NC];
    for (int j = 0; j < NC; ++j) acc[j] = _mm256_setzero_ps();
    KBlock w;
    __m256i sc[8];
    for (int64_t ib = 0; ib < k / kQK_K; ++ib) {
        _mm_prefetch((const char*)(x + ib + 2), _MM_HINT_T0);
        _mm_prefetch((const char*)(x + ib + 2) + 64, _MM_HINT_T0);
        Unp::run(x[ib], w);
        for (int c = 0; c < 8; ++c)
            sc[c] = _mm256_set_m128i(_mm_set1_epi16(w.scale[2 * c + 1]), _mm_set1_epi16(w.scale[2 * c]));
        const __m256i scales = _mm256_load_si256((const __m256i*)w.scale);
        const __m256i mins = _mm256_load_si256((const __m256i*)w.min);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_K& y = ((const BlockQ8_K*)(b + j * bs))[ib];
            __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int c = 0; c < 8; ++c) {
                const __m256i p = _mm256_maddubs_epi16(w.u[c], _mm256_loadu_si256((const __m256i*)(y.qs + 32 * c)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc[c]));
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
}
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
void add_quant_dots_avx2(Kernels&) {}
}  // namespace pyggml::cpu::mm
#endif
