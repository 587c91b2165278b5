// The CPU backend: host buffers, dispatch through the op table, a schedule of steps (one per
// node that runs) and an abort check after each.
#include "cpu/backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "cpu/host_memory.h"
#include "cpu/kernels.h"
#include "cpu/schedule.h"
#include "cpu/simd/isa.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {
using ForwardFn = void (*)(const ComputeParams&, Tensor*);
const ForwardFn kForward[] = {
#define PYGGML_X(name, family, py) cpu_forward_##name,
    PYGGML_OP_TABLE(PYGGML_X)
#undef PYGGML_X
};
}  // namespace

namespace {
// How long a thread waiting for the previous step spins, then polls between yields of its
// core, before it sleeps. The yields cover a stretch of solo steps or a step's uneven shares
// (tens of microseconds each in a prompt graph of a small model): a worker that slept there
// costs a futex wake-up at the next split step, on an idle machine more than the step saves.
constexpr int64_t kStepSpinNs = 20000;
constexpr int64_t kStepYieldNs = 200000;

}  // namespace

namespace {
std::atomic<int64_t> g_computes{0}, g_computes_with_workers{0}, g_solo_steps{0}, g_split_steps{0}, g_shared_steps{0};
std::atomic<int64_t> g_back_claimed_units{0}, g_quiet_solo_steps{0}, g_plan_ns{0}, g_grouped_nodes{0};
std::atomic<bool> g_poison_scratch{false};
std::atomic<int64_t> g_conversion_delay_us{0};
}  // namespace

bool set_poison_scratch(bool on) { return g_poison_scratch.exchange(on); }
int64_t set_claimed_conversion_delay(int64_t us) { return g_conversion_delay_us.exchange(std::max<int64_t>(0, us)); }
int64_t claimed_conversion_delay_us() { return g_conversion_delay_us.load(std::memory_order_relaxed); }

void count_back_claimed_units(int64_t n) { g_back_claimed_units.fetch_add(n, std::memory_order_relaxed); }

ScheduleCounts schedule_counts() {
    ScheduleCounts c;
    c.computes = g_computes.load(std::memory_order_relaxed);
    c.computes_with_workers = g_computes_with_workers.load(std::memory_order_relaxed);
    c.solo_steps = g_solo_steps.load(std::memory_order_relaxed);
    c.split_steps = g_split_steps.load(std::memory_order_relaxed);
    c.shared_steps = g_shared_steps.load(std::memory_order_relaxed);
    c.back_claimed_units = g_back_claimed_units.load(std::memory_order_relaxed);
    c.quiet_solo_steps = g_quiet_solo_steps.load(std::memory_order_relaxed);
    c.plan_ns = g_plan_ns.load(std::memory_order_relaxed);
    c.grouped_nodes = g_grouped_nodes.load(std::memory_order_relaxed);
    c.plans_built = plans_built();
    c.plans_reused = plans_reused();
    return c;
}

DeviceInfo CpuBackend::info() const {
    DeviceInfo i;
    i.name = "cpu (" + std::string(simd::isa_name(simd::cpu_isa())) + ")";
    i.sm_count = hardware_threads();
    return i;
}

void* CpuBackend::alloc(size_t bytes) {
    void* p = host_alloc(bytes, kMemAlign);
    if (!p) {
        std::ostringstream os;
        os << "cpu: cannot allocate " << bytes << " bytes";
        throw OutOfMemoryError(os.str());
    }
    return p;
}
void CpuBackend::free(void* ptr) { std::free(ptr); }
void CpuBackend::set(void* dst, const void* src, size_t bytes) { if (bytes) std::memcpy(dst, src, bytes); }
void CpuBackend::get(void* dst, const void* src, size_t bytes) { if (bytes) std::memcpy(dst, src, bytes); }
void CpuBackend::copy(void* dst, const void* src, size_t bytes) { if (bytes) std::memmove(dst, src, bytes); }

void CpuBackend::compute_graph(const std::vector<Tensor*>& nodes, const ComputeOptions& opts) {
    const int n_threads = std::max(1, std::min(opts.n_threads, max_threads()));
    // one level (and AVX512-BF16 setting) for the work sizes and every thread of this compute
    const simd::Isa isa = simd::cpu_isa();
    const bool bf16 = simd::avx512_bf16_allowed();
    std::unique_ptr<BackendPlan> local_plan;
    const auto t_plan = std::chrono::steady_clock::now();
    const SchedulePlan& plan = schedule_for(nodes, n_threads, isa, bf16, opts.plan ? *opts.plan : local_plan);
    g_plan_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t_plan).count(),
                        std::memory_order_relaxed);
    const std::vector<Step>& steps = plan.steps;
    const size_t wsize = plan.work_bytes;
    std::vector<uint8_t> local;
    std::vector<uint8_t>& work = opts.scratch ? *opts.scratch : local;
    if (work.size() < wsize + 64) work.resize(wsize + 64);
    if (g_poison_scratch.load(std::memory_order_relaxed)) std::memset(work.data(), 0xff, work.size());
    void* wdata = (void*)(((uintptr_t)work.data() + 63) & ~uintptr_t(63));

    std::vector<double>* times = opts.node_times;
    if (times) times->assign(nodes.size(), 0.0);
    const int64_t n_solo = plan.n_solo, n_shared = plan.n_shared;
    // Nothing to split: the workers are not woken at all.
    const bool all_solo = n_solo == (int64_t)steps.size();
    const int n_run = all_solo ? 1 : n_threads;
    g_computes.fetch_add(1, std::memory_order_relaxed);
    g_computes_with_workers.fetch_add(n_run > 1 ? 1 : 0, std::memory_order_relaxed);
    g_solo_steps.fetch_add(n_solo, std::memory_order_relaxed);
    g_split_steps.fetch_add((int64_t)steps.size() - n_solo, std::memory_order_relaxed);
    g_shared_steps.fetch_add(n_shared, std::memory_order_relaxed);
    g_grouped_nodes.fetch_add(plan.n_grouped, std::memory_order_relaxed);
    ShareCounters* counters = plan.counters.get();
    for (uint32_t c = 0; c < plan.n_counters; ++c) counters[c].reset();

    ThreadPool& pool = ThreadPool::instance();
    // Per split step, counters (the plan's, reset above): shares taken and shares finished.
    // `completed` counts the steps whose every share has finished; a step starts once all
    // steps before it completed (steps run in graph order, so no dependency is ever crossed).
    WaitWord completed;
    // Thread 0 polls the abort callback after its part of every big step. After an abort or a
    // kernel error every thread still walks the schedule (taking and finishing shares) but runs
    // no kernel, so nobody waits forever; nodes are never cut in half. `stop` changes only when
    // a step ends, before the count moves (or inside a stretch of solo steps, which only thread
    // 0 runs): all threads of a step read the same value, so a step whose kernel has barriers
    // is run by all of them or by none.
    std::atomic<bool> aborted{false}, stop{false};
    size_t done = 0;
    int64_t quiet_solo = 0;  // solo steps not published (thread 0 only)
    auto job = [&](int ith) {
        simd::IsaPin pin(isa, bf16);
        ComputeParams p;
        p.ith = ith;
        p.nth = n_threads;
        p.wdata = wdata;
        p.wsize = wsize;
        p.pool = &pool;
        auto kernel = [&](Tensor* n, const ComputeParams& q) {
            if (stop.load(std::memory_order_relaxed)) return;
            try {
                kForward[(int)n->op](q, n);
            } catch (const BarrierInShareError& e) {  // say which node met it
                pool.set_error(std::make_exception_ptr(BarrierInShareError(std::string(e.what()) + " (node '" +
                                                                           n->name + "', " + op_name(n->op) + ")")));
            } catch (...) {
                pool.set_error(std::current_exception());
            }
        };
        // The thread that finishes step k publishes it. Sleepers are woken only when one may be
        // waiting for it: before a solo step only thread 0 waits, so thread 0 publishing a step
        // that a solo one follows wakes nobody (a stretch of solo steps costs no system call).
        auto note_stop = [&] {
            if (aborted.load(std::memory_order_relaxed) || pool.has_error()) stop.store(true, std::memory_order_relaxed);
        };
        auto publish = [&](size_t k) {
            note_stop();
            completed.value.store((uint32_t)(k + 1), std::memory_order_seq_cst);
            const bool next_solo = k + 1 < steps.size() && steps[k + 1].mode == Mode::Solo;
            if (!(next_solo && ith == 0)) completed.wake_all();
        };
        auto wait_for = [&](size_t k) {
            for (uint32_t v; (v = completed.value.load(std::memory_order_acquire)) < (uint32_t)k;)
                completed.wait_while(v, kStepSpinNs, kStepYieldNs);
        };
        for (size_t k = 0; k < steps.size(); ++k) {
            const Step& st = steps[k];
            Tensor* n = nodes[st.node];
            const auto t0 = times && ith == 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
            if (st.mode == Mode::Solo) {
                if (ith != 0) continue;
                // after a solo step (thread 0's own) there is nothing to wait for
                if (k == 0 || steps[k - 1].mode != Mode::Solo) wait_for(k);
                ComputeParams q = p;
                q.nth = 1;
                kernel(n, q);
                // Inside a stretch of solo steps nobody waits for any but its last one (the
                // workers wait for the next split step): publishing each would move the count's
                // cache line to the spinning workers and back at every step, a store that
                // stalls thread 0 on that round trip (~40 of them in a one-token decode).
                if (k + 1 < steps.size() && steps[k + 1].mode == Mode::Solo) {
                    note_stop();
                    ++quiet_solo;
                } else {
                    publish(k);
                }
            } else if (st.mode == Mode::Shared) {
                // Shares are taken, not assigned: a thread that is late (descheduled, asleep)
                // finds them done by the others and moves on, nobody waits for it to arrive.
                wait_for(k);
                ComputeParams q = p;
                q.no_barrier = true;
                q.share_slots = counters[st.counters].kernel_slots;
                for (int s; (s = counters[st.counters].taken.fetch_add(1, std::memory_order_relaxed)) < n_threads;) {
                    q.ith = s;
                    kernel(n, q);
                    if (counters[st.counters].finished.fetch_add(1, std::memory_order_acq_rel) + 1 == n_threads) publish(k);
                }
            } else if (st.mode == Mode::Group) {
                // Items are taken like shares; each member's scratch is its own region. Under
                // profiling a member's time is thread 0's time in its items, and the group's
                // wait for the other threads goes to its first member.
                wait_for(k);
                ShareCounters& gc = counters[st.counters];
                const GroupMember* first = plan.members.data() + st.first;
                for (int i; (i = gc.taken.fetch_add(1, std::memory_order_relaxed)) < (int)st.items;) {
                    const GroupMember* m = first;
                    int s = i;
                    for (; s >= m->shares; ++m) s -= m->shares;
                    ComputeParams q = p;
                    q.wdata = (char*)wdata + m->work_offset;
                    q.wsize = m->work_bytes;
                    q.no_barrier = true;
                    if (m->shares == 1) {
                        q.ith = 0;
                        q.nth = 1;
                    } else {
                        q.ith = s;
                        q.share_slots = counters[m->counters].kernel_slots;
                    }
                    const auto ti = times && ith == 0 ? std::chrono::steady_clock::now()
                                                      : std::chrono::steady_clock::time_point{};
                    kernel(nodes[m->node], q);
                    if (times && ith == 0)
                        (*times)[m->node] += std::chrono::duration<double>(std::chrono::steady_clock::now() - ti).count();
                    if (gc.finished.fetch_add(1, std::memory_order_acq_rel) + 1 == (int)st.items) publish(k);
                }
            } else {  // Gang: every thread runs its own share, the kernel's barriers need them all
                wait_for(k);
                kernel(n, p);
                if (counters[st.counters].finished.fetch_add(1, std::memory_order_acq_rel) + 1 == n_threads) publish(k);
            }
            // solo steps are small: polling after every 8th of them keeps Ctrl-C prompt and
            // saves a clock read per node of a decode step
            const bool poll = st.mode != Mode::Solo || (k & 7) == 7 || k + 1 == steps.size();
            if (ith == 0 && poll && !aborted.load(std::memory_order_relaxed) && opts.abort && opts.abort()) {
                aborted.store(true, std::memory_order_relaxed);
                done = (st.mode == Mode::Group ? plan.members[st.first + st.count - 1].node : st.node) + 1;
            }
            if (times && ith == 0) {
                double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                if (st.mode == Mode::Group)  // the members' items were counted as they ran
                    for (uint32_t i = 0; i < st.count; ++i) t -= (*times)[plan.members[st.first + i].node];
                (*times)[st.node] += t;
            }
        }
    };
    pool.run(n_run, job);
    g_quiet_solo_steps.fetch_add(quiet_solo, std::memory_order_relaxed);
    if (aborted.load()) {
        std::ostringstream os;
        os << "Graph.compute: aborted after " << done << " of " << nodes.size() << " nodes";
        throw AbortedError(os.str());
    }
}

namespace {
CpuBackend& the_cpu() {
    static CpuBackend* b = new CpuBackend();  // never destroyed: contexts may outlive static teardown
    return *b;
}
}  // namespace

BackendKind backend_kind() {
    BackendKind k;
    k.name = "cpu";
    k.device_count = [] { return 1; };
    k.device = [](int) -> Backend* { return &the_cpu(); };
    k.unsupported_reason = [](const Tensor*) { return std::string(); };
    return k;
}

}  // namespace pyggml::cpu
