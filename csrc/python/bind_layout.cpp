// Python bindings of the layout ops (views, reshape, permute, transpose, repeat, concat, pad).
#include "bind_common.h"

namespace pyggml::python {

void bind_layout(py::module_& m) {
    def_op(m, "view_1d", &view_1d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("offset"));
    def_op(m, "view_2d", &view_2d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"),
           py::arg("nb1"), py::arg("offset"));
    def_op(m, "view_3d", &view_3d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"),
           py::arg("ne2"), py::arg("nb1"), py::arg("nb2"), py::arg("offset"));
    def_op(m, "view_4d", &view_4d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"),
           py::arg("ne2"), py::arg("ne3"), py::arg("nb1"), py::arg("nb2"), py::arg("nb3"),
           py::arg("offset"), "View with explicit byte strides; nb0 is the element size.");
    def_op(m, "view_tensor", [](Context* c, Tensor* a) { return c->view_tensor(a); },
           py::arg("ctx"), py::arg("a"));
    def_op(m, "reshape", &reshape, py::arg("ctx"), py::arg("a"), py::arg("b"));
    def_op(m, "reshape_1d", &reshape_1d, py::arg("ctx"), py::arg("a"), py::arg("ne0"));
    def_op(m, "reshape_2d", &reshape_2d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"));
    def_op(m, "reshape_3d", &reshape_3d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"),
           py::arg("ne2"));
    def_op(m, "reshape_4d", &reshape_4d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"),
           py::arg("ne2"), py::arg("ne3"));
    def_op(m, "permute", &permute, py::arg("ctx"), py::arg("a"), py::arg("axis0"), py::arg("axis1"),
           py::arg("axis2"), py::arg("axis3"),
           "Source dim k moves to result position axis_k (the inverse of numpy.transpose's axes).");
    def_op(m, "transpose", &transpose, py::arg("ctx"), py::arg("a"));
}

}  // namespace pyggml::python
