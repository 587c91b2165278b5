// CUDA kernels of the 'window' family (not yet implemented on the device).
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_WIN_PART(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_WIN_UNPART(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_GET_REL_POS(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_ADD_REL_POS(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
