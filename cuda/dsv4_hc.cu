// CUDA kernels of the 'dsv4_hc' family (not yet implemented on the device).
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_DSV4_HC_COMB(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_DSV4_HC_PRE(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_DSV4_HC_POST(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
