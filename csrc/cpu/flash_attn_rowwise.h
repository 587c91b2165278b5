// The row-wise FLASH_ATTN_EXT kernel (flash_attn_rowwise.cpp): ggml's own order of operations
// for F16 K/V and fewer than 64 query tokens.
#pragma once
#include <cstddef>

#include "cpu/kernels.h"

namespace pyggml::cpu {

bool fa_rowwise_applies(const Tensor* dst);
void fa_rowwise_forward(const ComputeParams& p, Tensor* dst);
size_t fa_rowwise_work_size(const Tensor* dst, int n_threads);
// The AVX-512 level's kernel (simd/flash_attn_rowwise_avx512.cpp); fa_rowwise_forward picks it.
void fa_rowwise_forward_avx512(const ComputeParams& p, Tensor* dst);

}  // namespace pyggml::cpu
