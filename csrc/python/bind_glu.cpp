// Python bindings of the GLU family.
#include "bind_common.h"

namespace pyggml::python {

void bind_glu(py::module_& m) {
    // Enum-like arguments also accept plain ints (the golden runner passes ints).
    py::implicitly_convertible<py::int_, GluOp>();
    def_op(m, "glu", &glu, py::arg("ctx"), py::arg("a"), py::arg("op"), py::arg("swapped") = false,
           "Fused GLU: gate and up are the two halves of each row of a (swapped: up first); "
           "output ne0 = a.ne0 // 2.");
    def_op(m, "glu_split", &glu_split, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("op"),
           "Split GLU: gate = a, up = b (same shape and type).");
    struct Named {
        const char* name;
        Tensor* (*fused)(Context*, Tensor*);
        Tensor* (*swapped)(Context*, Tensor*);
        Tensor* (*split)(Context*, Tensor*, Tensor*);
    };
    const Named named[] = {
        {"reglu", &reglu, &reglu_swapped, &reglu_split},
        {"geglu", &geglu, &geglu_swapped, &geglu_split},
        {"swiglu", &swiglu, &swiglu_swapped, &swiglu_split},
        {"geglu_erf", &geglu_erf, &geglu_erf_swapped, &geglu_erf_split},
        {"geglu_quick", &geglu_quick, &geglu_quick_swapped, &geglu_quick_split},
    };
    for (const Named& n : named) {
        const std::string base = n.name;
        def_op(m, base.c_str(), n.fused, py::arg("ctx"), py::arg("a"));
        def_op(m, (base + "_swapped").c_str(), n.swapped, py::arg("ctx"), py::arg("a"));
        def_op(m, (base + "_split").c_str(), n.split, py::arg("ctx"), py::arg("a"), py::arg("b"));
    }
    def_op(m, "swiglu_oai", &swiglu_oai, py::arg("ctx"), py::arg("a"), py::arg("b").none(true),
           py::arg("alpha"), py::arg("limit"),
           "x = min(gate, limit), y = clamp(up, -limit, limit), out = x*sigmoid(alpha*x)*(y+1). "
           "b=None: fused halves of a.");
    def_op(m, "swiglu_clamp", &swiglu_clamp, py::arg("ctx"), py::arg("a"), py::arg("b").none(true),
           py::arg("limit"),
           "out = silu(min(gate, limit)) * clamp(up, -limit, limit): the gate is clamped before "
           "SiLU. b=None: fused halves of a.");
}

}  // namespace pyggml::python
