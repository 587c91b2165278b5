// CUDA kernels of the 'linalg' family (OUT_PROD, SOLVE_TRI): not yet implemented on the device.
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_OUT_PROD(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_SOLVE_TRI(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
