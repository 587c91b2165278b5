// The CPU schedule: split decisions per node, work sizes, and the plan kept with a graph.
#include "cpu/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "cpu/env.h"
#include "cpu/kernels.h"

namespace pyggml::cpu {

namespace {
using WorkSizeFn = size_t (*)(const Tensor*, int);
const WorkSizeFn kWorkSize[] = {
#define PYGGML_X(name, family, py) cpu_work_size_##name,
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
// read at every compute (a short environ scan) so that a test can change them; a kept plan
// made under other values is not reused
int64_t min_work_per_thread() { return env_nonnegative("PYGGML_CPU_MIN_WORK", (int64_t)128 * 1024); }
int64_t min_share_work_per_thread() { return env_nonnegative("PYGGML_CPU_MIN_SHARE_WORK", (int64_t)16 * 1024); }

double node_work(const Tensor* n) {
    double w = (double)n->nbytes();
    for (const Tensor* s : n->src)
        if (s) w += (double)s->nbytes();
    const Tensor* a = n->src[0];
    const Tensor* b = n->src[1];
    switch (n->op) {
        case Op::MUL_MAT:
        case Op::MUL_MAT_ID:
        case Op::OUT_PROD:
            // multiply-adds: every output element is a dot product of length a->ne[0]
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

// PYGGML_CPU_SHARES=0 runs barrier-free nodes as gang steps too (every thread its own share,
// all waiting for the slowest): the lockstep schedule, kept for benchmarks.
bool shares_enabled() { return env_not_zero("PYGGML_CPU_SHARES"); }

// PYGGML_CPU_GROUPS=0 runs every node as its own step (no group steps), for benchmarks.
bool groups_enabled() { return env_not_zero("PYGGML_CPU_GROUPS"); }

// The bytes a tensor spans, [lo, hi) (empty without storage).
struct Extent {
    uintptr_t lo = 0, hi = 0;
};
Extent extent_of(const Tensor* t) {
    if (!t || !t->data) return {};
    return {(uintptr_t)t->data, (uintptr_t)t->data + t->nbytes()};
}
bool overlap(Extent a, Extent b) { return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi; }

// Whether two nodes may run at once, or in either order: neither writes bytes the other reads
// or writes. By memory, not by the source lists: the buffer planner reuses the storage of dead
// tensors, and a view's writes land in its root. A node that reads another's result reads its
// bytes, so dependence is a conflict too.
bool conflict(const Tensor* a, const Tensor* b) {
    const Extent da = extent_of(a), db = extent_of(b);
    if (overlap(da, db)) return true;
    for (const Tensor* s : b->src)
        if (s && overlap(da, extent_of(s))) return true;
    for (const Tensor* s : a->src)
        if (s && overlap(db, extent_of(s))) return true;
    return false;
}

// How far past a shared step the planner looks for independent shared nodes to run with it.
constexpr size_t kGroupWindow = 8;

// Gathers nodes that may run at once into group steps: from each shared step, the shared and
// barrier-free solo steps of the next kGroupWindow that conflict neither with it and the nodes
// joined so far nor with the steps they move ahead of (which keep their order after the
// group). A member whose work reaches the full split bar runs as n_threads shares, a smaller
// one whole. A solo step joins a group whose first node runs whole (never one it would start:
// alone it costs no wait).
void plan_groups(SchedulePlan& plan, const std::vector<Tensor*>& nodes, const std::vector<double>& work,
                 const PlanKey& key, const WorkSizeFn* work_size) {
    const std::vector<Step> in = std::move(plan.steps);
    std::vector<Step>& out = plan.steps;
    out.clear();
    std::vector<bool> taken(in.size(), false);
    const double full_bar = (double)key.min_work * key.n_threads;
    std::vector<size_t> joined, passed;
    for (size_t k = 0; k < in.size(); ++k) {
        if (taken[k]) continue;
        if (in[k].mode != Mode::Shared) {
            out.push_back(in[k]);
            continue;
        }
        joined.assign(1, k);
        passed.clear();
        // solo nodes join only small groups, whose members run whole: next to a big node's
        // shares they would save nothing
        const bool small = work[k] < full_bar;
        for (size_t j = k + 1; j < in.size() && j <= k + kGroupWindow; ++j) {
            if (taken[j]) continue;
            if (in[j].mode == Mode::Gang) break;
            const Tensor* n = nodes[in[j].node];
            bool free = in[j].mode == Mode::Shared || (small && in[j].mode == Mode::Solo && barrier_free(n));
            for (size_t i = 0; free && i < joined.size(); ++i) free = !conflict(nodes[in[joined[i]].node], n);
            for (size_t i = 0; free && i < passed.size(); ++i) free = !conflict(nodes[in[passed[i]].node], n);
            (free ? joined : passed).push_back(j);
        }
        if (joined.size() < 2) {
            out.push_back(in[k]);
            continue;
        }
        Step g{in[k].node, Mode::Group, 0};
        g.first = (uint32_t)plan.members.size();
        g.count = (uint32_t)joined.size();
        size_t offset = 0;
        for (size_t j : joined) {
            taken[j] = true;
            const Tensor* n = nodes[in[j].node];
            GroupMember m{in[j].node, 0, work[j] >= full_bar ? key.n_threads : 1, offset, 0};
            m.work_bytes = std::max(work_size[(int)n->op](n, key.n_threads), work_size[(int)n->op](n, 1));
            offset += (m.work_bytes + 63) & ~size_t(63);
            g.items += (uint32_t)m.shares;
            plan.members.push_back(m);
        }
        plan.work_bytes = std::max(plan.work_bytes, offset);
        out.push_back(g);
    }
}

// The steps of `nodes`, their split decisions under the key's settings.
std::vector<Step> plan_steps(const std::vector<Tensor*>& nodes, const PlanKey& key, std::vector<double>& work) {
    const int n_threads = key.n_threads;
    const double solo_below = (double)key.min_work * n_threads;
    const bool shares = key.shares;
    std::vector<Step> steps;
    work.clear();
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
        steps.push_back({i, m, 0});
        work.push_back(w);
    }
    if (engaged && shares) {
        const double share_below = std::min(solo_below, (double)key.min_share_work * n_threads);
        for (size_t k = 0; k < steps.size(); ++k)
            if (steps[k].mode == Mode::Solo && work[k] >= share_below && barrier_free(nodes[steps[k].node]))
                steps[k].mode = Mode::Shared;
    }
    return steps;
}

std::atomic<bool> g_reuse{true};
std::atomic<int64_t> g_built{0}, g_reused{0};

void build(SchedulePlan& plan, const std::vector<Tensor*>& nodes, const PlanKey& key) {
    plan.key = PlanKey{};  // fits nothing until built (a throw on the way leaves it so)
    simd::IsaPin sizing_pin(key.isa, key.bf16);  // the sizes of the level every thread will run
    plan.work_bytes = 0;
    for (Tensor* n : nodes)
        if (runs(n)) plan.work_bytes = std::max(plan.work_bytes, kWorkSize[(int)n->op](n, key.n_threads));
    std::vector<double> work;
    plan.steps = plan_steps(nodes, key, work);
    plan.members.clear();
    if (key.groups && key.n_threads > 1) plan_groups(plan, nodes, work, key, kWorkSize);
    plan.n_solo = plan.n_shared = plan.n_grouped = 0;
    uint32_t n_split = 0;
    for (Step& s : plan.steps) {
        plan.n_solo += s.mode == Mode::Solo;
        plan.n_shared += s.mode == Mode::Shared;
        plan.n_grouped += s.mode == Mode::Group ? s.count : 0;
        if (s.mode != Mode::Solo) s.counters = n_split++;
    }
    for (GroupMember& m : plan.members)
        if (m.shares > 1) m.counters = n_split++;
    plan.counters.reset(n_split ? new ShareCounters[n_split] : nullptr);
    plan.n_counters = n_split;
    plan.key = key;
}
}  // namespace

bool PlanKey::operator==(const PlanKey& o) const {
    return nodes == o.nodes && n_nodes == o.n_nodes && n_threads == o.n_threads && isa == o.isa && bf16 == o.bf16 &&
           shares == o.shares && groups == o.groups && min_work == o.min_work && min_share_work == o.min_share_work &&
           tensor_edits == o.tensor_edits;
}

const SchedulePlan& schedule_for(const std::vector<Tensor*>& nodes, int n_threads, simd::Isa isa, bool bf16,
                                 std::unique_ptr<BackendPlan>& kept) {
    PlanKey key;
    key.nodes = nodes.data();
    key.n_nodes = nodes.size();
    key.n_threads = n_threads;
    key.isa = isa;
    key.bf16 = bf16;
    key.shares = shares_enabled();
    key.groups = groups_enabled();
    key.min_work = min_work_per_thread();
    key.min_share_work = min_share_work_per_thread();
    key.tensor_edits = tensor_edit_epoch();
    auto* plan = dynamic_cast<SchedulePlan*>(kept.get());
    if (plan && plan->key == key && g_reuse.load(std::memory_order_relaxed)) {
        g_reused.fetch_add(1, std::memory_order_relaxed);
        return *plan;
    }
    if (!plan) {
        kept = std::make_unique<SchedulePlan>();
        plan = static_cast<SchedulePlan*>(kept.get());
    }
    build(*plan, nodes, key);
    g_built.fetch_add(1, std::memory_order_relaxed);
    return *plan;
}

bool set_plan_reuse(bool on) { return g_reuse.exchange(on); }
int64_t plans_built() { return g_built.load(std::memory_order_relaxed); }
int64_t plans_reused() { return g_reused.load(std::memory_order_relaxed); }

}  // namespace pyggml::cpu
