// Python bindings of the 'flash_attn' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_flash_attn(py::module_& m) {
    def_op(m, "flash_attn_ext", &flash_attn_ext, py::arg("ctx"), py::arg("q"), py::arg("k"),
           py::arg("v"), py::arg("mask").none(true), py::arg("scale"), py::arg("max_bias") = 0.0f,
           py::arg("logit_softcap") = 0.0f,
           "Flash attention. q [D_k, N, H, S] f32; k [D_k, KV, H_kv, S], v [D_v, KV, H_v, S] "
           "(f32/f16/bf16 or a block weight type of gg.type_traits(), H % H_kv == 0: consecutive heads share a KV head); "
           "mask [>=KV, >=N, H_m, S_m] f16 or None (-inf excludes an entry; broadcast over heads "
           "and dim 3 by modulo). Result [D_v, H, N, S] f32 (heads before tokens). A row with no "
           "finite mask entry gives zeros.");
    def_modifier(m, "flash_attn_ext_add_sinks", &flash_attn_ext_add_sinks, py::arg("node"),
                 py::arg("sinks").none(true),
                 "Attach per-head sink logits (f32 [H], raw: not scaled, capped or sloped); None clears.");
    def_modifier(m, "flash_attn_ext_set_prec", &flash_attn_ext_set_prec, py::arg("node"),
                 py::arg("prec"), "Set op_params slot 3: 0 (DEFAULT) or 10 (F32). The CPU always "
                 "accumulates in F32.");
    def_modifier(m, "flash_attn_ext_get_prec", &flash_attn_ext_get_prec, py::arg("node"));
    def_modifier(m, "flash_attn_ext_set_n_kv_max", &flash_attn_ext_set_n_kv_max, py::arg("node"),
                 py::arg("n_kv_max"),
                 "Sparse hint (slot 4): the caller promises that no mask row has more than n_kv_max "
                 "finite entries; 0 disables. The result equals the dense op; the CPU then gathers "
                 "the finite mask columns and works only on those K/V rows. With gg.set_debug(True) "
                 "(or PYGGML_DEBUG=1) a row breaking the promise raises ValueError.");
}

}  // namespace pyggml::python
