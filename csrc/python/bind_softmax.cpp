// Python bindings of the 'softmax' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_softmax(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
