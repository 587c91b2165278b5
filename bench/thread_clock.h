// The calling thread's CPU time in seconds: figures that hold on a machine shared with other
// work (the standalone one-thread benches).
#pragma once
#include <time.h>

namespace bench {
inline double thread_seconds() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
}  // namespace bench
