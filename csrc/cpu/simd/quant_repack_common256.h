// 256-bit pieces shared by the repacked tile kernels (quant_repack256.h for the 32-value
// blocks, quant_repack_k256.h for the K-quants). Include inside idot256.h's target region, in
// namespace pyggml::cpu::rp (internal linkage: each instruction set's build has its own copy).
#pragma once
#include <type_traits>

namespace {

// The 8 slots of one 32-value block of 8 rows: low nibbles of 128 bytes (slots 2i and 2i + 1
// share 32 bytes).
inline void nibbles(const uint8_t* qs, __m256i* u) {
    const __m256i low = _mm256_set1_epi8(0x0F);
    for (int i = 0; i < 4; ++i) {
        const __m256i raw = _mm256_loadu_si256((const __m256i*)(qs + 32 * i));
        u[2 * i] = _mm256_and_si256(raw, low);
        u[2 * i + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
    }
}

// Bit s of each byte of h to bit 4 of slot s (a 16-bit shift keeps it within its byte).
inline void add_bit4(const uint8_t* qh, __m256i* u) {
    const __m256i h = _mm256_loadu_si256((const __m256i*)qh), bit = _mm256_set1_epi8(0x10);
    u[0] = _mm256_or_si256(u[0], _mm256_and_si256(_mm256_slli_epi16(h, 4), bit));
    u[1] = _mm256_or_si256(u[1], _mm256_and_si256(_mm256_slli_epi16(h, 3), bit));
    u[2] = _mm256_or_si256(u[2], _mm256_and_si256(_mm256_slli_epi16(h, 2), bit));
    u[3] = _mm256_or_si256(u[3], _mm256_and_si256(_mm256_slli_epi16(h, 1), bit));
    u[4] = _mm256_or_si256(u[4], _mm256_and_si256(h, bit));
    u[5] = _mm256_or_si256(u[5], _mm256_and_si256(_mm256_srli_epi16(h, 1), bit));
    u[6] = _mm256_or_si256(u[6], _mm256_and_si256(_mm256_srli_epi16(h, 2), bit));
    u[7] = _mm256_or_si256(u[7], _mm256_and_si256(_mm256_srli_epi16(h, 3), bit));
}

// Calls run(std::integral_constant<int, NC>) for NC = nc in 1..kMax (4 or 8): the column
// count is a template argument so a tile keeps its accumulators in registers.
template <int kMax = 4, class Run>
inline void for_columns(int nc, Run&& run) {
    static_assert(kMax == 4 || kMax == 8, "4 or 8 columns");
    switch (nc) {
        case 1: run(std::integral_constant<int, 1>{}); break;
        case 2: run(std::integral_constant<int, 2>{}); break;
        case 3: run(std::integral_constant<int, 3>{}); break;
        case 4: run(std::integral_constant<int, 4>{}); break;
        default:
            if constexpr (kMax == 8) {
                switch (nc) {
                    case 5: run(std::integral_constant<int, 5>{}); break;
                    case 6: run(std::integral_constant<int, 6>{}); break;
                    case 7: run(std::integral_constant<int, 7>{}); break;
                    default: run(std::integral_constant<int, 8>{}); break;
                }
            } else {
                run(std::integral_constant<int, 4>{});
            }
    }
}

}  // namespace
