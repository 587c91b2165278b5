// NgramWake: the n-gram drafter's token history with its index of `width`-token windows and the
// absorb rule (pyggml/llm/speculative/ngram_index.py's WakeIndex is the Python reference, and
// describes the rule). In a quiet stretch of plain rounds the decoder calls absorb once a token:
// in C++ that is one short call instead of a Python function run cold after each compute.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bind_common.h"

namespace pyggml::python {
namespace {

constexpr int64_t kMaxWidth = 8;

// a window's tokens; the entries past the width stay 0
using WindowKey = std::array<int64_t, kMaxWidth>;

struct WindowKeyHash {
    size_t operator()(const WindowKey& k) const noexcept {
        uint64_t h = 0x9E3779B97F4A7C15ull;
        for (int64_t t : k) {
            h ^= static_cast<uint64_t>(t) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
        }
        return static_cast<size_t>(h);
    }
};

class NgramWake {
public:
    explicit NgramWake(int64_t width) : width_(width) {
        if (width < 1 || width > kMaxWidth) {
            throw py::value_error("NgramWake: width " + std::to_string(width) + " must be in [1, " +
                                  std::to_string(kMaxWidth) + "]");
        }
    }

    void reset() {
        hist_.clear();
        counts_.clear();
        covered_ = 0;
        hit_ = false;
        dirty_ = -1;
    }

    int64_t size() const { return static_cast<int64_t>(hist_.size()); }
    int64_t width() const { return width_; }
    int64_t covered() const { return covered_; }
    bool hit() const { return hit_; }

    py::dict counts() const {
        py::dict out;
        for (const auto& [key, n] : counts_) {
            py::tuple t(width_);
            for (int64_t j = 0; j < width_; ++j) t[j] = py::int_(key[j]);
            out[t] = py::int_(n);
        }
        return out;
    }

    std::vector<int64_t> tokens(int64_t start) const {
        start = std::clamp<int64_t>(start, 0, size());
        return std::vector<int64_t>(hist_.begin() + start, hist_.end());
    }

    void put(int64_t pos0, const std::vector<int64_t>& tokens) {
        if (pos0 < 0) throw py::value_error("NgramWake.put: pos0 " + std::to_string(pos0) + " < 0");
        write(pos0, tokens.data(), static_cast<int64_t>(tokens.size()));
        if (dirty_ > pos0) dirty_ = pos0;
    }

    void truncate(int64_t keep) {
        if (keep < 0) throw py::value_error("NgramWake.truncate: keep " + std::to_string(keep) + " < 0");
        if (keep >= size()) return;
        if (covered_ + width_ - 1 > keep) cut(keep);
        hist_.resize(keep);
        if (dirty_ > keep) dirty_ = keep;
    }

    bool absorb(int64_t token, int64_t pos) {
        const int64_t L = size();
        if (pos == L) {
            mark(L);
            hist_.push_back(token);
        } else if (!(pos == L - 1 && pos >= 0 && hist_[pos] == token)) {
            if (pos < 0) throw py::value_error("NgramWake.absorb: pos " + std::to_string(pos) + " < 0");
            mark(std::min(pos, L));
            write(pos, &token, 1);
        }
        const bool hit = last_seen();
        const bool woke = hit && !hit_;
        hit_ = hit;
        return woke;
    }

    bool ask_seen() {
        hit_ = last_seen();
        return hit_;
    }

    std::optional<std::pair<int64_t, std::vector<int64_t>>> take_dirty() {
        if (dirty_ < 0) return std::nullopt;
        const int64_t pos = dirty_;
        dirty_ = -1;
        return std::make_pair(pos, tokens(pos));
    }

private:
    WindowKey key_at(int64_t p) const {
        WindowKey k{};
        for (int64_t j = 0; j < width_; ++j) k[j] = hist_[p + j];
        return k;
    }

    void mark(int64_t pos) {
        if (dirty_ < 0 || pos < dirty_) dirty_ = pos;
    }

    // index the windows lying inside hist_[:end]
    void extend(int64_t end) {
        for (int64_t p = covered_; p <= end - width_; ++p) ++counts_[key_at(p)];
        covered_ = std::max(covered_, end - width_ + 1);
    }

    // forget the windows reaching past hist_[:end] (hist_ still holds their tokens)
    void cut(int64_t end) {
        const int64_t first = std::max<int64_t>(end - width_ + 1, 0);
        for (int64_t p = covered_ - 1; p >= first; --p) {
            auto it = counts_.find(key_at(p));
            if (--it->second == 0) counts_.erase(it);
        }
        covered_ = std::min(covered_, first);
    }

    void write(int64_t pos0, const int64_t* tokens, int64_t n) {
        if (covered_ + width_ - 1 > pos0) cut(pos0);
        const int64_t L = size();
        for (int64_t i = L; i < pos0; ++i) hist_.push_back(-1 - i);   // never seen: matches nothing
        hist_.resize(pos0);
        hist_.insert(hist_.end(), tokens, tokens + n);
    }

    bool last_seen() {
        const int64_t L = size();
        if (L <= width_) return false;
        extend(L - 1);
        return counts_.count(key_at(L - width_)) > 0;
    }

    int64_t width_;
    std::vector<int64_t> hist_;
    std::unordered_map<WindowKey, int64_t, WindowKeyHash> counts_;
    int64_t covered_ = 0;   // windows starting before it are counted
    bool hit_ = false;
    int64_t dirty_ = -1;    // lowest position absorb wrote since take_dirty, or -1
};

}  // namespace

void bind_ngram_wake(py::module_& m) {
    py::class_<NgramWake>(m, "NgramWake",
                          "The n-gram drafter's history and its index of width-token windows, with the "
                          "per-token absorb rule (ngram_index.WakeIndex is the Python reference).")
        .def(py::init<int64_t>(), py::arg("width"))
        .def("absorb", &NgramWake::absorb, py::arg("token"), py::arg("pos"),
             "Write a plain round's token at pos; True when the last width tokens occur earlier and "
             "the window looked at before did not.")
        .def("ask_seen", &NgramWake::ask_seen, "An ask looked at the end: whether its window occurs earlier.")
        .def("put", &NgramWake::put, py::arg("pos0"), py::arg("tokens"),
             "Write tokens at pos0.. (dropping what follows; unseen positions before get distinct negative ids).")
        .def("truncate", &NgramWake::truncate, py::arg("keep"), "Keep the first keep tokens.")
        .def("take_dirty", &NgramWake::take_dirty,
             "(pos, tokens from pos) for the lowest position absorb wrote since the last call, or None.")
        .def("tokens", &NgramWake::tokens, py::arg("start") = 0)
        .def("counts", &NgramWake::counts, "window (tuple) -> how many indexed windows hold it")
        .def("reset", &NgramWake::reset)
        .def("__len__", &NgramWake::size)
        .def_property_readonly("width", &NgramWake::width)
        .def_property_readonly("covered", &NgramWake::covered)
        .def_property_readonly("hit", &NgramWake::hit)
        .def("__deepcopy__", [](const NgramWake& w, py::dict) { return NgramWake(w); }, py::arg("memo"));
}

}  // namespace pyggml::python
