// CPU kernels of the 'rows' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_SET_ROWS(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[set_rows] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_SET_ROWS(const Tensor*, int) { return 0; }

void cpu_forward_GET_ROWS(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[get_rows] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_GET_ROWS(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
