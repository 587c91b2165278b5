// The block-type dot kernels of quant_dot256.h built for AVX-512 with VNNI (integer dots by
// vpdpbusd / vpdpwssd on 256-bit vectors): the same integers, so the AVX2 build's bits.
#define PYGGML_IDOT_VNNI 1
#include "cpu/simd/quant_dot256.h"

namespace pyggml::cpu::mm {
void add_quant_dots_avx512(Kernels& k) {
    add_quant_gemm_avx512(k);  // the GEMM tiles of the same types, bit-identical to these dots
    fill_quant_dots(k);
}
}  // namespace pyggml::cpu::mm
