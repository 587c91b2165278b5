// Op constructors of the 'flash_attn' family (shape inference and validation only).
#pragma once
#include "pyggml/context.h"

namespace pyggml {

}  // namespace pyggml
