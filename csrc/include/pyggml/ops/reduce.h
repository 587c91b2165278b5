// Op constructors of the 'reduce' family (shape inference and validation only).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

}  // namespace pyggml
