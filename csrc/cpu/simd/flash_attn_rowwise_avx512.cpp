// The row-wise flash-attention kernel (cpu/flash_attn_rowwise_impl.h) at the AVX-512 level:
// 16-lane accumulators, the score dots in ggml's AVX-512 build's order.
#include "cpu/flash_attn_rowwise.h"

#if defined(__x86_64__) || defined(__i386__)
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

#include <immintrin.h>

#include "cpu/expf_libm_avx2.h"
#include "cpu/flash_attn_rowwise_plan.h"
#include "pyggml/ops/flash_attn.h"

// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsics as
// uninitialized (false positive)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#include "cpu/flash_attn_rowwise_impl.h"

namespace pyggml::cpu {

void fa_rowwise_forward_avx512(const ComputeParams& p, Tensor* dst) { Rowwise<true>(p, dst).run(); }

}  // namespace pyggml::cpu
#pragma GCC pop_options
#pragma GCC diagnostic pop
#endif
