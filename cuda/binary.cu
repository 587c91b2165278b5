// CUDA: ADD/SUB/MUL/DIV with b tiled into a by modulo; math in f32.
#include "kernels.cuh"

namespace pyggml::cuda {

namespace {
template <int OP>
__global__ void binary_kernel(const char* a, Dims da, int ta, const char* b, Dims db, int tb, char* o,
                              Dims dd, int to, int64_t n) {
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(dd, idx, i0, i1, i2, i3);
    const float x = load_as_f32(a + offset_of(da, i0, i1, i2, i3), ta);
    const float y = load_as_f32(b + offset_of(db, i0 % db.ne[0], i1 % db.ne[1], i2 % db.ne[2], i3 % db.ne[3]), tb);
    float r = OP == 0 ? x + y : OP == 1 ? x - y : OP == 2 ? x * y : x / y;
    store_from_f32(o + offset_of(dd, i0, i1, i2, i3), to, r);
}

template <int OP>
void launch(const Launch& l, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const int64_t n = dst->nelements();
    binary_kernel<OP><<<blocks_for(n, 256), 256, 0, l.stream>>>(
        (const char*)a->data, dims_of(a), (int)a->type, (const char*)b->data, dims_of(b), (int)b->type,
        (char*)dst->data, dims_of(dst), (int)dst->type, n);
}
}  // namespace

void cuda_forward_ADD(const Launch& l, Tensor* d) { launch<0>(l, d); }
void cuda_forward_SUB(const Launch& l, Tensor* d) { launch<1>(l, d); }
void cuda_forward_MUL(const Launch& l, Tensor* d) { launch<2>(l, d); }
void cuda_forward_DIV(const Launch& l, Tensor* d) { launch<3>(l, d); }

}  // namespace pyggml::cuda
