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
static_assert(sizeof(Q4_0x8) == 144 && sizeof(Q4_1x8) == 160 && sizeof(Q8_0x8) == 272, "records");

// One activation block (32 values) as the kernels read it: the q8_0 / q8_1 block of the plain
// path with its scales widened, plus 8 * sum(qs) for q4_0's level offset.
struct alignas(16) Act {
    float d;       // the block's scale
    float s;       // q8_1's s = f16(d * sum(qs)) widened (q4_1 weights), else 0
    int32_t bias;  // 8 * sum(qs) (q4_0 weights), else 0
    int32_t unused;
    int8_t qs[32];
};
static_assert(sizeof(Act) == 48, "activation block");

// out[8 * c + r] = dot(row r of the group, column c) for c < nc (1..4); `group` holds the
// group's nb records, cols[c] the column's nb activation blocks.
using TileFn = void (*)(int64_t nb, const void* group, const Act* const* cols, int nc, float* out);

struct Kernels {
    TileFn tile[kTypeIdLimit];  // by weight type; null: not repackable
};
const Kernels& kernels_scalar();
const Kernels& kernels_avx2();  // = kernels_scalar() where AVX2 is not compiled in

inline size_t record_bytes(Type t) {
    switch (t) {
        case Type::Q4_0: return sizeof(Q4_0x8);
        case Type::Q4_1: return sizeof(Q4_1x8);
        case Type::Q8_0: return sizeof(Q8_0x8);
        default: return 0;
    }
}

}  // namespace pyggml::cpu::rp
