// CPU kernels of the 'softmax' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_SOFT_MAX(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[soft_max] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_SOFT_MAX(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
