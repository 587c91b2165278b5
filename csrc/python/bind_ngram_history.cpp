// NgramHistory: the n-gram drafter's token history with incremental indexes of its windows and
// the two things read from them, the per-token absorb rule and the "longest" lookup of an ask.
// pyggml/llm/speculative/ngram.py's PyNgramHistory is the Python reference and describes both
// rules. On fresh text the decoder calls absorb once a token and draft_longest once an ask: in
// C++ each is one short call instead of Python functions run cold after every compute.
#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
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

// what an index keeps per key: how many windows hold it (the wake rule asks only whether one
// does), or where they start, ascending (the lookups)
struct WindowCount {
    int64_t n = 0;
    void add(int64_t) { ++n; }
    bool remove_last() { return --n == 0; }
};

struct WindowStarts {
    std::vector<int64_t> starts;
    void add(int64_t p) { starts.push_back(p); }
    bool remove_last() {
        starts.pop_back();
        return starts.empty();
    }
};

// the windows of `width` tokens of a history that start before `covered` (ngram_index.KeyIndex)
template <class Slot>
struct WindowIndex {
    int64_t width = 0;
    int64_t covered = 0;
    std::unordered_map<WindowKey, Slot, WindowKeyHash> map;

    static WindowKey key_at(const std::vector<int64_t>& h, int64_t p, int64_t w) {
        WindowKey k{};
        for (int64_t j = 0; j < w; ++j) k[j] = h[p + j];
        return k;
    }

    // index the windows lying inside h[:end]
    void extend(const std::vector<int64_t>& h, int64_t end) {
        for (int64_t p = covered; p <= end - width; ++p) map[key_at(h, p, width)].add(p);
        covered = std::max(covered, end - width + 1);
    }

    // forget the windows reaching past h[:end] (h still holds their tokens); they are the
    // latest of their keys
    void cut(const std::vector<int64_t>& h, int64_t end) {
        if (covered + width - 1 <= end) return;
        const int64_t first = std::max<int64_t>(end - width + 1, 0);
        for (int64_t p = covered - 1; p >= first; --p) {
            auto it = map.find(key_at(h, p, width));
            if (it->second.remove_last()) map.erase(it);
        }
        covered = std::min(covered, first);
    }

    // the slot of the history's last `width` tokens, or nullptr
    const Slot* last(const std::vector<int64_t>& h) const {
        auto it = map.find(key_at(h, static_cast<int64_t>(h.size()) - width, width));
        return it == map.end() ? nullptr : &it->second;
    }

    void clear() {
        map.clear();
        covered = 0;
    }
};

// the lookup's constants and draft classes, as ngram.py defines them
struct LookupRules {
    int64_t match_cap, long_match, medium_match, sub_window;
    int64_t cls_other, cls_sub, cls_short, cls_medium, cls_long;
};

class NgramHistory {
public:
    NgramHistory(int64_t wake_width, int64_t key_width, bool substitute, int64_t match_cap,
                 int64_t long_match, int64_t medium_match, int64_t sub_window, std::array<int64_t, 5> classes)
        : substitute_(substitute),
          rules_{match_cap, long_match, medium_match, sub_window,
                 classes[0], classes[1], classes[2], classes[3], classes[4]} {
        for (int64_t w : {wake_width, key_width}) {
            if (w < 1 || w > kMaxWidth) {
                throw py::value_error("NgramHistory: window width " + std::to_string(w) + " must be in [1, " +
                                      std::to_string(kMaxWidth) + "]");
            }
        }
        if (key_width + 2 > sub_window || sub_window > kMaxWidth || match_cap < key_width) {
            throw py::value_error("NgramHistory: the substitution window must hold the key and the pair "
                                  "before it (key_width + 2 <= sub_window <= 8) and match_cap >= key_width");
        }
        wake_.width = wake_width;
        keys_.width = key_width;
        pairs_.width = 2;
    }

    void reset() {
        hist_.clear();
        wake_.clear();
        keys_.clear();
        pairs_.clear();
        hit_ = false;
    }

    int64_t size() const { return static_cast<int64_t>(hist_.size()); }
    int64_t covered() const { return wake_.covered; }
    bool hit() const { return hit_; }

    py::dict counts() const {
        py::dict out;
        for (const auto& [key, slot] : wake_.map) {
            py::tuple t(wake_.width);
            for (int64_t j = 0; j < wake_.width; ++j) t[j] = py::int_(key[j]);
            out[t] = py::int_(slot.n);
        }
        return out;
    }

    std::vector<int64_t> tokens(int64_t start) const {
        start = std::clamp<int64_t>(start, 0, size());
        return std::vector<int64_t>(hist_.begin() + start, hist_.end());
    }

    void put(int64_t pos0, const std::vector<int64_t>& tokens) {
        if (pos0 < 0) throw py::value_error("NgramHistory.put: pos0 " + std::to_string(pos0) + " < 0");
        write(pos0, tokens.data(), static_cast<int64_t>(tokens.size()));
    }

    void truncate(int64_t keep) {
        if (keep < 0) throw py::value_error("NgramHistory.truncate: keep " + std::to_string(keep) + " < 0");
        if (keep >= size()) return;
        cut_all(keep);
        hist_.resize(keep);
    }

    bool absorb(int64_t token, int64_t pos) {
        const int64_t L = size();
        if (pos == L) {
            hist_.push_back(token);
        } else if (!(pos == L - 1 && pos >= 0 && hist_[pos] == token)) {
            if (pos < 0) throw py::value_error("NgramHistory.absorb: pos " + std::to_string(pos) + " < 0");
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

    // PyNgramHistory.ask: an ask's three calls in one (id_last written at pos0, its window
    // seen, the lookup)
    py::tuple ask(int64_t pos0, int64_t id_last, int64_t n_max, int64_t hint) {
        if (pos0 < 0) throw py::value_error("NgramHistory.ask: pos0 " + std::to_string(pos0) + " < 0");
        write(pos0, &id_last, 1);
        ask_seen();
        return draft_longest(n_max, hint);
    }

    // PyNgramHistory.draft_longest: (ids, class, match length or None, None or (j, replaced, replacement))
    py::tuple draft_longest(int64_t n_max, int64_t hint) {
        const int64_t L = size(), m = keys_.width;
        if (L <= m) return nothing();   // no key before ours, and too short to substitute
        keys_.extend(hist_, L - 1);     // windows with at least one token after them
        if (const WindowStarts* s = keys_.last(hist_)) return best_exact(s->starts, n_max, hint);
        if (!substitute_ || L <= rules_.sub_window) return nothing();
        WindowIndex<WindowStarts>& pairs = pair_index();
        if (&pairs != &keys_) pairs.extend(hist_, L - 1);
        WindowKey anchor{};
        anchor[0] = hist_[L - m - 2];
        anchor[1] = hist_[L - m - 1];
        auto it = pairs.map.find(anchor);
        const int64_t e = it == pairs.map.end() ? -1 : substituted(it->second.starts);
        if (e < 0) return nothing();
        int64_t j = 0;   // the window's differing token (none: an exact place beyond the key)
        for (int64_t d = 1; d <= rules_.sub_window && !j; ++d) {
            if (hist_[e - d] != hist_[L - d]) j = d;
        }
        py::object sub = j ? py::object(py::make_tuple(j, hist_[e - j], hist_[L - j])) : py::object(py::none());
        return py::make_tuple(slice(e, hint), rules_.cls_sub, -1, sub);
    }

private:
    py::tuple nothing() const { return py::make_tuple(py::list(), rules_.cls_other, py::none(), py::none()); }

    py::list slice(int64_t e, int64_t n) const {
        const int64_t stop = std::min(e + std::max<int64_t>(n, 0), size());
        py::list out(std::max<int64_t>(stop - e, 0));
        for (int64_t i = e; i < stop; ++i) out[i - e] = py::int_(hist_[i]);
        return out;
    }

    // with 2-token keys the pairs are the keys
    WindowIndex<WindowStarts>& pair_index() { return keys_.width == 2 ? keys_ : pairs_; }

    py::tuple best_exact(const std::vector<int64_t>& starts, int64_t n_max, int64_t hint) const {
        const int64_t L = size(), m = keys_.width;
        int64_t e = -1, k_best = -1;
        for (int64_t s : starts) {   // ascending: ">=" lets the later place win a tie
            const int64_t end = s + m;
            const int64_t cap = std::min(rules_.match_cap, end);
            int64_t j = m;           // the key itself matches
            while (j < cap && hist_[end - j - 1] == hist_[L - j - 1]) ++j;
            const int64_t k = std::min({j, cap, L - end});
            if (k >= k_best) {
                e = end;
                k_best = k;
            }
        }
        const int64_t cls = k_best >= rules_.long_match     ? rules_.cls_long
                            : k_best >= rules_.medium_match ? rules_.cls_medium
                                                            : rules_.cls_short;
        const int64_t n = std::min(k_best >= rules_.long_match ? n_max : hint, k_best);
        return py::make_tuple(slice(e, n), cls, k_best, py::none());
    }

    // the most recent place anchored by the pair before our key whose window differs from ours
    // in at most one token, or -1
    int64_t substituted(const std::vector<int64_t>& pair_starts) const {
        const int64_t L = size(), w = rules_.sub_window, shift = keys_.width + 2;
        for (auto it = pair_starts.rbegin(); it != pair_starts.rend(); ++it) {
            const int64_t e = *it + shift;
            if (e >= L || e < w) continue;
            int64_t diff = 0;
            for (int64_t d = 1; d <= w && diff <= 1; ++d) diff += hist_[e - d] != hist_[L - d];
            if (diff <= 1) return e;
        }
        return -1;
    }

    void cut_all(int64_t end) {
        wake_.cut(hist_, end);
        keys_.cut(hist_, end);
        if (keys_.width != 2) pairs_.cut(hist_, end);
    }

    void write(int64_t pos0, const int64_t* tokens, int64_t n) {
        cut_all(pos0);
        const int64_t L = size();
        for (int64_t i = L; i < pos0; ++i) hist_.push_back(-1 - i);   // never seen: matches nothing
        hist_.resize(pos0);
        hist_.insert(hist_.end(), tokens, tokens + n);
    }

    bool last_seen() {
        const int64_t L = size();
        if (L <= wake_.width) return false;
        wake_.extend(hist_, L - 1);
        return wake_.last(hist_) != nullptr;
    }

    bool substitute_;
    LookupRules rules_;
    std::vector<int64_t> hist_;
    WindowIndex<WindowCount> wake_;
    WindowIndex<WindowStarts> keys_, pairs_;   // pairs_ unused with 2-token keys
    bool hit_ = false;   // the last window absorb or ask_seen looked at occurred before
};

}  // namespace

void bind_ngram_history(py::module_& m) {
    py::class_<NgramHistory>(m, "NgramHistory",
                             "The n-gram drafter's history with its window indexes, the per-token absorb rule "
                             "and the 'longest' lookup (ngram.PyNgramHistory is the Python reference).")
        .def(py::init<int64_t, int64_t, bool, int64_t, int64_t, int64_t, int64_t, std::array<int64_t, 5>>(),
             py::arg("wake_width"), py::arg("key_width"), py::arg("substitute"), py::arg("match_cap"),
             py::arg("long_match"), py::arg("medium_match"), py::arg("sub_window"), py::arg("classes"))
        .def("absorb", &NgramHistory::absorb, py::arg("token"), py::arg("pos"),
             "Write a plain round's token at pos; True when the last wake_width tokens occur earlier and "
             "the window looked at before did not.")
        .def("ask_seen", &NgramHistory::ask_seen, "An ask looked at the end: whether its window occurs earlier.")
        .def("put", &NgramHistory::put, py::arg("pos0"), py::arg("tokens"),
             "Write tokens at pos0.. (dropping what follows; unseen positions before get distinct negative ids).")
        .def("truncate", &NgramHistory::truncate, py::arg("keep"), "Keep the first keep tokens.")
        .def("draft_longest", &NgramHistory::draft_longest, py::arg("n_max"), py::arg("hint"),
             "The 'longest' rule's draft: (ids, class, match length or None, None or (j, replaced, replacement)).")
        .def("ask", &NgramHistory::ask, py::arg("pos0"), py::arg("id_last"), py::arg("n_max"), py::arg("hint"),
             "put(pos0, [id_last]), ask_seen() and draft_longest(n_max, hint) in one call.")
        .def("tokens", &NgramHistory::tokens, py::arg("start") = 0)
        .def("counts", &NgramHistory::counts, "wake window (tuple) -> how many indexed windows hold it")
        .def("reset", &NgramHistory::reset)
        .def("__len__", &NgramHistory::size)
        .def_property_readonly("covered", &NgramHistory::covered)
        .def_property_readonly("hit", &NgramHistory::hit)
        .def("__deepcopy__", [](const NgramHistory& h, py::dict) { return NgramHistory(h); }, py::arg("memo"));
}

}  // namespace pyggml::python
