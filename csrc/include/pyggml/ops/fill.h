// Op constructors of the 'fill' family (shape inference and validation only).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

}  // namespace pyggml
