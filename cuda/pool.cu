// CUDA kernels of the 'pool' family (not yet implemented on the device).
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_POOL_1D(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_POOL_2D(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
