// Python bindings of the 'set' family (acc, set, set_1d, set_2d and their _inplace forms).
#include "bind_common.h"

namespace pyggml::python {

void bind_set(py::module_& m) {
    def_op(m, "acc", &acc, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("nb1"), py::arg("nb2"),
           py::arg("nb3"), py::arg("offset"),
           "Copy of a with b added into the view of a of b's shape, byte strides nb1..nb3 and byte offset "
           "(f32).");
    def_op(m, "acc_inplace", &acc_inplace, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("nb1"),
           py::arg("nb2"), py::arg("nb3"), py::arg("offset"));
    def_op(m, "set", &set, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("nb1"), py::arg("nb2"),
           py::arg("nb3"), py::arg("offset"),
           "Copy of a with b written into the view of a of b's shape, byte strides nb1..nb3 and byte "
           "offset (f32 or i32).");
    def_op(m, "set_inplace", &set_inplace, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("nb1"),
           py::arg("nb2"), py::arg("nb3"), py::arg("offset"));
    def_op(m, "set_1d", &set_1d, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("offset"),
           "set() with a's own strides: b written at byte offset.");
    def_op(m, "set_1d_inplace", &set_1d_inplace, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("offset"));
    def_op(m, "set_2d", &set_2d, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("nb1"), py::arg("offset"),
           "set() with row stride nb1 and a's own nb2, nb3.");
    def_op(m, "set_2d_inplace", &set_2d_inplace, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("nb1"),
           py::arg("offset"));
}

}  // namespace pyggml::python
