// CPU kernels of the 'pool' family. Rows (pool_1d) or planes (pool_2d) are split across
// threads; values are read as f32 (f16 widened), max starts at -FLT_MAX, sums in f32.
#include <algorithm>
#include <cfloat>
#include <vector>

#include "cpu/convert.h"
#include "cpu/kernels.h"

namespace pyggml::cpu {

void cpu_forward_POOL_1D(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const bool avg = dst->param_i32(0) == 1;
    const int64_t k = dst->param_i32(1), s = dst->param_i32(2), pad = dst->param_i32(3);
    const int64_t IW = a->ne[0], OW = dst->ne[0];
    if (dst->is_empty()) return;
    std::vector<float> row(IW);
    int64_t r0, r1;
    split_range(a->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % a->ne[1], i2 = (r / a->ne[1]) % a->ne[2], i3 = r / (a->ne[1] * a->ne[2]);
        to_float_row(a->type, a->row(i1, i2, i3), row.data(), IW);
        float* out = (float*)dst->row(i1, i2, i3);
        for (int64_t o = 0; o < OW; ++o) {
            const int64_t j0 = std::max<int64_t>(0, o * s - pad), j1 = std::min<int64_t>(IW, o * s - pad + k);
            float res = avg ? 0.0f : -FLT_MAX;
            for (int64_t j = j0; j < j1; ++j) res = avg ? res + row[j] : std::max(row[j], res);
            if (avg) res = j1 > j0 ? res / float(j1 - j0) : 0.0f;
            out[o] = res;
        }
    }
}
size_t cpu_work_size_POOL_1D(const Tensor*, int) { return 0; }

void cpu_forward_POOL_2D(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const bool avg = dst->param_i32(0) == 1;
    const int64_t k0 = dst->param_i32(1), k1 = dst->param_i32(2), s0 = dst->param_i32(3), s1 = dst->param_i32(4),
                  p0 = dst->param_i32(5), p1 = dst->param_i32(6);
    const int64_t IW = a->ne[0], IH = a->ne[1], OW = dst->ne[0], OH = dst->ne[1];
    if (dst->is_empty()) return;
    const float area = float(k0 * k1);
    std::vector<float> plane(IW * IH);
    int64_t r0, r1;
    split_range(a->ne[2] * a->ne[3], p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i2 = r % a->ne[2], i3 = r / a->ne[2];
        for (int64_t y = 0; y < IH; ++y) to_float_row(a->type, a->row(y, i2, i3), plane.data() + y * IW, IW);
        for (int64_t oy = 0; oy < OH; ++oy) {
            float* out = (float*)dst->row(oy, i2, i3);
            const int64_t y0 = std::max<int64_t>(0, oy * s1 - p1), y1 = std::min<int64_t>(IH, oy * s1 - p1 + k1);
            for (int64_t ox = 0; ox < OW; ++ox) {
                const int64_t x0 = std::max<int64_t>(0, ox * s0 - p0), x1 = std::min<int64_t>(IW, ox * s0 - p0 + k0);
                float res = avg ? 0.0f : -FLT_MAX;
                for (int64_t y = y0; y < y1; ++y) {
                    const float* row = plane.data() + y * IW;
                    for (int64_t x = x0; x < x1; ++x) res = avg ? res + row[x] : std::max(row[x], res);
                }
                out[ox] = avg ? res / area : res;
            }
        }
    }
}
size_t cpu_work_size_POOL_2D(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
