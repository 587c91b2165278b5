// CPU kernels of ARGSORT and TOP_K: rows split across threads. NaN is ordered above every
// number (so a row with NaN never breaks the comparator's strict weak ordering); ties keep
// ascending index order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {
inline void row_index(const Tensor* t, int64_t r, int64_t& i1, int64_t& i2, int64_t& i3) {
    i1 = r % t->ne[1];
    i2 = (r / t->ne[1]) % t->ne[2];
    i3 = r / (t->ne[1] * t->ne[2]);
}

// TOP_K order: descending, NaN above every number, ties broken by index.
struct Descending {
    const float* x;
    bool operator()(int32_t i, int32_t j) const {
        const float a = x[i], b = x[j];
        const bool na = std::isnan(a), nb = std::isnan(b);
        if (na || nb) return na != nb ? na : i < j;
        return a > b || (a == b && i < j);
    }
};
}  // namespace

// Order-preserving map of a float to an unsigned key (NaN above +inf), so that a row sorts
// as plain 64-bit integers (key << 32 | index): ties fall back to index order.
inline uint32_t sort_key(float f) {
    if (std::isnan(f)) return 0xFFFFFFFFu;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

void cpu_forward_ARGSORT(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const bool desc = dst->param_i32(0) == 1;
    const int64_t n = a->ne[0];
    std::vector<uint64_t> keys(n);
    int64_t r0, r1;
    split_range(a->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        row_index(a, r, i1, i2, i3);
        const float* x = (const float*)a->row(i1, i2, i3);
        int32_t* idx = (int32_t*)dst->row(i1, i2, i3);
        for (int64_t i = 0; i < n; ++i) {
            const uint32_t k = sort_key(x[i]);
            keys[i] = (uint64_t)(desc ? ~k : k) << 32 | (uint32_t)i;
        }
        std::sort(keys.begin(), keys.end());
        for (int64_t i = 0; i < n; ++i) idx[i] = (int32_t)(keys[i] & 0xFFFFFFFFu);
    }
}
size_t cpu_work_size_ARGSORT(const Tensor*, int) { return 0; }

void cpu_forward_TOP_K(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t n = a->ne[0], k = dst->ne[0];
    if (k == 0) return;
    int64_t r0, r1;
    split_range(a->nrows(), p.ith, p.nth, r0, r1);
    if (k == 1) {  // greedy sampling: one pass; the first in Descending order, as below
        for (int64_t r = r0; r < r1; ++r) {
            int64_t i1, i2, i3;
            row_index(a, r, i1, i2, i3);
            const float* x = (const float*)a->row(i1, i2, i3);
            int32_t best = 0;
            for (int64_t i = 1; i < n; ++i) {
                const float v = x[i], b = x[best];
                if (std::isnan(b)) break;  // the first NaN ranks above everything after it
                if (std::isnan(v) || v > b) best = (int32_t)i;
            }
            *(int32_t*)dst->row(i1, i2, i3) = best;
        }
        return;
    }
    std::vector<int32_t> idx(n);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        row_index(a, r, i1, i2, i3);
        const float* x = (const float*)a->row(i1, i2, i3);
        std::iota(idx.begin(), idx.end(), 0);
        Descending cmp{x};
        if (k < n) std::nth_element(idx.begin(), idx.begin() + k, idx.end(), cmp);
        std::sort(idx.begin(), idx.begin() + k, cmp);
        std::copy(idx.begin(), idx.begin() + k, (int32_t*)dst->row(i1, i2, i3));
    }
}
size_t cpu_work_size_TOP_K(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
