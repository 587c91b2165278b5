// CUDA kernels of the 'reduce' family (not yet implemented on the device).
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_SUM_ROWS(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_MEAN(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_CUMSUM(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_SUM(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_ARGMAX(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_COUNT_EQUAL(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
