// The repacked K-quant tile kernels of quant_repack_k256.h built for AVX2 (maddubs + madd).
#include "cpu/simd/quant_repack_k256.h"

namespace pyggml::cpu::rp {
void add_k_kernels_avx2(Kernels& k) { fill_repack_k(k); }
}  // namespace pyggml::cpu::rp
