// The registry of device kinds this build has, and the op-support check every backend shares.
#include <sstream>

#include "pyggml/backend.h"
#include "pyggml/error.h"

namespace pyggml {

// Each kind describes itself next to its kernels.
namespace cpu { BackendKind backend_kind(); }
#ifdef PYGGML_WITH_CUDA
namespace cuda { BackendKind backend_kind(); }
#endif

const std::vector<BackendKind>& backend_kinds() {
    static const std::vector<BackendKind> kinds = [] {
        std::vector<BackendKind> k{cpu::backend_kind()};
#ifdef PYGGML_WITH_CUDA
        k.push_back(cuda::backend_kind());
#endif
        return k;
    }();
    return kinds;
}

const BackendKind* find_backend_kind(const std::string& kind) {
    for (const BackendKind& k : backend_kinds())
        if (k.name == kind) return &k;
    return nullptr;
}

std::vector<std::string> backend_names() {
    std::vector<std::string> out;
    for (const BackendKind& k : backend_kinds()) {
        if (k.name == "cpu") { out.push_back("cpu"); continue; }
        const int n = k.device_count();
        for (int i = 0; i < n; ++i) out.push_back(k.name + ":" + std::to_string(i));
    }
    return out;
}

Backend* cpu_backend() {
    static Backend* cpu = backend_kinds().front().device(0);
    return cpu;
}

Backend* find_backend(const std::string& name) {
    const size_t colon = name.find(':');
    const std::string kind = name.substr(0, colon);
    int index = 0;
    if (colon != std::string::npos) {
        const std::string digits = name.substr(colon + 1);
        if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos)
            throw ShapeError("backend '" + name + "': expected '<kind>' or '<kind>:<device index>'");
        index = std::stoi(digits);
    }
    const BackendKind* k = find_backend_kind(kind);
    std::ostringstream present;
    for (const std::string& n : backend_names()) present << (present.tellp() ? ", " : "") << n;
    if (!k) {
        std::ostringstream kinds;
        for (const BackendKind& b : backend_kinds()) kinds << (kinds.tellp() ? ", " : "") << b.name;
        throw ShapeError("unknown backend '" + name + "': this build has " + kinds.str() + " (present: " +
                         present.str() + ")");
    }
    const int n = k->device_count();
    if (index < 0 || index >= n)
        throw ShapeError("backend '" + name + "': no such device (" + std::to_string(n) + " " + kind +
                         " device(s) present; backends: " + present.str() + ")");
    return k->device(index);
}

std::string Backend::unsupported_reason(const Tensor* node) const {
    if (!node || op_is_layout_only(node->op)) return "";
    return op_unsupported_reason(node);
}

}  // namespace pyggml
