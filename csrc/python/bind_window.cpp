// Python bindings of the 'window' family (SAM-style windowed attention helpers).
#include "bind_common.h"

namespace pyggml::python {

void bind_window(py::module_& m) {
    using py::arg;
    def_op(m, "win_part", &win_part, arg("ctx"), arg("a"), arg("w"),
           "a f32 [C, W, H] -> [C, w, w, npx*npy]: window py*npx + px holds a[:, px*w + x, py*w + y], zero "
           "padded to multiples of w.");
    def_op(m, "win_unpart", &win_unpart, arg("ctx"), arg("a"), arg("w0"), arg("h0"), arg("w"),
           "Inverse of win_part: a f32 [C, w, w, n_windows] -> [C, w0, h0] (padding cropped).");
    def_op(m, "get_rel_pos", &get_rel_pos, arg("ctx"), arg("a"), arg("qh"), arg("kh"),
           "a f16/bf16 [C, 2h-1] -> [C, h, h] of a's type: result[c, k, q] = a[c, q - k + h - 1] (qh == kh == h). "
           "(ggml labels the result f16 even for a bf16 a; pyggml keeps bf16.)");
    def_op(m, "add_rel_pos", &add_rel_pos, arg("ctx"), arg("a"), arg("pw"), arg("ph"),
           "SAM's decomposed relative positions: a f32 [W*W, W*qh, B], pw, ph f32 [W, W, qh, B]; "
           "result[kw + kh*W, r, b] = a[kw + kh*W, r, b] + pw[kw, r, b] + ph[kh, r, b], r = i1 + W*i2 of pw.");
    def_op(m, "add_rel_pos_inplace", &add_rel_pos_inplace, arg("ctx"), arg("a"), arg("pw"), arg("ph"),
           "add_rel_pos writing into a.");
}

}  // namespace pyggml::python
