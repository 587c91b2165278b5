// Python bindings of the 'reduce' family (sum_rows, mean, cumsum, sum, argmax, count_equal).
#include "bind_common.h"

namespace pyggml::python {

void bind_reduce(py::module_& m) {
    def_op(m, "sum_rows", &sum_rows, py::arg("ctx"), py::arg("a"),
           "Row sums: [1, ne1, ne2, ne3], a's type (accumulated in double).");
    def_op(m, "mean", &mean, py::arg("ctx"), py::arg("a"), "Row means: [1, ne1, ne2, ne3] f32.");
    def_op(m, "cumsum", &cumsum, py::arg("ctx"), py::arg("a"),
           "Inclusive prefix sum along dim 0 (sequential f32 accumulation).");
    def_op(m, "sum", &sum, py::arg("ctx"), py::arg("a"),
           "Sum of every element: [1], a's type (accumulated in double, rounded once).");
    def_op(m, "argmax", &argmax, py::arg("ctx"), py::arg("a"),
           "I32 [ne1]: per row of the f32 matrix a, the index of its maximum (last among equals).");
    def_op(m, "count_equal", &count_equal, py::arg("ctx"), py::arg("a"), py::arg("b"),
           "I64 [1]: the number of equal elements of the i32 tensors a and b (same shape).");
}

}  // namespace pyggml::python
