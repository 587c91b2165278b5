// CPU kernels of the 'sort' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_ARGSORT(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[argsort] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_ARGSORT(const Tensor*, int) { return 0; }

void cpu_forward_TOP_K(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[top_k] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_TOP_K(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
