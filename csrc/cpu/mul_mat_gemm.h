// Packed, blocked GEMM for MUL_MAT with many activation columns (the BLIS/GotoBLAS loop nest).
//   - b's columns are converted to the weights' vec-dot values (as f32) and packed into panels
//     of NR columns (Bp[k*NR + j], all of K) in wdata, cooperatively by all threads;
//   - tasks (batch piece, MC rows, NC columns) are taken from a shared counter; each thread
//     packs its MC x KC block of weights (dequantized to f32) into panels of MR rows and runs
//     the micro-kernel over the NR x MR tiles. f32 accumulation throughout.
// When the packed b would exceed kPackBudget it is processed in chunks (two barriers each).
#pragma once
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/mul_mat_common.h"

namespace pyggml::cpu::mm {

constexpr int64_t kKC = 256;   // multiple of every block size (256 for the K-quants) and of every MR
constexpr int64_t kMC = 128;   // multiple of kMaxMR
constexpr int64_t kNC = 1536;  // multiple of every NR
constexpr size_t kPackBudget = size_t(32) << 20;

struct GemmShape {
    int64_t K, M, N, nbatch;  // nbatch = ne12 * ne13 of dst
};

inline GemmShape gemm_shape(const Tensor* dst) {
    const Tensor* b = dst->src[1];
    return {b->ne[0], dst->ne[0], dst->ne[1], dst->ne[2] * dst->ne[3]};
}

// Bytes reserved for packed b, valid for every kernel set (NR divides kMaxNR).
inline size_t gemm_pack_budget(const GemmShape& s) {
    const size_t one_panel = size_t(kMaxNR) * s.K * sizeof(float);
    const size_t total = size_t(s.nbatch) * ((s.N + kMaxNR - 1) / kMaxNR) * one_panel;
    return std::min(total, std::max(kPackBudget, one_panel));
}
inline size_t gemm_a_bytes() { return size_t(kMC) * kKC * sizeof(float); }
inline size_t gemm_work_size(const Tensor* dst, int nth) {
    return kCounterBytes + size_t(nth) * gemm_a_bytes() + gemm_pack_budget(gemm_shape(dst));
}

// A piece: columns [n0, n1) of dst batch `batch`, packed at float offset `off`.
struct GemmPiece { int64_t batch, n0, n1; size_t off; };

// Weight row segment [k0, k0+kc) of row `row` as f32 (k0, kc block aligned for block types).
inline const float* weight_segment(const Kernels& kr, const Tensor* a, const char* row, int64_t k0, int64_t kc,
                                   float* tmp) {
    switch (a->type) {
        case Type::F32: return (const float*)row + k0;
        case Type::F16: kr.f16_to_f32((const uint16_t*)row + k0, tmp, kc); return tmp;
        default: {
            const TypeTraits& tt = type_traits(a->type);
            kr.dequant[(int)a->type](row + (k0 / tt.blck_size) * tt.type_size, tmp, kc);
            return tmp;
        }
    }
}

inline void gemm_forward(const ComputeParams& p, Tensor* dst, const Kernels& kr) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const GemmShape s = gemm_shape(dst);
    const Type w = a->type;
    const int MR = kr.mr, NR = kr.nr;
    const int64_t ne12 = b->ne[2], r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const int64_t ldc = dst->nb[1] / sizeof(float);

    char* wbase = (char*)p.wdata + kCounterBytes;
    float* apack = (float*)(wbase + size_t(p.ith) * gemm_a_bytes());
    float* bpack = (float*)(wbase + size_t(p.nth) * gemm_a_bytes());
    const size_t budget = gemm_pack_budget(s) / sizeof(float);  // floats
    const int64_t panel_floats = int64_t(NR) * s.K;
    const int64_t piece_cols = std::max<int64_t>(NR, int64_t(budget / panel_floats) * NR);

    std::vector<float> tmp(std::max<int64_t>(s.K, kKC)), col(s.K);
    std::vector<char> qtmp;
    float ctile[kMaxMR * kMaxNR];

    auto panels_of = [&](const GemmPiece& pc) { return (pc.n1 - pc.n0 + NR - 1) / NR; };

    auto pack_b = [&](const std::vector<GemmPiece>& pieces) {
        int64_t total = 0;
        for (auto& pc : pieces) total += panels_of(pc);
        int64_t r0, r1;
        split_range(total, p.ith, p.nth, r0, r1);
        int64_t base = 0;
        for (auto& pc : pieces) {
            const int64_t np = panels_of(pc);
            const int64_t i12 = pc.batch % ne12, i13 = pc.batch / ne12;
            for (int64_t jp = std::max<int64_t>(0, r0 - base); jp < std::min(np, r1 - base); ++jp) {
                float* out = bpack + pc.off + jp * panel_floats;
                for (int j = 0; j < NR; ++j) {
                    const int64_t n = pc.n0 + jp * NR + j;
                    if (n >= pc.n1) {
                        for (int64_t k = 0; k < s.K; ++k) out[k * NR + j] = 0.0f;
                        continue;
                    }
                    convert_act_f32(kr, w, b->type, b->row(n, i12, i13), s.K, col.data(), tmp, qtmp);
                    for (int64_t k = 0; k < s.K; ++k) out[k * NR + j] = col[k];
                }
            }
            base += np;
        }
    };

    auto run_task = [&](const GemmPiece& pc, int64_t m0, int64_t m1, int64_t c0, int64_t c1) {
        const int64_t i12 = pc.batch % ne12, i13 = pc.batch / ne12;
        const char* abase = (const char*)a->data + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
        float* cbase = (float*)dst->data + (i12 * dst->nb[2] + i13 * dst->nb[3]) / sizeof(float);
        const int64_t mp = (m1 - m0 + MR - 1) / MR;
        for (int64_t k0 = 0; k0 < s.K; k0 += kKC) {
            const int64_t kc = std::min(kKC, s.K - k0);
            // pack the weights block: panels of MR rows, zero rows past m1
            for (int64_t ip = 0; ip < mp; ++ip) {
                float* out = apack + ip * MR * kc;
                for (int r = 0; r < MR; ++r) {
                    const int64_t m = m0 + ip * MR + r;
                    if (m >= m1) {
                        for (int64_t k = 0; k < kc; ++k) out[k * MR + r] = 0.0f;
                        continue;
                    }
                    const float* x = weight_segment(kr, a, abase + m * a->nb[1], k0, kc, tmp.data());
                    for (int64_t k = 0; k < kc; ++k) out[k * MR + r] = x[k];
                }
            }
            const bool acc = k0 > 0;
            for (int64_t n = c0; n < c1; n += NR) {
                const float* bp = bpack + pc.off + ((n - pc.n0) / NR) * panel_floats + k0 * NR;
                const int nv = (int)std::min<int64_t>(NR, c1 - n);
                for (int64_t ip = 0; ip < mp; ++ip) {
                    const int64_t m = m0 + ip * MR;
                    const int mv = (int)std::min<int64_t>(MR, m1 - m);
                    float* c = cbase + n * ldc + m;
                    if (mv == MR && nv == NR) {
                        kr.micro(kc, apack + ip * MR * kc, bp, c, ldc, acc);
                    } else {
                        kr.micro(kc, apack + ip * MR * kc, bp, ctile, MR, false);
                        for (int j = 0; j < nv; ++j)
                            for (int i = 0; i < mv; ++i)
                                c[j * ldc + i] = acc ? c[j * ldc + i] + ctile[j * MR + i] : ctile[j * MR + i];
                    }
                }
            }
        }
    };

    auto run_chunk = [&](const std::vector<GemmPiece>& pieces, bool last) {
        reset_counter(p);
        pack_b(pieces);
        p.barrier();
        const int64_t mblocks = (s.M + kMC - 1) / kMC;
        std::vector<int64_t> first_task(pieces.size() + 1, 0);
        for (size_t i = 0; i < pieces.size(); ++i)
            first_task[i + 1] = first_task[i] + mblocks * ((pieces[i].n1 - pieces[i].n0 + kNC - 1) / kNC);
        std::atomic<int64_t>* counter = work_counter(p);
        for (int64_t t; (t = counter->fetch_add(1, std::memory_order_relaxed)) < first_task.back();) {
            const size_t pi = std::upper_bound(first_task.begin(), first_task.end(), t) - first_task.begin() - 1;
            const GemmPiece& pc = pieces[pi];
            const int64_t local = t - first_task[pi];
            const int64_t mb = local % mblocks, nb = local / mblocks;
            const int64_t c0 = pc.n0 + nb * kNC, c1 = std::min(pc.n1, c0 + kNC);
            run_task(pc, mb * kMC, std::min(s.M, (mb + 1) * kMC), c0, c1);
        }
        if (!last) p.barrier();  // the next chunk reuses the packed b; after the last, the node ends
    };

    // Group (batch, column range) pieces into chunks whose packed b fits the budget.
    std::vector<GemmPiece> chunk;
    size_t used = 0;
    for (int64_t bt = 0; bt < s.nbatch; ++bt) {
        for (int64_t n0 = 0; n0 < s.N; n0 += piece_cols) {
            GemmPiece pc{bt, n0, std::min(s.N, n0 + piece_cols), 0};
            const size_t need = size_t(panels_of(pc)) * panel_floats;
            if (used + need > budget && !chunk.empty()) {
                run_chunk(chunk, false);
                chunk.clear();
                used = 0;
            }
            pc.off = used;
            used += need;
            chunk.push_back(pc);
        }
    }
    if (!chunk.empty()) run_chunk(chunk, true);
}

}  // namespace pyggml::cpu::mm
