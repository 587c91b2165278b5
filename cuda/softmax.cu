// CUDA: SOFT_MAX (scale, F16/F32 mask broadcast by modulo, ALiBi, sinks); one block per row.
#include <cmath>

#include "kernels.cuh"

namespace pyggml::cuda {

namespace {
__device__ float block_reduce(float v, float* shared, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffff, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    const int n_warps = blockDim.x / 32;
    v = lane < n_warps ? shared[lane] : (is_max ? -INFINITY : 0.f);
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffff, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    __syncthreads();
    return v;
}

__global__ void soft_max_kernel(const float* a, Dims da, const char* mask, Dims dm, int mask_type,
                                const float* sinks, float* o, Dims dd, float scale, float m0, float m1,
                                int n_head_log2, bool alibi) {
    __shared__ float shared[32];
    const int64_t r = blockIdx.x;
    const int64_t i1 = r % dd.ne[1], i2 = (r / dd.ne[1]) % dd.ne[2], i3 = r / (dd.ne[1] * dd.ne[2]);
    const float* x = (const float*)((const char*)a + offset_of(da, 0, i1, i2, i3));
    float* y = (float*)((char*)o + offset_of(dd, 0, i1, i2, i3));
    const int64_t n = da.ne[0];
    float slope = 1.f;
    if (alibi) slope = i2 < n_head_log2 ? powf(m0, (float)(i2 + 1)) : powf(m1, (float)(2 * (i2 - n_head_log2) + 1));
    const char* mrow = mask ? mask + offset_of(dm, 0, i1, i2 % dm.ne[2], i3 % dm.ne[3]) : nullptr;
    float mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = x[i] * scale;
        if (mrow) v += slope * load_as_f32(mrow + i * dm.nb[0], mask_type);
        y[i] = v;
        mx = fmaxf(mx, v);
    }
    mx = block_reduce(mx, shared, true);
    if (sinks) mx = fmaxf(mx, sinks[i2]);
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float e = expf(y[i] - mx);
        y[i] = e;
        s += e;
    }
    s = block_reduce(s, shared, false);
    if (sinks) s += expf(sinks[i2] - mx);
    const float inv = 1.f / s;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) y[i] *= inv;
}
}  // namespace

void cuda_forward_SOFT_MAX(const Launch& l, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* mask = dst->src[1];
    const Tensor* sinks = dst->src[2];
    const float scale = dst->param_f32(0), max_bias = dst->param_f32(1);
    const int n_head = (int)a->ne[2];
    const int n_head_log2 = 1 << (int)std::floor(std::log2((double)n_head));
    const float m0 = std::pow(2.0f, -max_bias / n_head_log2);
    const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / n_head_log2);
    soft_max_kernel<<<(unsigned)dst->nrows(), 256, 0, l.stream>>>(
        (const float*)a->data, dims_of(a), mask ? (const char*)mask->data : nullptr,
        mask ? dims_of(mask) : Dims{}, mask ? (int)mask->type : 0,
        sinks ? (const float*)sinks->data : nullptr, (float*)dst->data, dims_of(dst), scale, m0, m1,
        n_head_log2, max_bias > 0.f);
}


}  // namespace pyggml::cuda
