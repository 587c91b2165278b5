// Python bindings of the layout ops (views, reshape, permute, transpose, repeat, concat, pad).
#include "bind_common.h"
#include "pyggml/error.h"

namespace pyggml::python {

void bind_layout(py::module_& m) {
    def_op(m, "view_1d", &view_1d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("offset"));
    def_op(m, "view_2d", &view_2d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"),
           py::arg("nb1"), py::arg("offset"));
    def_op(m, "view_3d", &view_3d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"),
           py::arg("ne2"), py::arg("nb1"), py::arg("nb2"), py::arg("offset"));
    def_op(m, "view_4d", &view_4d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"),
           py::arg("ne2"), py::arg("ne3"), py::arg("nb1"), py::arg("nb2"), py::arg("nb3"),
           py::arg("offset"), "View with explicit byte strides; nb0 is the element size.");
    def_op(m, "view_tensor", [](Context* c, Tensor* a) {
               if (!a) throw TypeMismatchError("[view_tensor] a is required");
               return c->view_tensor(a);
           },
           py::arg("ctx"), py::arg("a"));
    def_op(m, "reshape", &reshape, py::arg("ctx"), py::arg("a"), py::arg("b"));
    def_op(m, "reshape_1d", &reshape_1d, py::arg("ctx"), py::arg("a"), py::arg("ne0"));
    def_op(m, "reshape_2d", &reshape_2d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"));
    def_op(m, "reshape_3d", &reshape_3d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"),
           py::arg("ne2"));
    def_op(m, "reshape_4d", &reshape_4d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"),
           py::arg("ne2"), py::arg("ne3"));
    def_op(m, "permute", &permute, py::arg("ctx"), py::arg("a"), py::arg("axis0"), py::arg("axis1"),
           py::arg("axis2"), py::arg("axis3"),
           "Source dim k moves to result position axis_k (the inverse of numpy.transpose's axes).");
    def_op(m, "transpose", &transpose, py::arg("ctx"), py::arg("a"));
    // copying layout ops
    def_op(m, "repeat", &repeat, py::arg("ctx"), py::arg("a"), py::arg("b"),
           "Tile a to b's shape (each b.ne[i] a multiple of a.ne[i]); only b's shape is used.");
    def_op(m, "repeat_4d", &repeat_4d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"),
           py::arg("ne2"), py::arg("ne3"), "Tile a to the shape [ne0, ne1, ne2, ne3].");
    def_op(m, "concat", &concat, py::arg("ctx"), py::arg("a"), py::arg("b"), py::arg("dim"),
           "Join a and b along dim; every other dim must match.");
    def_op(m, "pad", &pad, py::arg("ctx"), py::arg("a"), py::arg("p0"), py::arg("p1"), py::arg("p2"),
           py::arg("p3"), "Append p_i zeros at the end of dim i.");
    def_op(m, "pad_ext", &pad_ext, py::arg("ctx"), py::arg("a"), py::arg("lp0"), py::arg("rp0"),
           py::arg("lp1"), py::arg("rp1"), py::arg("lp2"), py::arg("rp2"), py::arg("lp3"),
           py::arg("rp3"), "Pad dim i with lp_i zeros before and rp_i zeros after.");
    def_op(m, "pad_circular", &pad_circular, py::arg("ctx"), py::arg("a"), py::arg("p0"),
           py::arg("p1"), py::arg("p2"), py::arg("p3"),
           "Like pad, but the padding wraps around (out[i] = a[i mod a.ne]).");
    def_op(m, "pad_ext_circular", &pad_ext_circular, py::arg("ctx"), py::arg("a"), py::arg("lp0"),
           py::arg("rp0"), py::arg("lp1"), py::arg("rp1"), py::arg("lp2"), py::arg("rp2"),
           py::arg("lp3"), py::arg("rp3"),
           "Like pad_ext, but the padding wraps around (out[i] = a[(i - lp) mod a.ne]).");
    def_op(m, "roll", &roll, py::arg("ctx"), py::arg("a"), py::arg("shift0"), py::arg("shift1"),
           py::arg("shift2"), py::arg("shift3"),
           "numpy.roll in each dim: out[i] = a[(i - shift) mod ne], |shift_i| < ne_i.");
    def_op(m, "pad_reflect_1d", &pad_reflect_1d, py::arg("ctx"), py::arg("a"), py::arg("p0"), py::arg("p1"),
           "Reflect-pad dim 0 by p0 before and p1 after, without repeating the edge (f32, p < ne0).");
}

}  // namespace pyggml::python
