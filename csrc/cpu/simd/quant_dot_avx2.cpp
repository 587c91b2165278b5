// The block-type dot kernels of quant_dot256.h built for AVX2 (integer dots by maddubs + madd).
#include "cpu/simd/quant_dot256.h"

namespace pyggml::cpu::mm {
void add_quant_dots_avx2(Kernels& k) {
    add_quant_gemm_avx2(k);  // the GEMM tiles of the same types, bit-identical to these dots
    fill_quant_dots(k);
}
}  // namespace pyggml::cpu::mm
