// Python bindings of the 'reduce' family (sum_rows, mean, cumsum).
#include "bind_common.h"

namespace pyggml::python {

void bind_reduce(py::module_& m) {
    def_op(m, "sum_rows", &sum_rows, py::arg("ctx"), py::arg("a"),
           "Row sums: [1, ne1, ne2, ne3], a's type (accumulated in double).");
    def_op(m, "mean", &mean, py::arg("ctx"), py::arg("a"), "Row means: [1, ne1, ne2, ne3] f32.");
    def_op(m, "cumsum", &cumsum, py::arg("ctx"), py::arg("a"),
           "Inclusive prefix sum along dim 0 (sequential f32 accumulation).");
}

}  // namespace pyggml::python
