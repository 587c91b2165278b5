// 256-bit two-row dot kernels of the 32-value block types (q8_0, q4_0, q5_0, iq4_nl, mxfp4
// against q8_0; q4_1, q5_1 against q8_1), built per instruction set by quant_dot2_avx2.cpp and
// quant_dot2_avx512.cpp (integer dots: idot256.h). Each activation block is loaded once for
// both weight rows, and the two rows' accumulators are independent FMA chains. The one-row
// kernels (mm_quant256.h, quant_dot256.h) and the scalar ones stay the references. Over
// converted columns, q4_0, q5_0, mxfp4 and (VNNI only) q8_0, iq4_nl take dot2x instead: the
// integer dots start from the columns' extras, no sign trick (K 576 x M 1536 and 1536 x 576 at 2
// to 7 columns, one thread: 1.15-1.3x the rate of dot2_signed; compare_quant --mode widths -t 1).
// Defines fill_quant_dot2(Kernels&) (the dot2 and dot2x rows), outside the target region.
#pragma once
#include <cstring>

#include "cpu/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include "cpu/simd/idot256.h"

namespace pyggml::cpu::mm {
#include "cpu/simd/quant_decode256.h"

namespace {

// Two-pass types (passes_of): the even blocks, then the odd ones (the rows are read twice, the
// second time from cache), each pass with its own accumulators: the one-row kernel's order.
template <class Dec, int NC>
void dot2_signed(int64_t k, const void* av, size_t as, const void* bv, size_t bs, float* out) {
    using Block = typename Dec::Block;
    constexpr int kPasses = passes_of<Dec>(0);
    const Block* x0 = (const Block*)av;
    const Block* x1 = (const Block*)((const char*)av + as);
    const char* b = (const char*)bv;
    const int64_t nb = k / 32;
    auto pass = [&](int64_t first, __m256* acc0, __m256* acc1) __attribute__((always_inline)) {
        for (int j = 0; j < NC; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
        for (int64_t ib = first; ib < nb; ib += kPasses) {
            if (first == 0) {  // a later pass finds the rows in cache
                _mm_prefetch((const char*)(x0 + ib) + 768, _MM_HINT_T0);
                _mm_prefetch((const char*)(x1 + ib) + 768, _MM_HINT_T0);
            }
            if constexpr (NC == 1 && has_offset<Dec>(0)) {
                // one column: the one-row dots' offset form (the same integers), the offset's
                // products computed once for both rows
                const BlockQ8_0& y = ((const BlockQ8_0*)b)[ib];
                const __m256i q = _mm256_loadu_si256((const __m256i*)y.qs);
                const __m256i off = udot(_mm256_set1_epi8((char)Dec::kOffset), q);
                const __m128 dy = f16_pair(&y.d);
                const __m256i i0 = _mm256_sub_epi32(udot(Dec::levels(x0[ib]), q), off);
                const __m256i i1 = _mm256_sub_epi32(udot(Dec::levels(x1[ib]), q), off);
                acc0[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), scale_product(Dec::scale(x0[ib]), dy), acc0[0]);
                acc1[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), scale_product(Dec::scale(x1[ib]), dy), acc1[0]);
                continue;
            }
            float unused0, unused1;
            const __m256i a0 = Dec::values(x0[ib], unused0), a1 = Dec::values(x1[ib], unused1);
            const __m128 d0 = Dec::scale(x0[ib]), d1 = Dec::scale(x1[ib]);
            const __m256i u0 = _mm256_sign_epi8(a0, a0), u1 = _mm256_sign_epi8(a1, a1);
#pragma GCC unroll 4
            for (int j = 0; j < NC; ++j) {
                const BlockQ8_0& y = ((const BlockQ8_0*)(b + j * bs))[ib];
                const __m256i q = _mm256_loadu_si256((const __m256i*)y.qs);
                const __m128 dy = f16_pair(&y.d);
                acc0[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(u0, _mm256_sign_epi8(q, a0))), scale_product(d0, dy), acc0[j]);
                acc1[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(u1, _mm256_sign_epi8(q, a1))), scale_product(d1, dy), acc1[j]);
            }
        }
    };
    __m256 acc0[NC], acc1[NC];
    pass(0, acc0, acc1);
    if constexpr (kPasses == 2) {
        __m256 odd0[NC], odd1[NC];
        pass(1, odd0, odd1);
        for (int j = 0; j < NC; ++j) {
            acc0[j] = _mm256_add_ps(acc0[j], odd0[j]);
            acc1[j] = _mm256_add_ps(acc1[j], odd1[j]);
        }
    }
    for (int j = 0; j < NC; ++j) {
        out[j] = hsum(acc0[j]);
        out[4 + j] = hsum(acc1[j]);
    }
}

template <class Dec, int NC>
void dot2_with_min(int64_t k, const void* av, size_t as, const void* bv, size_t bs, float* out) {
    using Block = typename Dec::Block;
    const Block* x0 = (const Block*)av;
    const Block* x1 = (const Block*)((const char*)av + as);
    const char* b = (const char*)bv;
    __m256 acc0[NC], acc1[NC];
    __m128 min0[NC], min1[NC];  // lane 1: the m * s sums (see dot_with_min)
    for (int j = 0; j < NC; ++j) { acc0[j] = acc1[j] = _mm256_setzero_ps(); min0[j] = min1[j] = _mm_setzero_ps(); }
    const int64_t nb = k / 32;
    for (int64_t ib = 0; ib < nb; ++ib) {
        _mm_prefetch((const char*)(x0 + ib) + 768, _MM_HINT_T0);
        _mm_prefetch((const char*)(x1 + ib) + 768, _MM_HINT_T0);
        const __m256i u0 = Dec::levels(x0[ib]), u1 = Dec::levels(x1[ib]);
        const __m128 dm0 = f16_pair(&x0[ib].d), dm1 = f16_pair(&x1[ib].d);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_1& y = ((const BlockQ8_1*)(b + j * bs))[ib];
            const __m256i q = _mm256_loadu_si256((const __m256i*)y.qs);
            const __m128 ds = f16_pair(&y.d);
            acc0[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(u0, q)), scale_product(dm0, ds), acc0[j]);
            acc1[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(u1, q)), scale_product(dm1, ds), acc1[j]);
            min0[j] = _mm_fmadd_ps(dm0, ds, min0[j]);
            min1[j] = _mm_fmadd_ps(dm1, ds, min1[j]);
        }
    }
    for (int j = 0; j < NC; ++j) {
        out[j] = hsum(acc0[j]) + _mm_cvtss_f32(_mm_movehdup_ps(min0[j]));
        out[4 + j] = hsum(acc1[j]) + _mm_cvtss_f32(_mm_movehdup_ps(min1[j]));
    }
}

// dot2_signed over converted columns with extras (Dot2xFn): lane l of a block's integer dot
// starts at the extras' -offset * (group l's sum) and adds the unsigned levels' products, ending
// at dot2_signed's integer; the scale product dx * dy (dy widened in the extras) and the
// accumulation are dot2_signed's: one chain per row and column, two for the two-pass types
// (the even blocks' and the odd blocks', added before the sum).
struct X2Q8_0 {  // levels = the bytes xor 0x80 (value + 128): up to 255, exact under vpdpbusd only
    using Block = BlockQ8_0;
    static __m128 scale(const Block& b) { return f16_pair(&b.d); }
    static __m256i levels(const Block& b) {
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)b.qs), _mm256_set1_epi8((char)0x80));
    }
};
struct X2IQ4NL {  // levels = values + 128 (1..241): vpdpbusd only
    using Block = BlockIQ4NL;
    static constexpr int kPasses = 2;
    static __m128 scale(const Block& b) { return f16_pair(&b.d); }
    static __m256i levels(const Block& b) { return _mm256_shuffle_epi8(lut16(kIQ4NLLevels.v), nibbles(b.qs)); }
};
struct X2MXFP4 {  // levels = doubled E2M1 values + 12 (0..24)
    using Block = BlockMXFP4;
    static constexpr int kPasses = 2;
    static __m128 scale(const Block& b) { return DecMXFP4::scale(b); }
    static __m256i levels(const Block& b) { return _mm256_shuffle_epi8(lut16(kE2M1Levels.v), nibbles(b.qs)); }
};
template <class Dec, int NC>
void dot2x_offset(int64_t k, const void* av, size_t as, const void* ev, size_t es, float* out) {
    using Block = typename Dec::Block;
    constexpr int kPasses = passes_of<Dec>(0);
    const Block* x0 = (const Block*)av;
    const Block* x1 = (const Block*)((const char*)av + as);
    const int64_t nb = k / 32;
    const ActExtra* e[NC];
    const float* dy[NC];
    for (int j = 0; j < NC; ++j) {
        e[j] = (const ActExtra*)((const char*)ev + j * es);
        dy[j] = (const float*)(e[j] + nb);
    }
    __m256 acc0[kPasses][NC], acc1[kPasses][NC];
#pragma GCC unroll 8
    for (int p = 0; p < kPasses; ++p)
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) acc0[p][j] = acc1[p][j] = _mm256_setzero_ps();
    auto block = [&](int64_t ib, __m256* chain0, __m256* chain1) __attribute__((always_inline)) {
        _mm_prefetch((const char*)(x0 + ib) + 768, _MM_HINT_T0);
        _mm_prefetch((const char*)(x1 + ib) + 768, _MM_HINT_T0);
        const __m256i u0 = Dec::levels(x0[ib]), u1 = Dec::levels(x1[ib]);
        const __m256 d0 = _mm256_broadcastss_ps(Dec::scale(x0[ib])), d1 = _mm256_broadcastss_ps(Dec::scale(x1[ib]));
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const __m256i q = _mm256_loadu_si256((const __m256i*)e[j][ib].qs);
            const __m256i off = _mm256_loadu_si256((const __m256i*)e[j][ib].offset);
            const __m256 dyj = _mm256_broadcast_ss(dy[j] + ib);
            chain0[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot_acc(off, u0, q)), _mm256_mul_ps(d0, dyj), chain0[j]);
            chain1[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot_acc(off, u1, q)), _mm256_mul_ps(d1, dyj), chain1[j]);
        }
    };
    int64_t ib = 0;
    for (; ib + kPasses <= nb; ib += kPasses)
#pragma GCC unroll 2
        for (int p = 0; p < kPasses; ++p) block(ib + p, acc0[p], acc1[p]);
    if (ib < nb) block(ib, acc0[0], acc1[0]);  // an odd last block joins the even chain
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) {
        out[j] = hsum(kPasses == 2 ? _mm256_add_ps(acc0[0][j], acc0[kPasses - 1][j]) : acc0[0][j]);
        out[4 + j] = hsum(kPasses == 2 ? _mm256_add_ps(acc1[0][j], acc1[kPasses - 1][j]) : acc1[0][j]);
    }
}
template <class Dec>
void dispatch2x(int64_t k, const void* a, size_t as, const void* e, size_t es, int nc, float* out) {
    switch (nc) {
        case 1: dot2x_offset<Dec, 1>(k, a, as, e, es, out); break;
        case 2: dot2x_offset<Dec, 2>(k, a, as, e, es, out); break;
        case 3: dot2x_offset<Dec, 3>(k, a, as, e, es, out); break;
        default: dot2x_offset<Dec, 4>(k, a, as, e, es, out); break;
    }
}

template <class D, int NC> struct Signed2 { static void run(int64_t k, const void* a, size_t as, const void* b, size_t bs, float* o) { dot2_signed<D, NC>(k, a, as, b, bs, o); } };
template <class D, int NC> struct WithMin2 { static void run(int64_t k, const void* a, size_t as, const void* b, size_t bs, float* o) { dot2_with_min<D, NC>(k, a, as, b, bs, o); } };

template <template <class, int> class K, class D>
void dispatch2(int64_t k, const void* a, size_t as, const void* b, size_t bs, int nc, float* out, const float*) {
    switch (nc) {
        case 1: K<D, 1>::run(k, a, as, b, bs, out); break;
        case 2: K<D, 2>::run(k, a, as, b, bs, out); break;
        case 3: K<D, 3>::run(k, a, as, b, bs, out); break;
        default: K<D, 4>::run(k, a, as, b, bs, out); break;
    }
}

}  // namespace
}  // namespace pyggml::cpu::mm

#include "cpu/simd/idot256_end.h"

// Outside the target region: filling the table must run on any CPU.
namespace pyggml::cpu::mm {
namespace {
void fill_quant_dot2(Kernels& k) {
    k.dot2[(int)Type::Q8_0] = dispatch2<Signed2, DecQ8_0>;
    k.dot2[(int)Type::Q4_0] = dispatch2<Signed2, DecQ4_0>;
    k.dot2[(int)Type::Q5_0] = dispatch2<Signed2, DecQ5_0>;
    k.dot2[(int)Type::IQ4_NL] = dispatch2<Signed2, DecIQ4NL>;
    k.dot2[(int)Type::MXFP4] = dispatch2<Signed2, DecMXFP4>;
    k.dot2[(int)Type::Q4_1] = dispatch2<WithMin2, DecQ4_1>;
    k.dot2[(int)Type::Q5_1] = dispatch2<WithMin2, DecQ5_1>;
    // one column of long rows: per 64-row unit of a streamed 4096 x 14336 weight, one thread,
    // bytes per TSC cycle at the avx512 level q4_0 5.8 -> 6.8-7.0 and q5_0 6.7 -> 6.9-7.1 (the
    // offset form above), q4_1 6.7 -> 8.0; at avx2 q4_0 5.9 -> 6.3, q5_0 5.1 -> 5.3, q4_1 6.6 -> 7.3
    // (bench/quant_gemv_paths.cpp, dot vs dot2h). Not q8_0 (10.9 -> 9.7) nor q5_1 (7.8 -> 8.0).
    for (Type t : {Type::Q4_0, Type::Q5_0, Type::Q4_1}) k.dot2_one_column[(int)t] = true;
    k.dot2x[(int)Type::Q4_0] = dispatch2x<DecQ4_0>;
    k.dot2x[(int)Type::Q5_0] = dispatch2x<DecQ5_0>;
    k.dot2x[(int)Type::MXFP4] = dispatch2x<X2MXFP4>;
    if (kIdotVnni) {  // maddubs would saturate at levels > 128
        k.dot2x[(int)Type::Q8_0] = dispatch2x<X2Q8_0>;
        k.dot2x[(int)Type::IQ4_NL] = dispatch2x<X2IQ4NL>;
    }
}
}  // namespace
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
namespace {
void fill_quant_dot2(Kernels&) {}
}  // namespace
}  // namespace pyggml::cpu::mm
#endif
