// The CUDA kernel entry points: void cuda_forward_<OP>(const Launch&, Tensor* dst), one per op
// the CUDA backend runs. Only ops listed in op_list.cu (with what each handles) are run;
// any other op of the op table is reported unsupported before a graph starts, so an op
// without a CUDA kernel needs no code here.
#pragma once
#include "common.cuh"

namespace pyggml::cuda {

#define PYGGML_CUDA_FORWARD(name) void cuda_forward_##name(const Launch& l, Tensor* dst);
PYGGML_CUDA_FORWARD(ADD) PYGGML_CUDA_FORWARD(SUB) PYGGML_CUDA_FORWARD(MUL) PYGGML_CUDA_FORWARD(DIV)
PYGGML_CUDA_FORWARD(SQR) PYGGML_CUDA_FORWARD(SQRT) PYGGML_CUDA_FORWARD(UNARY) PYGGML_CUDA_FORWARD(GLU)
PYGGML_CUDA_FORWARD(SCALE) PYGGML_CUDA_FORWARD(CLAMP) PYGGML_CUDA_FORWARD(ARANGE) PYGGML_CUDA_FORWARD(TRI)
PYGGML_CUDA_FORWARD(FILL) PYGGML_CUDA_FORWARD(NORM) PYGGML_CUDA_FORWARD(RMS_NORM)
PYGGML_CUDA_FORWARD(SOFT_MAX) PYGGML_CUDA_FORWARD(ROPE)
PYGGML_CUDA_FORWARD(GET_ROWS) PYGGML_CUDA_FORWARD(SET_ROWS)
PYGGML_CUDA_FORWARD(CPY) PYGGML_CUDA_FORWARD(DUP) PYGGML_CUDA_FORWARD(CONT)
PYGGML_CUDA_FORWARD(MUL_MAT) PYGGML_CUDA_FORWARD(MUL_MAT_ID) PYGGML_CUDA_FORWARD(FLASH_ATTN_EXT)
#undef PYGGML_CUDA_FORWARD

using Forward = void (*)(const Launch&, Tensor*);
// The kernel of `op` and a check of what it handles ("" when it handles `node`); nullptr when
// the CUDA backend has no kernel for the op. op_list.cu.
struct OpEntry {
    Forward forward;
    std::string (*check)(const Tensor* node);
};
const OpEntry* find_op(Op op);
// Why the CUDA kernels cannot run `node` ("" when they can).
std::string unsupported_reason(const Tensor* node);

}  // namespace pyggml::cuda
