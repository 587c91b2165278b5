// Shared helpers for the pybind11 op bindings.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "pyggml/graph.h"
#include "pyggml/ops.h"

namespace py = pybind11;

namespace pyggml::python {
// Call policy: the returned tensor keeps argument 1 (the context) alive. Same as
// py::keep_alive<0, 1>, except that it does nothing when the call did not happen: pybind11
// 3.1 runs keep_alive's post-call hook even after an argument conversion failure, on the
// sentinel result (PyObject*)1, which segfaults on any wrong argument type
// (pybind/pybind11 PR #6154).
struct keep_ctx_alive {};
}  // namespace pyggml::python

namespace pybind11::detail {
template <>
struct process_attribute<pyggml::python::keep_ctx_alive>
    : process_attribute_default<pyggml::python::keep_ctx_alive> {
    static void postcall(function_call& call, handle ret) {
        if (!ret || ret.ptr() == PYBIND11_TRY_NEXT_OVERLOAD) return;
        keep_alive_impl(0, 1, call, ret);
    }
};
}  // namespace pybind11::detail

namespace pyggml::python {

// Binds an op constructor `gg.name(ctx, ...)`. The returned tensor is owned by the context
// (reference policy) and keeps the context alive (keep_alive<0, 1>).
template <class F, class... Extra>
void def_op(py::module_& m, const char* name, F&& f, const Extra&... extra) {
    m.def(name, std::forward<F>(f), py::return_value_policy::reference, keep_ctx_alive(), extra...);
}

// Binds a function that modifies an existing node (e.g. flash_attn_ext_add_sinks).
template <class F, class... Extra>
void def_modifier(py::module_& m, const char* name, F&& f, const Extra&... extra) {
    m.def(name, std::forward<F>(f), extra...);
}

#define PYGGML_FAMILY(fam) void bind_##fam(py::module_& m);
PYGGML_FAMILY(layout) PYGGML_FAMILY(copy) PYGGML_FAMILY(binary) PYGGML_FAMILY(unary)
PYGGML_FAMILY(reduce) PYGGML_FAMILY(sort) PYGGML_FAMILY(norm) PYGGML_FAMILY(mul_mat)
PYGGML_FAMILY(misc) PYGGML_FAMILY(fill) PYGGML_FAMILY(rows) PYGGML_FAMILY(softmax)
PYGGML_FAMILY(rope) PYGGML_FAMILY(flash_attn) PYGGML_FAMILY(ssm) PYGGML_FAMILY(glu)
PYGGML_FAMILY(dsv4_hc) PYGGML_FAMILY(lightning_indexer)
PYGGML_FAMILY(set) PYGGML_FAMILY(diag) PYGGML_FAMILY(linalg)
PYGGML_FAMILY(conv) PYGGML_FAMILY(pool) PYGGML_FAMILY(upscale) PYGGML_FAMILY(window)
PYGGML_FAMILY(linear_attn) PYGGML_FAMILY(delta_net)
#undef PYGGML_FAMILY

void bind_core(py::module_& m);   // Type, Tensor, Context, Graph, errors
void bind_types(py::module_& m);  // conversion and quantization helpers

}  // namespace pyggml::python
