// A context: creates tensors and owns their headers and (unless no_alloc) their data arena.
#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "pyggml/tensor.h"

namespace pyggml {

class Backend;

class Context {
public:
    // Tensor storage comes from `backend`'s buffers (nullptr: the CPU backend); graphs over
    // this context compute on it.
    Context(size_t mem_size, bool no_alloc = false, Backend* backend = nullptr);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    // New packed tensor; 1..4 dims given in ggml order.
    Tensor* new_tensor(Type type, int n_dims, const int64_t* ne);
    Tensor* new_tensor(Type type, std::initializer_list<int64_t> ne);
    // A packed tensor over caller-owned memory (no copy, e.g. a memory-mapped GGUF file).
    // The caller keeps `data` alive for the context's lifetime.
    Tensor* new_tensor_external(Type type, int n_dims, const int64_t* ne, void* data);
    // A tensor of a's type and shape with packed strides (what most ops return).
    Tensor* dup_tensor(const Tensor* a);
    // A tensor sharing storage with `src` at byte offset `offs` (packed strides of `ne`).
    Tensor* new_view(Tensor* src, Type type, int n_dims, const int64_t* ne, size_t offs);
    // Full-size view with identical ne/nb (used by in-place ops).
    Tensor* view_tensor(Tensor* a);

    // Memory for graph intermediates (the planner), owned by the context.
    void* alloc_buffer(size_t bytes);

    size_t mem_size() const { return mem_size_; }
    size_t mem_used() const { return used_; }
    bool no_alloc() const { return no_alloc_; }
    Backend* backend() const { return backend_; }
    const std::deque<std::unique_ptr<Tensor>>& tensors() const { return tensors_; }

private:
    Tensor* make_tensor(Type type, int n_dims, const int64_t* ne, Tensor* view_src, size_t view_offs,
                        bool allocate = true);
    size_t mem_size_;
    bool no_alloc_;
    Backend* backend_;
    size_t used_ = 0;
    uint8_t* arena_ = nullptr;
    std::deque<std::unique_ptr<Tensor>> tensors_;
    std::vector<void*> buffers_;
};

}  // namespace pyggml
