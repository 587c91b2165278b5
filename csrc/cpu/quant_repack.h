// Row-interleaved copies of q4_0 / q4_1 / q5_0 / q8_0 / q4_K / q5_K / q6_K weights for MUL_MAT
// (the "repack").
//
// A repacked matrix stores its rows in groups of 8: block ib of the 8 rows of a group sits in
// one record (the 8 scales, then the 8 rows' values interleaved 4 at a time), so one integer
// vector holds the partial dots of 8 rows and one convert + one fma per block and column serve
// 8 outputs. Each output is sum over blocks, in block order, of fma(isum, d_row * d_act) (plus
// fma(m_row, s_act) for q4_1), with isum the exact integer dot. K-quant records hold a
// 256-value super-block: isum folds in the sub-block scales exactly (integers), then
// fma(isum, d_row * d_act) and, for q4_K / q5_K, fma(-summ, dmin_row * d_act) with summ the
// integer dot of the mins and the activation's sub-block sums. The same operations for a
// column whatever the column count, so results do not depend on the batch (nor on threads).
// The bits differ from the plain dot path's (another summation order), within its error.
//
// The copy is derived from a weight tensor and owned by a handle (RepackHandle) that the
// caller keeps, e.g. the model next to its tensors. While the handle lives, MUL_MAT nodes
// whose src0 is that tensor (same data pointer, type and shape) take the repacked path (but
// those the K-quant tiles take, quant_ktile.h: they read the original data);
// dropping the handle returns them to the plain path. The original data stays valid for
// every other op (get_rows of a tied embedding). Writing the tensor's data while a handle
// lives makes results stale: repack only weights that stay constant. repack_weights sets the
// tensor's field: do not call it while a graph reading that tensor computes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cpu/kernels.h"

namespace pyggml::cpu {

// One repacked copy (built by repack_weights; its tensor refers to it through `derived`).
struct RepackedWeights {
    const Tensor* tensor;
    const void* data;  // what it was built from: a node uses it only while these match
    Type type;
    int64_t ne[4];
    size_t nb[4];
    int64_t blocks;      // records per row group (K / 32, or K / 256 for the K-quants)
    int64_t groups;      // of 8 rows per matrix (the last one padded with zero rows)
    size_t group_bytes;  // blocks records
    size_t mat_bytes;    // groups * group_bytes
    char* buf = nullptr;

    ~RepackedWeights();
    const char* group(int64_t i2, int64_t i3, int64_t g) const {
        return buf + (i3 * ne[2] + i2) * mat_bytes + g * group_bytes;
    }
};

// Keeps one repacked copy alive; the tensor's `derived` field refers to it weakly, so dropping
// the last reference returns the tensor to the plain path.
using RepackHandle = std::shared_ptr<const RepackedWeights>;

// Whether `t` can be repacked: one of the types above, contiguous, host memory, not empty.
bool repack_supported(const Tensor* t);
// Builds and registers the repacked copy of `t` (replacing an earlier one); throws
// UnsupportedError when repack_supported(t) is false.
RepackHandle repack_weights(const Tensor* t);
// Bytes of the repacked copy held by `h`.
size_t repack_bytes(const RepackHandle& h);
// Whether MUL_MAT with src0 = t currently finds a repacked copy.
bool has_repack(const Tensor* t);

// MUL_MAT hook: the repacked copy this node uses, or null (the plain path then runs).
// Needs src0 to hold a live copy built from its current data, and b's rows contiguous.
RepackHandle repack_for_mul_mat(const Tensor* dst);
void repack_mul_mat_forward(const ComputeParams& p, Tensor* dst, const RepackedWeights& rw);
size_t repack_mul_mat_work_size(const Tensor* dst, int n_threads);
bool repack_mul_mat_barrier_free(const Tensor* dst);

}  // namespace pyggml::cpu
