// The repacked tile kernels (quant_repack256.h, quant_repack_k256.h) built for AVX2 (integer
// dots by maddubs + madd); the K-quant tiles come from quant_repack_k_avx2.cpp.
#include "cpu/simd/quant_repack256.h"

namespace pyggml::cpu::rp {
const Kernels& kernels_avx2() {
    static const Kernels k = [] {
        Kernels s{};
        fill_repack(s);
        add_k_kernels_avx2(s);
        return s;
    }();
    return k;
}
}  // namespace pyggml::cpu::rp
