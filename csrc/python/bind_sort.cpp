// Python bindings of the 'sort' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_sort(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
