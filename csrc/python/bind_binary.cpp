// Python bindings of the binary element-wise ops.
#include "bind_common.h"

namespace pyggml::python {

void bind_binary(py::module_& m) {
    const char* doc = "Element-wise op; b tiles (repeats) into a; result has a's type and shape.";
    def_op(m, "add", &add, py::arg("ctx"), py::arg("a"), py::arg("b"), doc);
    def_op(m, "sub", &sub, py::arg("ctx"), py::arg("a"), py::arg("b"), doc);
    def_op(m, "mul", &mul, py::arg("ctx"), py::arg("a"), py::arg("b"), doc);
    def_op(m, "div", &div, py::arg("ctx"), py::arg("a"), py::arg("b"), doc);
    def_op(m, "add_inplace", &add_inplace, py::arg("ctx"), py::arg("a"), py::arg("b"));
    def_op(m, "sub_inplace", &sub_inplace, py::arg("ctx"), py::arg("a"), py::arg("b"));
    def_op(m, "mul_inplace", &mul_inplace, py::arg("ctx"), py::arg("a"), py::arg("b"));
    def_op(m, "div_inplace", &div_inplace, py::arg("ctx"), py::arg("a"), py::arg("b"));
}

}  // namespace pyggml::python
