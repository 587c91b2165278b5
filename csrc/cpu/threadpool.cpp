#include "cpu/threadpool.h"

#include <algorithm>
#include <chrono>

#if defined(__linux__)
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PG_PAUSE() _mm_pause()
#else
#define PG_PAUSE() ((void)0)
#endif

#include "cpu/env.h"

namespace pyggml::cpu {

namespace {
// How long a waiting thread spins before it sleeps. Long enough to cover the gap between two
// nodes or two back-to-back graphs on an idle machine, short enough that a descheduled peer
// gets the core back soon on a busy one.
constexpr int64_t kBarrierSpinNs = 20000;
constexpr int64_t kIdleSpinNs = 50000;
// After the idle spin, a worker polls between yields of its core this long before it sleeps:
// the host work between two computes of a decode loop can outlast the spin (a speculative
// round's drafting and bookkeeping, ~50-150 us), and a futex wake-up then costs the next
// compute tens of microseconds. A yield gives the core to any other runnable thread, so a busy
// machine loses little. PYGGML_CPU_IDLE_YIELD_US (read once) overrides it, for benchmarks.
int64_t idle_yield_ns() {
    static const int64_t ns = env_nonnegative("PYGGML_CPU_IDLE_YIELD_US", 300) * 1000;
    return ns;
}
constexpr int64_t kDoneSpinNs = 20000;
// A thread waiting in a barrier or for a run's end then polls between yields this long before
// it sleeps. On a virtual machine the futex wake-up that ends such a sleep tends to put the
// sleeper on its waker's core (the sleeper's halted vCPU reads as preempted), and both threads
// then share one core for milliseconds, until the guest balances them again. A run that woke
// its worker late (after idle) left the caller waiting past the spin: the 8-column quantized
// GEMM (K 576 x M 1536, q8_0, 2 threads) ran its next eight computes at ~250 us instead of
// ~105 us; with this phase in both waits at 104-125 us. With it at barriers alone there was no
// gain, so the end-of-run wait carries it; a barrier's sleep is woken the same way, so it polls too.
constexpr int64_t kWaitYieldNs = 200000;

// The generation word: a run counter above the run's thread count. A worker that sits a run
// out can be slow enough to look only after the caller has finished that run and set up the
// next one (thread count, job) without bumping the word yet: judged from those fields, it ran
// the next job under the old generation and again under the new one (an extra arrival at the
// next run's barriers; rows went uncomputed). The one word it read cannot mix two runs.
constexpr uint32_t kThreadBits = 16, kThreadMask = (1u << kThreadBits) - 1;
uint32_t next_generation(uint32_t word, int n_threads) {
    return (((word >> kThreadBits) + 1) << kThreadBits) | (uint32_t(n_threads) & kThreadMask);
}

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
}  // namespace

int hardware_threads() {
    static const int n = (int)std::max(1u, std::thread::hardware_concurrency());
    return n;
}

int max_threads() {
    static const int cap = std::min(std::max(16, 4 * hardware_threads()), int(kThreadMask));
    return cap;
}

void WaitWord::wait_while(uint32_t seen, int64_t spin_ns, int64_t yield_ns) {
    if (value.load(std::memory_order_acquire) != seen) return;
    const int64_t until = now_ns() + spin_ns;
    for (int i = 1;; ++i) {
        PG_PAUSE();
        if (value.load(std::memory_order_acquire) != seen) return;
        if ((i & 63) == 0 && now_ns() > until) break;
    }
    if (yield_ns > 0) {
        const int64_t yield_until = now_ns() + yield_ns;
        do {
            std::this_thread::yield();
            if (value.load(std::memory_order_acquire) != seen) return;
        } while (now_ns() < yield_until);
    }
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
#if defined(__linux__)
    while (value.load(std::memory_order_seq_cst) == seen)
        syscall(SYS_futex, (uint32_t*)&value, FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
#else
    {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return value.load(std::memory_order_seq_cst) != seen; });
    }
#endif
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

void WaitWord::wake_all() {
    // The seq_cst pair (value store before this load; sleepers increment before the value
    // re-check) means a thread about to sleep either sees the new value or is counted here.
    if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
#if defined(__linux__)
    syscall(SYS_futex, (uint32_t*)&value, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
#else
    { std::lock_guard<std::mutex> lk(mu_); }
    cv_.notify_all();
#endif
}

ThreadPool& ThreadPool::instance() {
    static ThreadPool* pool = new ThreadPool();  // never destroyed: workers may outlive main
    return *pool;
}

ThreadPool::~ThreadPool() {
    stop_ = true;
    generation_.value.store(next_generation(generation_.value.load(), 0), std::memory_order_seq_cst);
    generation_.wake_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::ensure_workers(int n) {
    while ((int)workers_.size() < n - 1) {
        int ith = (int)workers_.size() + 1;
        uint32_t gen = generation_.value.load();  // read before the run bumps it
        workers_.emplace_back([this, ith, gen] { worker_loop(ith, gen); });
    }
}

// A worker woken from sleep can be put on the caller's own core: on a virtual machine a halted
// vCPU reads as preempted, so the guest scheduler does not count the idle core as free. The
// worker then waits there until the caller's share is done, and the run took longer at 2
// threads than at 1 (measured: a 4096 x 4096 q4_K GEMV after 20 ms idle, 570-830 us against
// 470 us on one thread). So, where some worker sleeps, the caller limits the workers to the
// other cores it may use before the wake-up; each then takes the caller's full set back.
void ThreadPool::steer_off_caller_core(int n_threads, uint32_t generation) {
#if defined(__linux__)
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < 2) return;
    const int here = sched_getcpu();
    if (here < 0 || here >= CPU_SETSIZE || !CPU_ISSET(here, &allowed)) return;
    cpu_set_t elsewhere = allowed;
    CPU_CLR(here, &elsewhere);
    for (int i = 0; i < n_threads - 1; ++i) pthread_setaffinity_np(workers_[i].native_handle(), sizeof(elsewhere), &elsewhere);
    allowed_ = allowed;
    steered_generation_.store(generation, std::memory_order_relaxed);  // published by the bump that follows
#else
    (void)n_threads;
#endif
}

void ThreadPool::restore_affinity() {
#if defined(__linux__)
    pthread_setaffinity_np(pthread_self(), sizeof(allowed_), &allowed_);
#endif
}

void ThreadPool::worker_loop(int ith, uint32_t seen) {
    for (;;) {
        generation_.wait_while(seen, kIdleSpinNs, idle_yield_ns());
        seen = generation_.value.load(std::memory_order_acquire);
        if (stop_.load()) return;
        if (ith >= int(seen & kThreadMask)) continue;  // not in this run
        if (steered_generation_.load(std::memory_order_relaxed) == seen) restore_affinity();
        try {
            (*job_)(ith);
        } catch (...) {
            set_error(std::current_exception());
        }
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            done_.value.fetch_add(1, std::memory_order_seq_cst);
            done_.wake_all();
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
    const uint32_t phase = barrier_phase_.value.load(std::memory_order_acquire);
    if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
        barrier_count_.store(0, std::memory_order_relaxed);
        barrier_phase_.value.fetch_add(1, std::memory_order_seq_cst);
        barrier_phase_.wake_all();
        return;
    }
    barrier_phase_.wait_while(phase, kBarrierSpinNs, kWaitYieldNs);
}

void ThreadPool::run(int n_threads, const std::function<void(int)>& fn) {
    std::lock_guard<std::mutex> run_lock(run_mu_);
    n_threads = std::max(1, std::min(n_threads, max_threads()));
    ensure_workers(n_threads);
    error_ = nullptr;
    has_error_ = false;
    n_active_ = n_threads;
    barrier_count_ = 0;
    uint32_t done_seen = done_.value.load(std::memory_order_acquire);
    if (n_threads > 1) {
        job_ = &fn;
        pending_ = n_threads - 1;
        const uint32_t next = next_generation(generation_.value.load(std::memory_order_relaxed), n_threads);
        if (generation_.has_sleepers()) steer_off_caller_core(n_threads, next);
        generation_.value.store(next, std::memory_order_seq_cst);
        generation_.wake_all();
    }
    try {
        fn(0);
    } catch (...) {
        set_error(std::current_exception());
    }
    if (n_threads > 1) {
        while (pending_.load(std::memory_order_acquire) > 0) {
            done_.wait_while(done_seen, kDoneSpinNs, kWaitYieldNs);
            done_seen = done_.value.load(std::memory_order_acquire);
        }
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
