// Python bindings of the 'linear_attn' family (GLA, RWKV-6, RWKV-7).
#include "bind_common.h"

namespace pyggml::python {

void bind_linear_attn(py::module_& m) {
    using py::arg;
    const char* layout =
        " Inputs f32 [S, H, n_tokens] contiguous, tokens split evenly over n_seqs = state.ne[1] sequences; state "
        "f32 [S*S*H, n_seqs] (per head an S x S row-major matrix); result f32 [S*H, n_tokens + S*n_seqs]: the "
        "outputs, then the final states.";
    static const std::string gla = std::string("Gated linear attention: state[i][j] = state[i][j]*g[i] + k[i]*v[j], "
                                               "y[j] = sum_i q[i]*scale*state[i][j].") + layout;
    static const std::string wkv6 = std::string("RWKV-6 WKV: y[j] = sum_i r[i]*(tf[i]*k[i]*v[j] + state[i][j]), "
                                                "state[i][j] = state[i][j]*td[i] + k[i]*v[j]; tf f32 [S, H].") + layout;
    static const std::string wkv7 = std::string("RWKV-7 WKV: sa = state[i] . a, state[i][j] = state[i][j]*w[j] + "
                                                "v[i]*k[j] + sa*b[j], y[i] = state[i] . r.") + layout;
    def_op(m, "gated_linear_attn", &gated_linear_attn, arg("ctx"), arg("k"), arg("v"), arg("q"), arg("g"),
           arg("state"), arg("scale"), gla.c_str());
    def_op(m, "rwkv_wkv6", &rwkv_wkv6, arg("ctx"), arg("k"), arg("v"), arg("r"), arg("tf"), arg("td"), arg("state"),
           wkv6.c_str());
    def_op(m, "rwkv_wkv7", &rwkv_wkv7, arg("ctx"), arg("r"), arg("w"), arg("k"), arg("v"), arg("a"), arg("b"),
           arg("state"), wkv7.c_str());
}

}  // namespace pyggml::python
