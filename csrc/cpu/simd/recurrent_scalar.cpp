// The scalar recurrent-state table: the plain loops of cpu/recurrent_simd.h.
#include "cpu/recurrent_simd.h"

namespace pyggml::cpu::recurrent {

const RecurrentOps& recurrent_scalar() {
    static const RecurrentOps k{decay_dot_scalar, update_dot_scalar, nullptr, nullptr, row_decay_update_scalar, axpy_scalar,
                                wkv6_out_scalar, dot_scalar, wkv7_row_scalar, nullptr, nullptr, ssm_row_scalar};
    return k;
}

}  // namespace pyggml::cpu::recurrent
