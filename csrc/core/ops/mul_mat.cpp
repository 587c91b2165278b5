// Op constructors of the 'mul_mat' family: validation and shape inference only.
#include "pyggml/ops/mul_mat.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
