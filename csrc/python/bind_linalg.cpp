// Python bindings of the 'linalg' family (out_prod, solve_tri).
#include "bind_common.h"

namespace pyggml::python {

void bind_linalg(py::module_& m) {
    def_op(m, "out_prod", &out_prod, py::arg("ctx"), py::arg("a"), py::arg("b"),
           "a [m, k, ..], b f32 [n, k, ne2, ne3] -> F32 [m, n, ne2, ne3], result[i, j] = sum_k a[i, k]*b[j, k]; "
           "a broadcasts over b's dims 2, 3.");
    def_op(m, "solve_tri", &solve_tri, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("left"),
           py::arg("lower"), py::arg("uni"),
           "Solve A X = B per batch for lower-triangular a f32 [n, n, ..] and b f32 [k, n, ..]; only "
           "left=True, lower=True, uni=False.");
}

}  // namespace pyggml::python
