// The CPU backend: host buffers, every op of the op table, nodes run on the persistent thread
// pool as a schedule of steps in graph order: small nodes on thread 0 alone, barrier-free
// kernels as thread shares that any thread may take (a late thread finds them done), kernels
// with barriers of their own on every thread at once. A step starts when the one before it
// has finished, so the graph's dependencies always hold.
#pragma once
#include "cpu/threadpool.h"
#include "pyggml/backend.h"

namespace pyggml::cpu {

// max_threads() (the one thread cap) and hardware_threads() live with the pool.

// What the schedule did, summed over every CPU compute of the process: computes, those that
// woke the pool's workers (some step split), and steps run solo or split (shared or gang).
// A graph whose every node is below the split bar must add to computes and solo_steps only:
// no worker wakes, none spins. Cumulative, so a reader takes the difference around a compute.
struct ScheduleCounts {
    int64_t computes = 0;
    int64_t computes_with_workers = 0;
    int64_t solo_steps = 0;
    int64_t split_steps = 0;
    int64_t shared_steps = 0;  // of the split steps, those run as shares (barrier-free kernels)
    int64_t back_claimed_units = 0;  // of shared one-column products (run_barrier_free_units)
    int64_t quiet_solo_steps = 0;    // solo steps not published: the next step is solo too
    int64_t plans_built = 0;         // schedules planned (cpu/schedule.h) ...
    int64_t plans_reused = 0;        // ... and taken from the graph's last compute
    int64_t plan_ns = 0;             // wall nanoseconds spent finding or making them
    int64_t grouped_nodes = 0;       // nodes run in group steps (of the split steps)
};
ScheduleCounts schedule_counts();

// Whether every compute first fills the kernels' scratch with 0xff bytes (NaN as floats and as
// f16 scales): a kernel that reads scratch another thread has not written yet then shows it,
// where the previous compute's identical values would hide it. For tests; returns the previous
// setting.
bool set_poison_scratch(bool on);
// Microseconds each claimed conversion item (kernels.h claimed_conversion_delay_us) sleeps
// first; for tests. Returns the previous setting.
int64_t set_claimed_conversion_delay(int64_t us);

class CpuBackend final : public Backend {
public:
    std::string name() const override { return "cpu"; }
    std::string kind() const override { return "cpu"; }
    int device_index() const override { return -1; }
    bool host_memory() const override { return true; }
    DeviceInfo info() const override;

    void* alloc(size_t bytes) override;
    void free(void* ptr) override;
    void set(void* dst, const void* host_src, size_t bytes) override;
    void get(void* host_dst, const void* src, size_t bytes) override;
    void copy(void* dst, const void* src, size_t bytes) override;

    void compute_graph(const std::vector<Tensor*>& nodes, const ComputeOptions& opts) override;

protected:
    std::string op_unsupported_reason(const Tensor*) const override { return ""; }  // every op has a CPU kernel
};

}  // namespace pyggml::cpu
