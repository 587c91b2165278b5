// Python bindings of the 'norm' op family (NORM, RMS_NORM).
#include "bind_common.h"

namespace pyggml::python {

void bind_norm(py::module_& m) {
    def_op(m, "norm", &norm, py::arg("ctx"), py::arg("a"), py::arg("eps"),
           "Per row (dim 0): (x - mean) / sqrt(var + eps); a f32, eps >= 0.");
    def_op(m, "norm_inplace", &norm_inplace, py::arg("ctx"), py::arg("a"), py::arg("eps"));
    def_op(m, "rms_norm", &rms_norm, py::arg("ctx"), py::arg("a"), py::arg("eps"),
           "Per row (dim 0): x / sqrt(mean(x^2) + eps); a f32, eps >= 0. No weight (use mul).");
    def_op(m, "rms_norm_inplace", &rms_norm_inplace, py::arg("ctx"), py::arg("a"), py::arg("eps"));
}

}  // namespace pyggml::python
