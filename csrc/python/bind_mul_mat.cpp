// Python bindings of the 'mul_mat' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_mul_mat(py::module_& m) {
    def_op(m, "mul_mat", &mul_mat, py::arg("ctx"), py::arg("a"), py::arg("b"),
           "a [K, M, A2, A3] (weights) times b [K, N, B2, B3]: f32 [M, N, B2, B3]; batch i of b uses "
           "batch i // (B/A) of a. Like ggml's CPU, b is rounded to f16/bf16 or quantized to the "
           "weights' vec_dot_type (q8_0, q8_1 or q8_K, see gg.type_traits()) before the dot products.");
    def_op(m, "mul_mat_id", &mul_mat_id, py::arg("ctx"), py::arg("as_"), py::arg("b"), py::arg("ids"),
           "Mixture-of-experts matmul: as [K, M, n_expert], b [K, Nb, n_tokens], ids i32 [n_used, "
           "n_tokens]; result f32 [M, n_used, n_tokens] with out[:, e, t] = as[ids[e, t]] . b[:, e % Nb, t].");
}

}  // namespace pyggml::python
