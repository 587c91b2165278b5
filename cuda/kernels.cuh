// The CUDA kernel interface, one entry per op of the op table (same families as csrc/cpu/):
//   void cuda_forward_<OP>(const Launch&, Tensor* dst);
// Ops a family does not implement throw UnsupportedError (listed in cuda/README.md).
#pragma once
#include "common.cuh"

namespace pyggml::cuda {

#define PYGGML_X(name, family, py) void cuda_forward_##name(const Launch& l, Tensor* dst);
PYGGML_OP_TABLE(PYGGML_X)
#undef PYGGML_X

}  // namespace pyggml::cuda
