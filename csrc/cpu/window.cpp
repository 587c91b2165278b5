// CPU kernels of the 'window' family: pure data movement (win_part, win_unpart, get_rel_pos)
// split by rows across threads, and ADD_REL_POS split by rows of a.
#include <cstring>

#include "cpu/kernels.h"

namespace pyggml::cpu {

void cpu_forward_WIN_PART(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t npx = dst->param_i32(0), w = dst->param_i32(2);
    const int64_t C = a->ne[0], W = a->ne[1], H = a->ne[2];
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);  // row (x, y, window)
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t x = r % w, y = (r / w) % w, win = r / (w * w);
        const int64_t sx = (win % npx) * w + x, sy = (win / npx) * w + y;
        float* out = (float*)dst->row(x, y, win);
        if (sx >= W || sy >= H) {
            std::memset(out, 0, C * sizeof(float));
        } else {
            const char* in = a->row(sx, sy);
            for (int64_t c = 0; c < C; ++c) out[c] = *(const float*)(in + c * a->nb[0]);
        }
    }
}
size_t cpu_work_size_WIN_PART(const Tensor*, int) { return 0; }

void cpu_forward_WIN_UNPART(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t w = dst->param_i32(0);
    const int64_t C = dst->ne[0], W = dst->ne[1];
    const int64_t npx = (W + w - 1) / w;
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);  // row (x, y)
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t x = r % W, y = r / W;
        const char* in = a->row(x % w, y % w, (y / w) * npx + x / w);
        float* out = (float*)dst->row(x, y);
        for (int64_t c = 0; c < C; ++c) out[c] = *(const float*)(in + c * a->nb[0]);
    }
}
size_t cpu_work_size_WIN_UNPART(const Tensor*, int) { return 0; }

void cpu_forward_GET_REL_POS(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t C = dst->ne[0], h = dst->ne[1];
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);  // row (k, q)
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t k = r % h, q = r / h;
        const char* in = a->row(q - k + h - 1);
        uint16_t* out = (uint16_t*)dst->row(k, q);
        for (int64_t c = 0; c < C; ++c) std::memcpy(out + c, in + c * a->nb[0], sizeof(uint16_t));
    }
}
size_t cpu_work_size_GET_REL_POS(const Tensor*, int) { return 0; }

void cpu_forward_ADD_REL_POS(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* pw = dst->src[1];
    const Tensor* ph = dst->src[2];
    const int64_t W = pw->ne[0], rows = a->ne[1];
    int64_t r0, r1;
    split_range(a->nrows(), p.ith, p.nth, r0, r1);  // row (r, b) of a; r = i1 + W*i2 of pw
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i = r % rows, b = r / rows;
        const char* in = a->row(i, b);
        float* out = (float*)dst->row(i, b);
        const char* wrow = pw->row(i % W, i / W, b);
        const char* hrow = ph->row(i % W, i / W, b);
        for (int64_t kh = 0; kh < W; ++kh) {
            const float hv = *(const float*)(hrow + kh * ph->nb[0]);
            for (int64_t kw = 0; kw < W; ++kw) {
                const int64_t c = kh * W + kw;
                out[c] = *(const float*)(in + c * a->nb[0]) + *(const float*)(wrow + kw * pw->nb[0]) + hv;
            }
        }
    }
}
size_t cpu_work_size_ADD_REL_POS(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
