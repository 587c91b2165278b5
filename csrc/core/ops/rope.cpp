// Op constructors of the 'rope' family: validation and shape inference only.
#include "pyggml/ops/rope.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
