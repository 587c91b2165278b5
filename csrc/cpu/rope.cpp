// CPU kernel of ROPE. Rows are split across threads; each thread keeps a cache
// of the per-pair (cos, sin) of the current token (positions depend on dim 2 only), built
// with the reference's F32 recurrences (theta *= theta_scale) and YaRN formulas, then rotates
// the window [n_offs, n_offs + n_dims) of each row with the SIMD row primitives. Elements
// outside the window are copied. op_params[0] != 0 marks the backward op (sin negated).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/rowops_simd.h"
#include "pyggml/ops/rope.h"

namespace pyggml::cpu {

namespace {

constexpr int64_t kPad = 16;

// ggml's MAX/MIN macros (a > b ? a : b), kept for their NaN behaviour.
inline float fmax_ref(float a, float b) { return a > b ? a : b; }
inline float fmin_ref(float a, float b) { return a < b ? a : b; }

struct RopeParams {
    int n_dims, mode, n_ctx_orig, n_offs;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    int sections[4];
    float sin_sign, theta_scale, corr[2];
    bool multi, vision, imrope;

    explicit RopeParams(const Tensor* t) {
        sin_sign = t->param_i32(0) ? -1.0f : 1.0f;
        n_dims = t->param_i32(1);
        mode = t->param_i32(2);
        n_ctx_orig = t->param_i32(4);
        freq_base = t->param_f32(5);
        freq_scale = t->param_f32(6);
        ext_factor = t->param_f32(7);
        attn_factor = t->param_f32(8);
        beta_fast = t->param_f32(9);
        beta_slow = t->param_f32(10);
        for (int i = 0; i < 4; ++i) sections[i] = t->param_i32(11 + i);
        n_offs = t->param_i32(15);
        multi = (mode & kRopeMrope) != 0;
        vision = mode == kRopeVision;
        imrope = mode == kRopeImrope;
        theta_scale = std::pow(freq_base, -2.0f / (float)n_dims);
        // YaRN correction range, literally (IEEE): n_ctx_orig = 0 gives -inf.
        const float start = std::floor(corr_dim(beta_fast));
        const float end = std::ceil(corr_dim(beta_slow));
        corr[0] = fmax_ref(0.0f, start);
        corr[1] = fmin_ref((float)(n_dims - 1), end);
    }
    float corr_dim(float n_rot) const {
        return (float)n_dims * std::log((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * std::log(freq_base));
    }
    // Magnitude factor (constant per node).
    float mscale() const {
        return ext_factor != 0.0f ? attn_factor * (1.0f + 0.1f * std::log(1.0f / freq_scale)) : attn_factor;
    }
    // YaRN angle of pair i for the extrapolated angle theta_extrap.
    float angle(float theta_extrap, int64_t i) const {
        const float theta_interp = freq_scale * theta_extrap;
        if (ext_factor == 0.0f) return theta_interp;
        const float y = ((float)i - corr[0]) / fmax_ref(0.001f, corr[1] - corr[0]);
        const float ramp = 1.0f - fmin_ref(1.0f, fmax_ref(0.0f, y));
        const float mix = ramp * ext_factor;
        return theta_interp * (1.0f - mix) + theta_extrap * mix;
    }
};

// Fills cs[i], sn[i] for the n_pairs pairs of token position(s) pos[0..3]: the angles first
// (scalar F32 recurrences, into sn), then cos/sin times the magnitude in one vector pass.
void build_cache(rowops::Level l, const RopeParams& rp, const int32_t pos[4], const Tensor* ff, int64_t n_pairs,
                 float* cs, float* sn) {
    float* ang = sn;
    const float ms = rp.mscale();
    auto factor = [&](int64_t i) {
        return ff ? *(const float*)((const char*)ff->data + i * ff->nb[0]) : 1.0f;
    };
    if (!rp.multi) {
        float theta = (float)pos[0];
        for (int64_t i = 0; i < n_pairs; ++i) {
            ang[i] = rp.angle(theta / factor(i), i);
            theta *= rp.theta_scale;
        }
        rowops::sincos(l, ang, cs, sn, ms, ms * rp.sin_sign, n_pairs);
        return;
    }
    const int* s = rp.sections;
    const int sect_dims = s[0] + s[1] + s[2] + s[3];
    const int sec_w = s[0] + s[1];
    const int sec_e = sec_w + s[2];
    const float base[4] = {(float)pos[0], (float)pos[1], (float)pos[2], (float)pos[3]};
    float th[4] = {base[0], base[1], base[2], base[3]};  // t, h, w, e
    for (int64_t i = 0; i < n_pairs; ++i) {
        const int sector = (int)(i % sect_dims);
        if (rp.vision) {  // independent sections: exponent restarts at each boundary
            if (sector == 0) th[0] = base[0];
            else if (sector == s[0]) th[1] = base[1];
            else if (sector == sec_w) th[2] = base[2];
            else if (sector == sec_e) th[3] = base[3];
        }
        float theta;
        if (rp.imrope) {
            if (sector % 3 == 1 && sector < 3 * s[1]) theta = th[1];
            else if (sector % 3 == 2 && sector < 3 * s[2]) theta = th[2];
            else if (sector % 3 == 0 && sector < 3 * s[0]) theta = th[0];
            else theta = th[3];
        } else {
            if (sector < s[0]) theta = th[0];
            else if (sector < sec_w) theta = th[1];
            else if (sector < sec_e) theta = th[2];
            else theta = th[3];
        }
        ang[i] = rp.angle(theta / factor(i), i);
        for (float& t : th) t *= rp.theta_scale;
    }
    rowops::sincos(l, ang, cs, sn, ms, ms * rp.sin_sign, n_pairs);
}

// The (cos, sin) rows of recent tokens, per thread. Every rope node of a graph (Q and K of each
// layer) rotates by the same positions with the same parameters, so the rows the first node
// built are found by the next ones: a row is reused when the node's parameters match and the
// token's position(s) match those it was built for, bit for bit the row a rebuild would give.
// Freq-factor tensors are not part of the key: a node with one always builds its rows.
constexpr int64_t kMemoMaxTokens = 8192;  // bounds the memo (2 x n_dims floats per token)

struct RopeMemo {
    int32_t params[kMaxOpParams] = {};
    int level = -1;
    int64_t len = 0;                 // floats per cos (and per sin) row
    std::vector<float> rows;         // [token][cos len | sin len]
    std::vector<int32_t> pos;        // [token][4]
    std::vector<uint8_t> valid;      // [token]

    // Rows for tokens 0..n_tok-1 of a node with these parameters; stale rows are dropped.
    void prepare(const Tensor* t, int lvl, int64_t row_len, int64_t n_tok) {
        const bool same = level == lvl && len == row_len &&
                          std::memcmp(params, t->op_params, sizeof(params)) == 0;
        if (!same) {
            std::memcpy(params, t->op_params, sizeof(params));
            level = lvl;
            len = row_len;
            std::fill(valid.begin(), valid.end(), 0);
        }
        if ((int64_t)valid.size() < n_tok) valid.resize((size_t)n_tok, 0);
        if (pos.size() < (size_t)n_tok * 4) pos.resize((size_t)n_tok * 4);
        if (rows.size() < (size_t)n_tok * 2 * (size_t)len) rows.resize((size_t)n_tok * 2 * (size_t)len);
    }
    float* row(int64_t i) { return rows.data() + (size_t)i * 2 * (size_t)len; }
    bool hit(int64_t i, const int32_t p[4]) const {
        return valid[(size_t)i] && std::memcmp(&pos[(size_t)i * 4], p, 4 * sizeof(int32_t)) == 0;
    }
    void store(int64_t i, const int32_t p[4]) {
        std::memcpy(&pos[(size_t)i * 4], p, 4 * sizeof(int32_t));
        valid[(size_t)i] = 1;
    }
};

}  // namespace

void cpu_forward_ROPE(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const Tensor* ff = dst->src[2];
    const RopeParams rp(dst);
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const size_t es = type_size(dst->type);
    const bool f16 = dst->type == Type::F16;
    const int64_t n_pairs = rp.vision ? rp.n_dims : rp.n_dims / 2;
    // window [w0, w1) that is rotated; the rest is copied
    const int64_t w0 = rp.vision ? 0 : rp.n_offs;
    const int64_t w1 = rp.vision ? ne0 : rp.n_offs + rp.n_dims;
    const rowops::Level l = rowops::level();

    float* scratch = (float*)p.wdata + (3 * ne0 + 3 * kPad) * p.ith;
    float* c = scratch;                   // cos per pair (also the duplicated cos for NORMAL)
    float* sn = c + ne0 + kPad;           // sin per pair (signed pairs for NORMAL)
    float* row = sn + ne0 + kPad;         // f16 window in f32
    const bool normal = rp.mode == kRopeNormal;

    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    const rowops::RowOps& ops = rowops::kernels_for(l);
    const auto rot = rp.vision ? ops.rot_neox : normal ? ops.rot_normal : ops.rot_neox;
    const int64_t rot_n = rp.vision ? rp.n_dims : normal ? rp.n_dims : rp.n_dims / 2;
    const bool has_outside = w0 > 0 || w1 < ne0;
    const int64_t cache_len = normal ? 2 * n_pairs : n_pairs;   // NORMAL keeps duplicated pairs
    thread_local RopeMemo memo;
    const bool use_memo = ff == nullptr && r0 < r1 && ne2 <= kMemoMaxTokens;
    if (use_memo) memo.prepare(dst, (int)l, cache_len, ne2);
    // Rows come token by token (dim 1 fastest): the (cos, sin) cache is taken once per token
    // and the token's rows follow without an index division each.
    for (int64_t r = r0; r < r1;) {
        const int64_t i1 = r % ne1;
        const int64_t i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        auto P = [&](int64_t i) { return *(const int32_t*)((const char*)b->data + i * b->nb[0]); };
        int32_t pos[4] = {P(i2), 0, 0, 0};
        if (rp.multi) { pos[1] = P(i2 + ne2); pos[2] = P(i2 + 2 * ne2); pos[3] = P(i2 + 3 * ne2); }
        const float* cc = c;
        const float* ss = sn;
        if (use_memo && memo.hit(i2, pos)) {
            cc = memo.row(i2);
            ss = cc + cache_len;
        } else {
            build_cache(l, rp, pos, ff, n_pairs, c, sn);
            if (normal) {  // duplicate into (cos, cos) and (-sin, sin) pairs, back to front
                for (int64_t i = n_pairs - 1; i >= 0; --i) {
                    const float ci = c[i], si = sn[i];
                    c[2 * i] = c[2 * i + 1] = ci;
                    sn[2 * i] = -si;
                    sn[2 * i + 1] = si;
                }
            }
            if (use_memo) {
                float* m = memo.row(i2);
                std::memcpy(m, c, (size_t)cache_len * sizeof(float));
                std::memcpy(m + cache_len, sn, (size_t)cache_len * sizeof(float));
                memo.store(i2, pos);
            }
        }
        const int64_t r_end = std::min(r1, r + (ne1 - i1));
        const char* srow = a->row(i1, i2, i3);
        char* drow = dst->row(i1, i2, i3);
        for (; r < r_end; ++r, srow += a->nb[1], drow += dst->nb[1]) {
            if (has_outside && srow != drow) {  // copy what lies outside the window
                std::memcpy(drow, srow, (size_t)w0 * es);
                std::memcpy(drow + w1 * es, srow + w1 * es, (size_t)(ne0 - w1) * es);
            }
            if (!f16) {
                rot((float*)drow + w0, (const float*)srow + w0, cc, ss, rot_n);
            } else {
                const int64_t n = w1 - w0;
                to_float_row(Type::F16, srow + w0 * es, row, n);
                rot(row, row, cc, ss, rot_n);
                from_float_row(Type::F16, row, drow + w0 * es, n);
            }
        }
    }
}

size_t cpu_work_size_ROPE(const Tensor* dst, int n_threads) {
    return (size_t)(3 * dst->ne[0] + 3 * kPad) * sizeof(float) * (size_t)n_threads;
}

}  // namespace pyggml::cpu
