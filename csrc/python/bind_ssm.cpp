// Python bindings of the 'ssm' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_ssm(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
