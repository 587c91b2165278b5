// CPU kernel of SOFT_MAX: per row z = x*scale + slope(head)*mask, then
// exp(z - max) / sum with the sum accumulated in double, optional sink logit per head.
// The destination row doubles as scratch (element i depends only on x[i] until the final
// scale), so dst may alias src0.
#include <cmath>

#include "cpu/kernels.h"
#include "cpu/rowops_simd.h"

namespace pyggml::cpu {

namespace {
// ALiBi slope of head h (as in FLASH_ATTN_EXT); 1 when max_bias == 0.
struct Alibi {
    float m0 = 1.0f, m1 = 1.0f;
    uint32_t n_head_log2 = 1;
    bool on = false;
    Alibi(int64_t n_head, float max_bias) {
        on = max_bias > 0.0f;
        n_head_log2 = 1u << (uint32_t)std::floor(std::log2((double)n_head));
        m0 = std::pow(2.0f, -(max_bias) / (float)n_head_log2);
        m1 = std::pow(2.0f, -(max_bias / 2.0f) / (float)n_head_log2);
    }
    float slope(int64_t h) const {
        if (!on) return 1.0f;
        return (uint32_t)h < n_head_log2 ? std::pow(m0, (float)(h + 1))
                                         : std::pow(m1, (float)(2 * ((uint32_t)h - n_head_log2) + 1));
    }
};
}  // namespace

void cpu_forward_SOFT_MAX(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* mask = dst->src[1];
    const Tensor* sinks = dst->src[2];
    const int64_t ne0 = a->ne[0], ne1 = a->ne[1], ne2 = a->ne[2];
    const float scale = dst->param_f32(0);
    const float max_bias = dst->param_f32(1);
    const Alibi alibi(ne2, max_bias);
    const rowops::Level l = rowops::level();

    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const float* x = (const float*)a->row(i1, i2, i3);
        float* y = (float*)dst->row(i1, i2, i3);
        const float* m32 = nullptr;
        const uint16_t* m16 = nullptr;
        if (mask) {
            const char* mrow = mask->row(i1, i2 % mask->ne[2], i3 % mask->ne[3]);
            if (mask->type == Type::F32) m32 = (const float*)mrow;
            else m16 = (const uint16_t*)mrow;
        }
        const float slope = mask ? alibi.slope(i2) : 1.0f;
        float M = rowops::scale_mask_max(l, y, x, scale, m32, m16, slope, ne0);
        float sink = 0.0f;
        if (sinks) {
            sink = *(const float*)((const char*)sinks->data + i2 * sinks->nb[0]);
            M = M > sink ? M : sink;
        }
        double sum = rowops::exp_sum(l, y, M, ne0);
        if (sinks) sum += (double)std::exp(sink - M);
        rowops::scale(l, y, y, (float)(1.0 / sum), ne0);
    }
}
size_t cpu_work_size_SOFT_MAX(const Tensor*, int) { return 0; }

// dx = scale * y * (dy - dot(y, dy)), the softmax Jacobian applied to dy (dot in double).
void cpu_forward_SOFT_MAX_BACK(const ComputeParams& p, Tensor* dst) {
    const Tensor* dy = dst->src[0];
    const Tensor* y = dst->src[1];
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const float scale = dst->param_f32(0);
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const float* g = (const float*)dy->row(i1, i2, i3);
        const float* s = (const float*)y->row(i1, i2, i3);
        float* o = (float*)dst->row(i1, i2, i3);
        double dot = 0.0;
        for (int64_t i = 0; i < ne0; ++i) dot += (double)s[i] * (double)g[i];
        const float d = (float)dot;
        for (int64_t i = 0; i < ne0; ++i) o[i] = (g[i] - d) * s[i] * scale;
    }
}
size_t cpu_work_size_SOFT_MAX_BACK(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
