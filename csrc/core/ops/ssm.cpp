// Op constructors of the 'ssm' family: validation and shape inference only.
#include "pyggml/ops/ssm.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
