// Python bindings of the DeepSeek-V4 hyper-connection ops.
#include "bind_common.h"

namespace pyggml::python {

void bind_dsv4_hc(py::module_& m) {
    def_op(m, "dsv4_hc_comb", &dsv4_hc_comb, py::arg("ctx"), py::arg("mixes"), py::arg("scale"),
           py::arg("base"), py::arg("eps"), py::arg("n_iter"),
           "Sinkhorn-normalised stream-mixing matrix f32 [hc, hc, T] = [dst, src, t] from mixes "
           "f32 [(2+hc)*hc, T] (hc must be 4), scale f32 [>=3] (only scale[2] used), base f32 "
           "[(2+hc)*hc]: softmax over dst + eps, one src normalisation, then n_iter-1 rounds of "
           "dst and src normalisation; every denominator is eps + sum.");
    def_op(m, "dsv4_hc_pre", &dsv4_hc_pre, py::arg("ctx"), py::arg("x"), py::arg("weights"),
           "out[i, t] = sum_h x[i, h, t] * weights[h, t]; x f32 [n_embd, hc, T], weights f32 [hc, T].");
    def_op(m, "dsv4_hc_pre_gated", &dsv4_hc_pre_gated, py::arg("ctx"), py::arg("x"), py::arg("gate"),
           py::arg("scale"), "out[i, t] = scale * sum_h x[i, h, t] * sigmoid(gate[i, h, t]).");
    def_op(m, "dsv4_hc_post", &dsv4_hc_post, py::arg("ctx"), py::arg("x"), py::arg("residual"), py::arg("post"),
           py::arg("comb"),
           "out[i, d, t] = x[i, t]*post[d, t] + sum_s residual[i, s, t]*comb[d, s, t] "
           "(comb None: + residual[i, d, t]); result f32 [n_embd, hc, T].");
}

}  // namespace pyggml::python
