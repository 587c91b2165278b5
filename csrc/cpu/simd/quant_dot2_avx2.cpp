// The two-row dot kernels of quant_dot2_256.h built for AVX2 (integer dots by maddubs + madd).
#include "cpu/simd/quant_dot2_256.h"

namespace pyggml::cpu::mm {
void add_quant_dot2_avx2(Kernels& k) { fill_quant_dot2(k); }
}  // namespace pyggml::cpu::mm
