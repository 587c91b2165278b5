// Python bindings of the 'lightning_indexer' op family.
#include "bind_common.h"

namespace pyggml::python {

void bind_lightning_indexer(py::module_& m) {
    (void)m;
}

}  // namespace pyggml::python
