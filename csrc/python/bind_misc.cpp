// Python bindings of scale, clamp, arange, tri, timestep_embedding.
#include "bind_common.h"

namespace pyggml::python {

void bind_misc(py::module_& m) {
    def_op(m, "scale", &scale, py::arg("ctx"), py::arg("a"), py::arg("s"), "out = s*a (f32/bf16).");
    def_op(m, "scale_inplace", &scale_inplace, py::arg("ctx"), py::arg("a"), py::arg("s"));
    def_op(m, "scale_bias", &scale_bias, py::arg("ctx"), py::arg("a"), py::arg("s"), py::arg("b"),
           "out = s*a + b (f32/bf16).");
    def_op(m, "scale_bias_inplace", &scale_bias_inplace, py::arg("ctx"), py::arg("a"), py::arg("s"), py::arg("b"));
    def_op(m, "clamp", &clamp, py::arg("ctx"), py::arg("a"), py::arg("min"), py::arg("max"),
           "out = max(min(a, max), min) by comparisons: NaN inputs give max (like ggml's CPU).");
    def_op(m, "clamp_inplace", &clamp_inplace, py::arg("ctx"), py::arg("a"), py::arg("min"), py::arg("max"));
    def_op(m, "arange", &arange, py::arg("ctx"), py::arg("start"), py::arg("stop"), py::arg("step"),
           "F32 [ceil((stop - start)/step)] with out[i] = start + step*i.");
    def_op(m, "tri", &tri, py::arg("ctx"), py::arg("a"), py::arg("type"),
           "Keep a triangle of each [n, n] matrix, zero the rest. type: 0 UPPER_DIAG (i0 >= i1), "
           "1 UPPER (i0 > i1), 2 LOWER_DIAG (i0 <= i1), 3 LOWER (i0 < i1); i0 column, i1 row.");
    def_op(m, "timestep_embedding", &timestep_embedding, py::arg("ctx"), py::arg("timesteps"), py::arg("dim"),
           py::arg("max_period"),
           "F32 [dim, N]: cos(t*f_j) then sin(t*f_j), f_j = exp(-ln(max_period)*j/(dim/2)); odd dim ends in 0.");
}

}  // namespace pyggml::python
