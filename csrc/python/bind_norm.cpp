// Python bindings of the 'norm' op family (NORM, RMS_NORM, L2_NORM, GROUP_NORM).
#include "bind_common.h"

namespace pyggml::python {

void bind_norm(py::module_& m) {
    def_op(m, "norm", &norm, py::arg("ctx"), py::arg("a"), py::arg("eps"),
           "Per row (dim 0): (x - mean) / sqrt(var + eps); a f32, eps >= 0.");
    def_op(m, "norm_inplace", &norm_inplace, py::arg("ctx"), py::arg("a"), py::arg("eps"));
    def_op(m, "rms_norm", &rms_norm, py::arg("ctx"), py::arg("a"), py::arg("eps"),
           "Per row (dim 0): x / sqrt(mean(x^2) + eps); a f32, eps >= 0. No weight (use mul).");
    def_op(m, "rms_norm_inplace", &rms_norm_inplace, py::arg("ctx"), py::arg("a"), py::arg("eps"));
    def_op(m, "l2_norm", &l2_norm, py::arg("ctx"), py::arg("a"), py::arg("eps"),
           "Per row (dim 0): x / max(||x||_2, eps); a f32, eps >= 0.");
    def_op(m, "l2_norm_inplace", &l2_norm_inplace, py::arg("ctx"), py::arg("a"), py::arg("eps"));
    def_op(m, "group_norm", &group_norm, py::arg("ctx"), py::arg("a"), py::arg("n_groups"), py::arg("eps"),
           "Channels (dim 2) in n_groups groups of ceil(ne2/n_groups); each group of each ne3 slice "
           "normalised over (ne0, ne1, its channels): (x - mean)/sqrt(var + eps). a f32, no affine part.");
    def_op(m, "group_norm_inplace", &group_norm_inplace, py::arg("ctx"), py::arg("a"), py::arg("n_groups"),
           py::arg("eps"));
}

}  // namespace pyggml::python
