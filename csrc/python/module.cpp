// The pyggml._core extension module.
#include "bind_common.h"

namespace pyggml::python {
void bind_llm_host(py::module_& m);  // the llm layer's per-token host helpers
void bind_ngram_history(py::module_& m);  // the n-gram drafter's history, window indexes and lookup
void bind_dsv4_host(py::module_& m);  // the DeepSeek V4 memory's per-ubatch plan and masks
}

PYBIND11_MODULE(_core, m) {
    m.doc() = "pyggml core: ggml's tensor model, ops and CPU backend in C++";
    pyggml::python::bind_core(m);
    pyggml::python::bind_types(m);
    using namespace pyggml::python;
    bind_layout(m); bind_copy(m); bind_binary(m); bind_unary(m); bind_reduce(m); bind_sort(m);
    bind_norm(m); bind_mul_mat(m); bind_misc(m); bind_fill(m); bind_rows(m); bind_softmax(m);
    bind_rope(m); bind_flash_attn(m); bind_ssm(m); bind_glu(m); bind_dsv4_hc(m);
    bind_set(m); bind_diag(m); bind_linalg(m);
    bind_lightning_indexer(m);
    bind_conv(m); bind_pool(m); bind_upscale(m); bind_window(m);
    bind_linear_attn(m); bind_delta_net(m);
    bind_llm_host(m);
    bind_ngram_history(m);
    bind_dsv4_host(m);
}
