// CPU kernels of the 'linear_attn' family (GLA, RWKV-6, RWKV-7). Heads are split across
// threads; each head walks its tokens in order, reading the previous state (the input state
// for a sequence's first token) and writing the new one into the result's state block, which
// then holds the final state. Rows of the S x S state are updated with AVX2+FMA when the CPU
// has it (run-time pick); the plain loops are the reference path.

#include <vector>

#include "cpu/kernels.h"
#include "cpu/simd/exp_simd.h"
#include "cpu/simd/isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PG_X86 1
#else
#define PG_X86 0  // cpu_isa() is always Scalar here: the AVX2 helpers are stubs never called
#endif

namespace pyggml::cpu {

namespace {

#define PG_LA_AVX2 __attribute__((target("avx2,fma")))

// out = prev*g + kk*v; y += qq*out   (GLA with g = g[i]; RWKV-6 state update with td[i])
inline void row_decay_update(float* out, const float* prev, float g, float kk, const float* v, int64_t n) {
    for (int64_t j = 0; j < n; ++j) out[j] = prev[j] * g + kk * v[j];
}
#if PG_X86
PG_LA_AVX2 inline void row_decay_update_avx2(float* out, const float* prev, float g, float kk, const float* v, int64_t n) {
    const __m256 vg = _mm256_set1_ps(g), vk = _mm256_set1_ps(kk);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(out + j, _mm256_fmadd_ps(_mm256_loadu_ps(prev + j), vg,
                                                  _mm256_mul_ps(vk, _mm256_loadu_ps(v + j))));
    for (; j < n; ++j) out[j] = prev[j] * g + kk * v[j];
}
#else
void row_decay_update_avx2(float* out, const float* prev, float g, float kk, const float* v, int64_t n) { __builtin_trap(); }
#endif

// y += s*x
inline void axpy(float* y, float s, const float* x, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] += s * x[j];
}
#if PG_X86
PG_LA_AVX2 inline void axpy_avx2(float* y, float s, const float* x, int64_t n) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(y + j, _mm256_fmadd_ps(vs, _mm256_loadu_ps(x + j), _mm256_loadu_ps(y + j)));
    for (; j < n; ++j) y[j] += s * x[j];
}
#else
void axpy_avx2(float* y, float s, const float* x, int64_t n) { __builtin_trap(); }
#endif

// RWKV-6 output row: y += r * (kk*tf*v + prev)
inline void wkv6_out(float* y, float r, float kt, const float* v, const float* prev, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] += (kt * v[j] + prev[j]) * r;
}
#if PG_X86
PG_LA_AVX2 inline void wkv6_out_avx2(float* y, float r, float kt, const float* v, const float* prev, int64_t n) {
    const __m256 vr = _mm256_set1_ps(r), vkt = _mm256_set1_ps(kt);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 t = _mm256_fmadd_ps(vkt, _mm256_loadu_ps(v + j), _mm256_loadu_ps(prev + j));
        _mm256_storeu_ps(y + j, _mm256_fmadd_ps(t, vr, _mm256_loadu_ps(y + j)));
    }
    for (; j < n; ++j) y[j] += (kt * v[j] + prev[j]) * r;
}
#else
void wkv6_out_avx2(float* y, float r, float kt, const float* v, const float* prev, int64_t n) { __builtin_trap(); }
#endif

inline float dot(const float* a, const float* b, int64_t n) {
    float s = 0.0f;
    for (int64_t j = 0; j < n; ++j) s += a[j] * b[j];
    return s;
}
#if PG_X86
PG_LA_AVX2 inline float dot_avx2(const float* a, const float* b, int64_t n) {
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
#else
float dot_avx2(const float* a, const float* b, int64_t n) { __builtin_trap(); }
#endif

// RWKV-7 row: out = prev*w + vi*k + sa*b, returns out . r
inline float wkv7_row(float* out, const float* prev, const float* w, float vi, const float* k, float sa,
                      const float* b, const float* r, int64_t n) {
    float y = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
        out[j] = prev[j] * w[j] + vi * k[j] + sa * b[j];
        y += out[j] * r[j];
    }
    return y;
}
#if PG_X86
PG_LA_AVX2 inline float wkv7_row_avx2(float* out, const float* prev, const float* w, float vi, const float* k,
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
#else
float wkv7_row_avx2(float* out, const float* prev, const float* w, float vi, const float* k,
                                      float sa, const float* b, const float* r, int64_t n) { __builtin_trap(); }
#endif

// GLA / RWKV-6 for one head and token with S % 8 == 0: eight output columns j stay in a
// register while the rows i stream past (y sums over i in increasing order, as the row path).
// wkv6 selects RWKV-6 (y from the previous state and tf), else GLA (y from the new state).
#if PG_X86
PG_LA_AVX2 void cols8_avx2(bool wkv6, float* cur, const float* prev, const float* decay, const float* k,
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
#else
void cols8_avx2(bool wkv6, float* cur, const float* prev, const float* decay, const float* k,
                           const float* yw, const float* tf, float scale, const float* v, float* y, int64_t S) { __builtin_trap(); }
#endif

// RWKV-7, four state rows i..i+3 at once (S % 8 == 0): a, w, k, b and r are loaded once per
// eight columns for all four rows.
#if PG_X86
PG_LA_AVX2 void wkv7_rows4_avx2(float* cur, const float* prev, const float* w, const float* k, const float* vi,
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
#else
void wkv7_rows4_avx2(float* cur, const float* prev, const float* w, const float* k, const float* vi,
                                const float* a, const float* b, const float* r, float* y, int64_t S) { __builtin_trap(); }
#endif

struct Recurrence {
    int64_t S, H, T, n_seqs, C;
    const float* state_in;
    float* y;       // [C, T]
    float* states;  // [S*S*H, n_seqs]
    // pointers of head h's S x S state for token t: (prev, cur)
    void head_state(int64_t t, int64_t h, const float*& prev, float*& cur) const {
        const int64_t per_seq = T / n_seqs, seq = t / per_seq;
        cur = states + seq * S * C + h * S * S;
        prev = t % per_seq ? cur : state_in + seq * S * C + h * S * S;
    }
};

Recurrence recurrence(Tensor* dst, const Tensor* v, const Tensor* state) {
    Recurrence r;
    r.S = v->ne[0];
    r.H = v->ne[1];
    r.T = v->ne[2];
    r.n_seqs = state->ne[1];
    r.C = r.S * r.H;
    r.state_in = (const float*)state->data;
    r.y = (float*)dst->data;
    r.states = r.y + r.C * r.T;
    return r;
}

}  // namespace

void cpu_forward_GATED_LINEAR_ATTN(const ComputeParams& p, Tensor* dst) {
    const float* k = (const float*)dst->src[0]->data;
    const float* v = (const float*)dst->src[1]->data;
    const float* q = (const float*)dst->src[2]->data;
    const float* g = (const float*)dst->src[3]->data;
    const float scale = dst->param_f32(0);
    const Recurrence R = recurrence(dst, dst->src[1], dst->src[4]);
    const bool avx2 = simd::cpu_isa() != simd::Isa::Scalar;
    int64_t h0, h1;
    split_range(R.H, p.ith, p.nth, h0, h1);
    for (int64_t t = 0; t < R.T; ++t)
        for (int64_t h = h0; h < h1; ++h) {
            const float* prev;
            float* cur;
            R.head_state(t, h, prev, cur);
            const int64_t o = t * R.C + h * R.S;
            float* y = R.y + o;
            if (avx2 && R.S % 8 == 0) {
                cols8_avx2(false, cur, prev, g + o, k + o, q + o, nullptr, scale, v + o, y, R.S);
                continue;
            }
            for (int64_t j = 0; j < R.S; ++j) y[j] = 0.0f;
            for (int64_t i = 0; i < R.S; ++i) {
                float* row = cur + i * R.S;
                if (avx2) {
                    row_decay_update_avx2(row, prev + i * R.S, g[o + i], k[o + i], v + o, R.S);
                    axpy_avx2(y, q[o + i] * scale, row, R.S);
                } else {
                    row_decay_update(row, prev + i * R.S, g[o + i], k[o + i], v + o, R.S);
                    axpy(y, q[o + i] * scale, row, R.S);
                }
            }
        }
}
size_t cpu_work_size_GATED_LINEAR_ATTN(const Tensor*, int) { return 0; }

void cpu_forward_RWKV_WKV6(const ComputeParams& p, Tensor* dst) {
    const float* k = (const float*)dst->src[0]->data;
    const float* v = (const float*)dst->src[1]->data;
    const float* r = (const float*)dst->src[2]->data;
    const float* tf = (const float*)dst->src[3]->data;
    const float* td = (const float*)dst->src[4]->data;
    const Recurrence R = recurrence(dst, dst->src[1], dst->src[5]);
    const bool avx2 = simd::cpu_isa() != simd::Isa::Scalar;
    int64_t h0, h1;
    split_range(R.H, p.ith, p.nth, h0, h1);
    for (int64_t t = 0; t < R.T; ++t)
        for (int64_t h = h0; h < h1; ++h) {
            const float* prev;
            float* cur;
            R.head_state(t, h, prev, cur);
            const int64_t o = t * R.C + h * R.S;
            float* y = R.y + o;
            if (avx2 && R.S % 8 == 0) {
                cols8_avx2(true, cur, prev, td + o, k + o, r + o, tf + h * R.S, 1.0f, v + o, y, R.S);
                continue;
            }
            for (int64_t j = 0; j < R.S; ++j) y[j] = 0.0f;
            for (int64_t i = 0; i < R.S; ++i) {
                const float ki = k[o + i], kt = ki * tf[h * R.S + i];
                // the output reads the previous row before the update overwrites it (in place)
                if (avx2) {
                    wkv6_out_avx2(y, r[o + i], kt, v + o, prev + i * R.S, R.S);
                    row_decay_update_avx2(cur + i * R.S, prev + i * R.S, td[o + i], ki, v + o, R.S);
                } else {
                    wkv6_out(y, r[o + i], kt, v + o, prev + i * R.S, R.S);
                    row_decay_update(cur + i * R.S, prev + i * R.S, td[o + i], ki, v + o, R.S);
                }
            }
        }
}
size_t cpu_work_size_RWKV_WKV6(const Tensor*, int) { return 0; }

void cpu_forward_RWKV_WKV7(const ComputeParams& p, Tensor* dst) {
    const float* r = (const float*)dst->src[0]->data;
    const float* w = (const float*)dst->src[1]->data;
    const float* k = (const float*)dst->src[2]->data;
    const float* v = (const float*)dst->src[3]->data;
    const float* a = (const float*)dst->src[4]->data;
    const float* b = (const float*)dst->src[5]->data;
    const Recurrence R = recurrence(dst, dst->src[3], dst->src[6]);
    const bool avx2 = simd::cpu_isa() != simd::Isa::Scalar;
    int64_t h0, h1;
    split_range(R.H, p.ith, p.nth, h0, h1);
    for (int64_t t = 0; t < R.T; ++t)
        for (int64_t h = h0; h < h1; ++h) {
            const float* prev;
            float* cur;
            R.head_state(t, h, prev, cur);
            const int64_t o = t * R.C + h * R.S;
            int64_t i0 = 0;
            if (avx2 && R.S % 8 == 0)
                for (; i0 + 4 <= R.S; i0 += 4)
                    wkv7_rows4_avx2(cur + i0 * R.S, prev + i0 * R.S, w + o, k + o, v + o + i0, a + o, b + o, r + o,
                                    R.y + o + i0, R.S);
            for (int64_t i = i0; i < R.S; ++i) {
                const float* pr = prev + i * R.S;
                float* row = cur + i * R.S;
                if (avx2) {
                    const float sa = dot_avx2(a + o, pr, R.S);
                    R.y[o + i] = wkv7_row_avx2(row, pr, w + o, v[o + i], k + o, sa, b + o, r + o, R.S);
                } else {
                    const float sa = dot(a + o, pr, R.S);
                    R.y[o + i] = wkv7_row(row, pr, w + o, v[o + i], k + o, sa, b + o, r + o, R.S);
                }
            }
        }
}
size_t cpu_work_size_RWKV_WKV7(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
