// CUDA kernels of the 'diag' family (DIAG, DIAG_MASK_INF, DIAG_MASK_ZERO): not yet implemented.
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_DIAG(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_DIAG_MASK_INF(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_DIAG_MASK_ZERO(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
