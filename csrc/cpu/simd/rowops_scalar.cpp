// The scalar row-primitive table: the plain loops of cpu/rowops_simd.h.
#include "cpu/rowops_simd.h"

namespace pyggml::cpu::rowops {

const RowOps& rowops_scalar() {
    static const RowOps k{plain::sum, plain::sumsq, plain::center_sumsq, plain::scale, plain::scale_mask_max, plain::exp_sum, plain::rot_neox, plain::rot_normal, plain::sincos};
    return k;
}

}  // namespace pyggml::cpu::rowops
