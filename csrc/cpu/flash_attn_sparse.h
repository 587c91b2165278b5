// FLASH_ATTN_EXT with the sparse hint (flash_attn_sparse.cpp): work follows n_kv_max, not the
// cache size.
#pragma once
#include <cstddef>

#include "cpu/kernels.h"

namespace pyggml::cpu {

// n_kv_max > 0, a mask and a non-empty cache.
bool fa_sparse_applies(const Tensor* dst);
void fa_sparse_forward(const ComputeParams& p, Tensor* dst);
size_t fa_sparse_work_size(const Tensor* dst, int n_threads);

}  // namespace pyggml::cpu
