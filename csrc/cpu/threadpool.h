// A persistent pool of worker threads. Waiting threads (for the next run, at a barrier, for
// the run's end) spin for a short, time-bounded while, poll between yields of the core, and
// then sleep on a futex (a condition variable off Linux), so that an oversubscribed machine
// gives the time slice to the thread that is late instead of burning it.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#if defined(__linux__)
#include <sched.h>
#endif
#include <vector>

namespace pyggml::cpu {

// Hardware threads of this machine, read once (glibc reads /sys on every
// std::thread::hardware_concurrency() call, tens of microseconds each).
int hardware_threads();

// The most threads a compute may use: 4x the hardware threads, at least 16. More only wait on
// each other (nodes are split by rows) and each costs a stack. The bindings refuse more; the
// backend lowers anything above it.
int max_threads();

// A 32-bit word threads can sleep on until it changes (futex on Linux).
class WaitWord {
public:
    std::atomic<uint32_t> value{0};
    // Returns once value != seen: spins for about spin_ns first, then (yield_ns > 0) polls
    // between yields of the core for about yield_ns, then sleeps. A yield returns at once on
    // an idle machine (the waiter stays as prompt as a spinner, with no wake-up to pay) and
    // hands the core to a runnable thread on a busy one.
    void wait_while(uint32_t seen, int64_t spin_ns, int64_t yield_ns = 0);
    bool has_sleepers() const { return sleepers_.load(std::memory_order_seq_cst) > 0; }
    // After changing value: wakes every sleeper (a no-op when nobody sleeps).
    void wake_all();

private:
    std::atomic<int> sleepers_{0};
#if !defined(__linux__)
    std::mutex mu_;
    std::condition_variable cv_;
#endif
};

class ThreadPool {
public:
    static ThreadPool& instance();
    ~ThreadPool();

    // Runs fn(ith) on n_threads threads (the caller is thread 0) and waits for all.
    // The first exception thrown by any thread is rethrown in the caller.
    void run(int n_threads, const std::function<void(int)>& fn);
    // Barrier among the n_threads of the current run.
    void barrier();
    int n_threads() const { return n_active_; }

    // Record an exception from a worker; later kernels of the run are skipped.
    void set_error(std::exception_ptr e);
    bool has_error() const { return has_error_.load(std::memory_order_relaxed); }

private:
    ThreadPool() = default;
    void ensure_workers(int n);
    void worker_loop(int ith, uint32_t seen);
    // Before sleeping workers are woken: keeps them off the caller's core for that wake-up
    // (see threadpool.cpp); each woken worker then takes the full set back.
    void steer_off_caller_core(int n_threads, uint32_t generation);
    void restore_affinity();

    std::vector<std::thread> workers_;
    // Bumped to start a run (or to stop). The word holds the run's thread count in its low bits
    // (next_generation), so a worker tells from the one value it read whether it takes part.
    WaitWord generation_;
    WaitWord done_;                  // bumped by the last worker to finish a run
    std::atomic<int> pending_{0};
    std::atomic<bool> stop_{false};
    // The generation word whose wake-up steered the workers, and the caller's cores they take back.
    std::atomic<uint32_t> steered_generation_{0};
#if defined(__linux__)
    cpu_set_t allowed_;
#endif
    const std::function<void(int)>* job_ = nullptr;
    int n_active_ = 1;

    alignas(64) std::atomic<int> barrier_count_{0};
    alignas(64) WaitWord barrier_phase_;

    std::mutex err_mu_;
    std::exception_ptr error_;
    std::atomic<bool> has_error_{false};
    std::mutex run_mu_;  // one graph at a time
};

}  // namespace pyggml::cpu
