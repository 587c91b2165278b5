// Python binding of the gated delta rule.
#include "bind_common.h"

namespace pyggml::python {

void bind_delta_net(py::module_& m) {
    using py::arg;
    def_op(m, "gated_delta_net", &gated_delta_net, arg("ctx"), arg("q"), arg("k"), arg("v"), arg("g"), arg("beta"),
           arg("state"), arg("K") = 1,
           "Gated delta rule. q, k f32 [S, H_k, T, B_k] (value head h uses q/k head h % H_k), v f32 [S, H, T, B], "
           "g f32 [1 or S, H, T, B] (log decay; per key channel = KDA), beta f32 [1, H, T, B], state f32 "
           "[S, S, H, B] (element (i, j) = S[i][j], i the key index). Per token: S *= exp(g); "
           "delta = (v - S^T k) * beta; S += k delta^T; out = S^T q / sqrt(S).\n"
           "Result f32 [S*H, T*B + K*S*B]: outputs [S, H, T, B], then K states [S, S, H, B]; slot 0 is the final "
           "state, slot j the state j tokens earlier; slots j >= T are zero-filled by pyggml (ggml leaves them "
           "unwritten).");
}

}  // namespace pyggml::python
