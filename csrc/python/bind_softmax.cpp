// Python bindings of the 'softmax' op family (SOFT_MAX).
#include "bind_common.h"

namespace pyggml::python {

void bind_softmax(py::module_& m) {
    def_op(m, "soft_max", &soft_max, py::arg("ctx"), py::arg("a"), "Softmax over dim 0; a f32, contiguous.");
    def_op(m, "soft_max_inplace", &soft_max_inplace, py::arg("ctx"), py::arg("a"));
    const char* doc =
        "softmax(a*scale + slope(head)*mask) over dim 0. mask: None or f16/f32 [a.ne0, >= a.ne1, "
        "divides a.ne2, divides a.ne3] (modulo broadcast over dims 2/3); max_bias > 0 enables ALiBi "
        "slopes (needs a mask). A fully -inf row gives NaN unless sinks are set.";
    def_op(m, "soft_max_ext", &soft_max_ext, py::arg("ctx"), py::arg("a"), py::arg("mask").none(true),
           py::arg("scale") = 1.0f, py::arg("max_bias") = 0.0f, doc);
    def_op(m, "soft_max_ext_inplace", &soft_max_ext_inplace, py::arg("ctx"), py::arg("a"),
           py::arg("mask").none(true), py::arg("scale") = 1.0f, py::arg("max_bias") = 0.0f);
    def_modifier(m, "soft_max_add_sinks", &soft_max_add_sinks, py::arg("node"), py::arg("sinks").none(true),
                 "Sets the per-head sink logits (f32 [a.ne2], src[2]) of a SOFT_MAX node; None clears them.");
    def_op(m, "soft_max_ext_back", &soft_max_ext_back, py::arg("ctx"), py::arg("dy"), py::arg("y"),
           py::arg("scale"), py::arg("max_bias"),
           "Gradient of soft_max_ext: per row scale * y * (dy - dot(y, dy)); y is the softmax output. "
           "max_bias must be 0.");
    def_op(m, "soft_max_ext_back_inplace", &soft_max_ext_back_inplace, py::arg("ctx"), py::arg("dy"),
           py::arg("y"), py::arg("scale"), py::arg("max_bias"));
}

}  // namespace pyggml::python
