// CUDA kernels of the 'linear_attn' family (not yet implemented on the device).
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_GATED_LINEAR_ATTN(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_RWKV_WKV6(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_RWKV_WKV7(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
