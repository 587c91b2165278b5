// The repacked MUL_MAT path (quant_repack.h): building the row-interleaved copy, the registry
// that finds it from a MUL_MAT node's weight tensor, and the driver.
#include "cpu/quant_repack.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cpu/mul_mat_common.h"
#include "cpu/quant_repack_kernels.h"
#include "pyggml/backend.h"
#include "pyggml/context.h"
#include "pyggml/error.h"
#include "pyggml/quant_blocks.h"

namespace pyggml::cpu {

using rp::Act;
using rp::kRows;


namespace {

// Live copies by tensor. A node holds a strong reference while it runs, so a handle dropped
// meanwhile frees nothing under it.
struct Entry {
    const RepackedWeights* raw;
    std::weak_ptr<const RepackedWeights> ref;
};
struct Registry {
    std::mutex mutex;
    std::unordered_map<const Tensor*, Entry> live;
};
// Never destroyed: a handle released during process teardown still finds it.
Registry& registry() {
    static Registry* r = new Registry;
    return *r;
}
std::atomic<int64_t> g_count{0};

void unregister(const RepackedWeights* rw) {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    auto it = reg.live.find(rw->tensor);
    if (it != reg.live.end() && it->second.raw == rw) {
        reg.live.erase(it);
        g_count.fetch_sub(1);
    }
}

RepackHandle lookup(const Tensor* t) {
    if (g_count.load(std::memory_order_relaxed) == 0) return nullptr;
    RepackHandle h;
    {
        Registry& reg = registry();
        std::lock_guard<std::mutex> lock(reg.mutex);
        auto it = reg.live.find(t);
        if (it == reg.live.end()) return nullptr;
        h = it->second.ref.lock();
    }
    if (!h || h->data != t->data || h->type != t->type) return nullptr;
    for (int i = 0; i < 4; ++i)
        if (h->ne[i] != t->ne[i] || h->nb[i] != t->nb[i]) return nullptr;
    return h;
}

// Row r's source block (null: a padding row, all zero) into its place in the record: value
// k goes to slot k / 4 at byte 4 * r + k % 4 (q4: slots 2i and 2i + 1 share bytes as nibbles).
void put_row(Type t, const char* blk, int r, char* rec) {
    uint16_t d = 0, m = 0;
    int8_t v[32] = {};
    if (blk) {
        std::memcpy(&d, blk, 2);
        if (t == Type::Q8_0) {
            std::memcpy(v, ((const BlockQ8_0*)blk)->qs, 32);
        } else {
            const uint8_t* qs = t == Type::Q4_0 ? ((const BlockQ4_0*)blk)->qs : ((const BlockQ4_1*)blk)->qs;
            if (t == Type::Q4_1) std::memcpy(&m, blk + 2, 2);
            for (int j = 0; j < 16; ++j) {
                v[j] = int8_t(qs[j] & 15);
                v[j + 16] = int8_t(qs[j] >> 4);
            }
        }
    }
    if (t == Type::Q8_0) {
        rp::Q8_0x8& w = *(rp::Q8_0x8*)rec;
        w.d[r] = d;
        for (int slot = 0; slot < 8; ++slot) std::memcpy(w.qs + 32 * slot + 4 * r, v + 4 * slot, 4);
        return;
    }
    uint8_t* qs;
    if (t == Type::Q4_0) {
        rp::Q4_0x8& w = *(rp::Q4_0x8*)rec;
        w.d[r] = d;
        qs = w.qs;
    } else {
        rp::Q4_1x8& w = *(rp::Q4_1x8*)rec;
        w.d[r] = d;
        w.m[r] = m;
        qs = w.qs;
    }
    for (int i = 0; i < 4; ++i)
        for (int p = 0; p < 4; ++p) qs[32 * i + 4 * r + p] = uint8_t(v[8 * i + p] | (v[8 * i + 4 + p] << 4));
}

const rp::Kernels& repack_kernels(simd::Isa isa) {
    return isa >= simd::Isa::Avx2 ? rp::kernels_avx2() : rp::kernels_scalar();
}

// One column of b as the plain path converts it (q8_0 / q8_1 blocks), then widened into the
// kernels' activation blocks.
void convert_column(const mm::Kernels& kr, Type wt, Type bt, const char* brow, int64_t K, Act* out,
                    std::vector<float>& tmp, std::vector<char>& q) {
    const Type vt = vec_dot_type(wt);
    q.resize(row_size(vt, K));
    mm::convert_act(kr, wt, bt, brow, K, q.data(), tmp);
    for (int64_t ib = 0; ib < K / 32; ++ib) {
        Act& a = out[ib];
        a.unused = 0;
        if (vt == Type::Q8_1) {
            const BlockQ8_1& y = ((const BlockQ8_1*)q.data())[ib];
            a.d = fp16_to_fp32(y.d);
            a.s = fp16_to_fp32(y.s);
            a.bias = 0;
            std::memcpy(a.qs, y.qs, 32);
        } else {
            const BlockQ8_0& y = ((const BlockQ8_0*)q.data())[ib];
            a.d = fp16_to_fp32(y.d);
            a.s = 0.0f;
            int32_t sum = 0;
            for (int k = 0; k < 32; ++k) sum += y.qs[k];
            a.bias = wt == Type::Q4_0 ? 8 * sum : 0;
            std::memcpy(a.qs, y.qs, 32);
        }
    }
}

size_t col_bytes(const Tensor* dst) { return mm::align64(size_t(dst->src[0]->ne[0] / 32) * sizeof(Act)); }
size_t conv_bytes(const Tensor* dst) {
    const Tensor* b = dst->src[1];
    return mm::align64(size_t(b->ne[1] * b->ne[2] * b->ne[3]) * col_bytes(dst));
}

constexpr int64_t kColBlock = 64;      // columns per unit: their activations stay in L2
constexpr int64_t kMaxGroupsPerUnit = 8;
constexpr int kTileCols = 4;

}  // namespace

RepackedWeights::~RepackedWeights() {
    unregister(this);
    std::free(buf);
}

bool repack_supported(const Tensor* t) {
    if (!t || !(t->type == Type::Q4_0 || t->type == Type::Q4_1 || t->type == Type::Q8_0)) return false;
    if (!t->data || t->is_empty() || !t->is_contiguous()) return false;
    const Backend* be = t->ctx ? t->ctx->backend() : nullptr;
    return !be || be->host_memory();
}

RepackHandle repack_weights(const Tensor* t) {
    if (!repack_supported(t))
        throw_unsupported((OpMessage("repack_weights")
                           << "needs a contiguous q4_0, q4_1 or q8_0 tensor in host memory, not empty")
                              .with("t", t));
    auto rw = std::make_shared<RepackedWeights>();
    rw->tensor = t;
    rw->data = t->data;
    rw->type = t->type;
    for (int i = 0; i < 4; ++i) { rw->ne[i] = t->ne[i]; rw->nb[i] = t->nb[i]; }
    rw->blocks = t->ne[0] / 32;
    rw->groups = (t->ne[1] + kRows - 1) / kRows;
    rw->group_bytes = size_t(rw->blocks) * rp::record_bytes(t->type);
    rw->mat_bytes = size_t(rw->groups) * rw->group_bytes;
    const size_t total = rw->mat_bytes * size_t(t->ne[2] * t->ne[3]);
    if (posix_memalign((void**)&rw->buf, 64, std::max<size_t>(total, 64)) != 0) rw->buf = nullptr;
    if (!rw->buf) throw OutOfMemoryError("repack_weights: cannot allocate " + std::to_string(total) + " bytes");
    const size_t rec = rp::record_bytes(t->type), src_block = type_traits(t->type).type_size;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t g = 0; g < rw->groups; ++g) {
                char* out = (char*)rw->group(i2, i3, g);
                for (int r = 0; r < kRows; ++r) {
                    const int64_t row = g * kRows + r;
                    const char* src = row < t->ne[1] ? t->row(row, i2, i3) : nullptr;
                    for (int64_t ib = 0; ib < rw->blocks; ++ib)
                        put_row(t->type, src ? src + ib * src_block : nullptr, r, out + ib * rec);
                }
            }
    {
        Registry& reg = registry();
        std::lock_guard<std::mutex> lock(reg.mutex);
        auto [it, fresh] = reg.live.insert_or_assign(t, Entry{rw.get(), rw});
        (void)it;
        if (fresh) g_count.fetch_add(1);
    }
    return rw;
}

size_t repack_bytes(const RepackHandle& h) {
    return h ? h->mat_bytes * size_t(h->ne[2] * h->ne[3]) : 0;
}

bool has_repack(const Tensor* t) { return lookup(t) != nullptr; }

RepackHandle repack_for_mul_mat(const Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    if (b->nb[0] != type_size(b->type) || dst->nb[0] != sizeof(float)) return nullptr;
    if (!(b->type == Type::F32 || b->type == Type::F16 || b->type == Type::BF16)) return nullptr;
    return lookup(a);
}

size_t repack_mul_mat_work_size(const Tensor* dst, int n_threads) {
    return mm::kCounterBytes + (mm::private_conversion(dst) ? size_t(std::max(1, n_threads)) : 1) * conv_bytes(dst);
}

bool repack_mul_mat_barrier_free(const Tensor* dst) { return mm::private_conversion(dst); }

void repack_mul_mat_forward(const ComputeParams& p, Tensor* dst, const RepackedWeights& rw) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const Type w = a->type;
    const int64_t K = a->ne[0], M = a->ne[1], N = dst->ne[1];
    const int64_t ne12 = b->ne[2], ne13 = b->ne[3], r2 = ne12 / a->ne[2], r3 = ne13 / a->ne[3];
    const simd::Isa isa = simd::cpu_isa();
    const mm::Kernels& kr = mm::kernels_for(isa);
    const rp::TileFn tile = repack_kernels(isa).tile[(int)w];
    const bool priv = mm::private_conversion(dst);
    const size_t colb = col_bytes(dst);
    char* conv = (char*)p.wdata + mm::kCounterBytes + (priv ? size_t(p.ith) * conv_bytes(dst) : 0);
    {
        std::vector<float> tmp;
        std::vector<char> q;
        mm::convert_columns(p, b, priv, conv, colb, [&](const char* src, char* out) {
            convert_column(kr, w, b->type, src, K, (Act*)out, tmp, q);
        });
    }
    const int64_t G = rw.groups, nbatch = ne12 * ne13;
    const int64_t col_blocks = (N + kColBlock - 1) / kColBlock;
    const int64_t per_unit = std::clamp<int64_t>(G * nbatch * col_blocks / (int64_t(p.nth) * 16), 1, kMaxGroupsPerUnit);
    const int64_t chunks = (G + per_unit - 1) / per_unit, units = chunks * col_blocks * nbatch;
    auto run_unit = [&](int64_t u) {
        const int64_t bt = u / (chunks * col_blocks), cb = (u / chunks) % col_blocks;
        const int64_t i12 = bt % ne12, i13 = bt / ne12;
        const int64_t g0 = (u % chunks) * per_unit, g1 = std::min(G, g0 + per_unit);
        const int64_t n0 = cb * kColBlock, n1 = std::min(N, n0 + kColBlock);
        char* dbase = (char*)dst->data + i12 * dst->nb[2] + i13 * dst->nb[3];
        const char* cbase = conv + bt * N * colb;
        float out[kRows * kTileCols];
        const Act* cols[kTileCols];
        for (int64_t g = g0; g < g1; ++g) {
            const char* grp = rw.group(i12 / r2, i13 / r3, g);
            const int rows = (int)std::min<int64_t>(kRows, M - g * kRows);
            for (int64_t n = n0; n < n1; n += kTileCols) {
                const int nc = (int)std::min<int64_t>(kTileCols, n1 - n);
                for (int c = 0; c < nc; ++c) cols[c] = (const Act*)(cbase + (n + c) * colb);
                tile(rw.blocks, grp, cols, nc, out);
                for (int c = 0; c < nc; ++c) {
                    float* d = (float*)(dbase + (n + c) * dst->nb[1]) + g * kRows;
                    std::memcpy(d, out + kRows * c, size_t(rows) * sizeof(float));
                }
            }
        }
    };
    mm::run_mul_mat_units(p, units, priv, run_unit);
}

}  // namespace pyggml::cpu
