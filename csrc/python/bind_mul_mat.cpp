// Python bindings of the 'mul_mat' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_mul_mat(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
