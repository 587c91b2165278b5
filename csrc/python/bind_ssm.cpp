// Python bindings of the Mamba ops SSM_CONV and SSM_SCAN.
#include "bind_common.h"

namespace pyggml::python {

void bind_ssm(py::module_& m) {
    def_op(m, "ssm_conv", &ssm_conv, py::arg("ctx"), py::arg("sx"), py::arg("c"),
           "Depth-wise causal conv: sx f32 [d_conv-1+n_t, d_inner, n_s] (dim 0 is time), c f32 "
           "[d_conv, d_inner] -> f32 [d_inner, n_t, n_s], out[i,t,s] = sum_k sx[t+k,i,s]*c[k,i]. sx may be any "
           "strided view (a transposed [d_inner, d_conv-1+n_t, n_s] buffer is as fast as ggml's packed layout).");
    def_op(m, "ssm_scan", &ssm_scan, py::arg("ctx"), py::arg("s"), py::arg("x"), py::arg("dt"), py::arg("A"),
           py::arg("B"), py::arg("C"), py::arg("ids"), py::arg("K") = 1,
           "Selective state-space scan (Mamba-1: A [d_state, n_head]; Mamba-2: A [1, n_head]).\n"
           "s f32 [d_state, head_dim, n_head, n_slots] is read at slot ids[q] for sequence q; x f32 "
           "[head_dim, n_head, n_tokens, n_seqs]; dt f32 [n_head, n_tokens, n_seqs] (softplus, > 20 passes "
           "through); B, C f32 [d_state, n_group, n_tokens, n_seqs]; head h uses group h // (n_head/n_group).\n"
           "Returns a 1-D f32 tensor: y packed [head_dim, n_head, n_tokens, n_seqs], then K state planes "
           "[d_state, head_dim, n_head, n_seqs] written densely (sequence q at position q): plane 0 is the "
           "final state, plane j the state after the first n_tokens-j tokens. Planes j >= n_tokens are "
           "zero-filled by pyggml (ggml leaves them unwritten). K > 1 requires Mamba-2.");
}

}  // namespace pyggml::python
