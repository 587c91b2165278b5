// Op constructors of the 'rope' family (shape inference and validation only).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

}  // namespace pyggml
