// CUDA: GET_ROWS (float sources, Q8_0/Q4_0 dequantized) and SET_ROWS (float destinations).
#include "kernels.cuh"
#include "quant.cuh"

namespace pyggml::cuda {

namespace {
__device__ int64_t load_index(const char* p, int type) {
    return type == (int)Type::I64 ? *(const int64_t*)p : (int64_t)*(const int32_t*)p;
}

// dst [ne0, n_idx, ne2, ne3]: one thread per output element.
__global__ void get_rows_kernel(const char* a, Dims da, int ta, const char* idx, Dims di, int ti,
                                char* o, Dims dd, int to, int64_t n) {
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t >= n) return;
    int64_t i0, r, j, k;
    unravel(dd, t, i0, r, j, k);
    const int64_t row = load_index(idx + offset_of(di, r, j, k, 0), ti);
    const char* src = a + row * da.nb[1] + j * da.nb[2] + k * da.nb[3];
    float v;
    if (ta == (int)Type::Q8_0) v = dequant_q8_0(src, i0);
    else if (ta == (int)Type::Q4_0) v = dequant_q4_0(src, i0);
    else v = load_as_f32(src + i0 * da.nb[0], ta);
    store_from_f32(o + offset_of(dd, i0, r, j, k), to, v);
}

// dst a [ne0, ne1, ne2, ne3] receives rows of b [ne0, n_rows, ne2, ne3] at indices c.
__global__ void set_rows_kernel(const char* b, Dims db, int tb, const char* c, Dims dc, int tc,
                                char* a, Dims da, int ta, int64_t n) {
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t >= n) return;
    int64_t i0, i, j, k;
    unravel(db, t, i0, i, j, k);
    const int64_t row = load_index(c + offset_of(dc, i, j % dc.ne[1], k % dc.ne[2], 0), tc);
    const float v = load_as_f32(b + offset_of(db, i0, i, j, k), tb);
    store_from_f32(a + offset_of(da, i0, row, j, k), ta, v);
}
}  // namespace

void cuda_forward_GET_ROWS(const Launch& l, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* idx = dst->src[1];
    if (!cuda_reads_type(a->type)) unsupported(dst, (std::string(type_name(a->type)) + " source").c_str());
    const int64_t n = dst->nelements();
    get_rows_kernel<<<blocks_for(n, 256), 256, 0, l.stream>>>(
        (const char*)a->data, dims_of(a), (int)a->type, (const char*)idx->data, dims_of(idx), (int)idx->type,
        (char*)dst->data, dims_of(dst), (int)dst->type, n);
}

void cuda_forward_SET_ROWS(const Launch& l, Tensor* dst) {
    const Tensor* b = dst->src[0];
    const Tensor* c = dst->src[1];
    if (is_quantized(dst->type)) unsupported(dst, "quantized destination");
    const int64_t n = b->nelements();
    set_rows_kernel<<<blocks_for(n, 256), 256, 0, l.stream>>>(
        (const char*)b->data, dims_of(b), (int)b->type, (const char*)c->data, dims_of(c), (int)c->type,
        (char*)dst->data, dims_of(dst), (int)dst->type, n);
}

}  // namespace pyggml::cuda
