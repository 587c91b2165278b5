// Python bindings of the 'misc' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_misc(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
