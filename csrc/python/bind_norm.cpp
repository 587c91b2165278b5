// Python bindings of the 'norm' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_norm(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
