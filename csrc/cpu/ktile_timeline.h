// A per-share timeline of the K-quant tile driver (quant_ktile.cpp) for bench/ktile_timeline.py:
// compiled in only with -DPYGGML_KTILE_TIMELINE (a bench build); otherwise every call is empty
// and the driver is unchanged. Each share prints one line to stderr when it ends: when it started
// (steady clock), the columns it converted and when its conversion (waits included) ended, its
// units and their decode and tile time (thread CPU time, so preemption is left out), its wall and
// CPU time, and the core it started and ended on.
#pragma once
#include <cstdint>

#ifdef PYGGML_KTILE_TIMELINE
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#endif

namespace pyggml::cpu::kt {

#ifdef PYGGML_KTILE_TIMELINE
class Timeline {
public:
    explicit Timeline(int ith) : ith_(ith), core0_(sched_getcpu()), t0_(wall()), c0_(cpu()) {}
    ~Timeline() {
        std::fprintf(stderr,
                     "KTILE_TIMELINE ith=%d core0=%d core1=%d t0_ns=%lld columns=%lld conv_end_us=%.1f units=%lld "
                     "decode_cpu_us=%.1f tile_cpu_us=%.1f wall_us=%.1f cpu_us=%.1f\n",
                     ith_, core0_, sched_getcpu(), (long long)t0_, (long long)columns_, (t_conv_ - t0_) / 1e3,
                     (long long)units_, decode_ / 1e3, tile_ / 1e3, (wall() - t0_) / 1e3, (cpu() - c0_) / 1e3);
    }
    void column() { ++columns_; }
    void converted() { t_conv_ = wall(); }
    void unit_start() { mark_ = cpu(); }
    void unit_decoded() {
        const int64_t c = cpu();
        decode_ += c - mark_;
        mark_ = c;
    }
    void unit_done() {
        tile_ += cpu() - mark_;
        ++units_;
    }

private:
    static int64_t wall() {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }
    static int64_t cpu() {
        timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    }
    int ith_, core0_;
    int64_t t0_, c0_, t_conv_ = 0, mark_ = 0, decode_ = 0, tile_ = 0, columns_ = 0, units_ = 0;
};
#else
class Timeline {
public:
    explicit Timeline(int) {}
    void column() {}
    void converted() {}
    void unit_start() {}
    void unit_decoded() {}
    void unit_done() {}
};
#endif

}  // namespace pyggml::cpu::kt
