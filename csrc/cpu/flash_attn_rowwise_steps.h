// The F16 V accumulators of the row-wise flash-attention kernel (cpu/flash_attn_rowwise_impl.h,
// whose Rowwise derives from RowwiseSteps): each block's recorded update steps per query
// vector (V row, weight vs, rescale factor ms) and the passes that apply them, ggml's
// acc = f16(acc * ms) on a rescale, then acc = f16(acc + v * vs), with the accumulators held in
// registers across the block. AVX2 (8 lanes) and AVX-512 (16 lanes, masked tails, each V row
// widened once for up to three vectors) give the same bits per lane. Included by
// flash_attn_rowwise_impl.h, inside the level's target region (its notes apply).
#pragma once

namespace pyggml::cpu {
namespace {

using fa_rowwise::kBlock;
using fa_rowwise::kMaxVectors;

inline __m256 round_f16(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, 0)); }
inline float round_f16(float x) { return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)); }

template <bool Wide>
class RowwiseSteps {
protected:
    // The general step record of a vector whose na steps are the block's columns in order.
    void record_plain_steps(int64_t i, int na) {
        const int64_t o = i * kBlock;
        for (int a = 0; a < na; ++a) {
            step_v_[o + a] = vrow_[a];
            step_ms_[o + a] = 1.0f;
            step_rs_[o + a] = false;
        }
    }

    // V row of step a of vector row o: the block's column a when no step rescales (every
    // column weighed, in order), else the recorded one.
    template <bool Rescale>
    const uint16_t* step_row(int64_t o, int a) const { return Rescale ? step_v_[o + a] : vrow_[a]; }

    // acc_block for vectors i and i + 1 (accumulators acc and acc + Dv) that share V rows.
    template <int NR, bool Rescale>
    void acc_pair(float* acc, int64_t i, int n) const {
        const int64_t o0 = i * kBlock, o1 = o0 + kBlock, Dv = Dv_;
        __m256 y0[NR], y1[NR];
        for (int r = 0; r < NR; ++r) {
            y0[r] = _mm256_loadu_ps(acc + 8 * r);
            y1[r] = _mm256_loadu_ps(acc + Dv + 8 * r);
        }
        for (int a = 0; a < n; ++a) {
            if (Rescale && step_rs_[o0 + a]) {
                const __m256 ms = _mm256_set1_ps(step_ms_[o0 + a]);
                for (int r = 0; r < NR; ++r) y0[r] = round_f16(_mm256_mul_ps(y0[r], ms));
            }
            if (Rescale && step_rs_[o1 + a]) {
                const __m256 ms = _mm256_set1_ps(step_ms_[o1 + a]);
                for (int r = 0; r < NR; ++r) y1[r] = round_f16(_mm256_mul_ps(y1[r], ms));
            }
            const __m256 vs0 = _mm256_set1_ps(step_vs_[o0 + a]);
            const __m256 vs1 = _mm256_set1_ps(step_vs_[o1 + a]);
            const uint16_t* vr = step_row<Rescale>(o0, a);
            for (int r = 0; r < NR; ++r) {
                const __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(vr + 8 * r)));
                y0[r] = round_f16(_mm256_fmadd_ps(xv, vs0, y0[r]));
                y1[r] = round_f16(_mm256_fmadd_ps(xv, vs1, y1[r]));
            }
        }
        for (int r = 0; r < NR; ++r) {
            _mm256_storeu_ps(acc + 8 * r, y0[r]);
            _mm256_storeu_ps(acc + Dv + 8 * r, y1[r]);
        }
    }

    // acc = f16(acc * ms) where a step rescales, then acc = f16(acc + v * vs), for the n steps.
    template <bool Rescale>
    void accumulate(float* acc, int64_t i, int64_t Dv, int n) const {
        const int64_t o = i * kBlock;
        int64_t d = 0;
        // Each 8-lane register is a chain of dependent round trips through F16; several
        // registers per pass keep those chains in flight together (same bits per lane).
        for (; d + 64 <= Dv; d += 64) acc_block<8, Rescale>(acc, o, d, n);
        if (d + 32 <= Dv) { acc_block<4, Rescale>(acc, o, d, n); d += 32; }
        if (d + 16 <= Dv) { acc_block<2, Rescale>(acc, o, d, n); d += 16; }
        if (d + 8 <= Dv) { acc_block<1, Rescale>(acc, o, d, n); d += 8; }
        for (; d < Dv; ++d) {
            float y = acc[d];
            for (int a = 0; a < n; ++a) {
                if (Rescale && step_rs_[o + a]) y = round_f16(y * step_ms_[o + a]);
                y = round_f16(std::fma(_cvtsh_ss(step_row<Rescale>(o, a)[d]), step_vs_[o + a], y));
            }
            acc[d] = y;
        }
    }

    template <int NR, bool Rescale>
    void acc_block(float* acc, int64_t o, int64_t d, int n) const {
        __m256 y[NR];
        for (int r = 0; r < NR; ++r) y[r] = _mm256_loadu_ps(acc + d + 8 * r);
        for (int a = 0; a < n; ++a) {
            if (Rescale && step_rs_[o + a]) {
                const __m256 ms = _mm256_set1_ps(step_ms_[o + a]);
                for (int r = 0; r < NR; ++r) y[r] = round_f16(_mm256_mul_ps(y[r], ms));
            }
            const __m256 vs = _mm256_set1_ps(step_vs_[o + a]);
            const uint16_t* vr = step_row<Rescale>(o, a) + d;
            for (int r = 0; r < NR; ++r) {
                const __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(vr + 8 * r)));
                y[r] = round_f16(_mm256_fmadd_ps(xv, vs, y[r]));
            }
        }
        for (int r = 0; r < NR; ++r) _mm256_storeu_ps(acc + d + 8 * r, y[r]);
    }

    // ---- the AVX-512 level (Wide): 16-lane registers ----

    static __mmask16 lanes(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u); }
    static __m512 round_f16_wide(__m512 x) { return _mm512_cvtph_ps(_mm512_cvtps_ph(x, 0)); }
    static __m512 load_f16_wide(const uint16_t* p, __mmask16 m) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    }

    // f(d, NR, mask) over the V dims in pieces of up to 64 (NR registers, the last one's lanes
    // in mask), so any Dv runs in registers without a scalar tail (same bits per lane).
    template <class F>
    void over_dims_wide(F&& f) const {
        const int64_t Dv = Dv_;
        for (int64_t d = 0; d < Dv; d += 64) {
            const int64_t left = std::min<int64_t>(Dv - d, 64);
            const __mmask16 last = lanes(left - 16 * ((left - 1) / 16));
            switch ((left + 15) / 16) {
                case 4: f(d, std::integral_constant<int, 4>(), last); break;
                case 3: f(d, std::integral_constant<int, 3>(), last); break;
                case 2: f(d, std::integral_constant<int, 2>(), last); break;
                default: f(d, std::integral_constant<int, 1>(), last); break;
            }
        }
    }

    // The V accumulators after the block's recurrences: the vectors without a rescale go up to
    // three at a time over the block's V rows (each row widened once for all of them, their
    // accumulators in registers); the others step by step through their recorded steps.
    void accumulate_wide(int64_t nq, int na) {
        int64_t plain[kMaxVectors];
        int n = 0;
        for (int64_t i = 0; i < nq; ++i) {
            if (!step_n_[i]) continue;
            if (rescales_[i]) {
                over_dims_wide([&](int64_t d, auto nr, __mmask16 last) { steps_wide<nr()>(i, d, last); });
            } else {
                plain[n++] = i;
            }
        }
        int k = 0;
        for (; k + 3 <= n; k += 3)
            over_dims_wide([&](int64_t d, auto nr, __mmask16 last) { shared_wide<3, nr()>(plain + k, na, d, last); });
        if (n - k == 2)
            over_dims_wide([&](int64_t d, auto nr, __mmask16 last) { shared_wide<2, nr()>(plain + k, na, d, last); });
        else if (n - k == 1)
            over_dims_wide([&](int64_t d, auto nr, __mmask16 last) { shared_wide<1, nr()>(plain + k, na, d, last); });
    }

    // acc = f16(acc + v * vs) over the block's na columns for the vectors idx[0..G-1], dims
    // d..d+16*NR-1 (the last register's lanes in last).
    template <int G, int NR>
    void shared_wide(const int64_t* idx, int na, int64_t d, __mmask16 last) {
        const int64_t Dv = Dv_;
        __m512 y[G][NR];
        float* acc[G];
        const float* vs[G];
        for (int g = 0; g < G; ++g) {
            acc[g] = acc_ + idx[g] * Dv + d;
            vs[g] = step_vs_ + idx[g] * kBlock;
            for (int r = 0; r < NR; ++r) y[g][r] = _mm512_maskz_loadu_ps(r == NR - 1 ? last : 0xFFFF, acc[g] + 16 * r);
        }
        for (int a = 0; a < na; ++a) {
            const uint16_t* vr = vrow_[a] + d;
            __m512 w[G];
            for (int g = 0; g < G; ++g) w[g] = _mm512_set1_ps(vs[g][a]);
            for (int r = 0; r < NR; ++r) {
                const __m512 xv = load_f16_wide(vr + 16 * r, r == NR - 1 ? last : 0xFFFF);
                for (int g = 0; g < G; ++g) y[g][r] = round_f16_wide(_mm512_fmadd_ps(xv, w[g], y[g][r]));
            }
        }
        for (int g = 0; g < G; ++g)
            for (int r = 0; r < NR; ++r) _mm512_mask_storeu_ps(acc[g] + 16 * r, r == NR - 1 ? last : 0xFFFF, y[g][r]);
    }

    // acc = f16(acc * ms) where a step rescales, then acc = f16(acc + v * vs), over the
    // step_n_[i] recorded steps of vector i, dims as shared_wide.
    template <int NR>
    void steps_wide(int64_t i, int64_t d, __mmask16 last) {
        const int64_t o = i * kBlock;
        float* acc = acc_ + i * Dv_ + d;
        __m512 y[NR];
        for (int r = 0; r < NR; ++r) y[r] = _mm512_maskz_loadu_ps(r == NR - 1 ? last : 0xFFFF, acc + 16 * r);
        for (int a = 0; a < step_n_[i]; ++a) {
            if (step_rs_[o + a]) {
                const __m512 ms = _mm512_set1_ps(step_ms_[o + a]);
                for (int r = 0; r < NR; ++r) y[r] = round_f16_wide(_mm512_mul_ps(y[r], ms));
            }
            const __m512 vs = _mm512_set1_ps(step_vs_[o + a]);
            const uint16_t* vr = step_v_[o + a] + d;
            for (int r = 0; r < NR; ++r)
                y[r] = round_f16_wide(_mm512_fmadd_ps(load_f16_wide(vr + 16 * r, r == NR - 1 ? last : 0xFFFF), vs, y[r]));
        }
        for (int r = 0; r < NR; ++r) _mm512_mask_storeu_ps(acc + 16 * r, r == NR - 1 ? last : 0xFFFF, y[r]);
    }

    int64_t Dv_ = 0;
    float* acc_ = nullptr;  // nq accumulators of Dv_ floats (F16-representable values)
    // one block of columns: V rows, and every vector's update steps
    const uint16_t* vrow_[kBlock];
    const uint16_t* step_v_[kMaxVectors * kBlock];
    float step_vs_[kMaxVectors * kBlock], step_ms_[kMaxVectors * kBlock];
    bool step_rs_[kMaxVectors * kBlock];
    int step_n_[kMaxVectors];
    bool rescales_[kMaxVectors];
};

}  // namespace
}  // namespace pyggml::cpu
