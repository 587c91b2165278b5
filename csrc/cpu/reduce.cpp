// CPU kernels of the 'reduce' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_SUM_ROWS(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[sum_rows] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_SUM_ROWS(const Tensor*, int) { return 0; }

void cpu_forward_MEAN(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[mean] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_MEAN(const Tensor*, int) { return 0; }

void cpu_forward_CUMSUM(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[cumsum] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_CUMSUM(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
