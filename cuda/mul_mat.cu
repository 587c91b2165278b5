// CUDA: MUL_MAT and MUL_MAT_ID. One warp per output element with lane-strided dot products
// over K (weights F32/F16/BF16 or dequantized Q8_0/Q4_0). A correctness-first kernel: the
// tensor-core GEMM and the bandwidth-bound GEMV of the CUDA issue replace it.
#include "kernels.cuh"
#include "quant.cuh"

namespace pyggml::cuda {

namespace {
__device__ inline float weight_at(const char* row, int64_t k, int type, int64_t nb0) {
    if (type == (int)Type::Q8_0) return dequant_q8_0(row, k);
    if (type == (int)Type::Q4_0) return dequant_q4_0(row, k);
    return load_as_f32(row + k * nb0, type);
}

// out[m, n, i2, i3] = sum_k a[k, m, i2/r2, i3/r3] * b[k, n, i2, i3]
__global__ void mul_mat_kernel(const char* a, Dims da, int ta, const char* b, Dims db, int tb,
                               float* o, Dims dd) {
    const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    const int64_t total = dd.ne[0] * dd.ne[1] * dd.ne[2] * dd.ne[3];
    if (warp >= total) return;
    int64_t m, n, i2, i3;
    unravel(dd, warp, m, n, i2, i3);
    const int64_t r2 = db.ne[2] / da.ne[2], r3 = db.ne[3] / da.ne[3];
    const char* arow = a + m * da.nb[1] + (i2 / r2) * da.nb[2] + (i3 / r3) * da.nb[3];
    const char* brow = b + n * db.nb[1] + i2 * db.nb[2] + i3 * db.nb[3];
    float s = 0.f;
    for (int64_t k = lane; k < da.ne[0]; k += 32)
        s += weight_at(arow, k, ta, da.nb[0]) * load_as_f32(brow + k * db.nb[0], tb);
    for (int o2 = 16; o2 > 0; o2 >>= 1) s += __shfl_xor_sync(0xffffffff, s, o2);
    if (lane == 0) *(float*)((char*)o + offset_of(dd, m, n, i2, i3)) = s;
}

// out[m, e, t] = sum_k as[k, m, ids[e, t]] * b[k, e % Nb, t]
__global__ void mul_mat_id_kernel(const char* as, Dims da, int ta, const char* b, Dims db, int tb,
                                  const char* ids, Dims di, float* o, Dims dd) {
    const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    const int64_t total = dd.ne[0] * dd.ne[1] * dd.ne[2];
    if (warp >= total) return;
    int64_t m, e, t, unused;
    unravel(dd, warp, m, e, t, unused);
    const int32_t expert = *(const int32_t*)(ids + e * di.nb[0] + t * di.nb[1]);
    const char* arow = as + m * da.nb[1] + expert * da.nb[2];
    const char* brow = b + (e % db.ne[1]) * db.nb[1] + t * db.nb[2];
    float s = 0.f;
    for (int64_t k = lane; k < da.ne[0]; k += 32)
        s += weight_at(arow, k, ta, da.nb[0]) * load_as_f32(brow + k * db.nb[0], tb);
    for (int o2 = 16; o2 > 0; o2 >>= 1) s += __shfl_xor_sync(0xffffffff, s, o2);
    if (lane == 0) *(float*)((char*)o + m * dd.nb[0] + e * dd.nb[1] + t * dd.nb[2]) = s;
}
}  // namespace

void cuda_forward_MUL_MAT(const Launch& l, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    if (!cuda_reads_type(a->type)) unsupported(dst, (std::string(type_name(a->type)) + " weights").c_str());
    const int64_t warps = dst->nelements();
    mul_mat_kernel<<<blocks_for(warps * 32, 256), 256, 0, l.stream>>>(
        (const char*)a->data, dims_of(a), (int)a->type, (const char*)b->data, dims_of(b), (int)b->type,
        (float*)dst->data, dims_of(dst));
}

void cuda_forward_MUL_MAT_ID(const Launch& l, Tensor* dst) {
    const Tensor* as = dst->src[0];
    const Tensor* b = dst->src[1];
    const Tensor* ids = dst->src[2];
    if (!cuda_reads_type(as->type)) unsupported(dst, (std::string(type_name(as->type)) + " weights").c_str());
    const int64_t warps = dst->nelements();
    mul_mat_id_kernel<<<blocks_for(warps * 32, 256), 256, 0, l.stream>>>(
        (const char*)as->data, dims_of(as), (int)as->type, (const char*)b->data, dims_of(b), (int)b->type,
        (const char*)ids->data, dims_of(ids), (float*)dst->data, dims_of(dst));
}

}  // namespace pyggml::cuda
