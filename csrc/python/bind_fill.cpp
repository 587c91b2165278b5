// Python bindings of fill.
#include "bind_common.h"

namespace pyggml::python {

void bind_fill(py::module_& m) {
    def_op(m, "fill", &fill, py::arg("ctx"), py::arg("a"), py::arg("c"),
           "A tensor of a's type and shape with every element c (a: f32/f16, contiguous).");
    def_op(m, "fill_inplace", &fill_inplace, py::arg("ctx"), py::arg("a"), py::arg("c"));
}

}  // namespace pyggml::python
