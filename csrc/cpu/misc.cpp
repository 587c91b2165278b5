// CPU kernels of the 'misc' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_SCALE(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[scale] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_SCALE(const Tensor*, int) { return 0; }

void cpu_forward_CLAMP(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[clamp] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_CLAMP(const Tensor*, int) { return 0; }

void cpu_forward_ARANGE(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[arange] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_ARANGE(const Tensor*, int) { return 0; }

void cpu_forward_TRI(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[tri] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_TRI(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
