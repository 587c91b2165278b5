// CUDA: NORM and RMS_NORM, one block per row, block-wide reductions.
#include "kernels.cuh"

namespace pyggml::cuda {

namespace {
__device__ float block_sum(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    const int n_warps = blockDim.x / 32;
    v = lane < n_warps ? shared[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    __syncthreads();
    return v;
}
__global__ void norm_kernel(const char* a, Dims da, char* o, Dims dd, float eps, bool rms) {
    __shared__ float shared[32];
    const int64_t r = blockIdx.x;
    const int64_t i1 = r % dd.ne[1], i2 = (r / dd.ne[1]) % dd.ne[2], i3 = r / (dd.ne[1] * dd.ne[2]);
    const char* x = a + offset_of(da, 0, i1, i2, i3);
    char* y = o + offset_of(dd, 0, i1, i2, i3);
    const int64_t n = da.ne[0];
    float mean = 0.f;
    if (!rms) {
        float s = 0.f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += *(const float*)(x + i * da.nb[0]);
        mean = block_sum(s, shared) / (float)n;
    }
    float s2 = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = *(const float*)(x + i * da.nb[0]) - mean;
        s2 += v * v;
    }
    const float scale = rsqrtf(block_sum(s2, shared) / (float)n + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        *(float*)(y + i * dd.nb[0]) = (*(const float*)(x + i * da.nb[0]) - mean) * scale;
}
void launch(const Launch& l, Tensor* dst, bool rms) {
    const Tensor* a = dst->src[0];
    if (a->type != Type::F32) unsupported(dst, "only f32 rows");
    norm_kernel<<<(unsigned)dst->nrows(), 256, 0, l.stream>>>((const char*)a->data, dims_of(a), (char*)dst->data,
                                                               dims_of(dst), dst->param_f32(0), rms);
}
}  // namespace

void cuda_forward_NORM(const Launch& l, Tensor* d) { launch(l, d, false); }
void cuda_forward_RMS_NORM(const Launch& l, Tensor* d) { launch(l, d, true); }


}  // namespace pyggml::cuda
