// Op constructors of the 'rows' family: validation and shape inference only.
#include "pyggml/ops/rows.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
