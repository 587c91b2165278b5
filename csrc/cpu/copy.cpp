// CPU kernels of the 'copy' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_DUP(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[dup] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_DUP(const Tensor*, int) { return 0; }

void cpu_forward_CPY(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[cpy] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_CPY(const Tensor*, int) { return 0; }

void cpu_forward_CONT(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[cont] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_CONT(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
