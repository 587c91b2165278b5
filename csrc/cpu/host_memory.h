// Host memory for the CPU backend's buffers and repacked weights. Large blocks sit on 2 MiB
// transparent huge pages where the kernel offers them on request (THP "madvise", the usual
// default): a weight streamed by a GEMV then crosses no 4 KiB page boundary, where the
// hardware prefetchers stop and a TLB miss waits (bench/quant_gemv_paths.cpp, Zen 4: a read
// pass took ~1.3x the cycles per byte on 4 KiB pages, one- and two-thread; the one-column dots
// 1.05-1.4x, q6_K most). numpy asks the same for its large arrays, so the memcpy the benches
// compare against already has them. Weights mapped from a GGUF file stay on the page cache's
// pages unless the model copies them (pyggml.llm.Model.load's use_mmap).
#pragma once
#include <cstddef>
#include <cstdint>

namespace pyggml::cpu {

// Blocks of at least this many bytes are 2 MiB aligned, rounded up to whole 2 MiB pages and
// advised huge; smaller ones are plainly `align`-aligned.
constexpr size_t kHugePageBytes = size_t(2) << 20;
constexpr size_t kHugeAllocMin = size_t(4) << 20;

// `bytes` (0 taken as `align`) aligned to `align` (a power of two, at least sizeof(void*)), or
// null when out of memory. Free with std::free.
void* host_alloc(size_t bytes, size_t align);

// Long-lived weight copies (repacked matrices). A small model's matrices are mostly under
// kHugeAllocMin each; alone, each would sit on 4 KiB pages (a ~110M model's 768 x 2048 products
// streamed at ~0.75x). So copies under kHugeAllocMin are carved from shared huge-page slabs;
// freed room is reused (first fit) and a slab is released when its last piece is. Larger
// copies get a block of their own. 64-byte aligned; null when out of memory. Free with
// weight_free only.
void* weight_alloc(size_t bytes);
void weight_free(void* p);

struct WeightSlabStats {
    int64_t slabs = 0;        // slabs held
    int64_t pieces = 0;       // live pieces in them
    int64_t slab_bytes = 0;   // their reserved size
    int64_t hole_bytes = 0;   // freed room inside them that new pieces may take
    int64_t own_blocks = 0;   // live copies with a block of their own
};
WeightSlabStats weight_slab_stats();

}  // namespace pyggml::cpu
