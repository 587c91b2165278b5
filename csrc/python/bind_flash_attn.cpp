// Python bindings of the 'flash_attn' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_flash_attn(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
