// The repacked tile kernels (quant_repack256.h, quant_repack_k256.h) built for AVX-512 with
// VNNI (vpdpbusd, 32-bit sums): the same integers, so the AVX2 build's bits.
#define PYGGML_IDOT_VNNI 1
#include "cpu/simd/quant_repack256.h"

namespace pyggml::cpu::rp {
const Kernels& kernels_avx512() {
    static const Kernels k = [] {
        Kernels s{};
        fill_repack(s);
        add_k_kernels_avx512(s);
        return s;
    }();
    return k;
}
}  // namespace pyggml::cpu::rp
