// CPU kernels of the 'dsv4_hc' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_DSV4_HC_COMB(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[dsv4_hc_comb] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_DSV4_HC_COMB(const Tensor*, int) { return 0; }

void cpu_forward_DSV4_HC_PRE(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[dsv4_hc_pre] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_DSV4_HC_PRE(const Tensor*, int) { return 0; }

void cpu_forward_DSV4_HC_POST(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[dsv4_hc_post] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_DSV4_HC_POST(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
