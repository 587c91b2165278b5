// The two-row dot kernels of quant_dot2_256.h built for AVX-512 with VNNI (vpdpbusd): the
// same integers, so the AVX2 build's bits.
#define PYGGML_IDOT_VNNI 1
#include "cpu/simd/quant_dot2_256.h"

namespace pyggml::cpu::mm {
void add_quant_dot2_avx512(Kernels& k) { fill_quant_dot2(k); }
}  // namespace pyggml::cpu::mm
