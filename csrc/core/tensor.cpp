// Tensor layout predicates, error-message helpers and the count of edits to existing tensors.
#include "pyggml/tensor.h"

#include <atomic>

#include "pyggml/error.h"

namespace pyggml {

namespace {
std::atomic<uint64_t> g_tensor_edits{0};
}  // namespace
uint64_t tensor_edit_epoch() { return g_tensor_edits.load(std::memory_order_acquire); }
void note_tensor_edit() { g_tensor_edits.fetch_add(1, std::memory_order_acq_rel); }

size_t Tensor::nbytes() const {
    for (int i = 0; i < kMaxDims; ++i)
        if (ne[i] <= 0) return 0;
    const int64_t bs = blck_size(type);
    size_t n;
    if (bs == 1) {
        n = type_size(type);
        for (int i = 0; i < kMaxDims; ++i) n += (ne[i] - 1) * nb[i];
    } else {
        n = ne[0] * nb[0] / bs;
        for (int i = 1; i < kMaxDims; ++i) n += (ne[i] - 1) * nb[i];
    }
    return n;
}

int Tensor::n_dims() const {
    for (int i = kMaxDims - 1; i >= 1; --i)
        if (ne[i] > 1) return i + 1;
    return 1;
}

namespace {
// Walk the dims keeping the expected stride; dims in `free_mask` may have any stride.
bool contiguous_n(const Tensor* t, int free_mask) {
    const size_t ts = type_size(t->type);
    const int64_t bs = blck_size(t->type);
    if (t->ne[0] != bs && t->nb[0] != ts) return false;
    size_t expected = ts * (size_t)(t->ne[0] / bs);
    for (int i = 1; i < kMaxDims; ++i) {
        if (free_mask & (1 << i)) {
            expected = t->ne[i] * t->nb[i];
        } else {
            if (t->ne[i] != 1 && t->nb[i] != expected) return false;
            expected *= t->ne[i];
        }
    }
    return true;
}
}  // namespace

bool Tensor::is_contiguous() const { return contiguous_n(this, 0); }
bool Tensor::is_contiguous_1() const { return contiguous_n(this, 1 << 1); }
bool Tensor::is_contiguous_2() const { return contiguous_n(this, (1 << 1) | (1 << 2)); }
bool Tensor::is_contiguous_rows() const {
    return ne[0] == blck_size(type) || nb[0] == type_size(type);
}
bool Tensor::same_shape(const Tensor* o) const {
    for (int i = 0; i < kMaxDims; ++i)
        if (ne[i] != o->ne[i]) return false;
    return true;
}

bool can_repeat(const Tensor* small, const Tensor* big) {
    if (small->is_empty()) return big->is_empty();
    for (int i = 0; i < kMaxDims; ++i)
        if (big->ne[i] % small->ne[i] != 0) return false;
    return true;
}

bool are_same_layout(const Tensor* a, const Tensor* b) {
    if (a->type != b->type) return false;
    for (int i = 0; i < kMaxDims; ++i)
        if (a->ne[i] != b->ne[i] || a->nb[i] != b->nb[i]) return false;
    return true;
}

std::string describe(const Tensor* t) {
    if (!t) return "None";
    std::ostringstream os;
    os << type_name(t->type) << " [" << t->ne[0] << ", " << t->ne[1] << ", " << t->ne[2] << ", "
       << t->ne[3] << "]";
    if (!t->is_contiguous())
        os << " nb=[" << t->nb[0] << ", " << t->nb[1] << ", " << t->nb[2] << ", " << t->nb[3] << "]";
    return os.str();
}

OpMessage& OpMessage::with(const char* name, const Tensor* t) {
    if (!operands_.empty()) operands_ += ", ";
    operands_ += std::string(name) + ": " + describe(t);
    return *this;
}

void throw_shape(const OpMessage& m) { throw ShapeError(m.str()); }
void throw_type(const OpMessage& m) { throw TypeMismatchError(m.str()); }
void throw_unsupported(const OpMessage& m) { throw UnsupportedError(m.str()); }

}  // namespace pyggml
