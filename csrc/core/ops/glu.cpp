// Op constructors of the 'glu' family: validation and shape inference only.
#include "pyggml/ops/glu.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
