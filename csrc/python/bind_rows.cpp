// Python bindings of get_rows / set_rows.
#include "bind_common.h"

namespace pyggml::python {

void bind_rows(py::module_& m) {
    def_op(m, "get_rows", &get_rows, py::arg("ctx"), py::arg("a"), py::arg("b"),
           "out[:, r, j, k] = a[:, b[r, j, k], j, k] as f32 (i32 when a is i32). b: i32 indices. "
           "Out-of-range indices raise ValueError when computed.");
    def_op(m, "set_rows", &set_rows, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("c"),
           "a[:, c[i, j % c.ne1, k % c.ne2], j, k] = b[:, i, j, k]; returns a view of a. b f32/f16, "
           "c i32/i64. Out-of-range indices raise ValueError when computed.");
}

}  // namespace pyggml::python
