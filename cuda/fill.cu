// CUDA: FILL (flat element kernel, contiguous F32/F16).
#include "kernels.cuh"

namespace pyggml::cuda {

namespace {
__global__ void fill_kernel(char* dst, int type, int64_t n, float c) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) store_from_f32(dst + i * (type == (int)Type::F32 ? 4 : 2), type, c);
}
}  // namespace

void cuda_forward_FILL(const Launch& l, Tensor* dst) {
    const int64_t n = dst->nelements();
    fill_kernel<<<blocks_for(n, 256), 256, 0, l.stream>>>((char*)dst->data, (int)dst->type, n,
                                                           dst->param_f32(0));
}

}  // namespace pyggml::cuda
