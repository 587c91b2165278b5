// Python bindings of the 'copy' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_copy(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
