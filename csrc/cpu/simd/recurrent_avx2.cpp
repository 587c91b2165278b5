// AVX2 + FMA recurrent-state helpers (the RecurrentOps contract of cpu/recurrent_simd.h).
#include "cpu/recurrent_simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/simd/exp_simd.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace pyggml::cpu::recurrent {

namespace {

float decay_dot_avx2(float* m, const float* src, const float* dvec, float ds, const float* k, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const __m256 vds = _mm256_set1_ps(ds);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 d0 = dvec ? _mm256_loadu_ps(dvec + i) : vds, d1 = dvec ? _mm256_loadu_ps(dvec + i + 8) : vds;
        const __m256 m0 = _mm256_mul_ps(_mm256_loadu_ps(src + i), d0), m1 = _mm256_mul_ps(_mm256_loadu_ps(src + i + 8), d1);
        _mm256_storeu_ps(m + i, m0);
        _mm256_storeu_ps(m + i + 8, m1);
        acc0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(k + i), acc0);
        acc1 = _mm256_fmadd_ps(m1, _mm256_loadu_ps(k + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 m0 = _mm256_mul_ps(_mm256_loadu_ps(src + i), dvec ? _mm256_loadu_ps(dvec + i) : vds);
        _mm256_storeu_ps(m + i, m0);
        acc0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(k + i), acc0);
    }
    float s = simd::hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) {
        m[i] = src[i] * (dvec ? dvec[i] : ds);
        s += m[i] * k[i];
    }
    return s;
}

float update_dot_avx2(float* m, float d, const float* k, const float* q, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const __m256 vd = _mm256_set1_ps(d);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 m0 = _mm256_fmadd_ps(vd, _mm256_loadu_ps(k + i), _mm256_loadu_ps(m + i));
        const __m256 m1 = _mm256_fmadd_ps(vd, _mm256_loadu_ps(k + i + 8), _mm256_loadu_ps(m + i + 8));
        _mm256_storeu_ps(m + i, m0);
        _mm256_storeu_ps(m + i + 8, m1);
        acc0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(q + i), acc0);
        acc1 = _mm256_fmadd_ps(m1, _mm256_loadu_ps(q + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 m0 = _mm256_fmadd_ps(vd, _mm256_loadu_ps(k + i), _mm256_loadu_ps(m + i));
        _mm256_storeu_ps(m + i, m0);
        acc0 = _mm256_fmadd_ps(m0, _mm256_loadu_ps(q + i), acc0);
    }
    float s = simd::hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) {
        m[i] += d * k[i];
        s += m[i] * q[i];
    }
    return s;
}

// acc[0..3] += x * w over the row, 32 floats a step (8 for the S % 32 rest): x = src * decay
// (pass 1, stored to m) or m + d * k (pass 2, stored to m).
template <bool kPass1>
inline __m256 delta_pass(float* m, const float* src, int64_t S, const float* dvec, __m256 vds, __m256 d,
                         const float* k, const float* w) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    auto step = [&](int64_t i, __m256& acc) {
        __m256 x;
        if (kPass1) x = _mm256_mul_ps(_mm256_loadu_ps(src + i), dvec ? _mm256_loadu_ps(dvec + i) : vds);
        else x = _mm256_fmadd_ps(d, _mm256_loadu_ps(k + i), _mm256_loadu_ps(m + i));
        _mm256_storeu_ps(m + i, x);
        acc = _mm256_fmadd_ps(x, _mm256_loadu_ps(w + i), acc);
    };
    int64_t i = 0;
    for (; i + 32 <= S; i += 32) {
        step(i, a0);
        step(i + 8, a1);
        step(i + 16, a2);
        step(i + 24, a3);
    }
    for (; i < S; i += 8) step(i, a0);
    return _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
}

float delta_row_avx2(float* m, const float* src, int64_t S, const float* dvec, float ds, const float* k,
                     const float* q, float v, float beta, float scale) {
    const __m256 vds = _mm256_set1_ps(ds), zero = _mm256_setzero_ps();
    const float mk = simd::hsum_ps(delta_pass<true>(m, src, S, dvec, vds, zero, k, k));
    const __m256 dl = _mm256_set1_ps((v - mk) * beta);
    return simd::hsum_ps(delta_pass<false>(m, m, S, dvec, vds, dl, k, q)) * scale;
}

void delta_rows4_avx2(float* m, int64_t S, const float* dvec, float ds, const float* k, const float* q,
                           const float* v, float beta, float scale, float* out) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256 vds = _mm256_set1_ps(ds);
    for (int64_t i = 0; i < S; i += 8) {
        const __m256 d = dvec ? _mm256_loadu_ps(dvec + i) : vds, kk = _mm256_loadu_ps(k + i);
        for (int r = 0; r < 4; ++r) {
            const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(m + r * S + i), d);
            _mm256_storeu_ps(m + r * S + i, x);
            acc[r] = _mm256_fmadd_ps(x, kk, acc[r]);
        }
    }
    __m256 dl[4];
    for (int r = 0; r < 4; ++r) {
        dl[r] = _mm256_set1_ps((v[r] - simd::hsum_ps(acc[r])) * beta);
        acc[r] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < S; i += 8) {
        const __m256 kk = _mm256_loadu_ps(k + i), qq = _mm256_loadu_ps(q + i);
        for (int r = 0; r < 4; ++r) {
            const __m256 x = _mm256_fmadd_ps(dl[r], kk, _mm256_loadu_ps(m + r * S + i));
            _mm256_storeu_ps(m + r * S + i, x);
            acc[r] = _mm256_fmadd_ps(x, qq, acc[r]);
        }
    }
    for (int r = 0; r < 4; ++r) out[r] = simd::hsum_ps(acc[r]) * scale;
}

void row_decay_update_avx2(float* out, const float* prev, float g, float kk, const float* v, int64_t n) {
    const __m256 vg = _mm256_set1_ps(g), vk = _mm256_set1_ps(kk);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(out + j, _mm256_fmadd_ps(_mm256_loadu_ps(prev + j), vg,
                                                  _mm256_mul_ps(vk, _mm256_loadu_ps(v + j))));
    for (; j < n; ++j) out[j] = prev[j] * g + kk * v[j];
}

void axpy_avx2(float* y, float s, const float* x, int64_t n) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(y + j, _mm256_fmadd_ps(vs, _mm256_loadu_ps(x + j), _mm256_loadu_ps(y + j)));
    for (; j < n; ++j) y[j] += s * x[j];
}

void wkv6_out_avx2(float* y, float r, float kt, const float* v, const float* prev, int64_t n) {
    const __m256 vr = _mm256_set1_ps(r), vkt = _mm256_set1_ps(kt);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 t = _mm256_fmadd_ps(vkt, _mm256_loadu_ps(v + j), _mm256_loadu_ps(prev + j));
        _mm256_storeu_ps(y + j, _mm256_fmadd_ps(t, vr, _mm256_loadu_ps(y + j)));
    }
    for (; j < n; ++j) y[j] += (kt * v[j] + prev[j]) * r;
}

float dot_avx2(const float* a, const float* b, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8), acc1);
    }
    for (; j + 8 <= n; j += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc0);
    float s = simd::hsum_ps(_mm256_add_ps(acc0, acc1));
    for (; j < n; ++j) s += a[j] * b[j];
    return s;
}

float wkv7_row_avx2(float* out, const float* prev, const float* w, float vi, const float* k,
                                      float sa, const float* b, const float* r, int64_t n) {
    const __m256 vv = _mm256_set1_ps(vi), vsa = _mm256_set1_ps(sa);
    __m256 acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 s = _mm256_mul_ps(_mm256_loadu_ps(prev + j), _mm256_loadu_ps(w + j));
        s = _mm256_fmadd_ps(vv, _mm256_loadu_ps(k + j), s);
        s = _mm256_fmadd_ps(vsa, _mm256_loadu_ps(b + j), s);
        _mm256_storeu_ps(out + j, s);
        acc = _mm256_fmadd_ps(s, _mm256_loadu_ps(r + j), acc);
    }
    float y = simd::hsum_ps(acc);
    for (; j < n; ++j) {
        out[j] = prev[j] * w[j] + vi * k[j] + sa * b[j];
        y += out[j] * r[j];
    }
    return y;
}

void cols8_avx2(bool wkv6, float* cur, const float* prev, const float* decay, const float* k,
                           const float* yw, const float* tf, float scale, const float* v, float* y, int64_t S) {
    for (int64_t j = 0; j < S; j += 8) {
        const __m256 vv = _mm256_loadu_ps(v + j);
        __m256 acc = _mm256_setzero_ps();
        for (int64_t i = 0; i < S; ++i) {
            const __m256 kv = _mm256_mul_ps(_mm256_set1_ps(k[i]), vv);
            const __m256 pr = _mm256_loadu_ps(prev + i * S + j);
            if (wkv6) {
                const __m256 t = _mm256_fmadd_ps(_mm256_set1_ps(tf[i]), kv, pr);
                acc = _mm256_fmadd_ps(t, _mm256_set1_ps(yw[i]), acc);
                _mm256_storeu_ps(cur + i * S + j, _mm256_fmadd_ps(pr, _mm256_set1_ps(decay[i]), kv));
            } else {
                const __m256 x = _mm256_fmadd_ps(pr, _mm256_set1_ps(decay[i]), kv);
                _mm256_storeu_ps(cur + i * S + j, x);
                acc = _mm256_fmadd_ps(_mm256_set1_ps(yw[i] * scale), x, acc);
            }
        }
        _mm256_storeu_ps(y + j, acc);
    }
}

void wkv7_rows4_avx2(float* cur, const float* prev, const float* w, const float* k, const float* vi,
                                const float* a, const float* b, const float* r, float* y, int64_t S) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t j = 0; j < S; j += 8) {
        const __m256 av = _mm256_loadu_ps(a + j);
        for (int q = 0; q < 4; ++q) acc[q] = _mm256_fmadd_ps(av, _mm256_loadu_ps(prev + q * S + j), acc[q]);
    }
    __m256 sa[4], vv[4];
    for (int q = 0; q < 4; ++q) {
        sa[q] = _mm256_set1_ps(simd::hsum_ps(acc[q]));
        vv[q] = _mm256_set1_ps(vi[q]);
        acc[q] = _mm256_setzero_ps();
    }
    for (int64_t j = 0; j < S; j += 8) {
        const __m256 wv = _mm256_loadu_ps(w + j), kv = _mm256_loadu_ps(k + j), bv = _mm256_loadu_ps(b + j),
                     rv = _mm256_loadu_ps(r + j);
        for (int q = 0; q < 4; ++q) {
            __m256 x = _mm256_mul_ps(_mm256_loadu_ps(prev + q * S + j), wv);
            x = _mm256_fmadd_ps(vv[q], kv, x);
            x = _mm256_fmadd_ps(sa[q], bv, x);
            _mm256_storeu_ps(cur + q * S + j, x);
            acc[q] = _mm256_fmadd_ps(x, rv, acc[q]);
        }
    }
    for (int q = 0; q < 4; ++q) y[q] = simd::hsum_ps(acc[q]);
}

// One row at a time with four independent accumulators (32 floats a step): two streams (src,
// st) plus the shared B and C, which the hardware prefetcher follows even when the state comes
// from DRAM; the four add chains hide the FMA latency when it is cached.
float ssm_row_avx2(float* st, const float* src, const float* B, const float* C, float dA, float xdt, int64_t n) {
    const __m256 va = _mm256_set1_ps(dA), vx = _mm256_set1_ps(xdt);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 4; ++j) {
            const int64_t o = i + 8 * j;
            const __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(src + o), va, _mm256_mul_ps(_mm256_loadu_ps(B + o), vx));
            _mm256_storeu_ps(st + o, v);
            acc[j] = _mm256_fmadd_ps(v, _mm256_loadu_ps(C + o), acc[j]);
        }
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(src + i), va, _mm256_mul_ps(_mm256_loadu_ps(B + i), vx));
        _mm256_storeu_ps(st + i, v);
        acc[0] = _mm256_fmadd_ps(v, _mm256_loadu_ps(C + i), acc[0]);
    }
    float s = simd::hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; ++i) {
        const float v = src[i] * dA + B[i] * xdt;
        st[i] = v;
        s += v * C[i];
    }
    return s;
}

}  // namespace

const RecurrentOps& recurrent_avx2() {
    static const RecurrentOps k{decay_dot_avx2, update_dot_avx2, delta_row_avx2, delta_rows4_avx2, row_decay_update_avx2, axpy_avx2,
                                wkv6_out_avx2, dot_avx2, wkv7_row_avx2, cols8_avx2, wkv7_rows4_avx2, ssm_row_avx2};
    return k;
}

}  // namespace pyggml::cpu::recurrent

#pragma GCC pop_options
#else
namespace pyggml::cpu::recurrent {
const RecurrentOps& recurrent_avx2() { return recurrent_scalar(); }
}
#endif
