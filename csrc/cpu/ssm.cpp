// CPU kernels of the 'ssm' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_SSM_CONV(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[ssm_conv] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_SSM_CONV(const Tensor*, int) { return 0; }

void cpu_forward_SSM_SCAN(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[ssm_scan] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_SSM_SCAN(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
