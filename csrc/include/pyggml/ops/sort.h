// Row sorting ops.
#pragma once
#include "pyggml/context.h"

namespace pyggml {

enum class SortOrder : int32_t { ASC = 0, DESC = 1 };

// I32, same shape as a: per row, the permutation that sorts the row (ties keep index order;
// NaN sorts after every number in ASC order and before them in DESC order).
Tensor* argsort(Context* ctx, Tensor* a, SortOrder order);
// Descending argsort followed by a view of its first k columns (ordered, strided result).
Tensor* argsort_top_k(Context* ctx, Tensor* a, int64_t k);
// I32 [k, ne1, ne2, ne3]: the indices of the k largest values of each row. The order within
// a row is unspecified by ggml; pyggml returns them in descending value order.
Tensor* top_k(Context* ctx, Tensor* a, int64_t k);

}  // namespace pyggml
