// A persistent pool of worker threads with a spin-then-yield barrier.
#pragma once
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pyggml::cpu {

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
    void worker_loop(int ith, uint64_t seen);

    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    bool stop_ = false;
    const std::function<void(int)>* job_ = nullptr;
    int n_active_ = 1;

    alignas(64) std::atomic<int> barrier_count_{0};
    alignas(64) std::atomic<int> barrier_phase_{0};
    // Threads that stopped spinning sleep here (oversubscribed machines).
    std::mutex barrier_mu_;
    std::condition_variable barrier_cv_;
    std::atomic<int> barrier_sleepers_{0};

    std::mutex err_mu_;
    std::exception_ptr error_;
    std::atomic<bool> has_error_{false};
    std::mutex run_mu_;  // one graph at a time
};

}  // namespace pyggml::cpu
