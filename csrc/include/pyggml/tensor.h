// The tensor model of ggml: ne/nb layout, views, op, op_params, sources.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "pyggml/op_table.h"
#include "pyggml/types.h"

namespace pyggml {

constexpr int kMaxDims = 4;
constexpr int kMaxSrc = 10;
constexpr int kMaxOpParams = 16;  // int32 slots
constexpr size_t kMemAlign = 64;  // allocation alignment (ggml uses 16; 64 suits SIMD loads)

enum TensorFlag : int32_t {
    kFlagInput = 1,
    kFlagOutput = 2,   // kept alive by the memory planner
    kFlagParam = 4,
    kFlagCompute = 16, // reached through build_forward_expand
    kFlagReadOnly = 32, // storage may not be written (e.g. a read-only memory map)
};

class Context;

struct Tensor {
    Type type = Type::F32;
    int64_t ne[kMaxDims] = {1, 1, 1, 1};
    size_t nb[kMaxDims] = {0, 0, 0, 0};
    Op op = Op::NONE;
    int32_t op_params[kMaxOpParams] = {};
    Tensor* src[kMaxSrc] = {};
    Tensor* view_src = nullptr;  // the root owner of the storage (chains collapsed)
    size_t view_offs = 0;
    void* data = nullptr;
    std::string name;
    int32_t flags = 0;
    Context* ctx = nullptr;
    int64_t id = 0;  // creation index within its context
    // A backend's derived copy of constant data (the CPU's repacked weights, cpu/quant_repack.h),
    // alive while its owner's handle is: expires by itself when the handle is dropped.
    mutable std::weak_ptr<const void> derived;

    int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
    size_t nbytes() const;
    int n_dims() const;
    bool is_empty() const { return ne[0] == 0 || ne[1] == 0 || ne[2] == 0 || ne[3] == 0; }
    size_t elem_size() const { return type_size(type); }
    size_t row_bytes() const { return row_size(type, ne[0]); }

    // Contiguity predicates, exactly as.
    bool is_contiguous() const;
    bool is_contiguous_1() const;
    bool is_contiguous_2() const;
    bool is_contiguous_rows() const;
    bool is_transposed() const { return nb[0] > nb[1]; }
    bool is_permuted() const { return nb[0] > nb[1] || nb[1] > nb[2] || nb[2] > nb[3]; }
    bool same_shape(const Tensor* o) const;

    // Address of element/block (i0 in elements; must be block aligned for quantized types).
    char* ptr(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
        return (char*)data + (i0 / blck_size(type)) * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
    }
    char* row(int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const {
        return (char*)data + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
    }

    int32_t param_i32(int i) const { return op_params[i]; }
    float param_f32(int i) const { float f; std::memcpy(&f, &op_params[i], 4); return f; }
    void set_param_i32(int i, int32_t v) { op_params[i] = v; }
    void set_param_f32(int i, float v) { std::memcpy(&op_params[i], &v, 4); }
};

// Counts the changes to existing tensors that a backend's kept plan (BackendPlan) may depend
// on: a node's op params or sources set after it was made (the *_set_* and *_add_sinks
// modifiers), a weight's derived copy made or dropped. A kept plan records the count and is
// rebuilt once it moved.
uint64_t tensor_edit_epoch();
void note_tensor_edit();

bool can_repeat(const Tensor* small, const Tensor* big);  // big.ne[i] % small.ne[i] == 0
bool are_same_layout(const Tensor* a, const Tensor* b);   // same type, ne, nb

}  // namespace pyggml
