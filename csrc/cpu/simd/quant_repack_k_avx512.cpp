// The repacked K-quant tile kernels of quant_repack_k256.h built for AVX-512 with VNNI
// (vpdpbusd, one multiply by the sub-block scale): the same integers, so the AVX2 build's bits.
#define PYGGML_IDOT_VNNI 1
#include "cpu/simd/quant_repack_k256.h"

namespace pyggml::cpu::rp {
void add_k_kernels_avx512(Kernels& k) { fill_repack_k(k); }
}  // namespace pyggml::cpu::rp
