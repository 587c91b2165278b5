// CUDA kernel of the 'delta_net' family (not yet implemented on the device).
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_GATED_DELTA_NET(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
