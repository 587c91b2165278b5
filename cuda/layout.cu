// CUDA: layout ops. Views/reshape/permute/transpose are metadata only; repeat, concat and pad
// are not implemented on the device yet.
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_NONE(const Launch&, Tensor*) {}
void cuda_forward_RESHAPE(const Launch&, Tensor*) {}
void cuda_forward_VIEW(const Launch&, Tensor*) {}
void cuda_forward_PERMUTE(const Launch&, Tensor*) {}
void cuda_forward_TRANSPOSE(const Launch&, Tensor*) {}
void cuda_forward_REPEAT(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_CONCAT(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_PAD(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_ROLL(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_PAD_REFLECT_1D(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
