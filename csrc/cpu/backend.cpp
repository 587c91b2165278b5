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
#include "cpu/simd/isa.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {
using ForwardFn = void (*)(const ComputeParams&, Tensor*);
using WorkSizeFn = size_t (*)(const Tensor*, int);
struct Entry { ForwardFn forward; WorkSizeFn work_size; };
const Entry kDispatch[] = {
#define PYGGML_X(name, family, py) {cpu_forward_##name, cpu_work_size_##name},
    PYGGML_OP_TABLE(PYGGML_X)
#undef PYGGML_X
};

bool runs(const Tensor* n) { return !op_is_layout_only(n->op) && !n->is_empty() && (n->flags & kFlagCompute); }
}  // namespace

// Below this many bytes of work per thread a node runs on thread 0 alone: splitting it costs
// more in barriers and wake-ups than the split saves (on a busy machine, far more). "Work" is
// the bytes a node reads and writes, plus its multiply-adds for the arithmetic-bound ops.
// PYGGML_CPU_MIN_WORK (bytes) overrides it, for benchmarks.
// Once some node of a graph is that big (the workers take part in the compute anyway), a
// barrier-free node splits from a lower bar: its shares are taken, not assigned, so a worker
// that is late costs nothing, and a worker between two big nodes is polling, not asleep.
// Decode at a long context is the case: the attention node engages the workers, and the
// matrix-vector products between two of them are worth splitting too. PYGGML_CPU_MIN_SHARE_WORK
// (bytes) overrides that bar.
namespace {
int64_t env_bytes(const char* name, int64_t fallback) {
    // read at every compute (a short environ scan) so that a test can change it
    const char* e = std::getenv(name);
    if (e && *e) {
        char* end = nullptr;
        const long long x = std::strtoll(e, &end, 10);
        if (end && *end == 0 && x >= 0) return (int64_t)x;
    }
    return fallback;
}
int64_t min_work_per_thread() { return env_bytes("PYGGML_CPU_MIN_WORK", (int64_t)128 * 1024); }
int64_t min_share_work_per_thread() { return env_bytes("PYGGML_CPU_MIN_SHARE_WORK", (int64_t)16 * 1024); }

double node_work(const Tensor* n) {
    double w = (double)n->nbytes();
    for (const Tensor* s : n->src)
        if (s) w += (double)s->nbytes();
    const Tensor* a = n->src[0];
    const Tensor* b = n->src[1];
    switch (n->op) {
        case Op::MUL_MAT:
        case Op::OUT_PROD:
            // multiply-adds: every output element is a dot product of length a->ne[0]
            if (a) w += 0.25 * (double)a->ne[0] * (double)n->nelements();
            break;
        case Op::MUL_MAT_ID:
            if (a) w += 0.25 * (double)a->ne[0] * (double)n->nelements();
            break;
        case Op::FLASH_ATTN_EXT:
            // q [D, T, H, S] against n_kv keys and values
            if (a && b) w += 0.5 * (double)a->ne[0] * (double)b->ne[1] * (double)a->ne[1] * a->ne[2] * a->ne[3];
            break;
        case Op::SET_ROWS:
            // writes only the source rows into the (often cache-sized) destination
            return 2.0 * (double)a->nbytes() + (b ? (double)b->nbytes() : 0.0);
        case Op::GET_ROWS:
            // reads only the rows it gathers from the (often table-sized) source
            return 2.0 * (double)n->nbytes() + (b ? (double)b->nbytes() : 0.0);
        case Op::ARGSORT:
            // n log n comparisons per row, costly ones: a row of a few values is not worth a split
            return w * 16.0 * std::log2(std::max<double>(2.0, (double)n->ne[0]));
        case Op::IM2COL: case Op::IM2COL_3D: case Op::CONV_2D: case Op::CONV_3D: case Op::CONV_2D_DW:
        case Op::CONV_TRANSPOSE_1D: case Op::CONV_TRANSPOSE_2D: case Op::COL2IM_1D: case Op::SOLVE_TRI:
            return 1e30;  // arithmetic-bound in ways bytes do not show: always split
        default:
            break;
    }
    return w;
}

// Ops whose kernels split their work by (ith, nth) alone and never meet the other threads:
// their thread shares may run in any order, several on one thread.
bool barrier_free(const Tensor* n) {
    switch (n->op) {
        case Op::ADD: case Op::ADD1: case Op::ADD_ID: case Op::SUB: case Op::MUL: case Op::DIV:
        case Op::SCALE: case Op::CLAMP: case Op::UNARY: case Op::SQR: case Op::SQRT: case Op::LOG:
        case Op::SIN: case Op::COS: case Op::LEAKY_RELU:
        case Op::RMS_NORM: case Op::NORM: case Op::L2_NORM: case Op::ROPE: case Op::GLU:
        case Op::SOFT_MAX: case Op::GET_ROWS: case Op::SET_ROWS: case Op::CPY: case Op::DUP:
        case Op::CONT: case Op::FILL:
            return true;
        case Op::MUL_MAT:
            return mul_mat_barrier_free(n);
        case Op::MUL_MAT_ID:
            return mul_mat_id_barrier_free(n);
        case Op::FLASH_ATTN_EXT:
            return flash_attn_barrier_free(n);
        default:
            return false;
    }
}

// How a scheduled node runs: on thread 0 alone (too little work to split), as thread shares
// any thread may take (barrier-free kernels), or on every thread at once (its kernel has
// barriers of its own).
enum class Mode : uint8_t { Solo, Shared, Gang };
struct Step {
    size_t node;
    Mode mode;
};
struct alignas(64) ShareCounters {
    std::atomic<int> taken{0};
    std::atomic<int> finished{0};
    std::atomic<int64_t> kernel_slots[2] = {0, 0};  // ComputeParams::share_slots
};

// How long a thread waiting for the previous step spins, then polls between yields of its
// core, before it sleeps. The yields cover a stretch of solo steps or a step's uneven shares
// (tens of microseconds each in a prompt graph of a small model): a worker that slept there
// costs a futex wake-up at the next split step, on an idle machine more than the step saves.
constexpr int64_t kStepSpinNs = 20000;
constexpr int64_t kStepYieldNs = 200000;

// PYGGML_CPU_SHARES=0 runs barrier-free nodes as gang steps too (every thread its own share,
// all waiting for the slowest): the lockstep schedule, kept for benchmarks.
bool shares_enabled() {
    const char* e = std::getenv("PYGGML_CPU_SHARES");
    return !(e && e[0] == '0' && e[1] == 0);
}

std::vector<Step> plan_steps(const std::vector<Tensor*>& nodes, int n_threads) {
    const double solo_below = (double)min_work_per_thread() * n_threads;
    const bool shares = shares_enabled();
    std::vector<Step> steps;
    std::vector<double> work;
    steps.reserve(nodes.size());
    work.reserve(nodes.size());
    bool engaged = false;  // some node splits by the full bar: the workers take part
    for (size_t i = 0; i < nodes.size(); ++i) {
        Tensor* n = nodes[i];
        if (!runs(n)) continue;
        const double w = n_threads > 1 ? node_work(n) : 0.0;
        Mode m = Mode::Solo;
        if (n_threads > 1 && w >= solo_below) m = shares && barrier_free(n) ? Mode::Shared : Mode::Gang;
        engaged = engaged || m != Mode::Solo;
        steps.push_back({i, m});
        work.push_back(w);
    }
    if (engaged && shares) {
        const double share_below = std::min(solo_below, (double)min_share_work_per_thread() * n_threads);
        for (size_t k = 0; k < steps.size(); ++k)
            if (steps[k].mode == Mode::Solo && work[k] >= share_below && barrier_free(nodes[steps[k].node]))
                steps[k].mode = Mode::Shared;
    }
    return steps;
}
}  // namespace

namespace {
std::atomic<int64_t> g_computes{0}, g_computes_with_workers{0}, g_solo_steps{0}, g_split_steps{0}, g_shared_steps{0};
std::atomic<int64_t> g_back_claimed_units{0}, g_quiet_solo_steps{0};
}  // namespace

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
    simd::IsaPin sizing_pin(isa, bf16);
    size_t wsize = 0;
    for (Tensor* n : nodes)
        if (runs(n)) wsize = std::max(wsize, kDispatch[(int)n->op].work_size(n, n_threads));
    std::vector<uint8_t> local;
    std::vector<uint8_t>& work = opts.scratch ? *opts.scratch : local;
    if (work.size() < wsize + 64) work.resize(wsize + 64);
    void* wdata = (void*)(((uintptr_t)work.data() + 63) & ~uintptr_t(63));

    std::vector<double>* times = opts.node_times;
    if (times) times->assign(nodes.size(), 0.0);
    const std::vector<Step> steps = plan_steps(nodes, n_threads);
    int64_t n_solo = 0, n_shared = 0;
    for (const Step& s : steps) {
        n_solo += s.mode == Mode::Solo;
        n_shared += s.mode == Mode::Shared;
    }
    // Nothing to split: the workers are not woken at all.
    const bool all_solo = n_solo == (int64_t)steps.size();
    const int n_run = all_solo ? 1 : n_threads;
    g_computes.fetch_add(1, std::memory_order_relaxed);
    g_computes_with_workers.fetch_add(n_run > 1 ? 1 : 0, std::memory_order_relaxed);
    g_solo_steps.fetch_add(n_solo, std::memory_order_relaxed);
    g_split_steps.fetch_add((int64_t)steps.size() - n_solo, std::memory_order_relaxed);
    g_shared_steps.fetch_add(n_shared, std::memory_order_relaxed);

    ThreadPool& pool = ThreadPool::instance();
    // Per-step counters: shares taken and shares finished. `completed` counts the steps whose
    // every share has finished; a step starts once all steps before it completed (steps run in
    // graph order, so no dependency is ever crossed).
    std::unique_ptr<ShareCounters[]> counters(new ShareCounters[steps.size()]);
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
                kDispatch[(int)n->op].forward(q, n);
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
                q.share_slots = counters[k].kernel_slots;
                for (int s; (s = counters[k].taken.fetch_add(1, std::memory_order_relaxed)) < n_threads;) {
                    q.ith = s;
                    kernel(n, q);
                    if (counters[k].finished.fetch_add(1, std::memory_order_acq_rel) + 1 == n_threads) publish(k);
                }
            } else {  // Gang: every thread runs its own share, the kernel's barriers need them all
                wait_for(k);
                kernel(n, p);
                if (counters[k].finished.fetch_add(1, std::memory_order_acq_rel) + 1 == n_threads) publish(k);
            }
            // solo steps are small: polling after every 8th of them keeps Ctrl-C prompt and
            // saves a clock read per node of a decode step
            const bool poll = st.mode != Mode::Solo || (k & 7) == 7 || k + 1 == steps.size();
            if (ith == 0 && poll && !aborted.load(std::memory_order_relaxed) && opts.abort && opts.abort()) {
                aborted.store(true, std::memory_order_relaxed);
                done = st.node + 1;
            }
            if (times && ith == 0)
                (*times)[st.node] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
