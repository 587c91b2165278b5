// The repacked MUL_MAT path (quant_repack.h): building the row-interleaved copy, finding it
// from a MUL_MAT node's weight tensor (its `derived` field), and the driver.
#include "cpu/quant_repack.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cpu/host_memory.h"
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

// The copy a tensor's `derived` field points at, when it was built from this very data and
// layout. The returned reference keeps it alive while a node runs, so a handle dropped
// meanwhile frees nothing under it. Unlocked check first: a tensor without a copy pays one load.
RepackHandle lookup(const Tensor* t) {
    if (t->derived.expired()) return nullptr;
    RepackHandle h = std::static_pointer_cast<const RepackedWeights>(t->derived.lock());
    if (!h || h->tensor != t || h->data != t->data || h->type != t->type) return nullptr;
    for (int i = 0; i < 4; ++i)
        if (h->ne[i] != t->ne[i] || h->nb[i] != t->nb[i]) return nullptr;
    return h;
}

// One source block's integer content: levels (unsigned; q8_0's values as they are), scales.
// decode_block writes what put_row reads for the type (left uninitialized: it runs per block).
struct Decoded {
    uint16_t d = 0, dmin = 0;
    uint8_t lv[256];
    uint8_t sc[16];  // q4_K / q5_K: 8 sub-block scales; q6_K: 16 (signed, as bytes)
    uint8_t mn[8];
};

// The 6-bit scale and min of sub-block j of a q4_K / q5_K block.
void k4_scale_min(const uint8_t* s, int j, uint8_t& sc, uint8_t& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = uint8_t((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
        m = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

void decode_block(Type t, const char* blk, Decoded& o) {
    switch (t) {
        case Type::Q8_0: {
            const BlockQ8_0& x = *(const BlockQ8_0*)blk;
            o.d = x.d;
            std::memcpy(o.lv, x.qs, 32);
            break;
        }
        case Type::Q4_0:
        case Type::Q4_1: {
            std::memcpy(&o.d, blk, 2);
            const uint8_t* qs = t == Type::Q4_0 ? ((const BlockQ4_0*)blk)->qs : ((const BlockQ4_1*)blk)->qs;
            if (t == Type::Q4_1) std::memcpy(&o.dmin, blk + 2, 2);
            for (int j = 0; j < 16; ++j) {
                o.lv[j] = qs[j] & 15;
                o.lv[j + 16] = qs[j] >> 4;
            }
            break;
        }
        case Type::Q5_0: {
            const BlockQ5_0& x = *(const BlockQ5_0*)blk;
            uint32_t qh;
            std::memcpy(&qh, x.qh, 4);
            o.d = x.d;
            for (int j = 0; j < 16; ++j) {
                o.lv[j] = uint8_t((x.qs[j] & 15) | (((qh >> j) & 1) << 4));
                o.lv[j + 16] = uint8_t((x.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
            }
            break;
        }
        case Type::Q4_K:
        case Type::Q5_K: {
            const bool five = t == Type::Q5_K;
            const uint16_t* dd = (const uint16_t*)blk;  // d, dmin lead both layouts
            const uint8_t* scales = five ? ((const BlockQ5_K*)blk)->scales : ((const BlockQ4_K*)blk)->scales;
            const uint8_t* qs = five ? ((const BlockQ5_K*)blk)->qs : ((const BlockQ4_K*)blk)->qs;
            o.d = dd[0];
            o.dmin = dd[1];
            for (int j = 0; j < 8; ++j) k4_scale_min(scales, j, o.sc[j], o.mn[j]);
            for (int c = 0; c < 4; ++c)
                for (int l = 0; l < 32; ++l) {
                    o.lv[64 * c + l] = qs[32 * c + l] & 15;
                    o.lv[64 * c + 32 + l] = qs[32 * c + l] >> 4;
                    if (five) {
                        const uint8_t h = ((const BlockQ5_K*)blk)->qh[l];
                        o.lv[64 * c + l] |= uint8_t(((h >> (2 * c)) & 1) << 4);
                        o.lv[64 * c + 32 + l] |= uint8_t(((h >> (2 * c + 1)) & 1) << 4);
                    }
                }
            break;
        }
        case Type::Q6_K: {
            const BlockQ6_K& x = *(const BlockQ6_K*)blk;
            o.d = x.d;
            std::memcpy(o.sc, x.scales, 16);
            for (int half = 0; half < 2; ++half) {
                const uint8_t* ql = x.ql + 64 * half;
                const uint8_t* qh = x.qh + 32 * half;
                uint8_t* lv = o.lv + 128 * half;
                for (int l = 0; l < 32; ++l) {
                    lv[l] = uint8_t((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4));
                    lv[l + 32] = uint8_t((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4));
                    lv[l + 64] = uint8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                    lv[l + 96] = uint8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
                }
            }
            break;
        }
        default: break;
    }
}

// Value k (0..31) of row r sits in slot k / 4 at byte 4 * r + k % 4 of each piece below.
// Low nibbles: slots 2i and 2i + 1 share 32 bytes (low and high nibble).
void put_nibbles(uint8_t* qs, int r, const uint8_t* lv) {
    for (int i = 0; i < 4; ++i)
        for (int p = 0; p < 4; ++p)
            qs[32 * i + 4 * r + p] = uint8_t((lv[8 * i + p] & 15) | ((lv[8 * i + 4 + p] & 15) << 4));
}
// Fifth bits: bit s of qh[b] for slot s (the 4 bytes of row r are its own).
void put_bit4(uint8_t* qh, int r, const uint8_t* lv) {
    for (int p = 0; p < 4; ++p) {
        unsigned byte = 0;
        for (int slot = 0; slot < 8; ++slot) byte |= ((lv[4 * slot + p] >> 4) & 1u) << slot;
        qh[4 * r + p] = uint8_t(byte);
    }
}
// Bits 4 and 5: bits 2t, 2t + 1 of qh[32 * (s / 4) + b] for slot s, t = s % 4.
void put_bits45(uint8_t* qh, int r, const uint8_t* lv) {
    for (int half = 0; half < 2; ++half)
        for (int p = 0; p < 4; ++p) {
            unsigned byte = 0;
            for (int t = 0; t < 4; ++t) byte |= ((lv[4 * (4 * half + t) + p] >> 4) & 3u) << (2 * t);
            qh[32 * half + 4 * r + p] = uint8_t(byte);
        }
}

// Row r's decoded block into its place in the record (zeroed: padding rows stay zero).
void put_row(Type t, const Decoded& v, int r, char* rec) {
    switch (t) {
        case Type::Q8_0: {
            rp::Q8_0x8& w = *(rp::Q8_0x8*)rec;
            w.d[r] = v.d;
            for (int slot = 0; slot < 8; ++slot) std::memcpy(w.qs + 32 * slot + 4 * r, v.lv + 4 * slot, 4);
            break;
        }
        case Type::Q4_0: {
            rp::Q4_0x8& w = *(rp::Q4_0x8*)rec;
            w.d[r] = v.d;
            put_nibbles(w.qs, r, v.lv);
            break;
        }
        case Type::Q4_1: {
            rp::Q4_1x8& w = *(rp::Q4_1x8*)rec;
            w.d[r] = v.d;
            w.m[r] = v.dmin;
            put_nibbles(w.qs, r, v.lv);
            break;
        }
        case Type::Q5_0: {
            rp::Q5_0x8& w = *(rp::Q5_0x8*)rec;
            w.d[r] = v.d;
            put_nibbles(w.qs, r, v.lv);
            put_bit4(w.qh, r, v.lv);
            break;
        }
        case Type::Q4_K:
        case Type::Q5_K: {
            // Q5_Kx8 begins like Q4_Kx8 (d, dmin, sc, m); its qh sits before qs.
            rp::Q4_Kx8& w = *(rp::Q4_Kx8*)rec;
            w.d[r] = v.d;
            w.dmin[r] = v.dmin;
            for (int j = 0; j < 8; ++j) {
                w.sc[8 * j + r] = v.sc[j];
                w.m[16 * (j / 2) + 2 * r + j % 2] = v.mn[j];
            }
            uint8_t* qs = t == Type::Q5_K ? ((rp::Q5_Kx8*)rec)->qs : w.qs;
            for (int j = 0; j < 8; ++j) {
                put_nibbles(qs + 128 * j, r, v.lv + 32 * j);
                if (t == Type::Q5_K) put_bit4(((rp::Q5_Kx8*)rec)->qh + 32 * j, r, v.lv + 32 * j);
            }
            break;
        }
        case Type::Q6_K: {
            rp::Q6_Kx8& w = *(rp::Q6_Kx8*)rec;
            w.d[r] = v.d;
            for (int g = 0; g < 16; ++g) w.sc[8 * g + r] = (int8_t)v.sc[g];
            for (int j = 0; j < 8; ++j) {
                put_nibbles(w.qs + 128 * j, r, v.lv + 32 * j);
                put_bits45(w.qh + 64 * j, r, v.lv + 32 * j);
            }
            break;
        }
        default: break;
    }
}

const rp::Kernels& repack_kernels(simd::Isa isa) {
    if (isa >= simd::Isa::Avx512) return rp::kernels_avx512();
    return isa >= simd::Isa::Avx2 ? rp::kernels_avx2() : rp::kernels_scalar();
}

// One column of b as the plain path converts it (q8_0 / q8_1 / q8_K blocks), then widened
// into the kernels' activation blocks.
void convert_column(const mm::Kernels& kr, Type wt, Type bt, const char* brow, int64_t K, char* out,
                    std::vector<float>& tmp, std::vector<char>& q) {
    const Type vt = vec_dot_type(wt);
    q.resize(row_size(vt, K));
    mm::convert_act(kr, wt, bt, brow, K, q.data(), tmp);
    if (vt == Type::Q8_K) {
        for (int64_t ib = 0; ib < K / 256; ++ib) {
            const BlockQ8_K& y = ((const BlockQ8_K*)q.data())[ib];
            rp::ActK& a = ((rp::ActK*)out)[ib];
            std::memset(&a, 0, offsetof(rp::ActK, qs));
            a.d = y.d;
            std::memcpy(a.bs16, y.bsums, sizeof a.bs16);
            for (int j = 0; j < 8; ++j) a.bs32[j] = int16_t(y.bsums[2 * j] + y.bsums[2 * j + 1]);
            std::memcpy(a.qs, y.qs, 256);
        }
        return;
    }
    for (int64_t ib = 0; ib < K / 32; ++ib) {
        Act& a = ((Act*)out)[ib];
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
            // the level offset of q4_0 (8) and q5_0 (16), taken out of the integer dot; q8_0's
            // is for the VNNI tile, which takes the weights + 128 as unsigned levels
            a.bias = wt == Type::Q4_0 ? 8 * sum : wt == Type::Q5_0 ? 16 * sum : wt == Type::Q8_0 ? 128 * sum : 0;
            std::memcpy(a.qs, y.qs, 32);
        }
    }
}

size_t col_bytes(const Tensor* dst) {
    const Type w = dst->src[0]->type;
    return mm::align64(size_t(dst->src[0]->ne[0] / rp::record_values(w)) * rp::act_bytes(w));
}
size_t conv_bytes(const Tensor* dst) {
    const Tensor* b = dst->src[1];
    return mm::align64(size_t(b->ne[1] * b->ne[2] * b->ne[3]) * col_bytes(dst));
}

constexpr int64_t kColBlock = 64;      // columns per unit: their activations stay in L2
constexpr int64_t kMaxGroupsPerUnit = 8;

}  // namespace

// Made or dropped, a copy changes which path (and schedule) its MUL_MAT nodes take: kept plans
// see the edit count move.
RepackedWeights::~RepackedWeights() {
    weight_free(buf);
    note_tensor_edit();
}

bool repack_supported(const Tensor* t) {
    if (!t || rp::record_bytes(t->type) == 0) return false;
    if (!t->data || t->is_empty() || !t->is_contiguous()) return false;
    const Backend* be = t->ctx ? t->ctx->backend() : nullptr;
    return !be || be->host_memory();
}

RepackHandle repack_weights(const Tensor* t) {
    if (!repack_supported(t))
        throw_unsupported((OpMessage("repack_weights")
                           << "needs a contiguous q4_0, q4_1, q5_0, q8_0, q4_K, q5_K or q6_K tensor in host "
                              "memory, not empty")
                              .with("t", t));
    auto rw = std::make_shared<RepackedWeights>();
    rw->tensor = t;
    rw->data = t->data;
    rw->type = t->type;
    for (int i = 0; i < 4; ++i) { rw->ne[i] = t->ne[i]; rw->nb[i] = t->nb[i]; }
    rw->blocks = t->ne[0] / rp::record_values(t->type);
    rw->groups = (t->ne[1] + kRows - 1) / kRows;
    rw->group_bytes = size_t(rw->blocks) * rp::record_bytes(t->type);
    rw->mat_bytes = size_t(rw->groups) * rw->group_bytes;
    const size_t total = rw->mat_bytes * size_t(t->ne[2] * t->ne[3]);
    rw->buf = (char*)weight_alloc(total);
    if (!rw->buf) throw OutOfMemoryError("repack_weights: cannot allocate " + std::to_string(total) + " bytes");
    std::memset(rw->buf, 0, total);  // padding rows
    const size_t rec = rp::record_bytes(t->type), src_block = type_traits(t->type).type_size;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t g = 0; g < rw->groups; ++g) {
                char* out = (char*)rw->group(i2, i3, g);
                for (int r = 0; r < kRows; ++r) {
                    const int64_t row = g * kRows + r;
                    const char* src = row < t->ne[1] ? t->row(row, i2, i3) : nullptr;
                    if (!src) continue;
                    for (int64_t ib = 0; ib < rw->blocks; ++ib) {
                        Decoded v;
                        decode_block(t->type, src + ib * src_block, v);
                        put_row(t->type, v, r, out + ib * rec);
                    }
                }
            }
    t->derived = rw;  // replaces an earlier copy's reference (that handle then serves nobody)
    note_tensor_edit();
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
    const rp::Kernels& rk = repack_kernels(isa);
    const rp::TileFn tile = rk.tile[(int)w];
    const int tile_cols = rk.tile_cols[(int)w] ? rk.tile_cols[(int)w] : rp::kTileCols;
    const bool priv = mm::private_conversion(dst);
    const size_t colb = col_bytes(dst);
    char* conv = (char*)p.wdata + mm::kCounterBytes + (priv ? size_t(p.ith) * conv_bytes(dst) : 0);
    {
        std::vector<float> tmp;
        std::vector<char> q;
        mm::convert_columns(p, b, priv, conv, colb, [&](const char* src, char* out) {
            convert_column(kr, w, b->type, src, K, out, tmp, q);
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
        float out[kRows * rp::kMaxTileCols];
        const void* cols[rp::kMaxTileCols];
        for (int64_t g = g0; g < g1; ++g) {
            const char* grp = rw.group(i12 / r2, i13 / r3, g);
            const int rows = (int)std::min<int64_t>(kRows, M - g * kRows);
            for (int64_t n = n0; n < n1; n += tile_cols) {
                const int nc = (int)std::min<int64_t>(tile_cols, n1 - n);
                for (int c = 0; c < nc; ++c) cols[c] = cbase + (n + c) * colb;
                tile(rw.blocks, grp, cols, nc, out);
                for (int c = 0; c < nc; ++c) {
                    float* d = (float*)(dbase + (n + c) * dst->nb[1]) + g * kRows;
                    std::memcpy(d, out + kRows * c, size_t(rows) * sizeof(float));
                }
            }
        }
    };
    // Without a shared conversion the shares claim units from the step's slot (a late thread
    // takes fewer); each unit's arithmetic is the same whoever runs it.
    if (priv) mm::run_barrier_free_units(p, units, run_unit);
    else mm::run_mul_mat_units(p, units, false, run_unit);
}

}  // namespace pyggml::cpu
