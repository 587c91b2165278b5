// CPU kernel of FILL: contiguous destination split across threads.
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

void cpu_forward_FILL(const ComputeParams& p, Tensor* dst) {
    const int64_t n = dst->nelements();
    int64_t i0, i1;
    split_range(n, p.ith, p.nth, i0, i1);
    if (dst->type == Type::F32) {
        uint32_t bits;
        std::memcpy(&bits, &dst->op_params[0], 4);  // keep NaN payloads bit exact
        uint32_t* d = (uint32_t*)dst->data;
        for (int64_t i = i0; i < i1; ++i) d[i] = bits;
    } else {
        const uint16_t h = fp32_to_fp16(dst->param_f32(0));
        uint16_t* d = (uint16_t*)dst->data;
        for (int64_t i = i0; i < i1; ++i) d[i] = h;
    }
}
size_t cpu_work_size_FILL(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
