// Python bindings of the 'rope' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_rope(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
