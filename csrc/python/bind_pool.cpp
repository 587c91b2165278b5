// Python bindings of the 'pool' family.
#include "bind_common.h"

namespace pyggml::python {

void bind_pool(py::module_& m) {
    using py::arg;
    m.attr("OP_POOL_MAX") = 0;
    m.attr("OP_POOL_AVG") = 1;
    def_op(m, "pool_1d", &pool_1d, arg("ctx"), arg("a"), arg("op"), arg("k0"), arg("s0"), arg("p0"),
           "Pools dim 0: a f32/f16 [L, ...] -> f32 [(L + 2*p0 - k0) // s0 + 1, ...]. op: gg.OP_POOL_MAX (0) or "
           "gg.OP_POOL_AVG (1); padding is ignored by max, avg divides by the in-bounds count.");
    def_op(m, "pool_2d", &pool_2d, arg("ctx"), arg("a"), arg("op"), arg("k0"), arg("k1"), arg("s0"), arg("s1"),
           arg("p0"), arg("p1"),
           "Pools dims 0 and 1: a f32/f16 [W, H, ...] -> f32 [OW, OH, ...], O = int((in + 2p - k) / s + 1). Avg "
           "always divides by k0*k1 (padding counts as zeros); windows use int(p).");
}

}  // namespace pyggml::python
