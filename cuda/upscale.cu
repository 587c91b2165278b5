// CUDA kernels of the 'upscale' family (not yet implemented on the device).
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_UPSCALE(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
