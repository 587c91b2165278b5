#include "cpu/host_memory.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace pyggml::cpu {

void* host_alloc(size_t bytes, size_t align) {
    if (bytes == 0) bytes = align;
    const bool huge = bytes >= kHugeAllocMin;
    if (huge) {
        bytes = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
        if (align < kHugePageBytes) align = kHugePageBytes;
    }
    void* p = nullptr;
    if (posix_memalign(&p, align, bytes) != 0) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) madvise(p, bytes, MADV_HUGEPAGE);  // a hint: refused (no THP) changes nothing
#endif
    return p;
}

namespace {

// Pages are only backed when touched, so a slab's unused tail costs address space, not memory.
constexpr size_t kSlabBytes = size_t(32) << 20;
constexpr size_t kPieceAlign = 64;

struct Slab {
    char* base;
    size_t used;
    int64_t live;
};

struct SlabArena {
    std::mutex mu;
    std::vector<Slab> slabs;  // the last one takes new pieces; an empty one is released
    int64_t own_blocks = 0;

    Slab* owner(const void* p) {
        for (Slab& s : slabs)
            if ((const char*)p >= s.base && (const char*)p < s.base + kSlabBytes) return &s;
        return nullptr;
    }
};

SlabArena& arena() {
    static SlabArena* a = new SlabArena();  // never destroyed: copies may outlive static teardown
    return *a;
}

}  // namespace

void* weight_alloc(size_t bytes) {
    SlabArena& a = arena();
    if (bytes >= kHugeAllocMin) {
        void* p = host_alloc(bytes, kPieceAlign);
        if (p) {
            std::lock_guard<std::mutex> lock(a.mu);
            ++a.own_blocks;
        }
        return p;
    }
    const size_t size = std::max<size_t>(kPieceAlign, (bytes + kPieceAlign - 1) / kPieceAlign * kPieceAlign);
    std::lock_guard<std::mutex> lock(a.mu);
    if (a.slabs.empty() || a.slabs.back().used + size > kSlabBytes) {
        char* base = (char*)host_alloc(kSlabBytes, kHugePageBytes);
        if (!base) return nullptr;
        a.slabs.push_back({base, 0, 0});
    }
    Slab& s = a.slabs.back();
    char* p = s.base + s.used;
    s.used += size;
    ++s.live;
    return p;
}

void weight_free(void* p) {
    if (!p) return;
    SlabArena& a = arena();
    std::lock_guard<std::mutex> lock(a.mu);
    Slab* s = a.owner(p);
    if (!s) {
        --a.own_blocks;
        std::free(p);
        return;
    }
    if (--s->live > 0) return;
    std::free(s->base);  // holes inside a slab are not reused: copies live as long as their model
    a.slabs.erase(a.slabs.begin() + (s - a.slabs.data()));
}

WeightSlabStats weight_slab_stats() {
    SlabArena& a = arena();
    std::lock_guard<std::mutex> lock(a.mu);
    WeightSlabStats st;
    st.slabs = (int64_t)a.slabs.size();
    for (const Slab& s : a.slabs) st.pieces += s.live;
    st.slab_bytes = st.slabs * (int64_t)kSlabBytes;
    st.own_blocks = a.own_blocks;
    return st;
}

}  // namespace pyggml::cpu
