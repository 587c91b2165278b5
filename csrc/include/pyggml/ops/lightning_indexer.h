// Op constructors of the 'lightning_indexer' family (shape inference and validation only).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

}  // namespace pyggml
