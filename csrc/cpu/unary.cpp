// CPU kernels of UNARY, SQR, SQRT, LOG, SIN, COS and LEAKY_RELU: computed in f32, rounded to
// the storage type.
#include <cmath>
#include <vector>

#include "cpu/glu_simd.h"
#include "cpu/kernels.h"
#include "cpu/unary_math.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {
// f32 rows with dim 0 packed go through `row(x, o, n)` (a SIMD row kernel); others element-wise.
template <class F, class R>
void map_rows_simd(const ComputeParams& p, Tensor* dst, F f, R row);

template <class F>
void map_rows(const ComputeParams& p, Tensor* dst, F f) {
    const Tensor* a = dst->src[0];
    const int64_t ne0 = dst->ne[0];
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    std::vector<float> buf(a->type == Type::F32 ? 0 : ne0);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
        const char* in = a->row(i1, i2, i3);
        char* out = dst->row(i1, i2, i3);
        if (a->type == Type::F32) {
            const float* x = (const float*)in;
            float* o = (float*)out;
            for (int64_t i = 0; i < ne0; ++i) o[i] = f(x[i]);
        } else {
            to_float_row(a->type, in, buf.data(), ne0);
            for (int64_t i = 0; i < ne0; ++i) buf[i] = f(buf[i]);
            from_float_row(dst->type, buf.data(), out, ne0);
        }
    }
}
template <class F, class R>
void map_rows_simd(const ComputeParams& p, Tensor* dst, F f, R row) {
    const Tensor* a = dst->src[0];
    if (a->type != Type::F32 || dst->type != Type::F32 || a->nb[0] != sizeof(float) || dst->nb[0] != sizeof(float))
        return map_rows(p, dst, f);
    const int64_t ne0 = dst->ne[0];
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
        row((const float*)a->row(i1, i2, i3), (float*)dst->row(i1, i2, i3), ne0);
    }
}
}  // namespace

void cpu_forward_UNARY(const ComputeParams& p, Tensor* dst) {
    switch ((UnaryOp)dst->op_params[0]) {
        case UnaryOp::ABS: return map_rows(p, dst, [](float x) { return std::fabs(x); });
        case UnaryOp::SGN: return map_rows(p, dst, [](float x) { return x > 0 ? 1.f : x < 0 ? -1.f : 0.f; });
        case UnaryOp::NEG: return map_rows(p, dst, [](float x) { return -x; });
        case UnaryOp::STEP: return map_rows(p, dst, [](float x) { return x > 0 ? 1.f : 0.f; });
        case UnaryOp::TANH: return map_rows(p, dst, [](float x) { return std::tanh(x); });
        case UnaryOp::ELU: return map_rows(p, dst, [](float x) { return x > 0 ? x : std::expm1(x); });
        case UnaryOp::RELU: return map_rows(p, dst, [](float x) { return x > 0 ? x : 0.f; });
        case UnaryOp::SIGMOID: return map_rows(p, dst, sigmoid_f32);
        case UnaryOp::GELU: return map_rows(p, dst, gelu_f32);
        case UnaryOp::GELU_QUICK: return map_rows(p, dst, gelu_quick_f32);
        case UnaryOp::SILU: return map_rows_simd(p, dst, silu_f32, glu::kernels().silu);
        case UnaryOp::HARDSWISH:
            return map_rows(p, dst, [](float x) { return x * std::fmin(1.f, std::fmax(0.f, (x + 3.f) / 6.f)); });
        case UnaryOp::HARDSIGMOID:
            return map_rows(p, dst, [](float x) { return std::fmin(1.f, std::fmax(0.f, (x + 3.f) / 6.f)); });
        case UnaryOp::EXP: return map_rows(p, dst, [](float x) { return std::exp(x); });
        // ggml's CPU computes expf(x) - 1 here (not expm1f): keep its rounding near 0.
        case UnaryOp::EXPM1: return map_rows(p, dst, [](float x) { return std::exp(x) - 1.0f; });
        case UnaryOp::SOFTPLUS: return map_rows(p, dst, softplus_f32);
        case UnaryOp::GELU_ERF: return map_rows(p, dst, gelu_erf_f32);
        case UnaryOp::FLOOR: return map_rows(p, dst, [](float x) { return std::floor(x); });
        case UnaryOp::CEIL: return map_rows(p, dst, [](float x) { return std::ceil(x); });
        case UnaryOp::ROUND: return map_rows(p, dst, [](float x) { return std::round(x); });
        case UnaryOp::TRUNC: return map_rows(p, dst, [](float x) { return std::trunc(x); });
        case UnaryOp::XIELU: {
            const float an = dst->param_f32(1), ap = dst->param_f32(2), beta = dst->param_f32(3),
                        eps = dst->param_f32(4);
            return map_rows(p, dst, [=](float x) {
                return x > 0.0f ? ap * x * x + beta * x : (std::expm1(std::fmin(x, eps)) - x) * an + beta * x;
            });
        }
        default: throw UnsupportedError("[unary] unsupported sub-op");
    }
}
void cpu_forward_SQR(const ComputeParams& p, Tensor* dst) { map_rows(p, dst, [](float x) { return x * x; }); }
void cpu_forward_SQRT(const ComputeParams& p, Tensor* dst) { map_rows(p, dst, [](float x) { return std::sqrt(x); }); }
void cpu_forward_LOG(const ComputeParams& p, Tensor* dst) { map_rows(p, dst, [](float x) { return std::log(x); }); }
void cpu_forward_SIN(const ComputeParams& p, Tensor* dst) { map_rows(p, dst, [](float x) { return std::sin(x); }); }
void cpu_forward_COS(const ComputeParams& p, Tensor* dst) { map_rows(p, dst, [](float x) { return std::cos(x); }); }
void cpu_forward_LEAKY_RELU(const ComputeParams& p, Tensor* dst) {
    const float slope = dst->param_f32(0);
    map_rows(p, dst, [slope](float x) { return (x > 0.0f ? x : 0.0f) + slope * (x < 0.0f ? x : 0.0f); });
}
size_t cpu_work_size_LOG(const Tensor*, int) { return 0; }
size_t cpu_work_size_SIN(const Tensor*, int) { return 0; }
size_t cpu_work_size_COS(const Tensor*, int) { return 0; }
size_t cpu_work_size_LEAKY_RELU(const Tensor*, int) { return 0; }
size_t cpu_work_size_UNARY(const Tensor*, int) { return 0; }
size_t cpu_work_size_SQR(const Tensor*, int) { return 0; }
size_t cpu_work_size_SQRT(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
