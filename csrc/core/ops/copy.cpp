// Op constructors of the 'copy' family: validation and shape inference only.
#include "pyggml/ops/copy.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
