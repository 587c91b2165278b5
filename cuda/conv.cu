// CUDA kernels of the 'conv' family (not yet implemented on the device).
#include "kernels.cuh"

namespace pyggml::cuda {

void cuda_forward_IM2COL(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_IM2COL_3D(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_CONV_2D(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_CONV_3D(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_CONV_2D_DW(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_CONV_TRANSPOSE_1D(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_CONV_TRANSPOSE_2D(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }
void cuda_forward_COL2IM_1D(const Launch&, Tensor* dst) { unsupported(dst, "not implemented yet"); }

}  // namespace pyggml::cuda
