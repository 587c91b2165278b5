// CPU kernel of UPSCALE. Planes (dims 2, 3 of the result) are split across threads. Source
// coordinates follow ggml exactly: scale sf = out/in per dim (in float), nearest takes
// floor(i / sf); bilinear and bicubic sample at (i + 0.5)/sf - 0.5 (at i/sf with
// align-corners, where sf = (out-1)/(in-1)), neighbours clamped to the edge; antialiased
// bilinear averages a triangle filter widened by 1/sf when downsampling.
#include <algorithm>
#include <cmath>

#include "cpu/kernels.h"
#include "pyggml/ops/upscale.h"

namespace pyggml::cpu {

void cpu_forward_UPSCALE(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    if (dst->is_empty()) return;
    const int64_t ne00 = a->ne[0], ne01 = a->ne[1], ne0 = dst->ne[0], ne1 = dst->ne[1];
    float sf0 = (float)ne0 / a->ne[0], sf1 = (float)ne1 / a->ne[1];
    const float sf2 = (float)dst->ne[2] / a->ne[2], sf3 = (float)dst->ne[3] / a->ne[3];
    const uint32_t flags = (uint32_t)dst->param_i32(0), mode = flags & 0xFF;
    float off = 0.5f;
    if (flags & kScaleFlagAlignCorners) {
        off = 0.0f;
        if (ne0 > 1 && ne00 > 1) sf0 = (float)(ne0 - 1) / (ne00 - 1);
        if (ne1 > 1 && ne01 > 1) sf1 = (float)(ne1 - 1) / (ne01 - 1);
    }
    const char* base = (const char*)a->data;
    const size_t nb0 = a->nb[0], nb1 = a->nb[1], nb2 = a->nb[2], nb3 = a->nb[3];
    auto src = [=](int64_t x, int64_t y, int64_t i2, int64_t i3) {
        return *(const float*)(base + x * nb0 + y * nb1 + i2 * nb2 + i3 * nb3);
    };
    auto clampx = [&](int64_t x) { return std::max<int64_t>(0, std::min<int64_t>(x, ne00 - 1)); };
    auto clampy = [&](int64_t y) { return std::max<int64_t>(0, std::min<int64_t>(y, ne01 - 1)); };
    int64_t r0, r1;
    split_range(dst->ne[2] * dst->ne[3], p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i2 = r % dst->ne[2], i3 = r / dst->ne[2];
        const int64_t i02 = (int64_t)(i2 / sf2), i03 = (int64_t)(i3 / sf3);
        for (int64_t i1 = 0; i1 < ne1; ++i1) {
            float* out = (float*)dst->ptr(0, i1, i2, i3);
            const size_t os = dst->nb[0] / sizeof(float);
            if (mode == kScaleModeNearest) {
                const int64_t i01 = (int64_t)(i1 / sf1);
                for (int64_t i0 = 0; i0 < ne0; ++i0) out[i0 * os] = src((int64_t)(i0 / sf0), i01, i02, i03);
            } else if (mode == kScaleModeBilinear && (flags & kScaleFlagAntialias)) {
                const float sup0 = std::max(1.0f, 1.0f / sf0), inv0 = 1.0f / sup0;
                const float sup1 = std::max(1.0f, 1.0f / sf1), inv1 = 1.0f / sup1;
                const float y = ((float)i1 + off) / sf1;
                const int64_t y_lo = std::max<int64_t>((int64_t)(y - sup1 + off), 0);
                const int64_t y_hi = std::min<int64_t>((int64_t)(y + sup1 + off), ne01);
                for (int64_t i0 = 0; i0 < ne0; ++i0) {
                    const float x = ((float)i0 + off) / sf0;
                    const int64_t x_lo = std::max<int64_t>((int64_t)(x - sup0 + off), 0);
                    const int64_t x_hi = std::min<int64_t>((int64_t)(x + sup0 + off), ne00);
                    float val = 0.0f, total = 0.0f;
                    for (int64_t sy = y_lo; sy < y_hi; ++sy) {
                        const float wy = std::max(1.0f - std::fabs((sy - y + off) * inv1), 0.0f);
                        for (int64_t sx = x_lo; sx < x_hi; ++sx) {
                            const float w = std::max(1.0f - std::fabs((sx - x + off) * inv0), 0.0f) * wy;
                            if (w <= 0.0f) continue;
                            val += src(sx, sy, i02, i03) * w;
                            total += w;
                        }
                    }
                    out[i0 * os] = total > 0.0f ? val / total : val;
                }
            } else if (mode == kScaleModeBilinear) {
                const float y = ((float)i1 + off) / sf1 - off;
                const int64_t yf = (int64_t)std::floor(y), y0 = clampy(yf), y1 = clampy(yf + 1);
                const float dy = std::max(0.0f, std::min(y - (float)y0, 1.0f));
                for (int64_t i0 = 0; i0 < ne0; ++i0) {
                    const float x = ((float)i0 + off) / sf0 - off;
                    const int64_t xf = (int64_t)std::floor(x), x0 = clampx(xf), x1 = clampx(xf + 1);
                    const float dx = std::max(0.0f, std::min(x - (float)x0, 1.0f));
                    const float va = src(x0, y0, i02, i03), vb = src(x1, y0, i02, i03);
                    const float vc = src(x0, y1, i02, i03), vd = src(x1, y1, i02, i03);
                    out[i0 * os] = va * (1 - dx) * (1 - dy) + vb * dx * (1 - dy) + vc * (1 - dx) * dy + vd * dx * dy;
                }
            } else {  // bicubic, a = -0.75
                const float A = -0.75f;
                auto w1 = [A](float t) { return ((A + 2) * t - (A + 3)) * t * t + 1; };
                auto w2 = [A](float t) { return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A; };
                auto cubic = [&](float q0, float q1, float q2, float q3, float t) {
                    return q0 * w2(t + 1) + q1 * w1(t) + q2 * w1(1 - t) + q3 * w2(2 - t);
                };
                const float y = ((float)i1 + off) / sf1 - off;
                const int64_t y0 = (int64_t)std::floor(y);
                const float dy = y - (float)y0;
                for (int64_t i0 = 0; i0 < ne0; ++i0) {
                    const float x = ((float)i0 + off) / sf0 - off;
                    const int64_t x0 = (int64_t)std::floor(x);
                    const float dx = x - (float)x0;
                    float rows[4];
                    for (int j = 0; j < 4; ++j) {
                        const int64_t yy = clampy(y0 - 1 + j);
                        rows[j] = cubic(src(clampx(x0 - 1), yy, i02, i03), src(clampx(x0), yy, i02, i03),
                                        src(clampx(x0 + 1), yy, i02, i03), src(clampx(x0 + 2), yy, i02, i03), dx);
                    }
                    out[i0 * os] = cubic(rows[0], rows[1], rows[2], rows[3], dy);
                }
            }
        }
    }
}
size_t cpu_work_size_UPSCALE(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
