// The scalar GLU table: the plain loops of cpu/glu_simd.h.
#include "cpu/glu_simd.h"

namespace pyggml::cpu::glu {

const GluOps& glu_scalar() {
    static const GluOps k{reglu_scalar, swiglu_scalar, geglu_scalar, geglu_erf_scalar, geglu_quick_scalar, swiglu_oai_scalar, swiglu_clamp_scalar,
                          silu_scalar};
    return k;
}

}  // namespace pyggml::cpu::glu
