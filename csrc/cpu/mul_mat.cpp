// CPU kernels of the 'mul_mat' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_MUL_MAT(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[mul_mat] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_MUL_MAT(const Tensor*, int) { return 0; }

void cpu_forward_MUL_MAT_ID(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[mul_mat_id] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_MUL_MAT_ID(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
