// Graph execution on the CPU: dispatch through the op table, barrier between nodes.
#include "cpu/backend.h"

#include <chrono>

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
}  // namespace

void compute_graph(const std::vector<Tensor*>& nodes, int n_threads, std::vector<uint8_t>& work,
                   std::vector<double>* times) {
    size_t wsize = 0;
    for (Tensor* n : nodes)
        if (!op_is_layout_only(n->op) && !n->is_empty())
            wsize = std::max(wsize, kDispatch[(int)n->op].work_size(n, n_threads));
    if (work.size() < wsize + 64) work.resize(wsize + 64);
    void* wdata = (void*)(((uintptr_t)work.data() + 63) & ~uintptr_t(63));

    if (times) times->assign(nodes.size(), 0.0);
    ThreadPool& pool = ThreadPool::instance();
    const simd::Isa isa = simd::cpu_isa();  // one level for every thread of this compute
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
            if (op_is_layout_only(n->op) || n->is_empty() || !(n->flags & kFlagCompute)) continue;
            auto t0 = std::chrono::steady_clock::now();
            if (!pool.has_error()) {
                try {
                    kDispatch[(int)n->op].forward(p, n);
                } catch (...) {
                    pool.set_error(std::current_exception());
                }
            }
            pool.barrier();
            if (times && ith == 0)
                (*times)[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
    };
    pool.run(n_threads, job);
}

}  // namespace pyggml::cpu
