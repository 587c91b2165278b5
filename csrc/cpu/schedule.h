// The CPU schedule of a node list: which nodes run, each as a step on thread 0 alone, as thread
// shares or on every thread at once, and the kernels' scratch size. Planned once per graph and
// kept with it (BackendPlan): a graph computed again with the same thread count and settings
// runs the kept plan (decode reuses its graph for every token).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/simd/isa.h"
#include "pyggml/backend.h"

namespace pyggml::cpu {

// How a scheduled node runs: on thread 0 alone (too little work to split), as thread shares
// any thread may take (barrier-free kernels), or on every thread at once (its kernel has
// barriers of its own). A group step runs several independent barrier-free nodes at once: the
// threads take their items (a whole node, or one share of a big one) from one counter, so the
// nodes cost one wait instead of one each (decode's Q, K and V products; gate and up).
enum class Mode : uint8_t { Solo, Shared, Gang, Group };
struct Step {
    size_t node;        // a group: its first member's node
    Mode mode;
    uint32_t counters;  // split steps: their ShareCounters in the plan
    uint32_t first = 0, count = 0, items = 0;  // a group: members [first, first + count), items
};
// A node of a group step: run as `shares` items (its own ShareCounters give the kernel its
// share slots) or, shares == 1, whole on one thread like a solo step. Its scratch is its own
// region of the work buffer, as members run at the same time.
struct GroupMember {
    size_t node;
    uint32_t counters;
    int shares;
    size_t work_offset, work_bytes;
};
struct alignas(64) ShareCounters {
    std::atomic<int> taken{0};
    std::atomic<int> finished{0};
    std::atomic<int64_t> kernel_slots[2] = {0, 0};  // ComputeParams::share_slots
    void reset() {
        taken.store(0, std::memory_order_relaxed);
        finished.store(0, std::memory_order_relaxed);
        kernel_slots[0].store(0, std::memory_order_relaxed);
        kernel_slots[1].store(0, std::memory_order_relaxed);
    }
};

// What the decisions were made from, besides the nodes themselves (whose op params and sources
// change only through the modifiers that move tensor_edit_epoch()).
struct PlanKey {
    const Tensor* const* nodes = nullptr;  // the graph's node list: its storage and length
    size_t n_nodes = 0;
    int n_threads = 0;
    simd::Isa isa = simd::Isa::Scalar;
    bool bf16 = false;
    bool shares = true, groups = true;
    int64_t min_work = 0, min_share_work = 0;
    uint64_t tensor_edits = 0;
    bool operator==(const PlanKey& o) const;
};

struct SchedulePlan final : BackendPlan {
    PlanKey key;
    std::vector<Step> steps;
    std::vector<GroupMember> members;  // of the group steps
    size_t work_bytes = 0;  // the largest scratch any step needs
    int64_t n_solo = 0, n_shared = 0, n_grouped = 0;  // n_grouped: nodes in group steps
    // One per split step; reset by the compute that runs the plan (pool.run returns only when
    // every thread is done with them).
    std::unique_ptr<ShareCounters[]> counters;
    uint32_t n_counters = 0;
};

// The plan for `nodes` at `n_threads` under the pinned ISA settings: the one `kept` holds when
// it still fits, else a new one (stored in `kept`). Never null.
const SchedulePlan& schedule_for(const std::vector<Tensor*>& nodes, int n_threads, simd::Isa isa, bool bf16,
                                 std::unique_ptr<BackendPlan>& kept);

// Whether kept plans are reused (default on); off plans every compute afresh. For benches and
// for tests that compare against a fresh plan. Returns the previous setting.
bool set_plan_reuse(bool on);
// Plans built and plans reused, over every compute of the process.
int64_t plans_built();
int64_t plans_reused();

}  // namespace pyggml::cpu
