// CPU kernels of the 'norm' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_NORM(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[norm] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_NORM(const Tensor*, int) { return 0; }

void cpu_forward_RMS_NORM(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[rms_norm] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_RMS_NORM(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
