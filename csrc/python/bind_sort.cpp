// Python bindings of the 'sort' family (argsort, argsort_top_k, top_k).
#include "bind_common.h"

namespace pyggml::python {

void bind_sort(py::module_& m) {
    py::enum_<SortOrder> order(m, "SortOrder", "argsort order, numbered as ggml_sort_order");
    order.value("ASC", SortOrder::ASC).value("DESC", SortOrder::DESC);
    reject_unknown_values(order);
    py::implicitly_convertible<py::int_, SortOrder>();
    def_op(m, "argsort", &argsort, py::arg("ctx"), py::arg("a"), py::arg("order") = SortOrder::ASC,
           "I32 per-row permutation sorting a's rows; order 0 = ascending, 1 = descending.");
    def_op(m, "argsort_top_k", &argsort_top_k, py::arg("ctx"), py::arg("a"), py::arg("k"),
           "Descending argsort, then a view of its first k columns (ordered, strided).");
    def_op(m, "top_k", &top_k, py::arg("ctx"), py::arg("a"), py::arg("k"),
           "I32 [k, ne1, ne2, ne3]: indices of the k largest values per row (order unspecified "
           "upstream; pyggml gives them in descending order).");
}

}  // namespace pyggml::python
