// The AVX-512 set's packed float GEMM: micro-kernel, weight and column packing, in the set's
// canonical order (cpu/mul_mat_float.h: 16 lanes, the hsum4 tree of simd/mul_mat_avx512.cpp).
//
// The canonical order's lane sums (lane l of a block: acc_l = fma(a[16 q + l], b[16 q + l],
// acc_l) over the block's chunks q, from zero) can be run for many rows at once with the rows in
// a vector and b's value broadcast: an outer-product tile of 32 rows x 12 columns that loads
// 1 weight vector and 12 scalars per 12 multiply-adds, where the dot-product tile of 4 x 6
// loaded 10 vectors per 24 and paid a horizontal sum per output and block (Zen 4, one core:
// 0.85 of the FMA peak). A lane pass takes 16 rows x 12 columns (12 accumulators), the tile's
// two halves one after the other: with 24 accumulators (both halves in one pass) the lanes'
// tree went through memory, 24 stores or read-add-stores after every pass, and the tile ran
// at 0.93 of the peak; with 12 the tree keeps a partial sum in registers and the tile runs at
// 0.98-0.99 (f32, f16; the bf16 pair form 0.87 -> 0.95; in cache, bench/float_micro_cycles.cpp).
// The 16 lane results of a block are then added by the dot tiles' tree, 16 outputs per vector:
// u_i = v_i + v_{i+8}, s_i = u_i + u_{i+4}, t_0 = s_0 + s_2, t_1 = s_1 + s_3, y = t_0 + t_1.
// Packed layouts (per K block of nq chunks): a weight panel ap[p(l) * (nq * 32 + 16) + q * 32 + r]
// (float_lanes_avx512.h: a_slice_floats), a column
// panel bp[(p(l) * nq + q) * 12 + j], so one lane's pass reads both contiguously; p(l) (4-bit
// reversal) puts the slices in the order the tree takes the lanes (0, 8, 4, 12, 2, ...), so each
// 16-row half of a micro-kernel call reads both panels front to back (the weight panel's every
// other cache line), one stream each for the hardware prefetcher.
#include <algorithm>

#include "cpu/mul_mat_float.h"
#include "cpu/simd/float_gemm_avx512.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")

namespace pyggml::cpu::mm {
namespace {

#include "cpu/simd/float_avx512.h"
#include "cpu/simd/float_lanes_avx512.h"

constexpr int kLanes = 16;
constexpr int64_t kKB = kFloatKB512;
constexpr int64_t kBlockChunks = kKB / kLanes;

struct MacF32 {
    static constexpr int kChunkFloats = kMR;
    static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
    static __m512 mac(__m512 c, __m512 a, const float* b) { return _mm512_fmadd_ps(a, _mm512_set1_ps(*b), c); }
};

// f16 weights packed as f16 and widened as the lane pass loads them: the packing writes half
// the bytes to L2 and the tile streams half (the widening runs beside the multiply-adds).
struct MacF16 {
    static constexpr int kChunkFloats = kMR / 2;
    static __m512 load(const float* p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p)); }
    static __m512 mac(__m512 c, __m512 a, const float* b) { return _mm512_fmadd_ps(a, _mm512_set1_ps(*b), c); }
};

// A weight panel of 32 rows, 16 rows and one chunk at a time: P::load / P::tail read a chunk
// of a row (16 values; the first n), P::transpose turns 16 of them into 16 lane vectors and
// P::store puts lane vector v at unit offset o of the panel (units of P's packed values).
template <class P>
void pack_rows(const void* a, size_t as, int rows, int64_t k0, int64_t kc, float* ap) {
    const int64_t full = kc / kLanes, nq = (kc + kLanes - 1) / kLanes;
    const int tail = int(kc % kLanes);
    const int64_t slice = P::slice_units(nq);
    for (int r0 = 0; r0 < kMR; r0 += kLanes) {
        const char* row = (const char*)a + r0 * as;
        const int n = std::clamp(rows - r0, 0, kLanes);
        for (int64_t q = 0; q < nq; ++q) {
            typename P::Vec v[kLanes];
            for (int r = 0; r < kLanes; ++r) {
                const char* p = row + r * as;
                if (r >= n) v[r] = P::zero();
                else if (q < full) v[r] = P::load(p, k0 + q * kLanes);
                else v[r] = P::tail(p, k0 + q * kLanes, tail);
            }
            P::transpose(v);
            for (int l = 0; l < kLanes; ++l) P::store(ap, slice_of(l) * slice + q * kMR + r0, v[l]);
        }
    }
}

// Weights widened to f32 as they are read (W of float_avx512.h), transposed as f32.
template <class W>
struct PackWidened {
    using Vec = __m512;
    static int64_t slice_units(int64_t nq) { return a_slice_floats(nq); }
    static Vec zero() { return _mm512_setzero_ps(); }
    static Vec load(const char* p, int64_t i) { return W::load(p, i); }
    static Vec tail(const char* p, int64_t i, int n) { return W::tail(p, i, n); }
    static void transpose(Vec* v) { transpose16(v); }
    static void store(float* ap, int64_t o, Vec v) { _mm512_storeu_ps(ap + o, v); }
};
// Two 16 x 16 transposes of 16-bit values, one per 256-bit half: out[l] lane r = in[r] lane l
// in each half, in four stages (three of in-lane unpacks, then one two-source permute).
inline void transpose16x16_epi16_x2(__m512i* r) {
    __m512i a[16], b[16];
    for (int i = 0; i < 8; ++i) {  // a[2i]: columns 0-3 (lane 1: 8-11) of rows 2i, 2i+1 interleaved
        a[2 * i] = _mm512_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 4; ++g) {  // b[4g + c]: columns 2c, 2c + 1 (lane 1: + 8) of rows 4g .. 4g + 3
        const __m512i* x = a + 4 * g;
        b[4 * g + 0] = _mm512_unpacklo_epi32(x[0], x[2]);
        b[4 * g + 1] = _mm512_unpackhi_epi32(x[0], x[2]);
        b[4 * g + 2] = _mm512_unpacklo_epi32(x[1], x[3]);
        b[4 * g + 3] = _mm512_unpackhi_epi32(x[1], x[3]);
    }
    for (int h = 0; h < 2; ++h) {  // a[8h + j]: column j (lane 1: j + 8) of rows 8h .. 8h + 7
        const __m512i* x = b + 8 * h;
        for (int c = 0; c < 4; ++c) {
            a[8 * h + 2 * c] = _mm512_unpacklo_epi64(x[c], x[4 + c]);
            a[8 * h + 2 * c + 1] = _mm512_unpackhi_epi64(x[c], x[4 + c]);
        }
    }
    // lanes 0 (2) of a[j] and a[8 + j] make column j of the low (high) half, lanes 1 (3) column j + 8
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    for (int j = 0; j < 8; ++j) {
        r[j] = _mm512_permutex2var_epi64(a[j], lo, a[8 + j]);
        r[8 + j] = _mm512_permutex2var_epi64(a[j], hi, a[8 + j]);
    }
}

// f16 weights for micro<MacF16>: the layout of pack_rows<PackWidened> with 16-bit values (a
// chunk of the 32 rows in one cache line), transposed as 16-bit values, no widening; 16 rows and
// two chunks (one 64-byte line of each row) at a time, so that each line is read once. One chunk
// of 16 rows at a time read each line twice, and with rows a multiple of 4 KiB apart (K 4096) the
// 16 lines of a step share one set of the 8-way L1: the line was gone by the second read (the
// packing from L2 took 1.8x as long as with rows 8256 bytes apart; two chunks: 1.4x; K4096 M4096
// N128 at 1 thread: 0.9% faster, one process A/B).
void pack_f16(const void* a, size_t as, int rows, int64_t k0, int64_t kc, float* ap) {
    const int64_t full = kc / kLanes, nq = (kc + kLanes - 1) / kLanes;
    const int64_t slice = 2 * a_slice_floats(nq, MacF16::kChunkFloats);  // in 16-bit units
    uint16_t* out = (uint16_t*)ap;
    for (int r0 = 0; r0 < kMR; r0 += kLanes) {
        const char* row = (const char*)a + r0 * as;
        const int n = std::clamp(rows - r0, 0, kLanes);
        for (int64_t q = 0; q < nq; q += 2) {
            __m512i v[kLanes];
            auto at = [&](int r) { return (const uint16_t*)(row + r * as) + k0 + q * kLanes; };
            if (n == kLanes && q + 2 <= full) {
#pragma GCC unroll 16
                for (int r = 0; r < kLanes; ++r) v[r] = _mm512_loadu_si512(at(r));
            } else {  // zero past kc and for rows past `rows`
                const int values = (int)std::min<int64_t>(2 * kLanes, kc - q * kLanes);
                const __mmask32 m = values >= 32 ? ~__mmask32(0) : (__mmask32)((1u << values) - 1);
#pragma GCC unroll 16
                for (int r = 0; r < kLanes; ++r) v[r] = r < n ? _mm512_maskz_loadu_epi16(m, at(r)) : _mm512_setzero_si512();
            }
            transpose16x16_epi16_x2(v);
            const bool second = q + 1 < nq;
#pragma GCC unroll 16
            for (int l = 0; l < kLanes; ++l) {
                uint16_t* o = out + slice_of(l) * slice + q * kMR + r0;
                _mm256_storeu_si256((__m256i*)o, _mm512_castsi512_si256(v[l]));
                if (second) _mm256_storeu_si256((__m256i*)(o + kMR), _mm512_extracti64x4_epi64(v[l], 1));
            }
        }
    }
}

// A panel of whole K: block i (chunks [i * 32, ...), nq of them) starts at float i * 32 * 192
// and holds the block's layout above; per chunk the 12 columns' vectors are transposed so that
// lane l's 12 values are stored together.
void pack_b(const float* const* cols, int64_t kq, float* bp) {
    for (int64_t q0 = 0; q0 < kq; q0 += kBlockChunks) {
        const int64_t nq = std::min(kBlockChunks, kq - q0);
        float* blk = bp + q0 * kNR * kLanes;
        for (int64_t q = 0; q < nq; ++q) {
            __m512 v[kLanes];
            for (int j = 0; j < kLanes; ++j)
                v[j] = j < kNR && cols[j] ? _mm512_loadu_ps(cols[j] + (q0 + q) * kLanes) : _mm512_setzero_ps();
            transpose16(v);
            for (int l = 0; l < kLanes; ++l) _mm512_mask_storeu_ps(blk + (slice_of(l) * nq + q) * kNR, tail_mask(kNR), v[l]);
        }
    }
}

}  // namespace
}  // namespace pyggml::cpu::mm

#pragma GCC diagnostic pop
#pragma GCC pop_options

namespace pyggml::cpu::mm {
void float_gemm_avx512(FloatKernels& f) {
    static_assert(kMR <= kMaxFloatMR && kNR <= kMaxFloatNR, "tile exceeds the driver's bounds");
    f.mr = kMR;
    f.nr = kNR;
    f.mc = 4 * kMR;     // 128 x 512 f32 weights: 256 KiB in L2
    f.nc = 170 * kNR;   // each packed weight block serves up to 2040 columns (packed once for most N)
    f.a_panel_pad = 16 * kFloatSlicePad;
    f.micro = micro<MacF32>;
    f.pack_a[kFloatF32] = pack_rows<PackWidened<WF32>>;
    f.pack_a[kFloatF16] = pack_f16;
    f.micro_f16 = micro<MacF16>;
    f.pack_a[kFloatBF16] = pack_rows<PackWidened<WBF16>>;
    f.pack_b = pack_b;
}
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
void float_gemm_avx512(FloatKernels&) {}
}
#endif
