// CUDA kernels of the 'ssm' family (not yet implemented on the device).
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_SSM_CONV(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_SSM_SCAN(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
