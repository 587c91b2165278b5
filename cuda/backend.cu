// The CUDA backend: one Backend per device, with device buffers and one stream; nodes run in
// order through the kernels of op_list.cu.
#include <memory>
#include <mutex>
#include <vector>

#include "kernels.cuh"
#include "pyggml/backend.h"

namespace pyggml::cuda {

namespace {

int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no driver" error
        return 0;
    }
    return n;
}

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int device) : device_(device) {}

    std::string name() const override { return "cuda:" + std::to_string(device_); }
    std::string kind() const override { return "cuda"; }
    int device_index() const override { return device_; }
    bool host_memory() const override { return false; }

    DeviceInfo info() const override {
        cudaDeviceProp p;
        PG_CUDA_CHECK(cudaGetDeviceProperties(&p, device_));
        DeviceInfo i;
        i.name = p.name;
        i.cc_major = p.major;
        i.cc_minor = p.minor;
        i.sm_count = p.multiProcessorCount;
        PG_CUDA_CHECK(cudaSetDevice(device_));
        PG_CUDA_CHECK(cudaMemGetInfo(&i.free_bytes, &i.total_bytes));
        return i;
    }

    void* alloc(size_t bytes) override {
        PG_CUDA_CHECK(cudaSetDevice(device_));
        void* p = nullptr;
        if (cudaMalloc(&p, bytes ? bytes : 256) != cudaSuccess) {
            cudaGetLastError();
            size_t free_b = 0, total_b = 0;
            cudaMemGetInfo(&free_b, &total_b);
            std::ostringstream os;
            os << name() << ": cannot allocate " << bytes << " bytes (" << free_b << " of " << total_b
               << " bytes free)";
            throw OutOfMemoryError(os.str());
        }
        return p;
    }
    void free(void* ptr) override {
        if (!ptr) return;
        cudaSetDevice(device_);
        cudaFree(ptr);
    }
    void set(void* dst, const void* src, size_t bytes) override { transfer(dst, src, bytes, cudaMemcpyHostToDevice); }
    void get(void* dst, const void* src, size_t bytes) override { transfer(dst, src, bytes, cudaMemcpyDeviceToHost); }
    void copy(void* dst, const void* src, size_t bytes) override { transfer(dst, src, bytes, cudaMemcpyDeviceToDevice); }

    // The abort callback is polled between kernel launches; launched kernels finish first.
    void compute_graph(const std::vector<Tensor*>& nodes, const ComputeOptions& opts) override {
        PG_CUDA_CHECK(cudaSetDevice(device_));
        Launch l{stream(), device_};
        size_t done = 0;
        for (Tensor* n : nodes) {
            ++done;
            if (op_is_layout_only(n->op) || n->is_empty() || !(n->flags & kFlagCompute)) continue;
            const OpEntry* e = find_op(n->op);
            if (!e) unsupported(n, "no CUDA kernel for this op");  // Graph::compute checked already
            e->forward(l, n);
            PG_CUDA_CHECK(cudaGetLastError());
            if (opts.abort && opts.abort()) {
                PG_CUDA_CHECK(cudaStreamSynchronize(l.stream));
                std::ostringstream os;
                os << "Graph.compute: aborted after " << done << " of " << nodes.size() << " nodes";
                throw AbortedError(os.str());
            }
        }
        PG_CUDA_CHECK(cudaStreamSynchronize(l.stream));
    }

protected:
    std::string op_unsupported_reason(const Tensor* node) const override { return unsupported_reason(node); }

private:
    cudaStream_t stream() {
        std::call_once(stream_once_, [this] {
            PG_CUDA_CHECK(cudaSetDevice(device_));
            PG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        });
        return stream_;
    }
    void transfer(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
        if (!bytes) return;
        PG_CUDA_CHECK(cudaSetDevice(device_));
        PG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream()));
        PG_CUDA_CHECK(cudaStreamSynchronize(stream()));
    }
    int device_;
    std::once_flag stream_once_;
    cudaStream_t stream_ = nullptr;
};

Backend* device_backend(int device) {
    // Never destroyed: contexts may outlive static teardown.
    static std::vector<CudaBackend*>* devices = [] {
        auto* v = new std::vector<CudaBackend*>();
        for (int i = 0, n = device_count(); i < n; ++i) v->push_back(new CudaBackend(i));
        return v;
    }();
    return (*devices)[device];
}

}  // namespace

BackendKind backend_kind() {
    BackendKind k;
    k.name = "cuda";
    k.device_count = [] { return device_count(); };
    k.device = [](int i) { return device_backend(i); };
    k.unsupported_reason = [](const Tensor* node) { return unsupported_reason(node); };
    return k;
}

}  // namespace pyggml::cuda
