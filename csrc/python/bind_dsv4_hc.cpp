// Python bindings of the 'dsv4_hc' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_dsv4_hc(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
