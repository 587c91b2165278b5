// CUDA: layout ops. Views/reshape/permute/transpose are metadata only; repeat, concat and pad
// are not implemented on the device yet.
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_NONE(const Launch&, Tensor*) {}
void cuda_forward_RESHAPE(const Launch&, Tensor*) {}
void cuda_forward_VIEW(const Launch&, Tensor*) {}
void cuda_forward_PERMUTE(const Launch&, Tensor*) {}
void cuda_forward_TRANSPOSE(const Launch&, Tensor*) {}

}  // namespace pyggml::cuda
