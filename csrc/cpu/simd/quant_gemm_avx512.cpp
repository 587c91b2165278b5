// The quantized GEMM tiles of quant_gemm256.h built for AVX-512 with VNNI (vpdpbusd /
// vpdpwssd): the same integers, so the AVX2 build's bits.
#define PYGGML_IDOT_VNNI 1
#include "cpu/simd/quant_gemm256.h"

namespace pyggml::cpu::mm {
void add_quant_gemm_avx512(Kernels& k) { fill_quant_gemm(k); }
}  // namespace pyggml::cpu::mm
