// Shared helpers of the CUDA backend: error checks, launch geometry, tensor addressing.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <sstream>

#include "pyggml/error.h"
#include "pyggml/op_table.h"
#include "pyggml/tensor.h"

namespace pyggml::cuda {

#define PG_CUDA_CHECK(expr)                                                               \
    do {                                                                                  \
        cudaError_t err_ = (expr);                                                        \
        if (err_ != cudaSuccess) {                                                        \
            std::ostringstream os_;                                                       \
            os_ << "CUDA error " << cudaGetErrorName(err_) << " (" << cudaGetErrorString(err_) \
                << ") in " << #expr;                                                      \
            throw ::pyggml::Error(os_.str());                                             \
        }                                                                                 \
    } while (0)

struct Launch {
    cudaStream_t stream;
    int device;
};

// Shapes and byte strides passed by value to kernels.
struct Dims {
    int64_t ne[4];
    int64_t nb[4];
};
inline Dims dims_of(const Tensor* t) {
    Dims d;
    for (int i = 0; i < 4; ++i) { d.ne[i] = t->ne[i]; d.nb[i] = (int64_t)t->nb[i]; }
    return d;
}

__device__ inline float load_as_f32(const char* p, int type) {
    switch (type) {
        case (int)Type::F16: return __half2float(*(const __half*)p);
        case (int)Type::BF16: return __bfloat162float(*(const __nv_bfloat16*)p);
        case (int)Type::I32: return (float)*(const int32_t*)p;
        default: return *(const float*)p;
    }
}
__device__ inline void store_from_f32(char* p, int type, float v) {
    switch (type) {
        case (int)Type::F16: *(__half*)p = __float2half_rn(v); break;
        case (int)Type::BF16: *(__nv_bfloat16*)p = __float2bfloat16_rn(v); break;
        case (int)Type::I32: *(int32_t*)p = isnan(v) ? 0 : (int32_t)fminf(fmaxf(v, -2147483648.0f), 2147483520.0f); break;
        default: *(float*)p = v;
    }
}
// Offset of logical element (i0..i3) in a tensor with byte strides nb.
__device__ inline int64_t offset_of(const Dims& d, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return i0 * d.nb[0] + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
}
// Decompose a flat logical index into (i0, i1, i2, i3).
__device__ inline void unravel(const Dims& d, int64_t idx, int64_t& i0, int64_t& i1, int64_t& i2, int64_t& i3) {
    i0 = idx % d.ne[0]; idx /= d.ne[0];
    i1 = idx % d.ne[1]; idx /= d.ne[1];
    i2 = idx % d.ne[2]; i3 = idx / d.ne[2];
}

inline unsigned blocks_for(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

[[noreturn]] inline void unsupported(const Tensor* t, const char* why) {
    std::ostringstream os;
    os << "[" << op_name(t->op) << "] not supported by the CUDA backend: " << why << " ("
       << describe(t) << ")";
    throw UnsupportedError(os.str());
}

}  // namespace pyggml::cuda
