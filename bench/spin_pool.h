// A pool of T threads for the streaming benches (the caller is thread 0): go(job) runs job(ith)
// on every thread and returns the wall seconds; secs[i] is thread i's own time in that run
// (max / min: the skew). The workers spin between runs, so no wake-up is timed.
#pragma once
#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

struct SpinPool {
    using Clock = std::chrono::steady_clock;
    int n;
    std::vector<std::thread> th;
    std::atomic<int> gen{0}, done{0};
    std::atomic<bool> quit{false};
    std::function<void(int)> job;
    std::vector<double> secs;
    explicit SpinPool(int n_) : n(n_), secs(n_) {
        for (int i = 1; i < n; ++i)
            th.emplace_back([this, i] {
                for (int seen = 0;;) {
                    while (gen.load(std::memory_order_acquire) == seen && !quit) _mm_pause();
                    if (quit) return;
                    seen = gen.load();
                    run(i);
                    done.fetch_add(1);
                }
            });
    }
    void run(int i) {
        const auto t0 = Clock::now();
        job(i);
        secs[i] = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    double go(const std::function<void(int)>& f) {
        job = f;
        done = 0;
        const auto t0 = Clock::now();
        gen.fetch_add(1, std::memory_order_release);
        run(0);
        while (done.load() != n - 1) _mm_pause();
        return std::chrono::duration<double>(Clock::now() - t0).count();
    }
    ~SpinPool() {
        quit = true;
        for (auto& t : th) t.join();
    }
};
