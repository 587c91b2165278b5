// Python bindings of the 'rows' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_rows(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
