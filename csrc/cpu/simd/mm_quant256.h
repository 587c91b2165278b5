// 256-bit integer dot kernels for q8_0 / q4_0 / nvfp4 weights against q8_0 activations,
// shared by the AVX2 and AVX-512 translation units. The includer defines (under its target)
//   static inline __m256i mm_udot(__m256i u8, __m256i s8);  // 8 x i32, each a sum of 4 products
//   static inline __m256i mm_udot_offset(__m256i u8, __m256i s8, __m256i off8);  // same of (u - off) * s
// Sign trick: |a| (unsigned) times (b with a's sign) gives a*b with an unsigned x signed dot.
// The includer has included <cstring>.
#pragma once

#include "cpu/simd/q8_block256.h"

namespace {

inline float mm_hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
// dx * dy of two blocks whose f16 scale d comes first (followed by at least 6 more bytes),
// broadcast: one load-and-convert per scale instead of a load, an insert and a conversion.
inline __m256 mm_scale_product(const void* x, const void* y) {
    const __m128 a = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i*)x));
    const __m128 b = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i*)y));
    return _mm256_broadcastss_ps(_mm_mul_ss(a, b));
}

// acc += (a . b per 4-lane group) * scale, where a is signed int8 (|a| <= 127 or -128).
inline __m256 mm_dot_acc(__m256i ua, __m256i a, __m256i b, __m256 scale, __m256 acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm_udot(ua, _mm256_sign_epi8(b, a))), scale, acc);
}

// One accumulator per column, blocks in order: the float additions happen in ggml's order, so
// the result is bit-identical to ggml's AVX2 vec_dot (up to 4 columns keep the FMA unit busy).
template <int NC>
void mm_dot_q8_0(int64_t k, const void* av, const void* bv, size_t bs, float* out) {
    const BlockQ8_0* x = (const BlockQ8_0*)av;
    const char* b = (const char*)bv;
    __m256 accv[NC];
    for (int j = 0; j < NC; ++j) accv[j] = _mm256_setzero_ps();
    auto step = [&](int64_t ib, __m256* acc) __attribute__((always_inline)) {
        const __m256i a = _mm256_loadu_si256((const __m256i*)x[ib].qs);
        const __m256i ua = _mm256_sign_epi8(a, a);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_0* y = (const BlockQ8_0*)(b + j * bs) + ib;
            const __m256i by = _mm256_loadu_si256((const __m256i*)y->qs);
            acc[j] = mm_dot_acc(ua, a, by, mm_scale_product(&x[ib].d, &y->d), acc[j]);
        }
    };
    const int64_t nb = k / 32;
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {  // no software prefetch: the hardware's streams faster (quant_dot256.h)
        step(ib, accv);
        step(ib + 1, accv);
    }
    if (ib < nb) step(ib, accv);
    for (int j = 0; j < NC; ++j) out[j] = mm_hsum256(accv[j]);
}

template <int NC>
void mm_dot_q4_0(int64_t k, const void* av, const void* bv, size_t bs, float* out) {
    const BlockQ4_0* x = (const BlockQ4_0*)av;
    const char* b = (const char*)bv;
    const __m256i m4 = _mm256_set1_epi8(0x0F), off = _mm256_set1_epi8(8);
    __m256 accv[NC];
    for (int j = 0; j < NC; ++j) accv[j] = _mm256_setzero_ps();
    auto step = [&](int64_t ib, __m256* acc) __attribute__((always_inline)) {
        // elements 0..15 are the low nibbles, 16..31 the high nibbles: the 16 bytes in both
        // lanes, the high lane's words shifted right by 4 (one shuffle fewer than an insert)
        const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)x[ib].qs));
        const __m256i u = _mm256_and_si256(_mm256_srlv_epi32(q, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), m4);
        if constexpr (NC == 1) {  // one column: the offset form (same integers, fewer instructions)
            const __m256i by = _mm256_loadu_si256((const __m256i*)((const BlockQ8_0*)b + ib)->qs);
            acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm_udot_offset(u, by, off)),
                                     mm_scale_product(&x[ib].d, &((const BlockQ8_0*)b + ib)->d), acc[0]);
            return;
        }
        const __m256i a = _mm256_sub_epi8(u, off);
        const __m256i ua = _mm256_sign_epi8(a, a);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_0* y = (const BlockQ8_0*)(b + j * bs) + ib;
            const __m256i by = _mm256_loadu_si256((const __m256i*)y->qs);
            acc[j] = mm_dot_acc(ua, a, by, mm_scale_product(&x[ib].d, &y->d), acc[j]);
        }
    };
    const int64_t nb = k / 32;
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {  // no software prefetch: the hardware's streams faster (quant_dot256.h)
        step(ib, accv);
        step(ib + 1, accv);
    }
    if (ib < nb) step(ib, accv);
    for (int j = 0; j < NC; ++j) out[j] = mm_hsum256(accv[j]);
}

// The f16 scales d of 4 q8_0 blocks in a row, widened: gathered in a general register (their
// loads and shifts run beside the vector work) and converted by one instruction.
inline __m128 mm_q8_0_scales4(const BlockQ8_0* y) {
    uint16_t h[4];
    for (int i = 0; i < 4; ++i) std::memcpy(&h[i], &y[i].d, 2);
    const uint64_t w = uint64_t(h[0]) | uint64_t(h[1]) << 16 | uint64_t(h[2]) << 32 | uint64_t(h[3]) << 48;
    return _mm_cvtph_ps(_mm_set_epi64x(0, (long long)w));
}

// One nvfp4 block (64 values, four 16-value sub-blocks) is two q8_0 activation blocks: half h
// holds sub-blocks 2h and 2h+1. Bytes qs[8s..8s+7] hold sub-block s: values 0..7 in the low
// nibbles and 8..15 in the high nibbles. A half's 32 values in natural order, as one vector:
// its 16 bytes in both lanes, each lane's 8 bytes doubled in place (low lane sub-block 2h,
// high lane 2h+1), the second copy's words shifted right by 4 (the high nibbles), masked, then
// looked up. Accumulator h takes half h of every block; the scale of lanes 0..3 is sub-block
// 2h's times the activation block's d, that of lanes 4..7 sub-block 2h+1's.
template <int NC>
void mm_dot_nvfp4(int64_t k, const void* av, const void* bv, size_t bs, float* out, const float* scale) {
    const BlockNVFP4* x = (const BlockNVFP4*)av;
    const char* b = (const char*)bv;
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)kNvfp4Lut));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i dup = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9,
                                         10, 11, 12, 13, 14, 15);
    const __m256i nibble_shift = _mm256_setr_epi32(0, 0, 4, 4, 0, 0, 4, 4);
    __m256 acc0[NC], acc1[NC];
    for (int j = 0; j < NC; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
    alignas(32) float dy[NC][8];  // d of the activation blocks of 4 weight blocks, per column
    // ib: weight block; e: its activation blocks' entry in dy (2 * (ib % 4))
    auto block = [&](int64_t ib, int e) __attribute__((always_inline)) {
        const BlockNVFP4& w = x[ib];
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)(w.qs + 16 * h)));
            const __m256i a =
                _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(q, dup), nibble_shift), m4));
            const __m256i ua = _mm256_sign_epi8(a, a);
            const __m256 sa = _mm256_set_m128(_mm_broadcast_ss(&scale[w.d[2 * h + 1]]), _mm_broadcast_ss(&scale[w.d[2 * h]]));
#pragma GCC unroll 4
            for (int j = 0; j < NC; ++j) {
                const BlockQ8_0* y = (const BlockQ8_0*)(b + j * bs) + 2 * ib + h;
                const __m256i by = _mm256_loadu_si256((const __m256i*)y->qs);
                __m256* acc = h ? acc1 : acc0;
                acc[j] = mm_dot_acc(ua, a, by, _mm256_mul_ps(sa, _mm256_broadcast_ss(&dy[j][e + h])), acc[j]);
            }
        }
    };
    const int64_t nb = k / 64;
    int64_t ib = 0;
    for (; ib + 4 <= nb; ib += 4) {  // no software prefetch: the hardware's streams faster (quant_dot256.h)
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_0* y = (const BlockQ8_0*)(b + j * bs) + 2 * ib;
            _mm256_store_ps(dy[j], _mm256_set_m128(mm_q8_0_scales4(y + 4), mm_q8_0_scales4(y)));
        }
        // the broadcasts below then read dy from memory (load ports) instead of being turned
        // into shuffles of the converted vector
        asm volatile("" ::: "memory");
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) block(ib + i, 2 * i);
    }
    for (; ib < nb; ++ib) {
        for (int j = 0; j < NC; ++j) {
            const BlockQ8_0* y = (const BlockQ8_0*)(b + j * bs) + 2 * ib;
            dy[j][0] = _cvtsh_ss(y[0].d);
            dy[j][1] = _cvtsh_ss(y[1].d);
        }
        block(ib, 0);
    }
    for (int j = 0; j < NC; ++j) out[j] = mm_hsum256(_mm256_add_ps(acc0[j], acc1[j]));
}

// quantize_row_q8_0_cpu (id = 127/amax, rounding half away from zero) bit for bit, or with
// exact ties to even (kTiesEven); blocks holding NaN or inf go through the scalar quantizer.
template <bool kTiesEven>
void mm_quantize_q8_0_impl(const float* x, BlockQ8_0* y, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float* v = x + ib * 32;
        __m256 a[4];
        float amax;
        if (!q8_block_load(v, a, &amax)) {
            quantize_row_q8_0_cpu(v, y + ib, 32);
            continue;
        }
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[ib].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int i = 0; i < 4; ++i) {
            const __m256 t = _mm256_mul_ps(a[i], vid);
            if constexpr (kTiesEven) {
                q[i] = _mm256_cvtps_epi32(_mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
                continue;
            }
            const __m256 at = _mm256_andnot_ps(sign, t);
            __m256 r = _mm256_floor_ps(_mm256_add_ps(at, half));
            // a + 0.5 may round up across an integer: r - a is exact, fix r when it exceeds 0.5
            r = _mm256_sub_ps(r, _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(r, at), half, _CMP_GT_OQ), one));
            q[i] = _mm256_cvtps_epi32(_mm256_or_ps(r, _mm256_and_ps(t, sign)));
        }
        const __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
        const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        _mm256_storeu_si256((__m256i*)y[ib].qs, _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
}

void mm_quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n) { mm_quantize_q8_0_impl<false>(x, y, n); }
// mul_mat's activations: exact ties round to even, as ggml's AVX2 activation quantizer does
// (this keeps pyggml's quantized matmuls bit-identical to ggml's).
void mm_quantize_q8_0_even(const float* x, BlockQ8_0* y, int64_t n) { mm_quantize_q8_0_impl<true>(x, y, n); }

// DotFn adapters: dispatch nc (1..4) to the compile-time column count.
template <template <int> class F>
void mm_dispatch_nc(int nc, int64_t k, const void* a, const void* b, size_t bs, float* out, const float* aux) {
    switch (nc) {
        case 1: F<1>::run(k, a, b, bs, out, aux); break;
        case 2: F<2>::run(k, a, b, bs, out, aux); break;
        case 3: F<3>::run(k, a, b, bs, out, aux); break;
        default: F<4>::run(k, a, b, bs, out, aux); break;
    }
}
template <int NC> struct MmQ8 { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o, const float*) { mm_dot_q8_0<NC>(k, a, b, bs, o); } };
template <int NC> struct MmQ4 { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o, const float*) { mm_dot_q4_0<NC>(k, a, b, bs, o); } };
template <int NC> struct MmFp4 { static void run(int64_t k, const void* a, const void* b, size_t bs, float* o, const float* s) { mm_dot_nvfp4<NC>(k, a, b, bs, o, s); } };

void mm_dot_q8_0_fn(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float* aux) {
    mm_dispatch_nc<MmQ8>(nc, k, a, b, bs, out, aux);
}
void mm_dot_q4_0_fn(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float* aux) {
    mm_dispatch_nc<MmQ4>(nc, k, a, b, bs, out, aux);
}
void mm_dot_nvfp4_fn(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float* aux) {
    mm_dispatch_nc<MmFp4>(nc, k, a, b, bs, out, aux);
}

}  // namespace
