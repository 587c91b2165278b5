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
    def_op(m, "add1", &add1, py::arg("ctx"), py::arg("a"), py::arg("b"),
           "a + b for a 1-element b (f32 or a's type); the result has a's type and shape.");
    def_op(m, "add1_inplace", &add1_inplace, py::arg("ctx"), py::arg("a"), py::arg("b"));
    def_op(m, "add_id", &add_id, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("ids"),
           "result[i0, i1, i2] = a[i0, i1, i2] + b[i0, ids[i1, i2]] (a, b f32; ids i32).");
}

}  // namespace pyggml::python
