// CUDA: GLU family (fused halves or split), f32 math.
#include "kernels.cuh"

namespace pyggml::cuda {

namespace {
__device__ float glu_value(int op, float g, float u, float alpha, float limit) {
    switch ((GluOp)op) {
        case GluOp::REGLU: return g > 0.f ? g * u : 0.f;
        case GluOp::GEGLU:
            return (g <= -10.f ? 0.f : g >= 10.f ? g
                    : 0.5f * g * (1.f + tanhf(0.79788456080286535588f * g * (1.f + 0.044715f * g * g)))) * u;
        case GluOp::SWIGLU: return g / (1.f + expf(-g)) * u;
        case GluOp::SWIGLU_OAI: {
            const float x = fminf(g, limit), y = fminf(fmaxf(u, -limit), limit);
            return x / (1.f + expf(-alpha * x)) * (y + 1.f);
        }
        case GluOp::GEGLU_ERF: return 0.5f * g * (1.f + erff(g * 0.70710678118654752f)) * u;
        case GluOp::GEGLU_QUICK: return g / (1.f + expf(-1.702f * g)) * u;
        case GluOp::SWIGLU_CLAMP: {
            const float x = fminf(g, limit), y = fminf(fmaxf(u, -limit), limit);
            return x / (1.f + expf(-x)) * y;
        }
        default: return 0.f;
    }
}
__global__ void glu_kernel(const char* a, Dims da, const char* b, Dims db, char* o, Dims dd, int type,
                           int op, bool swapped, float alpha, float limit, int64_t n) {
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(dd, t, i0, i1, i2, i3);
    float g, u;
    if (b) {
        g = load_as_f32(a + offset_of(da, i0, i1, i2, i3), type);
        u = load_as_f32(b + offset_of(db, i0, i1, i2, i3), type);
    } else {
        const int64_t half = dd.ne[0];
        const float lo = load_as_f32(a + offset_of(da, i0, i1, i2, i3), type);
        const float hi = load_as_f32(a + offset_of(da, i0 + half, i1, i2, i3), type);
        g = swapped ? hi : lo;
        u = swapped ? lo : hi;
    }
    store_from_f32(o + offset_of(dd, i0, i1, i2, i3), type, glu_value(op, g, u, alpha, limit));
}
}  // namespace

void cuda_forward_GLU(const Launch& l, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const int64_t n = dst->nelements();
    glu_kernel<<<blocks_for(n, 256), 256, 0, l.stream>>>(
        (const char*)a->data, dims_of(a), b ? (const char*)b->data : nullptr, b ? dims_of(b) : Dims{},
        (char*)dst->data, dims_of(dst), (int)dst->type, dst->op_params[0], dst->op_params[1] != 0,
        dst->param_f32(2), dst->param_f32(3), n);
}

}  // namespace pyggml::cuda
