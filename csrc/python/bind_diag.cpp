// Python bindings of the 'diag' family (diag, diag_mask_inf, diag_mask_zero).
#include "bind_common.h"

namespace pyggml::python {

void bind_diag(py::module_& m) {
    def_op(m, "diag", &diag, py::arg("ctx"), py::arg("a"),
           "a [n, 1, ne2, ne3] f32 -> [n, n, ne2, ne3] with a on each matrix's diagonal, 0 elsewhere.");
    def_op(m, "diag_mask_inf", &diag_mask_inf, py::arg("ctx"), py::arg("a"), py::arg("n_past"),
           "Causal mask: entries (i0, i1) with i0 > n_past + i1 become -inf (a f32).");
    def_op(m, "diag_mask_inf_inplace", &diag_mask_inf_inplace, py::arg("ctx"), py::arg("a"), py::arg("n_past"));
    def_op(m, "diag_mask_zero", &diag_mask_zero, py::arg("ctx"), py::arg("a"), py::arg("n_past"),
           "Causal mask: entries (i0, i1) with i0 > n_past + i1 become 0 (a f32).");
    def_op(m, "diag_mask_zero_inplace", &diag_mask_zero_inplace, py::arg("ctx"), py::arg("a"), py::arg("n_past"));
}

}  // namespace pyggml::python
