// Python bindings of the 'reduce' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_reduce(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
