// Python bindings of the copy ops (dup, cpy, cast, cont).
#include "bind_common.h"
#include "pyggml/error.h"

namespace pyggml::python {

void bind_copy(py::module_& m) {
    def_op(m, "dup", &dup, py::arg("ctx"), py::arg("a"), "A packed copy of a (same type and shape).");
    def_op(m, "dup_inplace", &dup_inplace, py::arg("ctx"), py::arg("a"));
    def_op(m, "cpy", &cpy, py::arg("ctx"), py::arg("a"), py::arg("b"),
           "Copy a into b (equal element counts, logical order, converting types); returns a view "
           "of b. Conversions: see cast.");
    const char* cast_doc =
        "A new tensor of `type` with a's shape holding a's values converted.\n"
        "Supported: f32/f16/bf16 in any direction (round to nearest even), same-type raw copies "
        "(bit exact), f32 -> i32, i32 -> f32 (nearest float), f32/f16/bf16 -> any block type "
        "(its CPU row quantizer), block type -> f32. Other pairs raise TypeError.\n"
        "f32 -> i32 truncates toward zero; pyggml's choice for what ggml leaves undefined: NaN -> 0, "
        "values >= 2^31 and +inf -> INT32_MAX, values < -2^31 and -inf -> INT32_MIN.";
    // `type` accepts a gg.Type or its integer id (as ggml numbers types).
    def_op(m, "cast", [](Context* c, Tensor* a, py::object type) {
        Type t;
        if (py::isinstance<Type>(type)) {
            t = type.cast<Type>();
        } else if (py::isinstance<py::int_>(type)) {
            const int32_t id = type.cast<int32_t>();
            if (!type_id_is_valid(id)) throw TypeMismatchError("[cast] unsupported type id " + std::to_string(id));
            t = (Type)id;
        } else {
            throw TypeMismatchError("[cast] type must be a gg.Type or an int type id");
        }
        return cast(c, a, t);
    }, py::arg("ctx"), py::arg("a"), py::arg("type"), cast_doc);
    def_op(m, "cont", &cont, py::arg("ctx"), py::arg("a"), "A packed copy of a with the same shape.");
    def_op(m, "cont_1d", &cont_1d, py::arg("ctx"), py::arg("a"), py::arg("ne0"));
    def_op(m, "cont_2d", &cont_2d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"));
    def_op(m, "cont_3d", &cont_3d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"), py::arg("ne2"));
    def_op(m, "cont_4d", &cont_4d, py::arg("ctx"), py::arg("a"), py::arg("ne0"), py::arg("ne1"), py::arg("ne2"),
           py::arg("ne3"), "A packed copy of a reshaped to ne (equal element count, logical order).");
}

}  // namespace pyggml::python
