// The CPU backend: host buffers, dispatch through the op table, a barrier between nodes and an
// abort check before each node.
#include "cpu/backend.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

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

int max_threads() {
    static const int cap = std::max(16, 2 * (int)std::thread::hardware_concurrency());
    return cap;
}

DeviceInfo CpuBackend::info() const {
    DeviceInfo i;
    i.name = "cpu (" + std::string(simd::isa_name(simd::cpu_isa())) + ")";
    i.sm_count = (int)std::thread::hardware_concurrency();
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
    ThreadPool& pool = ThreadPool::instance();
    const simd::Isa isa = simd::cpu_isa();  // one level for every thread of this compute
    // Thread 0 polls the abort callback after its share of a node, before the barrier; after
    // the barrier every thread sees the flag and stops. Nodes are never cut in half (kernels
    // may have barriers of their own), and all threads pass the same number of barriers.
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
        for (size_t i = 0; i < nodes.size(); ++i) {
            Tensor* n = nodes[i];
            if (!runs(n)) continue;
            auto t0 = std::chrono::steady_clock::now();
            if (!pool.has_error()) {
                try {
                    kDispatch[(int)n->op].forward(p, n);
                } catch (...) {
                    pool.set_error(std::current_exception());
                }
            }
            if (ith == 0 && opts.abort && opts.abort()) {
                aborted.store(true, std::memory_order_relaxed);
                done = i + 1;
            }
            pool.barrier();
            if (times && ith == 0)
                (*times)[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (aborted.load(std::memory_order_relaxed)) break;
        }
    };
    pool.run(n_threads, job);
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
