// CPU kernels of the 'layout' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_NONE(const ComputeParams&, Tensor*) {}  // metadata only
size_t cpu_work_size_NONE(const Tensor*, int) { return 0; }

void cpu_forward_REPEAT(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[repeat] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_REPEAT(const Tensor*, int) { return 0; }

void cpu_forward_CONCAT(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[concat] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_CONCAT(const Tensor*, int) { return 0; }

void cpu_forward_PAD(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[pad] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_PAD(const Tensor*, int) { return 0; }

void cpu_forward_RESHAPE(const ComputeParams&, Tensor*) {}  // metadata only
size_t cpu_work_size_RESHAPE(const Tensor*, int) { return 0; }

void cpu_forward_VIEW(const ComputeParams&, Tensor*) {}  // metadata only
size_t cpu_work_size_VIEW(const Tensor*, int) { return 0; }

void cpu_forward_PERMUTE(const ComputeParams&, Tensor*) {}  // metadata only
size_t cpu_work_size_PERMUTE(const Tensor*, int) { return 0; }

void cpu_forward_TRANSPOSE(const ComputeParams&, Tensor*) {}  // metadata only
size_t cpu_work_size_TRANSPOSE(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
