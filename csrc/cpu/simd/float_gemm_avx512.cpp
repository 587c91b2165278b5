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
    static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
    static __m512 mac(__m512 c, __m512 a, const float* b) { return _mm512_fmadd_ps(a, _mm512_set1_ps(*b), c); }
};

template <class W>
void pack_a(const void* a, size_t as, int rows, int64_t k0, int64_t kc, float* ap) {
    const int64_t full = kc / kLanes, nq = (kc + kLanes - 1) / kLanes;
    const int tail = int(kc % kLanes);
    for (int r0 = 0; r0 < kMR; r0 += kLanes) {
        const char* row = (const char*)a + r0 * as;
        const int n = std::clamp(rows - r0, 0, kLanes);
        for (int64_t q = 0; q < nq; ++q) {
            __m512 v[kLanes];
            for (int r = 0; r < kLanes; ++r) {
                const char* p = row + r * as;
                if (r >= n) v[r] = _mm512_setzero_ps();
                else if (q < full) v[r] = W::load(p, k0 + q * kLanes);
                else v[r] = W::tail(p, k0 + q * kLanes, tail);
            }
            transpose16(v);
            for (int l = 0; l < kLanes; ++l) _mm512_storeu_ps(ap + slice_of(l) * a_slice_floats(nq) + q * kMR + r0, v[l]);
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
    f.pack_a[kFloatF32] = pack_a<WF32>;
    f.pack_a[kFloatF16] = pack_a<WF16>;
    f.pack_a[kFloatBF16] = pack_a<WBF16>;
    f.pack_b = pack_b;
}
}  // namespace pyggml::cpu::mm
#else
namespace pyggml::cpu::mm {
void float_gemm_avx512(FloatKernels&) {}
}
#endif
