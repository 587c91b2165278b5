// CPU kernels of the 'lightning_indexer' family.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_LIGHTNING_INDEXER(const ComputeParams&, Tensor* dst) {
    throw UnsupportedError(std::string("[lightning_indexer] not implemented on the CPU backend yet: ") + describe(dst));
}
size_t cpu_work_size_LIGHTNING_INDEXER(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
