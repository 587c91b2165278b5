// Context: tensor creation, the data arena and planner buffers.
#include "pyggml/context.h"


#include "pyggml/backend.h"
#include "pyggml/error.h"

namespace pyggml {

namespace {
size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

Context::Context(size_t mem_size, bool no_alloc, Backend* backend)
    : mem_size_(mem_size), no_alloc_(no_alloc), backend_(backend ? backend : cpu_backend()) {
    if (!no_alloc && mem_size > 0) {
        try {
            arena_ = (uint8_t*)backend_->alloc(mem_size);
        } catch (const OutOfMemoryError& e) {
            std::ostringstream os;
            os << "Context: cannot allocate an arena of " << mem_size << " bytes (" << e.what() << ")";
            throw OutOfMemoryError(os.str());
        }
    }
}

Context::~Context() {
    backend_->free(arena_);
    for (void* b : buffers_) backend_->free(b);
}

Tensor* Context::make_tensor(Type type, int n_dims, const int64_t* ne, Tensor* view_src,
                             size_t view_offs, bool allocate) {
    if (!type_traits(type).is_valid) {
        std::ostringstream os;
        os << "new_tensor: unsupported type id " << (int)type;
        throw TypeMismatchError(os.str());
    }
    if (n_dims < 1 || n_dims > kMaxDims) {
        std::ostringstream os;
        os << "new_tensor: n_dims must be 1..4, got " << n_dims;
        throw ShapeError(os.str());
    }
    int64_t shape[kMaxDims] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; ++i) {
        if (ne[i] < 0) {
            std::ostringstream os;
            os << "new_tensor: ne[" << i << "]=" << ne[i] << " must be >= 0";
            throw ShapeError(os.str());
        }
        shape[i] = ne[i];
    }
    const int64_t bs = blck_size(type);
    if (shape[0] % bs != 0) {
        std::ostringstream os;
        os << "new_tensor: ne[0]=" << shape[0] << " must be a multiple of the " << type_name(type)
           << " block size " << bs;
        throw ShapeError(os.str());
    }
    // Guard against sizes that overflow size_t arithmetic.
    // In long double from the first factor: size_t arithmetic could wrap for huge ne.
    long double total = (long double)type_size(type) * (long double)(shape[0] / bs) * shape[1] * shape[2] * shape[3];
    if (total > (long double)(1ull << 48)) {
        std::ostringstream os;
        os << "new_tensor: " << type_name(type) << " [" << shape[0] << ", " << shape[1] << ", "
           << shape[2] << ", " << shape[3] << "] is too large";
        throw OutOfMemoryError(os.str());
    }
    size_t data_size = row_size(type, shape[0]) * shape[1] * shape[2] * shape[3];

    if (view_src && view_src->view_src) {  // collapse view chains onto the root owner
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }
    if (view_src) {
        size_t span = view_src->nbytes();
        if (data_size + view_offs > span) {
            std::ostringstream os;
            os << "view: span " << data_size << " bytes at offset " << view_offs
               << " exceeds the source's " << span << " bytes (source: " << describe(view_src) << ")";
            throw ShapeError(os.str());
        }
    }

    void* data = nullptr;
    if (view_src) {
        if (view_src->data) data = (char*)view_src->data + view_offs;
    } else if (allocate && !no_alloc_ && data_size > 0) {
        size_t need = align_up(data_size, kMemAlign);
        if (used_ + need > mem_size_) {
            std::ostringstream os;
            os << "Context arena exhausted: a tensor of " << data_size << " bytes ("
               << type_name(type) << " [" << shape[0] << ", " << shape[1] << ", " << shape[2]
               << ", " << shape[3] << "]) needs " << need << " bytes, " << (mem_size_ - used_)
               << " of " << mem_size_ << " are left";
            throw OutOfMemoryError(os.str());
        }
        data = arena_ + used_;
        used_ += need;
    }

    auto t = std::make_unique<Tensor>();
    t->type = type;
    for (int i = 0; i < kMaxDims; ++i) t->ne[i] = shape[i];
    t->nb[0] = type_size(type);
    t->nb[1] = t->nb[0] * (size_t)(shape[0] / bs);
    t->nb[2] = t->nb[1] * shape[1];
    t->nb[3] = t->nb[2] * shape[2];
    t->view_src = view_src;
    t->view_offs = view_offs;
    t->data = data;
    t->ctx = this;
    t->id = (int64_t)tensors_.size();
    tensors_.push_back(std::move(t));
    return tensors_.back().get();
}

Tensor* Context::new_tensor(Type type, int n_dims, const int64_t* ne) {
    return make_tensor(type, n_dims, ne, nullptr, 0);
}

Tensor* Context::new_tensor(Type type, std::initializer_list<int64_t> ne) {
    return make_tensor(type, (int)ne.size(), ne.begin(), nullptr, 0);
}

Tensor* Context::new_tensor_external(Type type, int n_dims, const int64_t* ne, void* data) {
    Tensor* t = make_tensor(type, n_dims, ne, nullptr, 0, false);
    t->data = data;
    return t;
}

Tensor* Context::dup_tensor(const Tensor* a) { return make_tensor(a->type, kMaxDims, a->ne, nullptr, 0); }

Tensor* Context::new_view(Tensor* src, Type type, int n_dims, const int64_t* ne, size_t offs) {
    return make_tensor(type, n_dims, ne, src, offs);
}

Tensor* Context::view_tensor(Tensor* a) {
    Tensor* r = make_tensor(a->type, kMaxDims, a->ne, a, 0);
    for (int i = 0; i < kMaxDims; ++i) r->nb[i] = a->nb[i];
    r->name = a->name + " (view)";
    return r;
}

void* Context::alloc_buffer(size_t bytes) {
    void* p;
    try {
        p = backend_->alloc(bytes);
    } catch (const OutOfMemoryError& e) {
        std::ostringstream os;
        os << "cannot allocate a compute buffer of " << bytes << " bytes (" << e.what() << ")";
        throw OutOfMemoryError(os.str());
    }
    buffers_.push_back(p);
    return p;
}

}  // namespace pyggml
