// bf16 weights on AVX512-BF16 CPUs: the activations are rounded to bf16 (ggml's vec_dot_type
// for bf16 weights) and both sides stay bf16; vdpbf16ps adds the two products of a bf16 pair to
// an f32 lane, 32 values per instruction where the f32 form widens the weights and multiplies
// 16 (Zen 4: twice the multiply-adds per cycle, half the bytes of b).
//
// Canonical order of this form (cpu/mul_mat_float.h with chunks of 32 values): K in blocks of
// 512; in a block, lane l (16 lanes) of one accumulator takes vdpbf16ps steps of the pairs
// (32 q + 2 l, 32 q + 2 l + 1) of the block's chunks q in order (the last chunk zero-padded);
// the block's value is the lanes' sum by the avx512 tree (hsum4), and blocks are added in order.
// The instruction rounds as it does (denormal inputs and results flushed to zero), the same
// way on every path, so the direct tiles, the packed GEMM (the lane passes of
// simd/float_lanes_avx512.h with a pair as the unit) and MUL_MAT_ID's dots agree bit for bit.
#include <algorithm>

#include "cpu/mul_mat_float.h"
#include "cpu/simd/float_bf16_avx512.h"
#include "cpu/simd/float_gemm_avx512.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")

namespace pyggml::cpu::mm {
namespace {

#include "cpu/simd/float_avx512.h"
#include "cpu/simd/float_lanes_avx512.h"

constexpr int kChunk = 32;  // values per chunk: 16 pairs
constexpr int64_t kKB = 512;
constexpr int64_t kBlockChunks = kKB / kChunk;

inline __mmask32 mask32(int n) { return n >= 32 ? ~__mmask32(0) : (__mmask32)((1u << n) - 1); }

// 32 values of a column or a weight row as 16 bf16 pairs (`tail`: the first n < 32, zeros after).
struct PBF16 {  // stored as bf16
    static __m512bh load(const char* p, int64_t i) { return (__m512bh)_mm512_loadu_si512((const uint16_t*)p + i); }
    static __m512bh tail(const char* p, int64_t i, int n) {
        return (__m512bh)_mm512_maskz_loadu_epi16(mask32(n), (const uint16_t*)p + i);
    }
};
// Stored as f32 values, rounded to bf16 to nearest even here (exact where already rounded: the
// direct tiles' columns; the packed GEMM's may come unrounded). A denormal that the instruction
// may flush to zero is one vdpbf16ps would read as zero anyway.
struct PF32 {
    static __m512bh load(const char* p, int64_t i) {
        const float* x = (const float*)p + i;
        return _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
    }
    static __m512bh tail(const char* p, int64_t i, int n) {
        const float* x = (const float*)p + i;
        return _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(tail_mask(std::max(n - 16, 0)), x + 16),
                                   _mm512_maskz_loadu_ps(tail_mask(std::min(n, 16)), x));
    }
};

// R weight rows x C columns read in place (the direct tiles of simd/mul_mat_avx512.cpp, pairs).
template <class B, int R, int C>
void direct_tile(int64_t k, const char* a, size_t as, const char* b, size_t bs, float* out) {
    float sum[R][C] = {};
    for (int64_t k0 = 0; k0 < k; k0 += kKB) {
        const int64_t k1 = std::min(k, k0 + kKB);
        __m512 acc[R][C];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
        auto step = [&](auto wload, auto bload) {
            __m512bh bv[C];
            for (int c = 0; c < C; ++c) bv[c] = bload(b + c * bs);
            for (int r = 0; r < R; ++r) {
                const __m512bh av = wload(a + r * as);
                for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], av, bv[c]);
            }
        };
        int64_t i = k0;
        for (; i + kChunk <= k1; i += kChunk)
            step([&](const char* w) { return PBF16::load(w, i); }, [&](const char* y) { return B::load(y, i); });
        if (i < k1) {
            const int n = int(k1 - i);
            step([&](const char* w) { return PBF16::tail(w, i, n); }, [&](const char* y) { return B::tail(y, i, n); });
        }
        add_tile_sums<R, C>(acc, sum, k0 == 0);
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) out[r * 4 + c] = sum[r][c];
}

template <class B, int C>
void direct_rows(int64_t k, const char* a, size_t as, int rows, const char* b, size_t bs, float* out) {
    switch (rows) {
        case 1: direct_tile<B, 1, C>(k, a, as, b, bs, out); break;
        case 2: direct_tile<B, 2, C>(k, a, as, b, bs, out); break;
        case 3: direct_tile<B, 3, C>(k, a, as, b, bs, out); break;
        case 4: direct_tile<B, 4, C>(k, a, as, b, bs, out); break;
        case 8:
            if constexpr (C <= 2) {
                direct_tile<B, 8, C>(k, a, as, b, bs, out);
                break;
            }
            [[fallthrough]];
        default:
            direct_tile<B, 4, C>(k, a, as, b, bs, out);
            direct_rows<B, C>(k, a + 4 * as, as, rows - 4, b, bs, out + 16);
            break;
    }
}

template <class B>
void direct(int64_t k, const void* a, size_t as, int rows, const void* b, size_t bs, int cols, float* out) {
    const char* ap = (const char*)a;
    const char* bp = (const char*)b;
    if (cols == 1 && row_at_a_time(as, 2)) {  // bf16 weights one row at a time (simd/float_gemm_avx512.h)
        for (int r = 0; r < rows; ++r) direct_tile<B, 1, 1>(k, ap + r * as, as, bp, bs, out + r * 4);
        return;
    }
    switch (cols) {
        case 1: direct_rows<B, 1>(k, ap, as, rows, bp, bs, out); break;
        case 2: direct_rows<B, 2>(k, ap, as, rows, bp, bs, out); break;
        case 3: direct_rows<B, 3>(k, ap, as, rows, bp, bs, out); break;
        default: direct_rows<B, 4>(k, ap, as, rows, bp, bs, out); break;
    }
}

struct MacBF16 {
    static constexpr int kChunkFloats = kMR;
    static __m512bh load(const float* p) { return (__m512bh)_mm512_loadu_si512(p); }
    static __m512 mac(__m512 c, __m512bh a, const float* b) {
        return _mm512_dpbf16_ps(c, a, (__m512bh)_mm512_set1_epi32(*(const int*)b));
    }
};

// A weight panel of 32 rows: per chunk, 16 rows' 16 pairs transposed so that pair l of the 16
// rows is stored together (4-byte units in the float buffer, at the f32 form's offsets).
void pack_a(const void* a, size_t as, int rows, int64_t k0, int64_t kc, float* ap) {
    const int64_t full = kc / kChunk, nq = (kc + kChunk - 1) / kChunk;
    const int tail = int(kc % kChunk);
    for (int r0 = 0; r0 < kMR; r0 += 16) {
        const char* row = (const char*)a + r0 * as;
        const int n = std::clamp(rows - r0, 0, 16);
        for (int64_t q = 0; q < nq; ++q) {
            __m512 v[16];
            for (int r = 0; r < 16; ++r) {
                const char* p = row + r * as;
                if (r >= n) v[r] = _mm512_setzero_ps();
                else v[r] = (__m512)(q < full ? PBF16::load(p, k0 + q * kChunk) : PBF16::tail(p, k0 + q * kChunk, tail));
            }
            transpose16(v);
            for (int l = 0; l < 16; ++l) _mm512_storeu_ps(ap + slice_of(l) * a_slice_floats(nq) + q * kMR + r0, v[l]);
        }
    }
}

// A column panel of whole K: block i starts at float i * 16 * 12 * 16 (a chunk of a column is 16
// pairs, unit_values = 2).
void pack_b(const float* const* cols, int64_t kq, float* bp) {
    for (int64_t q0 = 0; q0 < kq; q0 += kBlockChunks) {
        const int64_t nq = std::min(kBlockChunks, kq - q0);
        float* blk = bp + q0 * kNR * (kChunk / 2);
        for (int64_t q = 0; q < nq; ++q) {
            __m512 v[16];
            for (int j = 0; j < 16; ++j)
                v[j] = j < kNR && cols[j] ? (__m512)PF32::load((const char*)cols[j], (q0 + q) * kChunk) : _mm512_setzero_ps();
            transpose16(v);
            for (int l = 0; l < 16; ++l) _mm512_mask_storeu_ps(blk + (slice_of(l) * nq + q) * kNR, tail_mask(kNR), v[l]);
        }
    }
}

}  // namespace

// MUL_MAT_ID's dots (columns as f32 values rounded to bf16), in the same order.
void dot_bf16_pairs(int64_t k, const void* a, const void* b, size_t bs, int nc, float* o, const float*) {
    float out[4 * 4];
    direct<PF32>(k, a, 0, 1, b, bs, nc, out);
    for (int j = 0; j < nc; ++j) o[j] = out[j];
}
void dot2_bf16_pairs(int64_t k, const void* a, size_t as, const void* b, size_t bs, int nc, float* o, const float*) {
    direct<PF32>(k, a, as, 2, b, bs, nc, o);
}

}  // namespace pyggml::cpu::mm

#pragma GCC diagnostic pop
#pragma GCC pop_options

namespace pyggml::cpu::mm {
const FloatKernels& float_kernels_avx512_bf16() {
    static const FloatKernels k = [] {
        FloatKernels f = float_kernels_avx512();  // the tile's blocking
        f.lanes = kChunk;
        f.unit_values = 2;
        f.kb = kKB;
        f.direct[kFloatF32] = f.direct[kFloatF16] = f.direct_f16b = nullptr;  // bf16 weights only
        f.pack_a[kFloatF32] = f.pack_a[kFloatF16] = nullptr;
        f.micro_f16 = nullptr;
        f.direct[kFloatBF16] = direct<PF32>;
        f.direct_bf16b = direct<PBF16>;
        f.micro = micro<MacBF16>;
        f.pack_a[kFloatBF16] = pack_a;
        f.pack_b = pack_b;
        return f;
    }();
    return k;
}
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
const FloatKernels& float_kernels_avx512_bf16() { return float_kernels_avx512(); }
void dot_bf16_pairs(int64_t, const void*, const void*, size_t, int, float*, const float*) {}
void dot2_bf16_pairs(int64_t, const void*, size_t, const void*, size_t, int, float*, const float*) {}
}
#endif
