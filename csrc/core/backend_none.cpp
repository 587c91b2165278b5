// The device interface when pyggml is built without CUDA: no devices.
#include "pyggml/backend.h"
#include "pyggml/error.h"

#ifndef PYGGML_WITH_CUDA
namespace pyggml {

namespace {
[[noreturn]] void no_device() {
    throw UnsupportedError("pyggml was built without CUDA: no device backends are available "
                           "(rebuild with -C cmake.define.PYGGML_CUDA=ON on a machine with nvcc)");
}
}  // namespace

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
DeviceInfo cuda_device_info(int) { no_device(); }
void* device_malloc(int, size_t) { no_device(); }
void device_free(int, void*) {}
void device_memset(int, void*, int, size_t) { no_device(); }
void copy_to_device(int, void*, const void*, size_t) { no_device(); }
void copy_to_host(int, void*, const void*, size_t) { no_device(); }
void device_compute_graph(int, const std::vector<Tensor*>&) { no_device(); }
bool device_supports_op(int, const Tensor*) { return false; }

}  // namespace pyggml
#endif
