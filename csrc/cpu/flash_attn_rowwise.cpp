// FLASH_ATTN_EXT over F16 K/V for up to 64 query tokens (the dense case), in ggml's CPU
// order of operations for one query vector: Q rounded to F16; each score a dot of F16 values
// with four 8-lane F32 accumulators, reduced pairwise; scale, soft cap (tanh), mask; an online
// softmax whose V accumulator is rounded to F16 after every update; the sum divided out at
// the end. Over a single KV chunk the results are bit-identical to ggml's, which matters for
// quantized models: their matmuls re-quantize the attention output, and any rounding
// difference is amplified layer after layer.
//
// Every query vector's result depends only on its own inputs: not on the batch size, the
// thread count, or -inf columns anywhere. That is what lets a speculative decoder's verify
// batch reproduce plain one-token decoding bit for bit. So the KV axis is cut into chunks at
// fixed multiples of kChunk (never where the threads would like), each chunk runs the online
// softmax from scratch, and the chunks are folded in ascending order with the log-sum-exp
// rule in F32. When there are few query vectors (decode) threads take (vectors, chunk) items
// and fold after a barrier; otherwise a thread folds its own chunks. Same arithmetic.
//
// A work item holds up to kMaxVectors query vectors (heads that share one K and one V head,
// times consecutive tokens); each K row is converted to F32 once for up to three of them, and
// the F16 V accumulators are held as F32 values that are F16-representable (rounded through
// F16 after each update, in registers across a block of columns), which gives ggml's bits
// with fewer conversions and memory round trips.
//
// The kernel itself is cpu/flash_attn_rowwise_impl.h (its V accumulators in
// cpu/flash_attn_rowwise_steps.h), compiled once per level: here for AVX2
// (ggml's AVX2 build's bits), in simd/flash_attn_rowwise_avx512.cpp for AVX-512 (16-lane
// registers; the dots in ggml's AVX-512 build's sum order). Used at the default precision when
// the op has no sparse hint; flash_attn.cpp is the general kernel (F32 accumulation, which
// GGML_PREC_F32 asks for; tiles, sparse columns).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

#if defined(__linux__)
#include <unistd.h>
#endif

#include "cpu/env.h"
#include "cpu/flash_attn_rowwise.h"
#include "cpu/flash_attn_rowwise_plan.h"
#include "cpu/simd/isa.h"
#include "pyggml/ops/flash_attn.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/expf_libm_avx2.h"
#define PYGGML_FA_ROWWISE 1
#endif

namespace pyggml::cpu {

using fa_rowwise::kRowwiseMaxTokens;
using fa_rowwise::RowPlan;

namespace {
size_t l2_bytes() {
    static const size_t bytes = [] {
        long b = 0;
#if defined(__linux__) && defined(_SC_LEVEL2_CACHE_SIZE)
        b = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
        return b > 0 ? (size_t)b : size_t(1) << 20;  // unknown: 1 MiB
    }();
    return bytes;
}
}  // namespace

bool fa_rowwise::prefetch_kv(const Tensor* k, const Tensor* v) {
    return k->nbytes() + v->nbytes() > 2 * l2_bytes() && env_not_zero("PYGGML_FA_PREFETCH");
}

bool fa_rowwise_applies(const Tensor* dst) {
#ifdef PYGGML_FA_ROWWISE
    const Tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3];
    if (simd::cpu_isa() == simd::Isa::Scalar) return false;
    if (q->type != Type::F32 || k->type != Type::F16 || v->type != Type::F16) return false;
    if (mask && mask->type != Type::F16) return false;
    if (dst->param_i32(kFaNKvMax) > 0 || dst->param_i32(kFaPrec) == kPrecF32) return false;
    if (q->ne[1] > kRowwiseMaxTokens) return false;
    return q->nb[0] == sizeof(float) && k->nb[0] == 2 && v->nb[0] == 2;
#else
    (void)dst;
    return false;
#endif
}

size_t fa_rowwise_work_size(const Tensor* dst, int n_threads) {
    const RowPlan plan(dst, n_threads);
    return (size_t(n_threads) * size_t(plan.per_thread) + plan.partial_floats()) * sizeof(float) + 64;
}

}  // namespace pyggml::cpu

#ifdef PYGGML_FA_ROWWISE
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "cpu/flash_attn_rowwise_impl.h"

namespace pyggml::cpu {

void fa_rowwise_forward(const ComputeParams& p, Tensor* dst) {
    if (simd::cpu_isa() == simd::Isa::Avx512 && fa_rowwise_wide_dots(dst->src[1]->ne[0]))
        return fa_rowwise_forward_avx512(p, dst);
    Rowwise<false>(p, dst).run();
}

}  // namespace pyggml::cpu
#pragma GCC pop_options
#else
namespace pyggml::cpu {
void fa_rowwise_forward(const ComputeParams&, Tensor*) {}
void fa_rowwise_forward_avx512(const ComputeParams&, Tensor*) {}
}  // namespace pyggml::cpu
#endif
