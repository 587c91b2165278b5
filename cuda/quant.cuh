// Device-side dequantization of single elements of Q8_0 / Q4_0 rows.
#pragma once
#include "common.cuh"

namespace pyggml::cuda {

// Block types these element dequantizers read; the other rows of the type table (q4_1, the
// K-quants, iq4_nl, mxfp4, nvfp4, ...) are refused by the CUDA kernels with UnsupportedError.
inline bool cuda_reads_type(Type t) { return !is_quantized(t) || t == Type::Q8_0 || t == Type::Q4_0; }

__device__ inline float dequant_q8_0(const char* row, int64_t i) {
    const char* blk = row + (i / 32) * 34;
    return __half2float(*(const __half*)blk) * (float)((const int8_t*)(blk + 2))[i % 32];
}

__device__ inline float dequant_q4_0(const char* row, int64_t i) {
    const char* blk = row + (i / 32) * 18;
    const int j = (int)(i % 32);
    const uint8_t q = ((const uint8_t*)(blk + 2))[j % 16];
    const int level = (j < 16 ? (q & 15) : (q >> 4)) - 8;
    return __half2float(*(const __half*)blk) * (float)level;
}

}  // namespace pyggml::cuda
