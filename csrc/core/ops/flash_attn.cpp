// Op constructors of the 'flash_attn' family: validation and shape inference only.
#include "pyggml/ops/flash_attn.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
