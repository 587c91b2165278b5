// Op constructors of the 'lightning_indexer' family: validation and shape inference only.
#include "pyggml/ops/lightning_indexer.h"

#include "pyggml/error.h"

namespace pyggml {

}  // namespace pyggml
