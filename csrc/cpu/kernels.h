// The CPU kernel interface. Every op in the op table has
//   void   cpu_forward_<OP>(const ComputeParams&, Tensor* dst);
//   size_t cpu_work_size_<OP>(const Tensor* dst, int n_threads);   // shared scratch bytes
// defined in csrc/cpu/<family>.cpp. Kernels never validate user input: the constructor did.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>

#include "cpu/threadpool.h"
#include "pyggml/tensor.h"

namespace pyggml::cpu {

// A kernel scheduled as barrier-free met a barrier: a bug in the schedule's list, reported
// (with the node, by the backend) instead of a hang.
struct BarrierInShareError : std::logic_error {
    using std::logic_error::logic_error;
};

struct ComputeParams {
    int ith = 0, nth = 1;
    void* wdata = nullptr;  // shared by all threads of the node
    size_t wsize = 0;
    ThreadPool* pool = nullptr;
    // Set when this share may run on any thread, after or before the node's other shares (the
    // backend does so only for kernels that never meet the other threads): a barrier then
    // is a bug in the schedule's list of barrier-free ops, reported instead of a hang.
    bool no_barrier = false;
    // Shared steps only: two counters of this step, zero when its first share starts, that
    // its shares may use to claim work and to tell the last one to finish (null otherwise).
    // A kernel that ran another kernel twice inside one node would have to clear them between
    // the calls (none does: the nesting kernels have barriers and get none).
    std::atomic<int64_t>* share_slots = nullptr;
    void barrier() const {
        if (nth <= 1) return;  // one thread (a solo step, or a node run whole in a group) meets nobody
        if (no_barrier) throw BarrierInShareError("cpu: a kernel scheduled as barrier-free met a barrier");
        if (pool) pool->barrier();
    }
};

// Adds to the schedule counts' units that shares claimed from the back of a shared step
// (mul_mat_common.h run_barrier_free_units; defined in backend.cpp).
void count_back_claimed_units(int64_t n);

// Microseconds every claimed conversion item sleeps before it converts (0: none, the default;
// set by tests through set_claimed_conversion_delay in backend.h): it widens the window in which
// a share that stopped waiting for the others' items would read scratch they had not written.
int64_t claimed_conversion_delay_us();

// True when this MUL_MAT node's kernel never meets the other threads (defined with the kernel).
bool mul_mat_barrier_free(const Tensor* dst);
// The same for a MUL_MAT_ID node (defined with its kernel).
bool mul_mat_id_barrier_free(const Tensor* dst);
// True when this FLASH_ATTN_EXT node's kernel can run as shares given share_slots.
bool flash_attn_barrier_free(const Tensor* dst);

// Contiguous split of [0, n) among threads: [r0, r1) for thread ith.
inline void split_range(int64_t n, int ith, int nth, int64_t& r0, int64_t& r1) {
    const int64_t dr = (n + nth - 1) / nth;
    r0 = std::min<int64_t>(n, dr * ith);
    r1 = std::min<int64_t>(n, r0 + dr);
}

// Asks for bytes [p, p + bytes) to be brought into L2 ahead of use (prefetcht1, a line at a
// time): rows the kernels stream next, while they work on these.
inline void prefetch_to_l2(const char* p, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 2);
}

#define PYGGML_X(name, family, py)                                   \
    void cpu_forward_##name(const ComputeParams& p, Tensor* dst);    \
    size_t cpu_work_size_##name(const Tensor* dst, int n_threads);
PYGGML_OP_TABLE(PYGGML_X)
#undef PYGGML_X

}  // namespace pyggml::cpu
