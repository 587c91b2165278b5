// The CPU backend entry: run a node list on the persistent thread pool.
#pragma once
#include <cstdint>
#include <vector>

#include "pyggml/tensor.h"

namespace pyggml::cpu {

// Runs nodes in order; every thread calls each node's kernel, then all meet at a barrier.
// `work` is grown to the largest per-node scratch need. `times` (optional) receives the
// wall time of every node in seconds.
void compute_graph(const std::vector<Tensor*>& nodes, int n_threads, std::vector<uint8_t>& work,
                   std::vector<double>* times);

}  // namespace pyggml::cpu
