// CPU kernels of the 'rope' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_ROPE(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[rope] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_ROPE(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
