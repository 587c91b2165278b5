// Shared pieces of the MUL_MAT / MUL_MAT_ID drivers: the activation conversion to the weights
// vec_dot_type, the nvfp4 scale table and the work counter.
#pragma once
#include <atomic>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "cpu/kernels.h"
#include "cpu/mul_mat_kernels.h"

namespace pyggml::cpu::mm {

inline size_t align64(size_t n) { return (n + 63) & ~size_t(63); }

// Weights larger than a core's L2 stream from memory. The GEMM paths that decode weight rows
// before their tiles ask for the rows they take next while they work on these (prefetch_to_l2):
// without that the decoding stalled on most of its loads (K-quant rows: 3/4 of its cycles).
constexpr size_t kStreamedWeightBytes = size_t(1) << 20;

// Bytes of one activation column (K values) in the weights' vec_dot_type, 64-byte aligned:
// f32 values for the float types (rounded to f16/bf16 where the weights are), blocks otherwise.
inline size_t act_col_bytes(Type wt, int64_t K) {
    return align64(is_quantized(wt) ? row_size(vec_dot_type(wt), K) : size_t(K) * sizeof(float));
}

// The first 64 bytes of wdata hold a shared work counter for dynamic scheduling.
constexpr size_t kCounterBytes = 64;
inline std::atomic<int64_t>* work_counter(const ComputeParams& p) { return (std::atomic<int64_t>*)p.wdata; }
inline void reset_counter(const ComputeParams& p) {
    if (p.ith == 0) new (p.wdata) std::atomic<int64_t>(0);
}

// Few activation values: every thread converts (or packs) all of b into its own slice of wdata
// and then works, so the node runs without a barrier (a thread that sleeps
// in a barrier on a loaded machine can cost more than a whole GEMV).
constexpr int64_t kPrivateConvertValues = 16 * 4096;
inline bool private_conversion(const Tensor* dst) {
    const Tensor* b = dst->src[1];
    return b->ne[0] * b->ne[1] * b->ne[2] * b->ne[3] <= kPrivateConvertValues;
}

// b's column c of the conversion order: (n, i12, i13) = (c % N, c / N % ne12, c / (N * ne12)).
inline const char* conversion_column(const Tensor* b, int64_t c) {
    const int64_t N = b->ne[1], ne12 = b->ne[2];
    return b->row(c % N, (c / N) % ne12, c / (N * ne12));
}

// Converts b's columns into conv + c * colb (c: conversion_column's order) with
// convert_one(src_row, dst): all of them when `priv`, else this thread's share.
template <class ConvertOne>
void convert_columns(const ComputeParams& p, const Tensor* b, bool priv, char* conv, size_t colb,
                     ConvertOne&& convert_one) {
    int64_t c0 = 0, c1 = b->ne[1] * b->ne[2] * b->ne[3];
    if (!priv) split_range(c1, p.ith, p.nth, c0, c1);
    for (int64_t c = c0; c < c1; ++c) convert_one(conversion_column(b, c), conv + c * colb);
}

// Spins (then yields the core) until ready() holds, for work another thread is doing now:
// microseconds, unless that thread was preempted.
template <class Ready>
void spin_until(Ready&& ready) {
    for (int i = 0; !ready(); ++i) {
#if defined(__x86_64__) || defined(__i386__)
        if (i < 2048) { _mm_pause(); continue; }
#endif
        std::this_thread::yield();
    }
}

// Runs convert_item(c) for items 0..items-1 (the pieces of a shared conversion: columns, groups
// of columns) with the shares of a barrier-free node (p.share_slots given): the shares claim
// items from share_slots[1] (its low 32 bits count the claims, its high 32 bits the items done)
// until none is left, then wait until every claimed item is done. A share only waits for items
// that other shares are converting at that moment, never for a share that has not started: a
// late thread finds the items converted and its units taken, where a barrier would hold the
// others until it arrived. Needs fewer than 2^31 items (claimed_conversion_fits).
constexpr int64_t kConvertClaim = 1, kConvertDone = int64_t(1) << 32;
constexpr int64_t kMaxClaimedItems = int64_t(1) << 31;
inline bool claimed_conversion_fits(const Tensor* b) { return b->ne[1] * b->ne[2] * b->ne[3] < kMaxClaimedItems; }
template <class ConvertItem>
void convert_claimed(const ComputeParams& p, int64_t items, ConvertItem&& convert_item) {
    std::atomic<int64_t>& slot = p.share_slots[1];
    const int64_t delay_us = claimed_conversion_delay_us();
    for (int64_t c; (c = slot.fetch_add(kConvertClaim, std::memory_order_relaxed) & 0xffffffff) < items;) {
        if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        convert_item(c);
        slot.fetch_add(kConvertDone, std::memory_order_release);
    }
    spin_until([&] { return (slot.load(std::memory_order_acquire) >> 32) >= items; });
}

// convert_columns over the shares of a barrier-free node (convert_claimed, one column an item).
template <class ConvertOne>
void convert_columns_claimed(const ComputeParams& p, const Tensor* b, char* conv, size_t colb,
                             ConvertOne&& convert_one) {
    convert_claimed(p, b->ne[1] * b->ne[2] * b->ne[3],
                    [&](int64_t c) { convert_one(conversion_column(b, c), conv + c * colb); });
}

// Runs units 0..units-1 over the threads. `fixed`: each thread takes a contiguous share, with
// no shared state and no barrier (for when there is no shared conversion to wait for);
// otherwise the threads meet once (the shared conversion is then done) and claim units from
// the work counter, so a late thread finds its share taken.
template <class RunUnit>
void run_mul_mat_units(const ComputeParams& p, int64_t units, bool fixed, RunUnit&& run_unit) {
    if (fixed) {
        int64_t u0, u1;
        split_range(units, p.ith, p.nth, u0, u1);
        for (int64_t u = u0; u < u1; ++u) run_unit(u);
        return;
    }
    reset_counter(p);
    p.barrier();
    std::atomic<int64_t>* counter = work_counter(p);
    for (int64_t u; (u = counter->fetch_add(1, std::memory_order_relaxed)) < units;) run_unit(u);
}

// Which unit a claim from a two-ended counter gets (-1: none left). The counter's low 32 bits
// count the claims from the front (units 0, 1, ..), its high 32 bits those from the back
// (units - 1, units - 2, ..); `before` is its value before this claim added kFrontClaim or
// kBackClaim. A claim holds while the two counts together stay below `units`, so the first
// `units` claims, whichever their ends, get every unit once.
constexpr int64_t kFrontClaim = 1, kBackClaim = int64_t(1) << 32;
inline int64_t two_ended_unit(int64_t before, bool front, int64_t units) {
    const int64_t f = before & 0xffffffff, b = before >> 32;
    if (f + b >= units) return -1;
    return front ? f : units - 1 - b;
}

// Runs units 0..units-1 over the shares of a barrier-free node: claimed from the step's first
// share slot (ComputeParams::share_slots) when the backend gave one, so a share that starts late (its
// thread woke late, or was preempted) takes fewer units instead of finishing last; else a
// contiguous share each, as run_mul_mat_units(fixed). Share 0 claims from the front and the
// others from the back (two_ended_unit), so share 0's units are one ascending run of memory
// whose stream and prefetches go on into its next unit (one-column products of a ~110M q8_0
// model's decode: their K 768 x 768 and 768 x 256 kernels 3-5% less time, 1.5% a token; with
// one counter the shares' units interleaved and each claim restarted a stream). Which share
// runs a unit never changes what the unit computes.
// two_ended = false: every share claims from the front (units that run slower in descending
// order).
template <class RunUnit>
void run_barrier_free_units(const ComputeParams& p, int64_t units, RunUnit&& run_unit, bool two_ended = true) {
    if (!p.share_slots || p.nth == 1) return run_mul_mat_units(p, units, true, run_unit);
    if (!two_ended || units >= (int64_t(1) << 31)) {  // one end (beyond 2^31: the counter's halves would overflow)
        for (int64_t u; (u = p.share_slots[0].fetch_add(1, std::memory_order_relaxed)) < units;) run_unit(u);
        return;
    }
    const bool front = p.ith == 0;
    int64_t claimed = 0;
    for (int64_t u; (u = two_ended_unit(p.share_slots[0].fetch_add(front ? kFrontClaim : kBackClaim,
                                                                  std::memory_order_relaxed),
                                        front, units)) >= 0;
         ++claimed)
        run_unit(u);
    if (!front && claimed) count_back_claimed_units(claimed);
}

// Visits rows [m0, m1) for a two-row kernel: row i of the range's first half together with row i
// of its second half (visit(m, half)), two weight streams that each run on into the next call's
// rows; pairing neighbours (2i, 2i+1) restarted one stream cold at every pair, 2-4x slower from
// memory (bench/quant_gemv_paths.cpp). An odd range's last row, and every row when !paired, is
// visited alone (visit(m, 0)). The two-row and one-row kernels give the same bits.
template <class Visit>
void visit_row_pairs(int64_t m0, int64_t m1, bool paired, Visit&& visit) {
    const int64_t half = paired ? (m1 - m0) / 2 : 0;
    for (int64_t m = m0; m < m0 + half; ++m) visit(m, half);
    for (int64_t m = m0 + 2 * half; m < m1; ++m) visit(m, int64_t(0));
}

inline void round_bf16_row(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
}

// b's row (f32/f16/bf16, contiguous) widened to f32: returns brow itself when it is f32.
inline const float* widen_row(const Kernels& kr, Type bt, const char* brow, int64_t K, std::vector<float>& tmp) {
    if (bt == Type::F32) return (const float*)brow;
    tmp.resize(K);
    if (bt == Type::F16) kr.f16_to_f32(brow, tmp.data(), K);
    else for (int64_t i = 0; i < K; ++i) tmp[i] = bf16_to_fp32(((const uint16_t*)brow)[i]);
    return tmp.data();
}

// One column of b converted to the vec_dot_type of weights `wt` (what ggml's CPU does: f16/bf16
// rounding, or quantization to q8_0 / q8_1 / q8_K with the CPU quantizers), once per column.
inline void convert_act(const Kernels& kr, Type wt, Type bt, const char* brow, int64_t K, void* out,
                        std::vector<float>& tmp) {
    const float* x = widen_row(kr, bt, brow, K, tmp);
    switch (wt) {
        case Type::F32: if ((const void*)x != out) std::copy(x, x + K, (float*)out); break;
        case Type::F16: kr.round_f16(x, (float*)out, K); break;
        case Type::BF16: round_bf16_row(x, (float*)out, K); break;
        default: kr.quantize[(int)vec_dot_type(wt)](x, out, K); break;
    }
}

// Same, but as f32 values (the GEMM path: activations are quantized then dequantized).
inline void convert_act_f32(const Kernels& kr, Type wt, Type bt, const char* brow, int64_t K, float* out,
                            std::vector<float>& tmp, std::vector<char>& qtmp) {
    if (!is_quantized(wt)) { convert_act(kr, wt, bt, brow, K, out, tmp); return; }
    const float* x = widen_row(kr, bt, brow, K, tmp);
    const Type vt = vec_dot_type(wt);
    qtmp.resize(row_size(vt, K));
    kr.quantize[(int)vt](x, qtmp.data(), K);
    to_float_row(vt, qtmp.data(), out, K);
}

// The extras of one activation column of K values for the dot1x of weights of type w.
inline size_t act_extras_bytes(Type w, int64_t K) {
    return w == Type::NVFP4 ? size_t(K / 64) * sizeof(ActUnitNVFP4) : size_t(K / 32) * (sizeof(ActExtra) + sizeof(float));
}
inline int32_t q8_group_sum(const int8_t* q) { return int32_t(q[0]) + q[1] + q[2] + q[3]; }
inline void act_extras(Type w, const BlockQ8_0* y, int64_t K, void* out) {
    const int32_t off = act_extra_offset(w);
    if (w == Type::NVFP4) {
        ActUnitNVFP4* u = (ActUnitNVFP4*)out;
        static constexpr int kLoGroups[4] = {0, 1, 4, 5}, kHiGroups[4] = {2, 3, 6, 7};
        for (int64_t i = 0; i < K / 64; ++i)
            for (int h = 0; h < 2; ++h) {
                const BlockQ8_0& b = y[2 * i + h];
                for (int j = 0; j < 4; ++j) {
                    const int l = 4 * h + j;
                    std::memcpy(u[i].lo + 4 * l, b.qs + 4 * kLoGroups[j], 4);
                    std::memcpy(u[i].hi + 4 * l, b.qs + 4 * kHiGroups[j], 4);
                    u[i].offset_lo[l] = -off * q8_group_sum(b.qs + 4 * kLoGroups[j]);
                    u[i].offset_hi[l] = -off * q8_group_sum(b.qs + 4 * kHiGroups[j]);
                    u[i].d[l] = fp16_to_fp32(b.d);
                }
            }
        return;
    }
    const int64_t nb = K / 32;
    ActExtra* e = (ActExtra*)out;
    float* d = (float*)(e + nb);
    for (int64_t ib = 0; ib < nb; ++ib) {
        std::memcpy(e[ib].qs, y[ib].qs, 32);
        for (int l = 0; l < 8; ++l) e[ib].offset[l] = -off * q8_group_sum(y[ib].qs + 4 * l);
        d[ib] = fp16_to_fp32(y[ib].d);
    }
}

// A converted column of the dot kernels: its vec_dot blocks, then their extras where the
// weights have a dot1x or a dot2x.
inline size_t dot_col_bytes(const Kernels& kr, Type w, int64_t K) {
    return act_col_bytes(w, K) + (kr.dot1x[(int)w] || kr.dot2x[(int)w] ? align64(act_extras_bytes(w, K)) : 0);
}

// Which dot kernels take the rows of a product of n_cols columns of K values (MUL_MAT's
// columns, or one expert's tokens in MUL_MAT_ID). Two-row kernels pay off once columns share
// the rows, or for one column when rows are short (the call and set-up per row then weigh); one
// long column mostly streams better alone (Kernels::dot2_one_column: the exceptions). For one
// column of converted activations the kernels with extras take it where the weights have them:
// two rows per call where no two-row dot does, one row where a row is left (no two-row kernel,
// or an odd last row). Where the pairs run on converted columns and the weights have a dot2x,
// it takes the pairs' place (the columns then carry extras). Every choice gives the one-row
// dot's bits, so it never shows in results.
struct DotChoice {
    Dot2Fn dot2 = nullptr;      // rows in pairs, up to 4 columns a call
    Dot2xFn dot2x = nullptr;    // the same over converted columns with their extras (in its place)
    Dot1x2Fn dot1x2 = nullptr;  // rows in pairs, the one column with its extras
    Dot1xFn dot1x = nullptr;    // a row alone, the one column with its extras
    bool pairs() const { return dot2 || dot1x2; }
    bool extras() const { return dot2x || dot1x2 || dot1x; }
    // One call: row arow, and the row pair_stride bytes on where pair_stride > 0, times nc
    // columns from bp, bs bytes apart (a converted column's extras blocks_bytes into it).
    // out[j] for the first row, out[4 + j] for the second.
    void run(const Kernels& kr, Type w, int64_t K, const char* arow, size_t pair_stride, const char* bp, size_t bs,
             size_t blocks_bytes, int nc, float* out, const float* aux) const {
        if (pair_stride && dot1x2) {  // (one column)
            dot1x2(K, arow, pair_stride, bp, bp + blocks_bytes, out, aux);
            out[4] = out[1];
        } else if (pair_stride && dot2x) {
            dot2x(K, arow, pair_stride, bp + blocks_bytes, bs, nc, out);
        } else if (pair_stride) {
            dot2(K, arow, pair_stride, bp, bs, nc, out, aux);
        } else if (dot1x && nc == 1) {
            dot1x(K, arow, bp, bp + blocks_bytes, out, aux);
        } else {
            kr.dot[(int)w](K, arow, bp, bs, nc, out, aux);
        }
    }
};
constexpr int64_t kDot2ShortRow = 1024;  // rows at most this long take dot2 even for one column
inline DotChoice choose_dots(const Kernels& kr, Type w, int64_t K, int64_t M, int64_t n_cols, bool converted) {
    DotChoice c;
    // one column of long rows also pairs where the pairs read extras (dot2x) and no dot1x2
    // does: q8_0 at the avx512 level, K 1536 x M 576 from L2 and 2048 x 2048 from L3 1.3-1.4x
    // the one-row dot's rate; streamed from memory (4096 x 14336) the same within noise
    const bool extras_pairs = converted && kr.dot2x[(int)w] && !kr.dot1x2[(int)w];
    if (n_cols >= 2 || K <= kDot2ShortRow || kr.dot2_one_column[(int)w] || extras_pairs) c.dot2 = kr.dot2[(int)w];
    if (converted && c.dot2) c.dot2x = kr.dot2x[(int)w];
    if (converted && n_cols == 1 && !c.dot2) c.dot1x2 = kr.dot1x2[(int)w];
    if (converted && (!c.pairs() || (M & 1))) c.dot1x = kr.dot1x[(int)w];
    return c;
}

// Halved UE4M3 scales of all 256 codes (from core/quant_nvfp4.cpp); built per node, per thread.
inline void nvfp4_scale_table(float* t) {
    for (int u = 0; u < 256; ++u) t[u] = nvfp4_ue4m3_to_scale((uint8_t)u);
}

}  // namespace pyggml::cpu::mm
