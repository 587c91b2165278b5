#include "cpu/threadpool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PG_PAUSE() _mm_pause()
#else
#define PG_PAUSE() ((void)0)
#endif

namespace pyggml::cpu {

ThreadPool& ThreadPool::instance() {
    static ThreadPool* pool = new ThreadPool();  // never destroyed: workers may outlive main
    return *pool;
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
        generation_++;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::ensure_workers(int n) {
    while ((int)workers_.size() < n - 1) {
        int ith = (int)workers_.size() + 1;
        uint64_t gen = generation_.load();  // read before the run bumps it
        workers_.emplace_back([this, ith, gen] { worker_loop(ith, gen); });
    }
}

void ThreadPool::worker_loop(int ith, uint64_t seen) {
    for (;;) {
        // Spin briefly for back-to-back graphs, then sleep.
        int spins = 0;
        while (generation_.load(std::memory_order_acquire) == seen && spins < 20000) { PG_PAUSE(); ++spins; }
        if (generation_.load(std::memory_order_acquire) == seen) {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return generation_.load() != seen; });
        }
        seen = generation_.load();
        if (stop_) return;
        if (ith < n_active_ && job_) {
            try {
                (*job_)(ith);
            } catch (...) {
                set_error(std::current_exception());
            }
            pending_.fetch_sub(1, std::memory_order_acq_rel);
        }
    }
}

void ThreadPool::set_error(std::exception_ptr e) {
    std::lock_guard<std::mutex> lk(err_mu_);
    if (!error_) error_ = e;
    has_error_ = true;
}

void ThreadPool::barrier() {
    const int n = n_active_;
    if (n == 1) return;
    const int phase = barrier_phase_.load(std::memory_order_acquire);
    if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
        barrier_count_.store(0, std::memory_order_relaxed);
        {
            std::lock_guard<std::mutex> lk(barrier_mu_);
            barrier_phase_.fetch_add(1, std::memory_order_acq_rel);
        }
        if (barrier_sleepers_.load(std::memory_order_acquire) > 0) barrier_cv_.notify_all();
        return;
    }
    // Spin briefly (the common case on an idle machine), then sleep so that an
    // oversubscribed machine does not burn the time slice the late thread needs.
    for (int spins = 0; spins < 2000; ++spins) {
        if (barrier_phase_.load(std::memory_order_acquire) != phase) return;
        PG_PAUSE();
    }
    std::unique_lock<std::mutex> lk(barrier_mu_);
    barrier_sleepers_.fetch_add(1, std::memory_order_acq_rel);
    barrier_cv_.wait(lk, [&] { return barrier_phase_.load(std::memory_order_acquire) != phase; });
    barrier_sleepers_.fetch_sub(1, std::memory_order_acq_rel);
}

void ThreadPool::run(int n_threads, const std::function<void(int)>& fn) {
    std::lock_guard<std::mutex> run_lock(run_mu_);
    if (n_threads < 1) n_threads = 1;
    ensure_workers(n_threads);
    error_ = nullptr;
    has_error_ = false;
    n_active_ = n_threads;
    barrier_count_ = 0;
    if (n_threads > 1) {
        job_ = &fn;
        pending_ = n_threads - 1;
        {
            std::lock_guard<std::mutex> lk(mu_);
            generation_++;
        }
        cv_.notify_all();
    }
    try {
        fn(0);
    } catch (...) {
        set_error(std::current_exception());
    }
    int spins = 0;
    while (pending_.load(std::memory_order_acquire) > 0) {
        if (++spins < 2000) PG_PAUSE();
        else std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    job_ = nullptr;
    n_active_ = 1;
    if (error_) {
        std::exception_ptr e = error_;
        error_ = nullptr;
        has_error_ = false;
        std::rethrow_exception(e);
    }
}

}  // namespace pyggml::cpu
