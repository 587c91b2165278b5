#include "cpu/host_memory.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
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
    size_t used;                      // the tail past every piece and hole
    std::map<size_t, size_t> live;    // offset -> size of each live piece
    std::map<size_t, size_t> holes;   // offset -> size of freed room before `used`, coalesced

    // First fit into a hole, then the tail: a copy replaced again and again while other
    // pieces stay alive reuses its room instead of pinning one slab after another.
    char* take(size_t size) {
        for (auto it = holes.begin(); it != holes.end(); ++it) {
            if (it->second < size) continue;
            const size_t off = it->first, rest = it->second - size;
            holes.erase(it);
            if (rest) holes.emplace(off + size, rest);
            live.emplace(off, size);
            return base + off;
        }
        if (used + size > kSlabBytes) return nullptr;
        live.emplace(used, size);
        used += size;
        return base + used - size;
    }

    void give_back(size_t off) {
        auto piece = live.find(off);
        if (piece == live.end()) return;  // not a piece of ours: nothing to do
        size_t start = off, end = off + piece->second;
        live.erase(piece);
        auto next = holes.lower_bound(end);
        if (next != holes.end() && next->first == end) {
            end += next->second;
            next = holes.erase(next);
        }
        if (next != holes.begin()) {
            auto prev = std::prev(next);
            if (prev->first + prev->second == start) {
                start = prev->first;
                holes.erase(prev);
            }
        }
        if (end == used) used = start;
        else holes.emplace(start, end - start);
    }
};

struct SlabArena {
    std::mutex mu;
    std::vector<Slab> slabs;  // an empty one is released
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
    for (Slab& s : a.slabs)
        if (char* p = s.take(size)) return p;
    char* base = (char*)host_alloc(kSlabBytes, kHugePageBytes);
    if (!base) return nullptr;
    a.slabs.push_back({base, 0, {}, {}});
    return a.slabs.back().take(size);
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
    s->give_back(size_t((const char*)p - s->base));
    if (!s->live.empty()) return;
    std::free(s->base);
    a.slabs.erase(a.slabs.begin() + (s - a.slabs.data()));
}

WeightSlabStats weight_slab_stats() {
    SlabArena& a = arena();
    std::lock_guard<std::mutex> lock(a.mu);
    WeightSlabStats st;
    st.slabs = (int64_t)a.slabs.size();
    for (const Slab& s : a.slabs) {
        st.pieces += (int64_t)s.live.size();
        for (const auto& [off, size] : s.holes) st.hole_bytes += (int64_t)size;
    }
    st.slab_bytes = st.slabs * (int64_t)kSlabBytes;
    st.own_blocks = a.own_blocks;
    return st;
}

}  // namespace pyggml::cpu
