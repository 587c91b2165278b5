// Python bindings of LIGHTNING_INDEXER.
#include "bind_common.h"

namespace pyggml::python {

void bind_lightning_indexer(py::module_& m) {
    def_op(m, "lightning_indexer", &lightning_indexer, py::arg("ctx"), py::arg("q"), py::arg("k"),
           py::arg("weights"), py::arg("mask"),
           "Indexer scores f32 [n_kv, n_batch, 1, S]: sum_h relu(q[:,h,t,s].k[:,0,j,s]) * "
           "weights[h,t,0,s] + mask[j,t,0,s % S_m]. q f32 [D, n_head, n_batch, S], k "
           "[D, 1, n_kv, S] (f32/f16/bf16 or a block type, dequantized to f32), weights f32 "
           "[n_head, n_batch, 1, S], mask f16 [n_kv, >= n_batch, 1, S_m] (mandatory).");
}

}  // namespace pyggml::python
