// CPU kernel of GLU: rows split across threads, computed in f32 and rounded to
// the storage type. Activations come from unary_math.h (shared with UNARY).
#include <cmath>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/simd/isa.h"
#include "cpu/unary_math.h"
#include "pyggml/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PYGGML_GLU_AVX2 1
#endif

namespace pyggml::cpu {

namespace {

#ifdef PYGGML_GLU_AVX2
// exp(x) as ggml's AVX2 kernels evaluate it (so SwiGLU rounds exactly as ggml's does): n =
// round(x*log2 e) by the 1.5*2^23 shift trick, b = x - n*ln2 in two parts, 2^n times a degree-5
// polynomial in b; |n| > 126 rescales in two steps, |n| > 192 saturates (0 or inf).
__attribute__((target("avx2,fma"))) inline __m256 exp_ggml_ps(__m256 x) {
    const __m256 shift = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
    const __m256 n = _mm256_sub_ps(z, shift);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(an, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    const __m256 b2 = _mm256_mul_ps(b, b);
    const __m256 hi = _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f));
    const __m256 lo = _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f));
    const __m256 poly = _mm256_fmadd_ps(_mm256_fmadd_ps(hi, b2, lo), b2,
                                        _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    const __m256 normal = _mm256_fmadd_ps(poly, k, k);
    if (!_mm256_movemask_ps(big)) return normal;
    const __m256i neg = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                         _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(neg, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, neg));
    const __m256 huge = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 scaled = _mm256_mul_ps(_mm256_fmadd_ps(s2, poly, s2), s1);
    return _mm256_blendv_ps(_mm256_blendv_ps(normal, scaled, big), _mm256_mul_ps(s1, s1), huge);
}

// o = silu(g) * u with silu(g) = g / (1 + exp(-g)), 8 at a time, the tail in scalar libm.
__attribute__((target("avx2,fma"))) void swiglu_row_avx2(const float* g, const float* u, float* o, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 den = _mm256_add_ps(_mm256_set1_ps(1.0f), exp_ggml_ps(_mm256_sub_ps(_mm256_setzero_ps(), x)));
        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_div_ps(x, den), _mm256_loadu_ps(u + i)));
    }
    for (; i < n; ++i) o[i] = silu_f32(g[i]) * u[i];
}
#endif

// out[i] = f(gate[i], up[i]) over n elements.
template <class F>
void glu_loop(const float* g, const float* u, float* o, int64_t n, F f) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(g[i], u[i]);
}

// SwiGLU rows take the AVX2 kernel (ggml's rounding) unless the scalar level is selected.
struct SwigluF32 {
    float operator()(float g, float u) const { return silu_f32(g) * u; }
};
inline void glu_loop(const float* g, const float* u, float* o, int64_t n, SwigluF32 f) {
#ifdef PYGGML_GLU_AVX2
    if (simd::cpu_isa() != simd::Isa::Scalar) return swiglu_row_avx2(g, u, o, n);
#endif
    for (int64_t i = 0; i < n; ++i) o[i] = f(g[i], u[i]);
}

template <class F>
void glu_rows(const ComputeParams& p, Tensor* dst, F f) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const int64_t nc = dst->ne[0];
    const bool swapped = dst->param_i32(1) != 0;
    const size_t es = type_size(a->type);
    // Fused form: gate and up are the two halves of a's row (an odd last element is ignored).
    const size_t gate_offs = b ? 0 : (swapped ? nc * es : 0);
    const size_t up_offs = b ? 0 : (swapped ? 0 : nc * es);
    const bool f32 = a->type == Type::F32;
    std::vector<float> gb(f32 ? 0 : nc), ub(f32 ? 0 : nc), ob(f32 ? 0 : nc);
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
        const char* grow = a->row(i1, i2, i3) + gate_offs;
        const char* urow = (b ? b->row(i1, i2, i3) : a->row(i1, i2, i3)) + up_offs;
        char* orow = dst->row(i1, i2, i3);
        if (f32) {
            glu_loop((const float*)grow, (const float*)urow, (float*)orow, nc, f);
        } else {
            to_float_row(a->type, grow, gb.data(), nc);
            to_float_row(a->type, urow, ub.data(), nc);
            glu_loop(gb.data(), ub.data(), ob.data(), nc, f);
            from_float_row(dst->type, ob.data(), orow, nc);
        }
    }
}

}  // namespace

void cpu_forward_GLU(const ComputeParams& p, Tensor* dst) {
    const float alpha = dst->param_f32(2);
    const float limit = dst->param_f32(3);
    switch ((GluOp)dst->param_i32(0)) {
        case GluOp::REGLU:
            return glu_rows(p, dst, [](float g, float u) { return g > 0.0f ? g * u : 0.0f; });
        case GluOp::GEGLU:
            return glu_rows(p, dst, [](float g, float u) { return gelu_f32(g) * u; });
        case GluOp::SWIGLU:
            return glu_rows(p, dst, SwigluF32{});
        case GluOp::GEGLU_ERF:
            return glu_rows(p, dst, [](float g, float u) { return gelu_erf_f32(g) * u; });
        case GluOp::GEGLU_QUICK:
            return glu_rows(p, dst, [](float g, float u) { return gelu_quick_f32(g) * u; });
        case GluOp::SWIGLU_OAI:
            return glu_rows(p, dst, [alpha, limit](float g, float u) {
                const float x = std::fmin(g, limit);
                const float y = std::fmax(std::fmin(u, limit), -limit);
                return x / (1.0f + std::exp(-alpha * x)) * (y + 1.0f);
            });
        case GluOp::SWIGLU_CLAMP:
            return glu_rows(p, dst, [limit](float g, float u) {
                const float x = std::fmin(g, limit);  // the gate is clamped before SiLU
                const float y = std::fmax(std::fmin(u, limit), -limit);
                return silu_f32(x) * y;
            });
        default:
            throw UnsupportedError("[glu] unsupported glu op id " + std::to_string(dst->param_i32(0)));
    }
}
size_t cpu_work_size_GLU(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
