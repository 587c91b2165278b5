// CPU kernels of the 'fill' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_FILL(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[fill] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_FILL(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
