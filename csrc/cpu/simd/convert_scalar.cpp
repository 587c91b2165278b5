// The scalar row-conversion table: the plain loops of cpu/convert.h.
#include "cpu/convert.h"

namespace pyggml::cpu::conv {

const ConvertOps& convert_scalar() {
    static const ConvertOps k{f32_to_f16_plain, f32_to_bf16_plain, f16_to_f32_plain};
    return k;
}

}  // namespace pyggml::cpu::conv
