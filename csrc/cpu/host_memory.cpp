#include "cpu/host_memory.h"

#include <cstdlib>

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

}  // namespace pyggml::cpu
