// CPU kernels of the 'glu' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_GLU(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[glu] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_GLU(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
