// CPU kernels of the 'flash_attn' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_FLASH_ATTN_EXT(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[flash_attn_ext] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_FLASH_ATTN_EXT(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
