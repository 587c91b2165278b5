// Graph construction (post-order DFS), the memory planner and the compute entry.
#include "pyggml/graph.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <unordered_map>

#include "pyggml/backend.h"
#include "pyggml/error.h"

namespace pyggml {

namespace {
std::atomic<int> g_debug{-1};  // -1: not yet read from the environment
size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
Tensor* root_of(Tensor* t) { return t->view_src ? t->view_src : t; }

// First-fit-by-size free list over a virtual buffer; tracks the high-water mark.
class OffsetAllocator {
public:
    size_t alloc(size_t size) {
        size = align_up(size, kMemAlign);
        auto best = free_.end();
        for (auto it = free_.begin(); it != free_.end(); ++it)
            if (it->second >= size && (best == free_.end() || it->second < best->second)) best = it;
        if (best != free_.end()) {
            size_t off = best->first, rest = best->second - size;
            free_.erase(best);
            if (rest) free_[off + size] = rest;
            return off;
        }
        size_t off = top_;
        top_ += size;
        peak_ = std::max(peak_, top_);
        return off;
    }
    void release(size_t off, size_t size) {
        size = align_up(size, kMemAlign);
        auto it = free_.emplace(off, size).first;
        auto next = std::next(it);
        if (next != free_.end() && it->first + it->second == next->first) {
            it->second += next->second;
            free_.erase(next);
        }
        if (it != free_.begin()) {
            auto prev = std::prev(it);
            if (prev->first + prev->second == it->first) {
                prev->second += it->second;
                free_.erase(it);
                it = prev;
            }
        }
        if (it->first + it->second == top_) {  // give the tail back
            top_ = it->first;
            free_.erase(it);
        }
    }
    size_t peak() const { return peak_; }
private:
    std::map<size_t, size_t> free_;
    size_t top_ = 0, peak_ = 0;
};
}  // namespace

void set_debug(bool on) { g_debug = on ? 1 : 0; }
bool debug_enabled() {
    int v = g_debug.load();
    if (v < 0) {
        const char* e = std::getenv("PYGGML_DEBUG");
        v = (e && *e && *e != '0') ? 1 : 0;
        g_debug = v;
    }
    return v == 1;
}

Graph::Graph(Context* ctx, size_t capacity) : ctx_(ctx), capacity_(capacity) {
    if (!ctx) throw TypeMismatchError("Graph: ctx is None; pass the pyggml Context the tensors were made in");
}

void Graph::visit(Tensor* t) {
    if (!t || visited_.count(t)) return;
    // Mark before recursing: CAST lists its own result as src[1] (as in ggml).
    visited_.insert(t);
    for (Tensor* s : t->src) visit(s);
    if (nodes_.size() + leafs_.size() >= capacity_) {
        std::ostringstream os;
        os << "Graph: capacity of " << capacity_ << " tensors exceeded";
        throw ShapeError(os.str());
    }
    if (t->op == Op::NONE && !(t->flags & kFlagParam)) {
        if (t->name.empty()) t->name = "leaf_" + std::to_string(leafs_.size());
        leafs_.push_back(t);
    } else {
        if (t->name.empty()) t->name = "node_" + std::to_string(nodes_.size());
        t->flags |= kFlagCompute;
        nodes_.push_back(t);
    }
}

void Graph::build_forward_expand(Tensor* t) {
    if (!t) throw ShapeError("build_forward_expand: tensor is None");
    // Validate reachability first so that a failure leaves the graph unchanged.
    const size_t n_before = nodes_.size();
    visit(t);
    root_of(t)->flags |= kFlagOutput;
    if (nodes_.size() != n_before) plan_.reset();  // planned for the shorter list
}

void Graph::alloc() {
    OffsetAllocator leaf_alloc, node_alloc;
    std::unordered_map<Tensor*, size_t> offs;
    std::unordered_map<Tensor*, size_t> last_use;
    auto needs = [](Tensor* t) { return !t->view_src && !t->data && t->nbytes() > 0; };

    for (size_t i = 0; i < nodes_.size(); ++i) {
        Tensor* n = nodes_[i];
        last_use[root_of(n)] = std::max(last_use[root_of(n)], i);
        for (Tensor* s : n->src)
            if (s) last_use[root_of(s)] = std::max(last_use[root_of(s)], i);
    }
    std::vector<Tensor*> leaf_list, node_list;
    const std::unordered_set<Tensor*> is_node(nodes_.begin(), nodes_.end());
    std::unordered_set<Tensor*> planned_nodes;
    for (Tensor* l : leafs_)
        if (needs(l)) { offs[l] = leaf_alloc.alloc(l->nbytes()); leaf_list.push_back(l); }
    // Roots of views can be tensors outside the node list (e.g. no_alloc inputs used
    // only through views); place those with the leafs.
    auto place_extra = [&](Tensor* r) {
        if (needs(r) && !offs.count(r) && !is_node.count(r)) {
            offs[r] = leaf_alloc.alloc(r->nbytes());
            leaf_list.push_back(r);
        }
    };
    for (Tensor* n : nodes_) {
        place_extra(root_of(n));
        for (Tensor* s : n->src) if (s) place_extra(root_of(s));
    }

    stats_ = PlanStats{};
    std::vector<std::vector<Tensor*>> to_free(nodes_.size());
    for (auto& kv : last_use)
        if (kv.first && !(kv.first->flags & kFlagOutput)) to_free[kv.second].push_back(kv.first);
    for (size_t i = 0; i < nodes_.size(); ++i) {
        Tensor* n = nodes_[i];
        if (needs(n) && !offs.count(n)) {
            offs[n] = node_alloc.alloc(n->nbytes());
            node_list.push_back(n);
            planned_nodes.insert(n);
            stats_.sum_intermediate_bytes += align_up(n->nbytes(), kMemAlign);
        }
        for (Tensor* r : to_free[i])
            if (planned_nodes.count(r)) node_alloc.release(offs[r], r->nbytes());
    }
    stats_.peak_bytes = node_alloc.peak();
    stats_.leaf_bytes = leaf_alloc.peak();
    stats_.n_planned = (int)(leaf_list.size() + node_list.size());

    char* leaf_base = leaf_list.empty() ? nullptr : (char*)ctx_->alloc_buffer(leaf_alloc.peak());
    char* node_base = node_list.empty() ? nullptr : (char*)ctx_->alloc_buffer(node_alloc.peak());
    for (Tensor* l : leaf_list) l->data = leaf_base + offs[l];
    for (Tensor* n : node_list) n->data = node_base + offs[n];
    // Views take their storage from their root.
    for (auto* list : {&leafs_, &nodes_})
        for (Tensor* t : *list) {
            if (t->view_src && t->view_src->data) t->data = (char*)t->view_src->data + t->view_offs;
            for (Tensor* s : t->src)
                if (s && s->view_src && s->view_src->data) s->data = (char*)s->view_src->data + s->view_offs;
        }
    allocated_upto_ = nodes_.size() + leafs_.size();
}

void Graph::compute(int n_threads, const std::function<bool()>& abort) {
    if (n_threads < 1) throw ShapeError("Graph.compute: n_threads must be >= 1");
    Backend* backend = ctx_->backend();
    // The checks depend only on the node and leaf lists (their tensors' contexts, flags and
    // storage, which stay once set) and on edits to existing nodes: a graph computed again
    // (decode) skips them, walking no tensor it does not run.
    const uint64_t edits = tensor_edit_epoch();
    if (!(checked_.nodes == nodes_.size() && checked_.leafs == leafs_.size() && checked_.edits == edits &&
          allocated())) {
        checked_ = Checked{};
        // Everything that can be refused is refused before a buffer is planned or a node runs.
        for (Tensor* n : nodes_) {
            const std::string why = backend->unsupported_reason(n);
            if (!why.empty()) {
                std::ostringstream os;
                os << "[" << op_name(n->op) << "] node '" << n->name << "' is not supported by the " << backend->name()
                   << " backend: " << why << " (" << describe(n) << ")";
                throw UnsupportedError(os.str());
            }
            const Tensor* root = n->view_src ? n->view_src : n;
            if (!op_is_layout_only(n->op) && (root->flags & kFlagReadOnly)) {
                std::ostringstream os;
                os << "[" << op_name(n->op) << "] node '" << n->name << "' would write into the read-only tensor '"
                   << root->name << "' (e.g. memory-mapped weights); copy it first";
                throw ShapeError(os.str());
            }
        }
        for (auto* list : {&leafs_, &nodes_})
            for (Tensor* t : *list) {
                Backend* home = t->ctx ? t->ctx->backend() : cpu_backend();
                if (home != backend) {
                    std::ostringstream os;
                    os << "Graph.compute: tensor '" << t->name << "' lives on " << home->name()
                       << " but the graph computes on " << backend->name();
                    throw ShapeError(os.str());
                }
            }
        if (!allocated()) alloc();
        for (auto* list : {&leafs_, &nodes_})
            for (Tensor* t : *list) {
                if (!t->data && t->view_src && t->view_src->data)
                    t->data = (char*)t->view_src->data + t->view_offs;
                if (!t->data && t->nbytes() > 0) {
                    std::ostringstream os;
                    os << "Graph.compute: tensor '" << t->name << "' (" << describe(t) << ") has no storage";
                    throw ShapeError(os.str());
                }
            }
        checked_ = Checked{nodes_.size(), leafs_.size(), edits};
    }
    ComputeOptions opts;
    opts.n_threads = n_threads;
    opts.abort = abort;
    opts.node_times = profiling_ ? &node_times_ : nullptr;
    opts.scratch = &work_;
    opts.plan = &plan_;
    backend->compute_graph(nodes_, opts);
}

}  // namespace pyggml
