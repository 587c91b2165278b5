// Layouts and kernels of the repacked MUL_MAT path (quant_repack.h): weight records of 8
// interleaved rows, activation blocks, and the tile kernels (simd/quant_repack_*.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "pyggml/types.h"

namespace pyggml::cpu::rp {

constexpr int kRows = 8;  // rows per group

// Value k (0..31) of row r sits in "slot" k / 4, byte 4 * r + k % 4 of it: a 32-byte slot
// holds 4 consecutive values of each of the 8 rows, so one dot against 4 broadcast activation
// bytes gives every row's partial sum in its own 32-bit lane. q4 records pack slots 2i (low
// nibbles) and 2i + 1 (high nibbles) into 32 bytes.
struct Q4_0x8 { uint16_t d[kRows]; uint8_t qs[128]; };                 // value = (level - 8) * d
struct Q4_1x8 { uint16_t d[kRows]; uint16_t m[kRows]; uint8_t qs[128]; };  // value = level * d + m
struct Q8_0x8 { uint16_t d[kRows]; int8_t qs[256]; };                  // value = q * d
// q5_0: the low nibbles as in Q4_0x8; bit s of qh[b] is the fifth bit of byte b of slot s.
struct Q5_0x8 { uint16_t d[kRows]; uint8_t qh[32]; uint8_t qs[128]; };  // value = (level - 16) * d
static_assert(sizeof(Q4_0x8) == 144 && sizeof(Q4_1x8) == 160 && sizeof(Q8_0x8) == 272, "records");
static_assert(sizeof(Q5_0x8) == 176, "records");

// K-quant records: one 256-value super-block of 8 rows, as 8 sub-blocks of 32 values, each laid
// out like Q4_0x8's qs (128 bytes). Sub-block scales are unpacked to bytes, [sub-block][row].
// q4_K / q5_K: value = d * sc * level - dmin * m; mins are stored [sub-block pair][row][2].
struct Q4_Kx8 {
    uint16_t d[kRows], dmin[kRows];
    uint8_t sc[8 * kRows];
    uint8_t m[8 * kRows];
    uint8_t qs[8 * 128];
};
// q5_K: qh[32 * j + b] bit s is the fifth bit of byte b of slot s of sub-block j.
struct Q5_Kx8 {
    uint16_t d[kRows], dmin[kRows];
    uint8_t sc[8 * kRows];
    uint8_t m[8 * kRows];
    uint8_t qh[8 * 32];
    uint8_t qs[8 * 128];
};
// q6_K: value = d * sc * (level - 32), one signed scale per 16 values ([group][row]); bits
// 2t, 2t + 1 of qh[64 * j + 32 * (s / 4) + b] are the top two bits of byte b of slot s of
// sub-block j, t = s % 4.
struct Q6_Kx8 {
    uint16_t d[kRows];
    int8_t sc[16 * kRows];
    uint8_t qh[8 * 64];
    uint8_t qs[8 * 128];
};
static_assert(sizeof(Q4_Kx8) == 1184 && sizeof(Q5_Kx8) == 1440 && sizeof(Q6_Kx8) == 1680, "records");

// One activation block (32 values) as the kernels read it: the q8_0 / q8_1 block of the plain
// path with its scales widened, plus 8 * sum(qs) for q4_0's level offset.
struct alignas(16) Act {
    float d;       // the block's scale
    float s;       // q8_1's s = f16(d * sum(qs)) widened (q4_1 weights), else 0
    int32_t bias;  // the weights' level offset times sum(qs): 8 (q4_0), 16 (q5_0), 128 (q8_0, VNNI), else 0
    int32_t unused;
    int8_t qs[32];
};
static_assert(sizeof(Act) == 48, "activation block");

// One q8_K activation block (256 values) for the K-quant records: its sums of 16 and of 32
// values (the mins' and q6_K's offset terms).
struct alignas(16) ActK {
    float d;
    int32_t unused[3];
    int16_t bs16[16];
    int16_t bs32[8];
    int16_t unused2[8];
    int8_t qs[256];
};
static_assert(sizeof(ActK) == 336, "activation block");

// out[8 * c + r] = dot(row r of the group, column c) for c < nc (1..tile_cols); `group` holds the
// group's nb records, cols[c] the column's nb activation blocks (Act, or ActK for K-quants).
using TileFn = void (*)(int64_t nb, const void* group, const void* const* cols, int nc, float* out);

constexpr int kTileCols = 4;     // columns per tile call, unless tile_cols says more
constexpr int kMaxTileCols = 8;
struct Kernels {
    TileFn tile[kTypeIdLimit];  // by weight type; null: not repackable
    // the columns one tile call takes at most (0: kTileCols): the VNNI build's K-quant tiles
    // take 8, decoding each sub-block once for twice the columns (32 vector registers hold them)
    int tile_cols[kTypeIdLimit];
};
const Kernels& kernels_scalar();
const Kernels& kernels_avx2();    // empty where x86 SIMD is not compiled in
const Kernels& kernels_avx512();  // the same bodies with VNNI integer dots (same bits)
void add_k_kernels_avx2(Kernels& k);    // the K-quant tiles (simd/quant_repack_k_*.cpp)
void add_k_kernels_avx512(Kernels& k);

inline size_t record_bytes(Type t) {
    switch (t) {
        case Type::Q4_0: return sizeof(Q4_0x8);
        case Type::Q4_1: return sizeof(Q4_1x8);
        case Type::Q8_0: return sizeof(Q8_0x8);
        case Type::Q5_0: return sizeof(Q5_0x8);
        case Type::Q4_K: return sizeof(Q4_Kx8);
        case Type::Q5_K: return sizeof(Q5_Kx8);
        case Type::Q6_K: return sizeof(Q6_Kx8);
        default: return 0;
    }
}
inline bool is_k_record(Type t) { return t == Type::Q4_K || t == Type::Q5_K || t == Type::Q6_K; }
inline int record_values(Type t) { return is_k_record(t) ? 256 : 32; }
inline size_t act_bytes(Type t) { return is_k_record(t) ? sizeof(ActK) : sizeof(Act); }

}  // namespace pyggml::cpu::rp
