// Op constructors of the 'flash_attn' family (shape inference and validation only).
// FLASH_ATTN_EXT (math, shapes, op_params) and 3.4 (the n_kv_max sparse hint).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

// op_params slots of FLASH_ATTN_EXT.
enum FlashAttnParam : int {
    kFaScale = 0,         // f32
    kFaMaxBias = 1,       // f32 (ALiBi; > 0 requires a mask)
    kFaLogitSoftcap = 2,  // f32 (0 = off)
    kFaPrec = 3,          // i32: 0 (DEFAULT) or 10 (F32). CPU: F32 accumulates everything in
                          // F32; DEFAULT lets F16 K/V with < 64 query tokens run as ggml's CPU
                          // does (Q and the V accumulator in F16), bit for bit
    kFaNKvMax = 4,        // i32: sparse hint, 0 = off
};
constexpr int32_t kPrecDefault = 0;
constexpr int32_t kPrecF32 = 10;

// q [D_k, N, H, S] f32; k [D_k, KV, H_kv, S]; v [D_v, KV, H_v, S] (f32/f16/bf16/q8_0/q4_0/
// nvfp4, rows contiguous); mask [>=KV, >=N, H_m, S_m] f16 contiguous or null.
// Result [D_v, H, N, S] f32 (the permuted layout of).
Tensor* flash_attn_ext(Context* ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale,
                       float max_bias, float logit_softcap);

// Node modifiers (they change an existing FLASH_ATTN_EXT node in place).
// sinks: f32 [H] (src[4]); null clears it.
void flash_attn_ext_add_sinks(Tensor* node, Tensor* sinks);
// prec: 0 (DEFAULT) or 10 (F32); anything else raises.
void flash_attn_ext_set_prec(Tensor* node, int32_t prec);
int32_t flash_attn_ext_get_prec(const Tensor* node);
// n_kv_max >= 0 (slot 4): the caller promises no mask row has more finite entries.
void flash_attn_ext_set_n_kv_max(Tensor* node, int64_t n_kv_max);

}  // namespace pyggml
