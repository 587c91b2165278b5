// Op constructors of the 'norm' family: validation and shape inference only.
#include "pyggml/ops/norm.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
