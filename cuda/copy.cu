// CUDA: CPY / DUP / CONT between F32, F16, BF16 and I32 (logical order, any strides), and
// dequantizing copies from Q8_0 / Q4_0. Quantizing destinations are not implemented yet.
#include "kernels.cuh"
#include "quant.cuh"

namespace pyggml::cuda {

namespace {
__global__ void copy_kernel(const char* s, Dims ds, int ts, char* d, Dims dd, int td, int64_t n) {
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t >= n) return;
    int64_t a0, a1, a2, a3, b0, b1, b2, b3;
    unravel(ds, t, a0, a1, a2, a3);  // the t-th element in the source's logical order ...
    unravel(dd, t, b0, b1, b2, b3);  // ... lands at the t-th position of the destination
    const char* src_row = s + offset_of(ds, 0, a1, a2, a3);
    float v;
    if (ts == (int)Type::Q8_0) v = dequant_q8_0(src_row, a0);
    else if (ts == (int)Type::Q4_0) v = dequant_q4_0(src_row, a0);
    else if (ts == td && ts == (int)Type::I32) {
        *(int32_t*)(d + offset_of(dd, b0, b1, b2, b3)) = *(const int32_t*)(src_row + a0 * ds.nb[0]);
        return;
    } else v = load_as_f32(src_row + a0 * ds.nb[0], ts);
    store_from_f32(d + offset_of(dd, b0, b1, b2, b3), td, v);
}

void copy_into(const Launch& l, const Tensor* src, Tensor* dst) {
    if (is_quantized(dst->type) && dst->type != src->type) unsupported(dst, "quantizing copies");
    if (!cuda_reads_type(src->type)) unsupported(dst, (std::string(type_name(src->type)) + " source").c_str());
    if (dst->type == src->type && is_quantized(src->type)) {
        if (!src->is_contiguous() || !dst->is_contiguous()) unsupported(dst, "strided block copies");
        PG_CUDA_CHECK(cudaMemcpyAsync(dst->data, src->data, dst->nbytes(), cudaMemcpyDeviceToDevice, l.stream));
        return;
    }
    Dims ds = dims_of(src);
    if (is_quantized(src->type)) ds.nb[0] = 0;  // rows are dequantized element by element
    const int64_t n = dst->nelements();
    copy_kernel<<<blocks_for(n, 256), 256, 0, l.stream>>>((const char*)src->data, ds, (int)src->type,
                                                           (char*)dst->data, dims_of(dst), (int)dst->type, n);
}
}  // namespace

void cuda_forward_CPY(const Launch& l, Tensor* dst) { copy_into(l, dst->src[0], dst); }
void cuda_forward_DUP(const Launch& l, Tensor* dst) { copy_into(l, dst->src[0], dst); }
void cuda_forward_CONT(const Launch& l, Tensor* dst) { copy_into(l, dst->src[0], dst); }

}  // namespace pyggml::cuda
