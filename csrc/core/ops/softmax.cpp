// Op constructors of the 'softmax' family: validation and shape inference only.
#include "pyggml/ops/softmax.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
