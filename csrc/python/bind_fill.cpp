// Python bindings of the 'fill' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_fill(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
