// CUDA: UNARY, SQR, SQRT (f32 math, rows contiguous).
#include "kernels.cuh"

namespace pyggml::cuda {

namespace {
__device__ float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * x * (1.0f + 0.044715f * x * x)));
}
__device__ float apply_unary(int op, float x) {
    switch ((UnaryOp)op) {
        case UnaryOp::ABS: return fabsf(x);
        case UnaryOp::SGN: return x > 0.f ? 1.f : x < 0.f ? -1.f : 0.f;
        case UnaryOp::NEG: return -x;
        case UnaryOp::STEP: return x > 0.f ? 1.f : 0.f;
        case UnaryOp::TANH: return tanhf(x);
        case UnaryOp::ELU: return x > 0.f ? x : expm1f(x);
        case UnaryOp::RELU: return x > 0.f ? x : 0.f;
        case UnaryOp::SIGMOID: return 1.f / (1.f + expf(-x));
        case UnaryOp::GELU: return x <= -10.f ? 0.f : x >= 10.f ? x : gelu_tanh(x);
        case UnaryOp::GELU_QUICK: return x / (1.f + expf(-1.702f * x));
        case UnaryOp::SILU: return x / (1.f + expf(-x));
        case UnaryOp::HARDSWISH: return x * fminf(1.f, fmaxf(0.f, (x + 3.f) / 6.f));
        case UnaryOp::HARDSIGMOID: return fminf(1.f, fmaxf(0.f, (x + 3.f) / 6.f));
        case UnaryOp::EXP: return expf(x);
        case UnaryOp::EXPM1: return expf(x) - 1.f;  // as ggml's CPU
        case UnaryOp::SOFTPLUS: return x > 20.f ? x : log1pf(expf(x));
        case UnaryOp::GELU_ERF: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
        case UnaryOp::FLOOR: return floorf(x);
        case UnaryOp::CEIL: return ceilf(x);
        case UnaryOp::ROUND: return roundf(x);
        case UnaryOp::TRUNC: return truncf(x);
        default: return x;
    }
}
// kind: 0 unary(op), 1 sqr, 2 sqrt
__global__ void unary_kernel(const char* a, Dims da, char* o, Dims dd, int type, int kind, int op, int64_t n) {
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(dd, idx, i0, i1, i2, i3);
    float x = load_as_f32(a + offset_of(da, i0, i1, i2, i3), type);
    float r = kind == 1 ? x * x : kind == 2 ? sqrtf(x) : apply_unary(op, x);
    store_from_f32(o + offset_of(dd, i0, i1, i2, i3), type, r);
}
void launch(const Launch& l, Tensor* dst, int kind) {
    const Tensor* a = dst->src[0];
    const int64_t n = dst->nelements();
    unary_kernel<<<blocks_for(n, 256), 256, 0, l.stream>>>((const char*)a->data, dims_of(a), (char*)dst->data,
                                                            dims_of(dst), (int)dst->type, kind,
                                                            dst->op_params[0], n);
}
}  // namespace

void cuda_forward_UNARY(const Launch& l, Tensor* d) {
    if ((UnaryOp)d->op_params[0] == UnaryOp::XIELU) unsupported(d, "xielu not implemented yet");
    launch(l, d, 0);
}
void cuda_forward_SQR(const Launch& l, Tensor* d) { launch(l, d, 1); }
void cuda_forward_SQRT(const Launch& l, Tensor* d) { launch(l, d, 2); }

}  // namespace pyggml::cuda
