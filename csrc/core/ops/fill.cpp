// Op constructors of the 'fill' family: validation and shape inference only.
#include "pyggml/ops/fill.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
