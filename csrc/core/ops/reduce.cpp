// Op constructors of the 'reduce' family: validation and shape inference only.
#include "pyggml/ops/reduce.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
