// The CPU backend: host buffers, dispatch through the op table, a barrier between nodes and an
// abort check before each node.
#include "cpu/backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/simd/isa.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {
using ForwardFn = void (*)(const ComputeParams&, Tensor*);
using WorkSizeFn = size_t (*)(const Tensor*, int);
struct Entry { ForwardFn forward; WorkSizeFn work_size; };
const Entry kDispatch[] = {
#define PYGGML_X(name, family, py) {cpu_forward_##name, cpu_work_size_##name},
    PYGGML_OP_TABLE(PYGGML_X)
#undef PYGGML_X
};

bool runs(const Tensor* n) { return !op_is_layout_only(n->op) && !n->is_empty() && (n->flags & kFlagCompute); }
}  // namespace

// Below this many bytes of work per thread a node runs on thread 0 alone: splitting it costs
// more in barriers and wake-ups than the split saves (on a busy machine, far more). "Work" is
// the bytes a node reads and writes, plus its multiply-adds for the arithmetic-bound ops.
// PYGGML_CPU_MIN_WORK (bytes) overrides it, for benchmarks.
namespace {
int64_t min_work_per_thread() {
    // read at every compute (a short environ scan) so that a test can change it
    const char* e = std::getenv("PYGGML_CPU_MIN_WORK");
    if (e && *e) {
        char* end = nullptr;
        const long long x = std::strtoll(e, &end, 10);
        if (end && *end == 0 && x >= 0) return (int64_t)x;
    }
    return (int64_t)128 * 1024;
}

double node_work(const Tensor* n) {
    double w = (double)n->nbytes();
    for (const Tensor* s : n->src)
        if (s) w += (double)s->nbytes();
    const Tensor* a = n->src[0];
    const Tensor* b = n->src[1];
    switch (n->op) {
        case Op::MUL_MAT:
        case Op::OUT_PROD:
            // multiply-adds: every output element is a dot product of length a->ne[0]
            if (a) w += 0.25 * (double)a->ne[0] * (double)n->nelements();
            break;
        case Op::MUL_MAT_ID:
            if (a) w += 0.25 * (double)a->ne[0] * (double)n->nelements();
            break;
        case Op::FLASH_ATTN_EXT:
            // q [D, T, H, S] against n_kv keys and values
            if (a && b) w += 0.5 * (double)a->ne[0] * (double)b->ne[1] * (double)a->ne[1] * a->ne[2] * a->ne[3];
            break;
        case Op::SET_ROWS:
            // writes only the source rows into the (often cache-sized) destination
            return 2.0 * (double)a->nbytes() + (b ? (double)b->nbytes() : 0.0);
        case Op::GET_ROWS:
            // reads only the rows it gathers from the (often table-sized) source
            return 2.0 * (double)n->nbytes() + (b ? (double)b->nbytes() : 0.0);
        case Op::ARGSORT:
            // n log n comparisons per row, costly ones: a row of a few values is not worth a split
            return w * 16.0 * std::log2(std::max<double>(2.0, (double)n->ne[0]));
        case Op::IM2COL: case Op::IM2COL_3D: case Op::CONV_2D: case Op::CONV_3D: case Op::CONV_2D_DW:
        case Op::CONV_TRANSPOSE_1D: case Op::CONV_TRANSPOSE_2D: case Op::COL2IM_1D: case Op::SOLVE_TRI:
            return 1e30;  // arithmetic-bound in ways bytes do not show: always split
        default:
            break;
    }
    return w;
}
}  // namespace

DeviceInfo CpuBackend::info() const {
    DeviceInfo i;
    i.name = "cpu (" + std::string(simd::isa_name(simd::cpu_isa())) + ")";
    i.sm_count = hardware_threads();
    return i;
}

void* CpuBackend::alloc(size_t bytes) {
    void* p = nullptr;
    if (posix_memalign(&p, kMemAlign, bytes ? bytes : kMemAlign) != 0 || !p) {
        std::ostringstream os;
        os << "cpu: cannot allocate " << bytes << " bytes";
        throw OutOfMemoryError(os.str());
    }
    return p;
}
void CpuBackend::free(void* ptr) { std::free(ptr); }
void CpuBackend::set(void* dst, const void* src, size_t bytes) { if (bytes) std::memcpy(dst, src, bytes); }
void CpuBackend::get(void* dst, const void* src, size_t bytes) { if (bytes) std::memcpy(dst, src, bytes); }
void CpuBackend::copy(void* dst, const void* src, size_t bytes) { if (bytes) std::memmove(dst, src, bytes); }

void CpuBackend::compute_graph(const std::vector<Tensor*>& nodes, const ComputeOptions& opts) {
    const int n_threads = std::max(1, std::min(opts.n_threads, max_threads()));
    size_t wsize = 0;
    for (Tensor* n : nodes)
        if (runs(n)) wsize = std::max(wsize, kDispatch[(int)n->op].work_size(n, n_threads));
    std::vector<uint8_t> local;
    std::vector<uint8_t>& work = opts.scratch ? *opts.scratch : local;
    if (work.size() < wsize + 64) work.resize(wsize + 64);
    void* wdata = (void*)(((uintptr_t)work.data() + 63) & ~uintptr_t(63));

    std::vector<double>* times = opts.node_times;
    if (times) times->assign(nodes.size(), 0.0);
    // The schedule: which nodes run on thread 0 alone (too little work to split), and after
    // which nodes the threads meet. Two solo nodes in a row need no barrier between them
    // (thread 0 runs both, in order), so a stretch of small ops costs no synchronization.
    const double solo_below = (double)min_work_per_thread() * n_threads;
    std::vector<int32_t> order;
    std::vector<uint8_t> solo, sync_after;
    order.reserve(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i)
        if (runs(nodes[i])) order.push_back((int32_t)i);
    solo.resize(order.size());
    sync_after.resize(order.size());
    for (size_t k = 0; k < order.size(); ++k)
        solo[k] = n_threads == 1 || node_work(nodes[order[k]]) < solo_below;
    for (size_t k = 0; k < order.size(); ++k)
        sync_after[k] = n_threads > 1 && k + 1 < order.size() && !(solo[k] && solo[k + 1]);
    // Nothing to split: the workers are not woken at all (and no node waits at a barrier).
    const bool all_solo = std::all_of(solo.begin(), solo.end(), [](uint8_t x) { return x != 0; });
    const int n_run = all_solo ? 1 : n_threads;

    ThreadPool& pool = ThreadPool::instance();
    const simd::Isa isa = simd::cpu_isa();  // one level for every thread of this compute
    // Thread 0 polls the abort callback after its share of every node; the others see the flag
    // after the next barrier and stop there, thread 0 with them (skipping the kernels of the
    // solo nodes before it). Nodes are never cut in half (kernels may have barriers of their
    // own), and all threads pass the same barriers, because the schedule is the same for all.
    std::atomic<bool> aborted{false};
    size_t done = 0;
    auto job = [&](int ith) {
        simd::IsaPin pin(isa);
        ComputeParams p;
        p.ith = ith;
        p.nth = n_threads;
        p.wdata = wdata;
        p.wsize = wsize;
        p.pool = &pool;
        ComputeParams p_solo = p;
        p_solo.nth = 1;
        for (size_t k = 0; k < order.size(); ++k) {
            const size_t i = (size_t)order[k];
            Tensor* n = nodes[i];
            auto t0 = std::chrono::steady_clock::now();
            // after thread 0 aborted in a stretch of solo nodes it skips their kernels until the
            // next barrier, where the others learn of it (they wait there meanwhile)
            const bool skip = pool.has_error() || aborted.load(std::memory_order_relaxed);
            if (!skip && (!solo[k] || ith == 0)) {
                try {
                    kDispatch[(int)n->op].forward(solo[k] ? p_solo : p, n);
                } catch (...) {
                    pool.set_error(std::current_exception());
                }
            }
            if (ith == 0 && !aborted.load(std::memory_order_relaxed) && opts.abort && opts.abort()) {
                aborted.store(true, std::memory_order_relaxed);
                done = i + 1;
            }
            if (sync_after[k]) pool.barrier();
            if (times && ith == 0)
                (*times)[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (sync_after[k] && aborted.load(std::memory_order_relaxed)) break;
        }
    };
    pool.run(n_run, job);
    if (aborted.load()) {
        std::ostringstream os;
        os << "Graph.compute: aborted after " << done << " of " << nodes.size() << " nodes";
        throw AbortedError(os.str());
    }
}

namespace {
CpuBackend& the_cpu() {
    static CpuBackend* b = new CpuBackend();  // never destroyed: contexts may outlive static teardown
    return *b;
}
}  // namespace

BackendKind backend_kind() {
    BackendKind k;
    k.name = "cpu";
    k.device_count = [] { return 1; };
    k.device = [](int) -> Backend* { return &the_cpu(); };
    k.unsupported_reason = [](const Tensor*) { return std::string(); };
    return k;
}

}  // namespace pyggml::cpu
