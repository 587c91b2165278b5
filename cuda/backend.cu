// The CUDA backend: device queries, memory, and graph execution on one stream per device.
#include <vector>

#include "kernels.cuh"
#include "pyggml/backend.h"

namespace pyggml {

namespace {
using Forward = void (*)(const cuda::Launch&, Tensor*);
const Forward kDispatch[] = {
#define PYGGML_X(name, family, py) cuda::cuda_forward_##name,
    PYGGML_OP_TABLE(PYGGML_X)
#undef PYGGML_X
};

cudaStream_t stream_for(int device) {
    static std::vector<cudaStream_t> streams;
    if ((int)streams.size() <= device) streams.resize(device + 1, nullptr);
    if (!streams[device]) {
        PG_CUDA_CHECK(cudaSetDevice(device));
        PG_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[device], cudaStreamNonBlocking));
    }
    return streams[device];
}

void check_device(int device) {
    if (device < 0 || device >= cuda_device_count()) {
        std::ostringstream os;
        os << "cuda:" << device << " is not present (" << cuda_device_count() << " CUDA devices)";
        throw ShapeError(os.str());
    }
}
}  // namespace

bool cuda_built() { return true; }

int cuda_device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no driver" error
        return 0;
    }
    return n;
}

DeviceInfo cuda_device_info(int device) {
    check_device(device);
    cudaDeviceProp p;
    PG_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    DeviceInfo i;
    i.name = p.name;
    i.cc_major = p.major;
    i.cc_minor = p.minor;
    i.sm_count = p.multiProcessorCount;
    PG_CUDA_CHECK(cudaSetDevice(device));
    PG_CUDA_CHECK(cudaMemGetInfo(&i.free_bytes, &i.total_bytes));
    return i;
}

void* device_malloc(int device, size_t bytes) {
    check_device(device);
    PG_CUDA_CHECK(cudaSetDevice(device));
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 256);
    if (err != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        std::ostringstream os;
        os << "cuda:" << device << ": cannot allocate " << bytes << " bytes (" << free_b << " of "
           << total_b << " bytes free)";
        throw OutOfMemoryError(os.str());
    }
    return p;
}

void device_free(int device, void* ptr) {
    if (!ptr) return;
    cudaSetDevice(device);
    cudaFree(ptr);
}

void device_memset(int device, void* dst, int value, size_t bytes) {
    PG_CUDA_CHECK(cudaSetDevice(device));
    PG_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, stream_for(device)));
    PG_CUDA_CHECK(cudaStreamSynchronize(stream_for(device)));
}

void copy_to_device(int device, void* dst, const void* src, size_t bytes) {
    PG_CUDA_CHECK(cudaSetDevice(device));
    PG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_for(device)));
    PG_CUDA_CHECK(cudaStreamSynchronize(stream_for(device)));
}

void copy_to_host(int device, void* dst, const void* src, size_t bytes) {
    PG_CUDA_CHECK(cudaSetDevice(device));
    PG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_for(device)));
    PG_CUDA_CHECK(cudaStreamSynchronize(stream_for(device)));
}

void device_compute_graph(int device, const std::vector<Tensor*>& nodes) {
    check_device(device);
    PG_CUDA_CHECK(cudaSetDevice(device));
    cuda::Launch l{stream_for(device), device};
    for (Tensor* n : nodes) {
        if (op_is_layout_only(n->op) || n->is_empty() || !(n->flags & kFlagCompute)) continue;
        kDispatch[(int)n->op](l, n);
        PG_CUDA_CHECK(cudaGetLastError());
    }
    PG_CUDA_CHECK(cudaStreamSynchronize(l.stream));
}

bool device_supports_op(int device, const Tensor* node) {
    (void)device;
    (void)node;
    return true;  // unsupported combinations raise at compute time with the reason
}

}  // namespace pyggml
