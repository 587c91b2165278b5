// Op constructors of the 'misc' family: validation and shape inference only.
#include "pyggml/ops/misc.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
