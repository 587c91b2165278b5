// Python bindings of the 'mul_mat' op family.
#include "bind_common.h"
#include "cpu/host_memory.h"
#include "cpu/quant_repack.h"

namespace pyggml::python {

void bind_mul_mat(py::module_& m) {
    def_op(m, "mul_mat", &mul_mat, py::arg("ctx"), py::arg("a"), py::arg("b"),
           "a [K, M, A2, A3] (weights) times b [K, N, B2, B3]: f32 [M, N, B2, B3]; batch i of b uses "
           "batch i // (B/A) of a. Like ggml's CPU, b is rounded to f16/bf16 or quantized to the "
           "weights' vec_dot_type (q8_0, q8_1 or q8_K, see gg.type_traits()) before the dot products.");
    def_op(m, "mul_mat_id", &mul_mat_id, py::arg("ctx"), py::arg("as_"), py::arg("b"), py::arg("ids"),
           "Mixture-of-experts matmul: as [K, M, n_expert], b [K, Nb, n_tokens], ids i32 [n_used, "
           "n_tokens]; result f32 [M, n_used, n_tokens] with out[:, e, t] = as[ids[e, t]] . b[:, e % Nb, t].");

    py::class_<cpu::RepackedWeights, std::shared_ptr<cpu::RepackedWeights>>(m, "RepackedWeights",
        "A row-interleaved copy of a q4_0 / q4_1 / q5_0 / q8_0 / q4_K / q5_K / q6_K weight tensor for the CPU's mul_mat; "
        "mul_mat nodes whose weights are that tensor use it while this object lives.")
        .def_property_readonly("nbytes", [](const std::shared_ptr<cpu::RepackedWeights>& h) {
            return cpu::repack_bytes(h);
        }, "bytes of the copy (about the tensor's own size)");
    m.def("repack_weights", [](py::object t) {
        // const cast only for the holder type: nothing writes through it
        return std::const_pointer_cast<cpu::RepackedWeights>(
            cpu::repack_weights(to_tensor(t, "repack_weights", "t", true)));
    }, py::arg("t"), py::keep_alive<0, 1>(),
          "Builds the repacked copy of constant weights t (contiguous q4_0 / q4_1 / q5_0 / q8_0 / q4_K / q5_K / q6_K in "
          "host memory; NotImplementedError otherwise). Keep the returned object while t is used; its data "
          "must not change meanwhile. Results differ from the plain path's in rounding only and do "
          "not depend on the number of columns.");
    m.def("repack_supported", [](py::object t) {
        return cpu::repack_supported(to_tensor(t, "repack_supported", "t", true));
    }, py::arg("t"), "Whether repack_weights(t) can build a copy.");
    m.def("has_repack", [](py::object t) {
        return cpu::has_repack(to_tensor(t, "has_repack", "t", true));
    }, py::arg("t"), "Whether mul_mat with weights t currently uses a repacked copy.");
    m.def("weight_slab_stats", []() {
        const cpu::WeightSlabStats st = cpu::weight_slab_stats();
        py::dict d;
        d["slabs"] = st.slabs;
        d["pieces"] = st.pieces;
        d["slab_bytes"] = st.slab_bytes;
        d["hole_bytes"] = st.hole_bytes;
        d["own_blocks"] = st.own_blocks;
        return d;
    }, "Where the live repacked copies sit: copies under 4 MiB share huge-page slabs ('slabs' held, "
       "'pieces' in them, 'slab_bytes' reserved, 'hole_bytes' freed room that new copies reuse); larger "
       "ones have a block each ('own_blocks').");
}

}  // namespace pyggml::python
