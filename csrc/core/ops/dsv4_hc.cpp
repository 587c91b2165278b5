// Op constructors of the 'dsv4_hc' family: validation and shape inference only.
#include "pyggml/ops/dsv4_hc.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
