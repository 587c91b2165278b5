// CUDA kernels of the 'set' family (ACC, SET): not yet implemented on the device.
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_ACC(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_SET(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
