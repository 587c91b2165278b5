// Devices other than the CPU. Implemented by cuda/ when pyggml is built with CUDA, otherwise
// by csrc/core/backend_none.cpp (every call reports that no device is present).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "pyggml/tensor.h"

namespace pyggml {

struct DeviceInfo {
    std::string name;
    size_t total_bytes = 0, free_bytes = 0;
    int cc_major = 0, cc_minor = 0, sm_count = 0;
};

bool cuda_built();                 // compiled with CUDA support
int cuda_device_count();           // 0 when not built or no GPU / driver
DeviceInfo cuda_device_info(int device);

// Device memory; failures throw OutOfMemoryError naming the request and the free memory.
void* device_malloc(int device, size_t bytes);
void device_free(int device, void* ptr);
void device_memset(int device, void* dst, int value, size_t bytes);
void copy_to_device(int device, void* dst, const void* src, size_t bytes);
void copy_to_host(int device, void* dst, const void* src, size_t bytes);

// Runs the nodes in order on the device's stream and waits for completion.
// Throws UnsupportedError for an op the device backend does not implement.
void device_compute_graph(int device, const std::vector<Tensor*>& nodes);
bool device_supports_op(int device, const Tensor* node);

}  // namespace pyggml
