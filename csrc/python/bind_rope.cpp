// Python bindings of the 'rope' op family (ROPE; rope_ext_back is ROPE with op_params[0] = 1).
#include <vector>

#include "bind_common.h"
#include "pyggml/error.h"

namespace pyggml::python {

namespace {
using Sections = std::vector<int>;
}

void bind_rope(py::module_& m) {
    m.attr("ROPE_TYPE_NORMAL") = kRopeNormal;
    m.attr("ROPE_TYPE_NEOX") = kRopeNeox;
    m.attr("ROPE_TYPE_MROPE") = kRopeMrope;
    m.attr("ROPE_TYPE_VISION") = kRopeVision;
    m.attr("ROPE_TYPE_IMROPE") = kRopeImrope;

    def_op(m, "rope", &rope, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("n_dims"), py::arg("mode"),
           "Rotary embedding with base 10000, no scaling. a [head_dim, heads, tokens, ne3] f32/f16; b i32 "
           "positions [tokens] (4*tokens for multi modes).");
    def_op(m, "rope_inplace", &rope_inplace, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("n_dims"),
           py::arg("mode"));
#define PG_ROPE_PYARGS                                                                                      \
    py::arg("n_ctx_orig"), py::arg("freq_base"), py::arg("freq_scale"), py::arg("ext_factor"),              \
        py::arg("attn_factor"), py::arg("beta_fast"), py::arg("beta_slow")
    const char* doc_ext =
        "Rotary embedding with YaRN scaling; c: None or f32 freq_factors (ne0 >= n_dims/2). Modes NORMAL 0, "
        "NEOX 2 (MROPE/IMROPE/VISION through rope_multi).";
    def_op(m, "rope_ext", &rope_ext, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("c").none(true),
           py::arg("n_dims"), py::arg("mode"), PG_ROPE_PYARGS, doc_ext);
    def_op(m, "rope_ext_inplace", &rope_ext_inplace, py::arg("ctx"), py::arg("a"), py::arg("b"),
           py::arg("c").none(true), py::arg("n_dims"), py::arg("mode"), PG_ROPE_PYARGS);
    def_op(m, "rope_ext_back", &rope_ext_back, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("c").none(true),
           py::arg("n_dims"), py::arg("mode"), PG_ROPE_PYARGS,
           "Inverse rotation of rope_ext (sin negated); a ROPE node with op_params[0] = 1.");

    auto multi = [](auto fn, const char* name) {
        return [fn, name](Context* ctx, Tensor* a, Tensor* b, Tensor* c, int n_dims, const Sections& s, int mode,
                          int n_ctx_orig, float fb, float fs, float ef, float af, float bf, float bs) {
            PG_SHAPE_CHECK(s.size() == 4, (OpMessage(name) << "sections must have 4 entries (got " << s.size() << ")"));
            return fn(ctx, a, b, c, n_dims, s.data(), mode, n_ctx_orig, fb, fs, ef, af, bf, bs);
        };
    };
    const char* doc_multi =
        "Multi-section rotary embedding (MROPE 8, VISION 24, IMROPE 40); sections: 4 ints (pairs per section); "
        "b holds 4 position streams (t, h, w, e) of a.ne2 entries each.";
    def_op(m, "rope_multi", multi(&rope_multi, "rope_multi"), py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("c").none(true),
           py::arg("n_dims"), py::arg("sections"), py::arg("mode"), PG_ROPE_PYARGS, doc_multi);
    def_op(m, "rope_multi_inplace", multi(&rope_multi_inplace, "rope_multi_inplace"), py::arg("ctx"), py::arg("a"), py::arg("b"),
           py::arg("c").none(true), py::arg("n_dims"), py::arg("sections"), py::arg("mode"), PG_ROPE_PYARGS);
    def_op(m, "rope_multi_back", multi(&rope_multi_back, "rope_multi_back"), py::arg("ctx"), py::arg("a"), py::arg("b"),
           py::arg("c").none(true), py::arg("n_dims"), py::arg("sections"), py::arg("mode"), PG_ROPE_PYARGS);
#undef PG_ROPE_PYARGS
    def_modifier(m, "rope_set_offset", &rope_set_offset, py::return_value_policy::reference, py::arg("node"),
                 py::arg("n_offs"),
                 "Moves the rotation window of a ROPE node to [n_offs, n_offs + n_dims) (op_params[15]); "
                 "returns the node.");
}

}  // namespace pyggml::python
