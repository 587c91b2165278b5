// CUDA: SCALE, CLAMP, ARANGE, TRI (element kernels).
#include "kernels.cuh"

namespace pyggml::cuda {

namespace {
// kind 0: scale (s, b), 1: clamp (lo, hi)
__global__ void map_kernel(const char* a, Dims da, char* o, Dims dd, int type, int kind, float p0, float p1, int64_t n) {
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(dd, idx, i0, i1, i2, i3);
    float x = load_as_f32(a + offset_of(da, i0, i1, i2, i3), type);
    float r;
    if (kind == 0) {
        r = p1 == 0.f ? x * p0 : x * p0 + p1;
    } else {
        r = x < p1 ? x : p1;   // NaN -> max, as ggml's comparison-based clamp
        r = r > p0 ? r : p0;
    }
    store_from_f32(o + offset_of(dd, i0, i1, i2, i3), type, r);
}
__global__ void arange_kernel(float* o, float start, float step, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) o[i] = start + step * (float)i;
}
__global__ void tri_kernel(const char* a, Dims da, char* o, Dims dd, int tri_type, int64_t n) {
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(dd, idx, i0, i1, i2, i3);
    bool keep = tri_type == 0 ? i0 >= i1 : tri_type == 1 ? i0 > i1 : tri_type == 2 ? i0 <= i1 : i0 < i1;
    float x = *(const float*)(a + offset_of(da, i0, i1, i2, i3));
    *(float*)(o + offset_of(dd, i0, i1, i2, i3)) = keep ? x : 0.f;
}
void launch_map(const Launch& l, Tensor* dst, int kind) {
    const Tensor* a = dst->src[0];
    const int64_t n = dst->nelements();
    map_kernel<<<blocks_for(n, 256), 256, 0, l.stream>>>((const char*)a->data, dims_of(a), (char*)dst->data,
                                                          dims_of(dst), (int)dst->type, kind,
                                                          dst->param_f32(0), dst->param_f32(1), n);
}
}  // namespace

void cuda_forward_SCALE(const Launch& l, Tensor* d) { launch_map(l, d, 0); }
void cuda_forward_CLAMP(const Launch& l, Tensor* d) { launch_map(l, d, 1); }
void cuda_forward_ARANGE(const Launch& l, Tensor* d) {
    const int64_t n = d->ne[0];
    arange_kernel<<<blocks_for(n, 256), 256, 0, l.stream>>>((float*)d->data, d->param_f32(0), d->param_f32(2), n);
}
void cuda_forward_TRI(const Launch& l, Tensor* d) {
    const Tensor* a = d->src[0];
    const int64_t n = d->nelements();
    tri_kernel<<<blocks_for(n, 256), 256, 0, l.stream>>>((const char*)a->data, dims_of(a), (char*)d->data,
                                                          dims_of(d), d->op_params[0], n);
}


}  // namespace pyggml::cuda
