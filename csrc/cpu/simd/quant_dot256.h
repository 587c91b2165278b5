// 256-bit dot kernels of the newer block types, built per instruction set by
// quant_dot_avx2.cpp and quant_dot_avx512.cpp (integer dots: idot256.h); the scalar ones in
// quant_dot_scalar.cpp are the reference. One weight block is decoded once
// (quant_decode256.h) and dotted with up to 4 activation columns.
//   - legacy 32-value blocks: signed values (q5_0, iq4_nl, mxfp4: |a| times y with a's sign)
//     against q8_0, or unsigned levels plus the block min (q4_1, q5_1) against q8_1;
//   - K-quants: unsigned levels against q8_K; the level offset and the mins are applied once
//     per block through q8_K's sums of 16 (bsums).
// Defines fill_quant_dots(Kernels&) (the dot, dot1x and quantize rows), outside the target region.
#pragma once
#include <cmath>
#include <cstring>

#include "cpu/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include "cpu/simd/idot256.h"

namespace pyggml::cpu::mm {
#include "cpu/simd/q8_block256.h"
#include "cpu/simd/quant_decode256.h"

namespace {

// One accumulator per column with the blocks in order (the block minimums summed apart, in
// order, added last), or for two-pass types (passes_of) one for the even blocks and one for
// the odd ones: ggml's AVX2 vec_dot order, so the results are bit-identical to it.
template <class Dec, int NC>
void dot_signed(int64_t k, const void* av, const void* bv, size_t bs, float* out) {
    using Block = typename Dec::Block;
    constexpr int kPasses = passes_of<Dec>(0);
    const Block* x = (const Block*)av;
    const char* b = (const char*)bv;
    __m256 accv[kPasses][NC];
    for (int p = 0; p < kPasses; ++p)
        for (int j = 0; j < NC; ++j) accv[p][j] = _mm256_setzero_ps();
    auto step = [&](int64_t ib, __m256* acc) __attribute__((always_inline)) {
        if constexpr (NC == 1 && has_offset<Dec>(0)) {  // one column: the offset form, same integers
            const BlockQ8_0& y = ((const BlockQ8_0*)b)[ib];
            const __m256i q = _mm256_loadu_si256((const __m256i*)y.qs);
            acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot_offset(Dec::levels(x[ib]), q, Dec::kOffset)),
                                     scale_product(Dec::scale(x[ib]), f16_pair(&y.d)), acc[0]);
            return;
        }
        float unused;
        const __m256i a = Dec::values(x[ib], unused);
        const __m128 dx = Dec::scale(x[ib]);
        const __m256i ua = _mm256_sign_epi8(a, a);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_0& y = ((const BlockQ8_0*)(b + j * bs))[ib];
            const __m256i sy = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i*)y.qs), a);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(ua, sy)), scale_product(dx, f16_pair(&y.d)), acc[j]);
        }
    };
    const int64_t nb = k / 32;
    int64_t ib = 0;
    // no software prefetch in the one-column dots: the hardware prefetchers alone streamed a
    // 4096 x 14336 weight 5-25% faster per thread on 4 KiB pages, and no slower on 2 MiB
    // ones, than with a prefetch 1 KiB (K-quants: 2 KiB) ahead (bench/quant_gemv_paths.cpp)
    for (; ib + 4 <= nb; ib += 4) {
        step(ib, accv[0]);
        step(ib + 1, accv[kPasses - 1]);
        step(ib + 2, accv[0]);
        step(ib + 3, accv[kPasses - 1]);
    }
    for (; ib + 2 <= nb; ib += 2) {
        step(ib, accv[0]);
        step(ib + 1, accv[kPasses - 1]);
    }
    if (ib < nb) step(ib, accv[0]);
    for (int j = 0; j < NC; ++j)
        out[j] = hsum(kPasses == 2 ? _mm256_add_ps(accv[0][j], accv[kPasses - 1][j]) : accv[0][j]);
}

// ---- one-column dots with the activations' extras (ActExtra, ActUnitNVFP4) ----
// Lane l: the sum of (u - offset) * y over 4-value group l, the signed values' integers: the
// accumulator starts at the extras' -offset * (group sum).
inline __m256i offset_dot(__m256i u, __m256i q, __m256i off) { return udot_acc(off, u, q); }
// mxfp4: levels value + kE2M1Offset; the scale 2^(e-128) from the table.
struct Dot1xMXFP4 {
    using Block = BlockMXFP4;
    static __m256i lut() { return lut16(kE2M1Levels.v); }
    static __m256i isum(const Block& b, __m256i lut, __m256i q, __m256i off) {
        return offset_dot(_mm256_shuffle_epi8(lut, nibbles(b.qs)), q, off);
    }
    static __m256 scale(const Block& b) { return _mm256_broadcast_ss(&kE8M0Half.v[b.e]); }
};
// iq4_nl: with VNNI levels value + kIQ4NLOffset; the maddubs build (whose 16-bit pair sums
// those levels would saturate) takes |value| times y with value's sign, as dot_signed.
struct Dot1xIQ4NL {
    using Block = BlockIQ4NL;
    static __m256i lut() { return lut16(kIdotVnni ? kIQ4NLLevels.v : kIQ4NLValues); }
    static __m256i isum(const Block& b, __m256i lut, __m256i q, __m256i off) {
        const __m256i v = _mm256_shuffle_epi8(lut, nibbles(b.qs));
        if constexpr (kIdotVnni) return offset_dot(v, q, off);
        return udot(_mm256_sign_epi8(v, v), _mm256_sign_epi8(q, v));
    }
    static __m256 scale(const Block& b) { return _mm256_cvtph_ps(_mm_set1_epi16((short)b.d)); }
};
// dot_signed<DecMXFP4 / DecIQ4NL, 1> with the same integers, products dx * dy and
// accumulation order (even blocks in one chain, odd ones in the other), for R rows `as` bytes
// apart (out[r]): each activation load serves every row. Several blocks' integer work goes
// before their float updates, which keep their order: the same bits. Against the former layout
// (8 copies of d and the offsets beside each q8_0 block, read unaligned, the offset subtracted
// after the dot): one vector load and one subtraction fewer per block.
template <class W, int R>
void dot1x_rows(int64_t k, const void* av, size_t as, const void* ev, float* out) {
    using Block = typename W::Block;
    const Block* x[R];
    for (int r = 0; r < R; ++r) x[r] = (const Block*)((const char*)av + r * as);
    const int64_t nb = k / 32;
    const ActExtra* ext = (const ActExtra*)ev;
    const float* dy = (const float*)(ext + nb);
    const __m256i lut = W::lut();
    __m256 acc[2][R];  // [block parity][row]
    for (int r = 0; r < R; ++r) acc[0][r] = acc[1][r] = _mm256_setzero_ps();
    constexpr int kAhead = R == 1 ? 4 : 2;  // blocks whose integers go first
    auto run = [&](int64_t ib, int n) __attribute__((always_inline)) {
        __m256i s[kAhead][R];
        for (int i = 0; i < n; ++i) {
            __m256i q = _mm256_loadu_si256((const __m256i*)ext[ib + i].qs), off = _mm256_loadu_si256((const __m256i*)ext[ib + i].offset);
            if constexpr (R > 1) asm("" : "+x"(q), "+x"(off));  // one load each for every row
            for (int r = 0; r < R; ++r) s[i][r] = W::isum(x[r][ib + i], lut, q, off);
        }
        for (int i = 0; i < n; ++i) {
            const __m256 d = _mm256_set1_ps(dy[ib + i]);
            for (int r = 0; r < R; ++r) {
                __m256& a = acc[(ib + i) & 1][r];  // an odd last block joins the even chain
                a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[i][r]), _mm256_mul_ps(W::scale(x[r][ib + i]), d), a);
            }
        }
    };
    int64_t ib = 0;
    for (; ib + kAhead <= nb; ib += kAhead) run(ib, kAhead);  // no software prefetch: see dot_signed
    for (; ib < nb; ++ib) run(ib, 1);
    for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_add_ps(acc[0][r], acc[1][r]));
}
template <class W>
void dot1x_offset(int64_t k, const void* av, const void*, const void* ev, float* out, const float*) {
    dot1x_rows<W, 1>(k, av, 0, ev, out);
}
template <class W>
void dot1x2_offset(int64_t k, const void* av, size_t as, const void*, const void* ev, float* out, const float*) {
    dot1x_rows<W, 2>(k, av, as, ev, out);
}

// mm_dot_nvfp4<1> (mm_quant256.h) with the same integers, products and lane chains: there
// accumulator h, lane l sums group l of half h of every block. Here the block's 32 bytes give
// two vectors (ActUnitNVFP4: lo = groups 0, 1, 4, 5 of each half, hi = 2, 3, 6, 7) whose lanes
// are those same chains in another order, put back in place before the final sum. Lanes 2j,
// 2j+1 of both belong to sub-block j, so one scale vector serves the whole block.
inline __m256i e2m1_offset_dot32(__m256i u, const int8_t* y, const int32_t* offset) {
    return udot_acc(_mm256_loadu_si256((const __m256i*)offset), u, _mm256_loadu_si256((const __m256i*)y));
}
void dot1x_nvfp4(int64_t k, const void* av, const void*, const void* ev, float* out, const float* scale) {
    const BlockNVFP4* x = (const BlockNVFP4*)av;
    const ActUnitNVFP4* y = (const ActUnitNVFP4*)ev;
    const __m256i lut = lut16(kE2M1Levels.v), m4 = _mm256_set1_epi8(0x0F);
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    auto block = [&](int64_t ib) __attribute__((always_inline)) {
        const BlockNVFP4& w = x[ib];
        const __m256i q = _mm256_loadu_si256((const __m256i*)w.qs);
        const __m256i ulo = _mm256_shuffle_epi8(lut, _mm256_and_si256(q, m4));
        const __m256i uhi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
        auto pair = [&](int s) {  // sub-blocks s, s + 1's scales as (a, a, b, b)
            return _mm_castpd_ps(_mm_unpacklo_pd(_mm_castps_pd(_mm_broadcast_ss(&scale[w.d[s]])),
                                                 _mm_castps_pd(_mm_broadcast_ss(&scale[w.d[s + 1]]))));
        };
        const __m256 sc = _mm256_mul_ps(_mm256_set_m128(pair(2), pair(0)), _mm256_loadu_ps(y[ib].d));
        lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(e2m1_offset_dot32(ulo, y[ib].lo, y[ib].offset_lo)), sc, lo);
        hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(e2m1_offset_dot32(uhi, y[ib].hi, y[ib].offset_hi)), sc, hi);
    };
    const int64_t nb = k / 64;
    int64_t ib = 0;
    for (; ib + 4 <= nb; ib += 4)  // no software prefetch: see dot_signed
        for (int i = 0; i < 4; ++i) block(ib + i);
    for (; ib < nb; ++ib) block(ib);
    // lo = (h0: g0 g1 g4 g5 | h1: g0 g1 g4 g5), hi the same with g2 g3 g6 g7: back to
    // acc0 = h0's g0..g7 and acc1 = h1's
    const __m256 a = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(lo), _mm256_castps_pd(hi)));
    const __m256 b = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(lo), _mm256_castps_pd(hi)));
    out[0] = hsum(_mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31)));
}

template <class Dec, int NC>
void dot_with_min(int64_t k, const void* av, const void* bv, size_t bs, float* out) {
    using Block = typename Dec::Block;
    const Block* x = (const Block*)av;
    const char* b = (const char*)bv;
    __m256 accv[NC];
    __m128 mins[NC];  // lane 1: the sum of m * s in block order, each step rounded once
    for (int j = 0; j < NC; ++j) { accv[j] = _mm256_setzero_ps(); mins[j] = _mm_setzero_ps(); }
    auto step = [&](int64_t ib, __m256* acc) __attribute__((always_inline)) {
        const __m256i u = Dec::levels(x[ib]);
        const __m128 dm = f16_pair(&x[ib].d);  // d, m
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_1& y = ((const BlockQ8_1*)(b + j * bs))[ib];
            const __m256i q = _mm256_loadu_si256((const __m256i*)y.qs);
            const __m128 ds = f16_pair(&y.d);  // d, s
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(u, q)), scale_product(dm, ds), acc[j]);
            mins[j] = _mm_fmadd_ps(dm, ds, mins[j]);
        }
    };
    const int64_t nb = k / 32;
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {  // no software prefetch: see dot_signed
        step(ib, accv);
        step(ib + 1, accv);
    }
    if (ib < nb) step(ib, accv);
    for (int j = 0; j < NC; ++j) out[j] = hsum(accv[j]) + _mm_cvtss_f32(_mm_movehdup_ps(mins[j]));
}

// Whether Unp gives its scales as bytes too (KBlock::sbytes).
template <class Unp>
constexpr auto has_byte_scales(int) -> decltype(Unp::kPickStep, bool()) { return true; }
template <class Unp>
constexpr bool has_byte_scales(long) { return false; }
// Whether Unp's signed scales take the even/odd int16 lanes (one source for all chunks)
// rather than two lane permutes of the int16 scales.
template <class Unp>
constexpr auto has_even_odd_lanes(int) -> decltype(Unp::kEvenOddLanes, bool()) { return Unp::kEvenOddLanes; }
template <class Unp>
constexpr bool has_even_odd_lanes(long) { return false; }

// Whether Unp gives chunks of scale * level bytes (Unp::scaled_level; VNNI builds only).
template <class Unp>
constexpr auto has_scaled_levels(int) -> decltype(Unp::kScaledLevels, bool()) { return Unp::kScaledLevels; }
template <class Unp>
constexpr bool has_scaled_levels(long) { return false; }

// The shift dividing the dot's sum over the odd chunks (Unp::dot_level gives their levels
// scaled by 2^shift); 0: Unp::level, one sum.
template <class Unp>
constexpr auto odd_chunk_shift(int) -> decltype(Unp::kOddChunkShift, int()) { return Unp::kOddChunkShift; }
template <class Unp>
constexpr int odd_chunk_shift(long) { return 0; }

// Whether Unp widens its mins itself (Unp::mins16) rather than from KBlock::mins.
template <class Unp>
constexpr auto has_mins16(int) -> decltype(&Unp::mins16, bool()) { return true; }
template <class Unp>
constexpr bool has_mins16(long) { return false; }

// The shuffle controls giving chunk c's int16 scale pair (scale 2c in the low lane, 2c+1 in the
// high one): from sbytes, a byte index then 0x80 (the high byte zeroed); from the even/odd
// lanes (even scales' int16 in the low lane, odd ones' in the high lane), entry c; else from
// the int16 scales with both lanes holding scales 0..7 (chunks 0..3) or 8..15 (chunks 4..7).
template <class Unp, bool kBytes, bool kEvenOdd>
struct ScalePicks {
    alignas(32) uint8_t v[8][32];
    constexpr ScalePicks() : v() {
        for (int c = 0; c < 8; ++c)
            for (int i = 0; i < 32; i += 2) {
                const int odd = i >= 16 ? 1 : 0;
                if constexpr (kBytes) {
                    v[c][i] = uint8_t(Unp::kPickStep * c + (odd ? Unp::kPickOdd : 0));
                    v[c][i + 1] = 0x80;
                } else {
                    const int entry = kEvenOdd ? c : (2 * c + odd) % 8;
                    v[c][i] = uint8_t(2 * entry);
                    v[c][i + 1] = uint8_t(2 * entry + 1);
                }
            }
    }
};

// R weight rows (R = 2: the two-row dot, rows `as` bytes apart, out[4 * r + j]); each
// activation vector loaded serves every row, each output keeps the one-row operations.
template <class Unp, int NC, int R = 1>
void dot_kquant(int64_t k, const void* av, size_t as, const void* bv, size_t bs, float* out) {
    using Block = typename Unp::Block;
    const Block* x[R];
    for (int r = 0; r < R; ++r) x[r] = (const Block*)((const char*)av + r * as);
    const char* b = (const char*)bv;
    // Chunk c (values 32c..32c+31) spans groups 2c (low 128-bit lane) and 2c+1 (high lane):
    // one in-lane shuffle per chunk broadcasts the pair (ScalePicks).
    constexpr bool kBytes = has_byte_scales<Unp>(0), kEvenOdd = has_even_odd_lanes<Unp>(0);
    // scaled levels: ~15% fewer cycles per block and column with 4 columns (one lookup serves
    // every column); with one column no faster (the same number of vector operations)
    constexpr bool kScaled = has_scaled_levels<Unp>(0) && NC >= 2;
    static constexpr ScalePicks<Unp, kBytes, kEvenOdd> kPicks{};
    __m256i pick[8];
    for (int c = 0; c < 8; ++c) pick[c] = _mm256_load_si256((const __m256i*)kPicks.v[c]);
    __m256 acc[R][NC];
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < NC; ++j) acc[r][j] = _mm256_setzero_ps();
    // One output's integer sums of one block and the factors of its float update.
    struct Sums {
        __m256i isum, msum;  // msum: kMins
        __m256 d, dmin;
    };
    // Block ib's sums of every output, handed to emit(r, j, sums).
    auto block_sums = [&](int64_t ib, auto&& emit) __attribute__((always_inline)) {
        KBlock w[R];
        __m256i chunk_src[R], scales[R], lanes_lo[R], lanes_hi[R], mins[R];  // per row
        __m256i tables[R][4];  // kScaled: Unp::scaled_tables
        for (int r = 0; r < R; ++r) {
            const Block& xb = x[r][ib];
            // no software prefetch (see dot_signed): without one, q6_K streamed ~25% faster from 4 KiB pages
            // each chunk's levels are built right before its products (Unp::level), not all 8 first:
            // fewer live vectors, no spills (q3_K and q6_K took 5-10% fewer cycles per block)
            Unp::run_scales(xb, w[r]);
            chunk_src[r] = Unp::chunk_source(xb);
            scales[r] = _mm256_cvtepi8_epi16(w[r].scales);
            // the shuffle sources of chunks 0..3 and 4..7
            if constexpr (kBytes) {
                lanes_lo[r] = lanes_hi[r] = w[r].sbytes;
            } else if constexpr (kEvenOdd) {
                const __m128i eo = _mm_shuffle_epi8(w[r].scales, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
                lanes_lo[r] = lanes_hi[r] = _mm256_set_m128i(_mm_cvtepi8_epi16(_mm_srli_si128(eo, 8)), _mm_cvtepi8_epi16(eo));
            } else {
                lanes_lo[r] = _mm256_permute4x64_epi64(scales[r], 0x44);
                lanes_hi[r] = _mm256_permute4x64_epi64(scales[r], 0xEE);
            }
            if constexpr (has_mins16<Unp>(0))
                mins[r] = Unp::mins16(xb);
            else
                mins[r] = _mm256_cvtepu8_epi16(w[r].mins);
            if constexpr (kScaled) Unp::scaled_tables(xb, tables[r]);
        }
        // chunk outer, columns inner: each chunk's scale pair is broadcast once for all columns
        // vpdpwssd accumulates in place: with one or two outputs its latency would bound the
        // loop, so the odd chunks take a second chain (integer sums: the same result); so do
        // they where their levels come scaled (odd_chunk_shift), that chain divided at the end
        // (not with more outputs: the second chain per output costs more than the shifts
        // saved, q3_K 8.4 -> 8.9 cycles per block and column with 4 columns)
        constexpr int kOddShift = kScaled || NC * R > 2 ? 0 : odd_chunk_shift<Unp>(0);
        constexpr bool kSplit = (kIdotVnni && NC * R <= 2) || kOddShift > 0;
        const BlockQ8_K* y[NC];
        __m256i isum[R][NC], odd[R][NC];
        for (int j = 0; j < NC; ++j) {
            y[j] = (const BlockQ8_K*)(b + j * bs) + ib;
            for (int r = 0; r < R; ++r) isum[r][j] = odd[r][j] = _mm256_setzero_si256();
        }
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) {
            __m256i sc[R], u[R];
            for (int r = 0; r < R; ++r) {
                if constexpr (kScaled) {
                    u[r] = Unp::scaled_level(x[r][ib], tables[r], c);
                } else {
                    sc[r] = _mm256_shuffle_epi8(c < 4 ? lanes_lo[r] : lanes_hi[r], pick[c]);
                    if constexpr (kOddShift > 0)
                        u[r] = Unp::dot_level(x[r][ib], chunk_src[r], c);
                    else
                        u[r] = Unp::level(x[r][ib], chunk_src[r], c);
                }
            }
#pragma GCC unroll 4
            for (int j = 0; j < NC; ++j) {
                const __m256i q = _mm256_loadu_si256((const __m256i*)(y[j]->qs + 32 * c));
                for (int r = 0; r < R; ++r) {
                    __m256i& s = kSplit && (c & 1) ? odd[r][j] : isum[r][j];
                    if constexpr (kScaled)
                        s = udot_acc(s, u[r], q);
                    else
                        s = scaled_udot_acc(s, u[r], q, sc[r]);
                }
            }
        }
        if constexpr (kSplit)
            for (int r = 0; r < R; ++r)
                for (int j = 0; j < NC; ++j) isum[r][j] = _mm256_add_epi32(isum[r][j], _mm256_srai_epi32(odd[r][j], kOddShift));
        for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
            for (int j = 0; j < NC; ++j) {
                const __m256i bsums = _mm256_loadu_si256((const __m256i*)y[j]->bsums);
                if constexpr (Unp::kOffShift >= 0)
                    isum[r][j] = _mm256_sub_epi32(isum[r][j], _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales[r]), Unp::kOffShift));
                Sums o;
                o.isum = isum[r][j];
                if constexpr (Unp::kMins) {  // d * y.d and dmin * y.d by one product
                    const __m128 dd = _mm_mul_ps(w[r].d_dmin, _mm_set1_ps(y[j]->d));
                    o.d = _mm256_broadcastss_ps(dd);
                    o.dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(dd));
                    o.msum = _mm256_madd_epi16(bsums, mins[r]);
                } else {
                    o.d = _mm256_set1_ps(w[r].d * y[j]->d);
                }
                emit(r, j, o);
            }
        }
    };
    auto update = [&](int r, int j, const Sums& o) __attribute__((always_inline)) {
        acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(o.isum), o.d, acc[r][j]);
        if constexpr (Unp::kMins) acc[r][j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(o.msum), o.dmin, acc[r][j]);
    };
    // With one output and 32 vector registers, two blocks' integer work goes before either's
    // updates: more independent work in flight (q2_K ~5% fewer cycles per block in cache; the
    // AVX2 build, with 16 registers, spilled and ran slower). The updates keep their order: the
    // same bits.
    constexpr bool kAhead = kIdotVnni && NC * R == 1;
    const int64_t nb = k / kQK_K;
    int64_t ib = 0;
    if constexpr (kAhead)
        for (; ib + 2 <= nb; ib += 2) {
            Sums o[2];
            block_sums(ib, [&](int, int, const Sums& v) { o[0] = v; });
            block_sums(ib + 1, [&](int, int, const Sums& v) { o[1] = v; });
            update(0, 0, o[0]);
            update(0, 0, o[1]);
        }
    for (; ib < nb; ++ib) block_sums(ib, update);
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < NC; ++j) out[4 * r + j] = hsum(acc[r][j]);
}

// q8_K activations, the bytes of quantize_row_q8_K_ref: max = the first value of largest |x|,
// iscale = -127 / max, q = min(127, round-half-even(iscale * x)), bsums the sums of 16 q, d =
// 1 / iscale; an all-zero block is all zero. Blocks holding NaN or inf, or so small that
// iscale overflows, take the reference.
void quantize_q8_K_avx2(const float* x, void* vy, int64_t n) {
    BlockQ8_K* y = (BlockQ8_K*)vy;
    const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(3.402823466e38f);
    for (int64_t ib = 0; ib < n / kQK_K; ++ib) {
        const float* v = x + ib * kQK_K;
        __m256 mx = _mm256_setzero_ps(), ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        for (int i = 0; i < 32; ++i) {
            const __m256 ab = _mm256_andnot_ps(sign, _mm256_loadu_ps(v + 8 * i));
            ok = _mm256_and_ps(ok, _mm256_cmp_ps(ab, big, _CMP_LE_OQ));
            mx = _mm256_max_ps(mx, ab);
        }
        if (_mm256_movemask_ps(ok) != 0xFF) {
            quantize_row_q8_K_ref(v, y + ib, kQK_K);
            continue;
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (amax == 0.0f) {
            std::memset(&y[ib], 0, sizeof(BlockQ8_K));
            continue;
        }
        const __m256 am = _mm256_set1_ps(amax);
        int first = 0;
        for (int i = 0; i < 32; ++i) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(v + 8 * i)), am, _CMP_EQ_OQ));
            if (hit) { first = 8 * i + __builtin_ctz((unsigned)hit); break; }
        }
        const float iscale = -127.0f / v[first];
        if (!(std::fabs(iscale) <= 3.402823466e38f)) {  // amax below 127 / FLT_MAX: the reference's
            quantize_row_q8_K_ref(v, y + ib, kQK_K);     // integer conversion of inf, not cvtps'
            continue;
        }
        const __m256 is = _mm256_set1_ps(iscale);
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (int g = 0; g < 8; ++g) {  // 32 values: 32 bytes of qs and bsums 2g, 2g+1
            __m256i q[4];
            for (int i = 0; i < 4; ++i)  // the rounding mode's default: to nearest, ties to even
                q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(v + 32 * g + 8 * i)));
            const __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i*)(y[ib].qs + 32 * g), _mm256_permutevar8x32_epi32(p8, order));
            const __m256i s0 = _mm256_add_epi32(q[0], q[1]), s1 = _mm256_add_epi32(q[2], q[3]);
            __m256i h = _mm256_hadd_epi32(s0, s1);  // lane pairs of both sums, 128-bit lanes apart
            h = _mm256_hadd_epi32(h, h);
            const __m128i t = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            y[ib].bsums[2 * g] = (int16_t)_mm_cvtsi128_si32(t);
            y[ib].bsums[2 * g + 1] = (int16_t)_mm_extract_epi32(t, 1);
        }
        y[ib].d = 1.0f / iscale;
    }
}

// q8_1 activations as ggml's AVX2 quantizer makes them: d = amax/127, q = x*(127/amax) rounded
// to nearest (ties to even), s = f16(d * sum(q)). Blocks holding NaN or inf take the scalar form.
void quantize_q8_1_avx2(const float* x, void* vy, int64_t n) {
    BlockQ8_1* y = (BlockQ8_1*)vy;
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float* v = x + ib * 32;
        __m256 a[4];
        float amax;
        if (!q8_block_load(v, a, &amax)) {
            quantize_row_q8_1_cpu(v, y + ib, 32);
            continue;
        }
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[ib].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        __m256i q[4];
        for (int i = 0; i < 4; ++i)
            q[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(a[i], _mm256_set1_ps(id)),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m256i sum4 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum4), _mm256_extracti128_si256(sum4, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
        y[ib].s = _cvtss_sh(d * (float)_mm_cvtsi128_si32(s4), _MM_FROUND_TO_NEAREST_INT);
        const __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i*)y[ib].qs, _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
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
template <class D, int NC> struct KQuant { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o) { dot_kquant<D, NC>(k, a, 0, b, bs, o); } };
// Dot2Fn: the two-row K-quant dots.
template <class Unp>
void dot2_kquant(int64_t k, const void* a, size_t as, const void* b, size_t bs, int nc, float* out, const float*) {
    switch (nc) {
        case 1: dot_kquant<Unp, 1, 2>(k, a, as, b, bs, out); break;
        case 2: dot_kquant<Unp, 2, 2>(k, a, as, b, bs, out); break;
        case 3: dot_kquant<Unp, 3, 2>(k, a, as, b, bs, out); break;
        default: dot_kquant<Unp, 4, 2>(k, a, as, b, bs, out); break;
    }
}

}  // namespace

}  // namespace pyggml::cpu::mm

#include "cpu/simd/idot256_end.h"

// Outside the target region: filling the table must run on any CPU.
namespace pyggml::cpu::mm {
namespace {
void fill_quant_dots(Kernels& k) {
    k.quantize[(int)Type::Q8_1] = quantize_q8_1_avx2;
    k.quantize[(int)Type::Q8_K] = quantize_q8_K_avx2;
    k.dot[(int)Type::Q4_1] = dispatch<WithMin, DecQ4_1>;
    k.dot[(int)Type::Q5_1] = dispatch<WithMin, DecQ5_1>;
    k.dot[(int)Type::Q5_0] = dispatch<Signed, DecQ5_0>;
    k.dot[(int)Type::IQ4_NL] = dispatch<Signed, DecIQ4NL>;
    k.dot[(int)Type::MXFP4] = dispatch<Signed, DecMXFP4>;
    k.dot1x[(int)Type::MXFP4] = dot1x_offset<Dot1xMXFP4>;
    k.dot1x[(int)Type::NVFP4] = dot1x_nvfp4;
    k.dot1x[(int)Type::IQ4_NL] = dot1x_offset<Dot1xIQ4NL>;
    k.dot1x2[(int)Type::MXFP4] = dot1x2_offset<Dot1xMXFP4>;
    k.dot1x2[(int)Type::IQ4_NL] = dot1x2_offset<Dot1xIQ4NL>;
    k.dot[(int)Type::Q2_K] = dispatch<KQuant, UnpQ2_K>;
    k.dot[(int)Type::Q3_K] = dispatch<KQuant, UnpQ3_K>;
    k.dot[(int)Type::Q4_K] = dispatch<KQuant, UnpQ4_K>;
    k.dot[(int)Type::Q5_K] = dispatch<KQuant, UnpQ5_K>;
    k.dot[(int)Type::Q6_K] = dispatch<KQuant, UnpQ6_K>;
    if (kIdotVnni) {  // two-row K-quant dots where 32 vector registers hold both rows' sums
        k.dot2[(int)Type::Q2_K] = dot2_kquant<UnpQ2_K>;
        k.dot2[(int)Type::Q3_K] = dot2_kquant<UnpQ3_K>;
        k.dot2[(int)Type::Q4_K] = dot2_kquant<UnpQ4_K>;
        k.dot2[(int)Type::Q5_K] = dot2_kquant<UnpQ5_K>;
        k.dot2[(int)Type::Q6_K] = dot2_kquant<UnpQ6_K>;
    }
}
}  // namespace
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
namespace {
void fill_quant_dots(Kernels&) {}
}  // namespace
}  // namespace pyggml::cpu::mm
#endif
