// Computation graphs: nodes in insertion order (a post-order walk from the outputs, each tensor
// once), leafs (inputs and weights), the memory planner, and compute on the context's backend.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "pyggml/backend.h"
#include "pyggml/context.h"

namespace pyggml {

struct PlanStats {
    size_t peak_bytes = 0;           // size of the planner buffer (intermediates, reused)
    size_t sum_intermediate_bytes = 0;  // what the same tensors would take without reuse
    size_t leaf_bytes = 0;           // unallocated leafs (inputs) placed by the planner
    int n_planned = 0;
};

class Graph {
public:
    explicit Graph(Context* ctx, size_t capacity = 8192);

    void build_forward_expand(Tensor* t);
    const std::vector<Tensor*>& nodes() const { return nodes_; }
    const std::vector<Tensor*>& leafs() const { return leafs_; }

    // Assign storage to every tensor of the graph that has none (no_alloc contexts),
    // reusing intermediate buffers by liveness. Called by compute() when needed.
    void alloc();
    bool allocated() const { return allocated_upto_ == nodes_.size() + leafs_.size(); }
    const PlanStats& plan_stats() const { return stats_; }

    // Run every node in order on the backend of the graph's context. Before anything runs, every
    // node must be supported by that backend (else UnsupportedError naming the op and the
    // backend) and every tensor must live on it. `abort` is polled between nodes; when it
    // returns true the compute stops with AbortedError and the graph can be computed again.
    void compute(int n_threads, const std::function<bool()>& abort = {});

    // Per-node wall time (seconds) of the last compute when profiling is on.
    void set_profiling(bool on) { profiling_ = on; }
    const std::vector<double>& node_times() const { return node_times_; }
    // The backend's plan of the last compute (null before one).
    const BackendPlan* backend_plan() const { return plan_.get(); }

private:
    void visit(Tensor* t);
    Context* ctx_;
    size_t capacity_;
    std::vector<Tensor*> nodes_, leafs_;
    std::unordered_set<Tensor*> visited_;
    size_t allocated_upto_ = 0;
    PlanStats stats_;
    bool profiling_ = false;
    std::vector<double> node_times_;
    std::vector<uint8_t> work_;  // kernel scratch, kept between computes
    std::unique_ptr<BackendPlan> plan_;  // the backend's plan of nodes_, kept likewise
    struct Checked {  // what compute's checks last passed for (nodes == 0: none)
        size_t nodes = 0, leafs = 0;
        uint64_t edits = 0;
    } checked_;
};

// Debug mode: kernels validate contracts (e.g. flash attention n_kv_max) and raise.
// Also enabled by the environment variable PYGGML_DEBUG=1.
void set_debug(bool on);
bool debug_enabled();

}  // namespace pyggml
