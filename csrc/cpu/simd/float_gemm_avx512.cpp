// The AVX-512 set's packed float GEMM: micro-kernel, weight and column packing, in the set's
// canonical order (cpu/mul_mat_float.h: 16 lanes, the hsum4 tree of simd/mul_mat_avx512.cpp).
//
// The canonical order's lane sums (lane l of a block: acc_l = fma(a[16 q + l], b[16 q + l],
// acc_l) over the block's chunks q, from zero) can be run for 32 rows at once with the rows in
// two vectors and b's value broadcast: an outer-product tile of 32 rows x 12 columns (24
// accumulators) that loads 2 weight vectors and 12 scalars per 24 multiply-adds, where the
// dot-product tile of 4 x 6 loaded 10 vectors per 24 and paid a horizontal sum per output and
// block (0.85 of the FMA peak on Zen 4 against 0.97 for this form, bench/float_micro_cycles.cpp).
// The 16 lane results of a block are then added by the dot tiles' tree, 16 outputs per vector:
// u_i = v_i + v_{i+8}, s_i = u_i + u_{i+4}, t_0 = s_0 + s_2, t_1 = s_1 + s_3, y = t_0 + t_1.
// Packed layouts (per K block of nq chunks): a weight panel ap[(p(l) * nq + q) * 32 + r], a column
// panel bp[(p(l) * nq + q) * 12 + j], so one lane's pass reads both contiguously; p(l) (4-bit
// reversal) puts the slices in the order the tree takes the lanes (0, 8, 4, 12, 2, ...), so a
// micro-kernel call reads both panels front to back, one stream for the hardware prefetcher.
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

#include "cpu/simd/float_load_avx512.h"

constexpr int kLanes = 16, kMR = 32, kNR = 12, kAcc = 2 * kNR;
constexpr int64_t kKB = kFloatKB512;
constexpr int64_t kBlockChunks = kKB / kLanes;

// Slice of lane l in a packed panel: the tree's pass order.
constexpr int slice_of(int l) { return ((l & 1) << 3) | ((l & 2) << 1) | ((l & 4) >> 1) | ((l & 8) >> 3); }

// How a lane pass leaves its 24 sums: stored, added to out, or added to out + other.
enum Finish { kStore, kAdd, kAdd2 };

// 32 rows x 12 columns of lane-l sums over nq chunks; acc[2 j + h] holds rows 16 h .. 16 h + 15
// of column j.
template <Finish F>
inline void lane_pass(int64_t nq, const float* a, const float* b, __m512* out, const __m512* other) {
    __m512 c[kAcc];
#pragma GCC unroll 24
    for (int i = 0; i < kAcc; ++i) c[i] = _mm512_setzero_ps();
    for (int64_t q = 0; q < nq; ++q, a += kMR, b += kNR) {
        const __m512 a0 = _mm512_loadu_ps(a), a1 = _mm512_loadu_ps(a + kLanes);
#pragma GCC unroll 12
        for (int j = 0; j < kNR; ++j) {
            const __m512 bv = _mm512_set1_ps(b[j]);
            c[2 * j] = _mm512_fmadd_ps(a0, bv, c[2 * j]);
            c[2 * j + 1] = _mm512_fmadd_ps(a1, bv, c[2 * j + 1]);
        }
    }
#pragma GCC unroll 24
    for (int i = 0; i < kAcc; ++i) {
        if constexpr (F == kStore) out[i] = c[i];
        else if constexpr (F == kAdd) out[i] = _mm512_add_ps(out[i], c[i]);
        else out[i] = _mm512_add_ps(out[i], _mm512_add_ps(other[i], c[i]));
    }
}

void micro(int64_t nq, const float* ap, const float* bp, float* c, int64_t ldc, int mv, int nv, bool accumulate,
           const char* pf, int pf_lines) {
    const int64_t as = nq * kMR, bs = nq * kNR;  // floats between two lanes' slices
    if (accumulate)  // the outputs read back at the end
        for (int j = 0; j < nv; ++j) {
            _mm_prefetch((const char*)(c + j * ldc), _MM_HINT_T0);
            _mm_prefetch((const char*)(c + j * ldc + mv - 1), _MM_HINT_T0);
        }
    int pass = 0;
    auto prefetch_share = [&] {  // a share of the next column panel's lines before each pass
        for (int k = pass * pf_lines / kLanes; k < (pass + 1) * pf_lines / kLanes; ++k) _mm_prefetch(pf + k * 64, _MM_HINT_T0);
        ++pass;
    };
    alignas(64) __m512 t0[kAcc], t1[kAcc], tmp[kAcc];
    // s_i (i < 4) into s: u_i = v_i + v_{i+8} in s, u_{i+4} in tmp, s = u_i + u_{i+4}
    auto s_of = [&](int i, __m512* s) {
        for (int k = 0; k < 4; ++k) prefetch_share();
        auto at = [&](int l, const float* base, int64_t stride) { return base + slice_of(l) * stride; };
        lane_pass<kStore>(nq, at(i, ap, as), at(i, bp, bs), s, nullptr);
        lane_pass<kAdd>(nq, at(i + 8, ap, as), at(i + 8, bp, bs), s, nullptr);
        lane_pass<kStore>(nq, at(i + 4, ap, as), at(i + 4, bp, bs), tmp, nullptr);
        lane_pass<kAdd2>(nq, at(i + 12, ap, as), at(i + 12, bp, bs), s, tmp);
    };
    alignas(64) __m512 x[kAcc];
    s_of(0, t0);
    s_of(2, x);
    for (int i = 0; i < kAcc; ++i) t0[i] = _mm512_add_ps(t0[i], x[i]);
    s_of(1, t1);
    s_of(3, x);
    for (int i = 0; i < kAcc; ++i) x[i] = _mm512_add_ps(t0[i], _mm512_add_ps(t1[i], x[i]));  // y
    const __mmask16 m0 = tail_mask(std::min(mv, kLanes)), m1 = tail_mask(std::max(mv - kLanes, 0));
    for (int j = 0; j < nv; ++j) {
        float* cj = c + j * ldc;
        if (mv == kMR) {
            for (int h = 0; h < 2; ++h) {
                const __m512 v = x[2 * j + h];
                _mm512_storeu_ps(cj + kLanes * h, accumulate ? _mm512_add_ps(_mm512_loadu_ps(cj + kLanes * h), v) : v);
            }
        } else {
            const __m512 v0 = x[2 * j], v1 = x[2 * j + 1];
            _mm512_mask_storeu_ps(cj, m0, accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(m0, cj), v0) : v0);
            if (m1) _mm512_mask_storeu_ps(cj + kLanes, m1, accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(m1, cj + kLanes), v1) : v1);
        }
    }
}

// 16 x 16 transpose: out[l] lane r = in[r] lane l.
inline void transpose16(__m512* r) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4 i + e], 128-bit chunk L: column 4 L + e of rows 4 i .. 4 i + 3
    for (int i = 0; i < 4; ++i) {
        u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    // column 4 L + e gathers chunk L of u[e], u[4 + e], u[8 + e], u[12 + e]
    for (int e = 0; e < 4; ++e) {
        const __m512 v0 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x44), v1 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xEE);
        const __m512 v2 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x44), v3 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xEE);
        r[e] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[4 + e] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        r[8 + e] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[12 + e] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
}

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
            for (int l = 0; l < kLanes; ++l) _mm512_storeu_ps(ap + (slice_of(l) * nq + q) * kMR + r0, v[l]);
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
    f.micro = micro;
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
