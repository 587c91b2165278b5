// The quantized GEMM tiles of quant_gemm256.h built for AVX2 (integer dots by maddubs + madd).
#include "cpu/simd/quant_gemm256.h"

namespace pyggml::cpu::mm {
void add_quant_gemm_avx2(Kernels& k) { fill_quant_gemm(k); }
}  // namespace pyggml::cpu::mm
