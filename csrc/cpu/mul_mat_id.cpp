// CPU kernel of MUL_MAT_ID (mixture-of-experts matmul): out[:, e, t] = as[ids[e, t]] @ b[:, e % Nb, t].
//
// The (slot e, token t) pairs are grouped by expert, so an expert's tokens share every weight
// row load: its columns are converted once, contiguously in expert order, and each weight row
// (or pair of rows where the kernel set has two-row dots) is dotted with up to 4 of them at a
// time by the MUL_MAT dot kernels (mul_mat_kernels.h). Every output is one dot of one weight
// row with one column, whose kernel adds in an order that depends on neither the column count
// nor the row pairing, so a token's result is bitwise the same however the batch groups
// tokens onto experts (speculative decoding verifies a batch against tokens decoded alone).
#include <algorithm>
#include <atomic>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/mul_mat_common.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

using namespace mm;

namespace {

// Columns per unit (a multiple of the kernels' 4 columns): an expert's block of activations
// stays in L2 while its weight rows stream past it once.
constexpr int64_t kColBlock = 64;

// Rows per unit: enough units for dynamic balance, at most 64 rows; even, so the two-row
// kernels pair rows (2i, 2i+1).
int64_t rows_per_unit(int64_t M, int64_t n_groups, int nth) {
    const int64_t want_units = int64_t(nth) * 16;
    const int64_t r = std::clamp<int64_t>(M * n_groups / want_units, 1, std::min<int64_t>(64, std::max<int64_t>(M, 1)));
    return r + (r & 1);
}

}  // namespace

// Every thread builds the same grouping, converts its share of the b columns straight into
// expert order, then (expert, column block, rows) units are taken from a shared counter.
void cpu_forward_MUL_MAT_ID(const ComputeParams& p, Tensor* dst) {
    const Tensor* as = dst->src[0];
    const Tensor* b = dst->src[1];
    const Tensor* ids = dst->src[2];
    const Kernels& kr = kernels_for(simd::cpu_isa());
    const Type w = as->type;
    const int64_t K = as->ne[0], M = as->ne[1], E = as->ne[2];
    const int64_t U = ids->ne[0], T = ids->ne[1], Nb = b->ne[1];

    // Validation and grouping run on every thread before the barrier, so an error is symmetric.
    std::vector<int64_t> count(E + 1, 0);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < U; ++e) {
            const int32_t x = *(const int32_t*)((const char*)ids->data + e * ids->nb[0] + t * ids->nb[1]);
            if (x < 0 || x >= E)
                throw_shape(OpMessage("mul_mat_id") << "ids[" << e << ", " << t << "]=" << x
                                                    << " is out of range [0, " << E << ")");
            ++count[x];
        }
    std::vector<int64_t> start(E + 1, 0);
    for (int64_t x = 0; x < E; ++x) start[x + 1] = start[x] + count[x];
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    std::vector<int32_t> slot_e(U * T), slot_t(U * T);  // sorted slot -> (e, t)
    for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < U; ++e) {
            const int32_t x = *(const int32_t*)((const char*)ids->data + e * ids->nb[0] + t * ids->nb[1]);
            const int64_t s = fill[x]++;
            slot_e[s] = (int32_t)e;
            slot_t[s] = (int32_t)t;
        }
    float scale[256];
    if (w == Type::NVFP4) nvfp4_scale_table(scale);

    const size_t colb = act_col_bytes(w, K);
    char* conv = (char*)p.wdata + kCounterBytes;
    {
        std::vector<float> tmp;
        int64_t s0, s1;
        split_range(U * T, p.ith, p.nth, s0, s1);
        for (int64_t s = s0; s < s1; ++s)
            convert_act(kr, w, b->type, b->row(slot_e[s] % Nb, slot_t[s]), K, conv + s * colb, tmp);
    }
    reset_counter(p);
    p.barrier();

    // Units: (expert, 64-slot column block, row chunk); experts without tokens have none.
    const int64_t rows = rows_per_unit(M, std::max<int64_t>(1, std::min<int64_t>(E, U * T)), p.nth);
    const int64_t chunks = (M + rows - 1) / rows;
    std::vector<int64_t> first_unit(E + 1, 0);
    for (int64_t x = 0; x < E; ++x)
        first_unit[x + 1] = first_unit[x] + chunks * ((count[x] + kColBlock - 1) / kColBlock);
    float out[8];
    std::atomic<int64_t>* counter = work_counter(p);
    for (int64_t u; (u = counter->fetch_add(1, std::memory_order_relaxed)) < first_unit[E];) {
        const int64_t x = std::upper_bound(first_unit.begin(), first_unit.end(), u) - first_unit.begin() - 1;
        const int64_t local = u - first_unit[x], cb = local / chunks;
        const int64_t m0 = (local % chunks) * rows, m1 = std::min(M, m0 + rows);
        const int64_t s0 = start[x] + cb * kColBlock, s1 = std::min(start[x + 1], s0 + kColBlock);
        Dot2Fn dot2 = count[x] >= 2 ? kr.dot2[(int)w] : nullptr;
        for (int64_t m = m0; m < m1; m += dot2 ? 2 : 1) {
            if (dot2 && m + 1 == m1) dot2 = nullptr;
            const char* arow = (const char*)as->data + x * as->nb[2] + m * as->nb[1];
            for (int64_t s = s0; s < s1; s += 4) {
                const int nc = (int)std::min<int64_t>(4, s1 - s);
                if (dot2) dot2(K, arow, as->nb[1], conv + s * colb, colb, nc, out, scale);
                else kr.dot[(int)w](K, arow, conv + s * colb, colb, nc, out, scale);
                for (int j = 0; j < nc; ++j) {
                    float* d = (float*)((char*)dst->data + m * sizeof(float) + slot_e[s + j] * dst->nb[1] + slot_t[s + j] * dst->nb[2]);
                    d[0] = out[j];
                    if (dot2) d[1] = out[4 + j];
                }
            }
        }
    }
}

size_t cpu_work_size_MUL_MAT_ID(const Tensor* dst, int) {
    const Tensor* ids = dst->src[2];
    return kCounterBytes + size_t(ids->ne[0] * ids->ne[1]) * act_col_bytes(dst->src[0]->type, dst->src[0]->ne[0]);
}

}  // namespace pyggml::cpu
