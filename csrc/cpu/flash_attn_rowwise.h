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
// Whether the AVX-512 level runs the 16-lane kernel for K head size D. Its dots step 64 dims
// and sum the rest one by one in f64, as ggml's AVX-512 build does; where that rest is 32 dims
// or more (D = 32, 40, 96, ...) the 8-lane kernel, stepping 32, is up to 4x faster, so that
// level runs it there, with the bits of ggml's AVX2 build.
inline bool fa_rowwise_wide_dots(int64_t D) { return D % 64 < 32; }

}  // namespace pyggml::cpu
