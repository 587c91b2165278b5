// Python bindings of the 'glu' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_glu(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
