// CUDA kernels of the 'sort' family (not yet implemented on the device).
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_ARGSORT(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_TOP_K(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
