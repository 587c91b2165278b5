// The backend seam: one interface every device kind implements (the CPU and CUDA alike), and a
// registry of the kinds this build has. A Context holds a Backend; its buffers come from the
// backend and a graph over it runs on the backend's compute_graph.
//
// Adding a device kind: implement Backend, describe the kind with a BackendKind (device count,
// the backend of each device, what its kernels support) and list it in core/backend_registry.cpp.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pyggml/tensor.h"

namespace pyggml {

struct DeviceInfo {
    std::string name;
    size_t total_bytes = 0, free_bytes = 0;
    int cc_major = 0, cc_minor = 0, sm_count = 0;
};

// What a backend derived from a node list to run it (the CPU's schedule and work size), kept by
// the graph between computes: a graph computed again (decode reusing its graph) skips the
// planning. The backend checks that it still fits (threads, settings, tensor_edit_epoch())
// and rebuilds it when not; the graph drops it when its node list grows.
struct BackendPlan {
    virtual ~BackendPlan() = default;
};

struct ComputeOptions {
    int n_threads = 1;                        // the CPU backend's worker count (others ignore it)
    std::function<bool()> abort;              // polled between nodes; true stops the compute
    std::vector<double>* node_times = nullptr;  // wall seconds per node, when profiling
    std::vector<uint8_t>* scratch = nullptr;    // kernel scratch kept by the graph between computes
    std::unique_ptr<BackendPlan>* plan = nullptr;  // the backend's plan, kept by the graph likewise
};

// One device of one kind. Instances live in the registry for the life of the process.
class Backend {
public:
    virtual ~Backend() = default;

    virtual std::string name() const = 0;   // "cpu", "cuda:0"
    virtual std::string kind() const = 0;   // "cpu", "cuda"
    virtual int device_index() const = 0;   // -1 for the host
    virtual bool host_memory() const = 0;   // buffers are host memory (numpy views without a copy)
    virtual DeviceInfo info() const = 0;

    // Buffers. alloc throws OutOfMemoryError naming the request; free(nullptr) is a no-op.
    virtual void* alloc(size_t bytes) = 0;
    virtual void free(void* ptr) = 0;
    virtual void set(void* dst, const void* host_src, size_t bytes) = 0;  // host -> buffer
    virtual void get(void* host_dst, const void* src, size_t bytes) = 0;  // buffer -> host
    virtual void copy(void* dst, const void* src, size_t bytes) = 0;      // buffer -> buffer

    // Why this backend cannot run `node` ("" when it can). Layout-only ops (views, reshapes,
    // permutes) run everywhere: they compute nothing.
    std::string unsupported_reason(const Tensor* node) const;
    bool supports_op(const Tensor* node) const { return unsupported_reason(node).empty(); }

    // Runs the nodes in order and waits for them. Graph::compute has already checked that every
    // node is supported and has storage on this backend. Throws AbortedError when opts.abort
    // asked to stop (the nodes before the stop have run).
    virtual void compute_graph(const std::vector<Tensor*>& nodes, const ComputeOptions& opts) = 0;

protected:
    virtual std::string op_unsupported_reason(const Tensor* node) const = 0;
};

// A device kind as the registry lists it.
struct BackendKind {
    std::string name;                        // "cpu", "cuda"
    std::function<int()> device_count;       // 0 when built but no device is present
    std::function<Backend*(int)> device;     // the backend of device i, 0 <= i < device_count()
    // What the kind's kernels cannot run, without needing a device (for tests and planning).
    std::function<std::string(const Tensor*)> unsupported_reason;
};

const std::vector<BackendKind>& backend_kinds();            // "cpu" first
const BackendKind* find_backend_kind(const std::string& kind);  // nullptr when not built
// "cpu", "cuda" (device 0), "cuda:1". Throws ShapeError naming what is present.
Backend* find_backend(const std::string& name);
Backend* cpu_backend();
std::vector<std::string> backend_names();                  // every present device, "cpu" first

}  // namespace pyggml
