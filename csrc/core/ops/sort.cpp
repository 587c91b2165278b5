// Op constructors of the 'sort' family: validation and shape inference only.
#include "pyggml/ops/sort.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
