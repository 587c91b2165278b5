// Plain-loop MUL_MAT kernels: the reference the SIMD sets are tested against, and the fallback
// on CPUs without AVX2.
#include <algorithm>
#include <cstring>

#include "cpu/mul_mat_float.h"
#include "cpu/mul_mat_kernels.h"
#include "cpu/quant_ktile.h"
#include "cpu/quant_repack_kernels.h"

namespace pyggml::cpu::mm {

namespace {

// ---- Float weights in the canonical order (cpu/mul_mat_float.h), plain loops over 8 lanes
// (products rounded before the add: no fused multiply-add here).
constexpr int kLanes = 8;
constexpr int64_t kFloatKB = 512;

// One tree for every accumulator: s_i = v_i + v_{i+4}; t_0 = s_0 + s_2, t_1 = s_1 + s_3; t_0 + t_1.
inline float hsum8(const float* v) {
    const float s0 = v[0] + v[4], s1 = v[1] + v[5], s2 = v[2] + v[6], s3 = v[3] + v[7];
    return (s0 + s2) + (s1 + s3);
}

inline float weight_value(int kind, const char* p, int64_t i) {
    switch (kind) {
        case kFloatF32: return ((const float*)p)[i];
        case kFloatF16: return fp16_to_fp32(((const uint16_t*)p)[i]);
        default: return bf16_to_fp32(((const uint16_t*)p)[i]);
    }
}

template <int kKind, int kColKind = kFloatF32>
void direct(int64_t k, const void* a, size_t as, int rows, const void* b, size_t bs, int cols, float* out) {
    for (int r = 0; r < rows; ++r) {
        const char* ar = (const char*)a + r * as;
        for (int c = 0; c < cols; ++c) {
            const char* y = (const char*)b + c * bs;
            float sum = 0.0f;
            for (int64_t k0 = 0; k0 < k; k0 += kFloatKB) {
                const int64_t k1 = std::min(k, k0 + kFloatKB);
                float acc[kLanes] = {};
                for (int64_t i = k0; i < k1; i += kLanes)
                    for (int l = 0; l < kLanes; ++l) {
                        const bool in = i + l < k1;
                        const float prod =
                            (in ? weight_value(kKind, ar, i + l) : 0.0f) * (in ? weight_value(kColKind, y, i + l) : 0.0f);
                        acc[l] = acc[l] + prod;
                    }
                const float h = hsum8(acc);
                sum = k0 == 0 ? h : sum + h;
            }
            out[r * 4 + c] = sum;
        }
    }
}

constexpr int kFloatMR = 4, kFloatNR = 4;
void float_micro(int64_t nq, const float* ap, const float* bp, float* c, int64_t ldc, int mv, int nv, bool accumulate,
                 const char*, int) {
    float acc[kFloatNR][kFloatMR][kLanes] = {};
    for (int64_t q = 0; q < nq; ++q, ap += kFloatMR * kLanes, bp += kFloatNR * kLanes)
        for (int j = 0; j < kFloatNR; ++j)
            for (int r = 0; r < kFloatMR; ++r)
                for (int l = 0; l < kLanes; ++l) {
                    const float prod = ap[r * kLanes + l] * bp[j * kLanes + l];
                    acc[j][r][l] = acc[j][r][l] + prod;
                }
    for (int j = 0; j < nv; ++j)
        for (int r = 0; r < mv; ++r) {
            const float h = hsum8(acc[j][r]);
            c[j * ldc + r] = accumulate ? c[j * ldc + r] + h : h;
        }
}

template <int kKind>
void pack_a(const void* a, size_t as, int rows, int64_t k0, int64_t kc, float* ap) {
    const int64_t nq = (kc + kLanes - 1) / kLanes;
    for (int r = 0; r < kFloatMR; ++r)
        for (int64_t q = 0; q < nq; ++q)
            for (int l = 0; l < kLanes; ++l) {
                const int64_t i = q * kLanes + l;
                ap[(q * kFloatMR + r) * kLanes + l] =
                    r < rows && i < kc ? weight_value(kKind, (const char*)a + r * as, k0 + i) : 0.0f;
            }
}
void pack_b(const float* const* cols, int64_t kq, float* bp) {
    for (int j = 0; j < kFloatNR; ++j)
        for (int64_t q = 0; q < kq; ++q) {
            float* out = bp + (q * kFloatNR + j) * kLanes;
            if (cols[j]) std::memcpy(out, cols[j] + q * kLanes, sizeof(float) * kLanes);
            else std::memset(out, 0, sizeof(float) * kLanes);
        }
}

// MUL_MAT_ID's dots on float weights, in the same order.
template <int kKind>
void dot_float(int64_t k, const void* a, const void* b, size_t bs, int nc, float* o, const float*) {
    float out[16];
    direct<kKind>(k, a, 0, 1, b, bs, nc, out);
    for (int j = 0; j < nc; ++j) o[j] = out[j];
}

void dot_q8_0(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float*) {
    const BlockQ8_0* x = (const BlockQ8_0*)a;
    for (int j = 0; j < nc; ++j) {
        const BlockQ8_0* y = (const BlockQ8_0*)((const char*)b + j * bs);
        float s = 0.0f;
        for (int64_t ib = 0; ib < k / 32; ++ib) {
            int32_t is = 0;
            for (int i = 0; i < 32; ++i) is += int32_t(x[ib].qs[i]) * int32_t(y[ib].qs[i]);
            s += float(is) * (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d));
        }
        out[j] = s;
    }
}

void dot_q4_0(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float*) {
    const BlockQ4_0* x = (const BlockQ4_0*)a;
    for (int j = 0; j < nc; ++j) {
        const BlockQ8_0* y = (const BlockQ8_0*)((const char*)b + j * bs);
        float s = 0.0f;
        for (int64_t ib = 0; ib < k / 32; ++ib) {
            int32_t is = 0;
            for (int i = 0; i < 16; ++i) {
                is += (int32_t(x[ib].qs[i] & 0x0F) - 8) * int32_t(y[ib].qs[i]);
                is += (int32_t(x[ib].qs[i] >> 4) - 8) * int32_t(y[ib].qs[i + 16]);
            }
            s += float(is) * (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d));
        }
        out[j] = s;
    }
}

// nvfp4 block = 64 values = two q8_0 blocks of the activations; sub-block s (16 values) lies in
// q8_0 block s/2 at offset 16*(s%2).
void dot_nvfp4(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float* scale) {
    const BlockNVFP4* x = (const BlockNVFP4*)a;
    for (int j = 0; j < nc; ++j) {
        const BlockQ8_0* y = (const BlockQ8_0*)((const char*)b + j * bs);
        float s = 0.0f;
        for (int64_t ib = 0; ib < k / 64; ++ib) {
            for (int sb = 0; sb < 4; ++sb) {
                const BlockQ8_0& yb = y[2 * ib + sb / 2];
                const int8_t* yq = yb.qs + 16 * (sb % 2);
                int32_t is = 0;
                for (int i = 0; i < 8; ++i) {
                    const uint8_t q = x[ib].qs[8 * sb + i];
                    is += int32_t(kNvfp4Lut[q & 0x0F]) * yq[i] + int32_t(kNvfp4Lut[q >> 4]) * yq[i + 8];
                }
                s += float(is) * (scale[x[ib].d[sb]] * fp16_to_fp32(yb.d));
            }
        }
        out[j] = s;
    }
}


void f16_to_f32(const void* src, float* dst, int64_t n) {
    const uint16_t* h = (const uint16_t*)src;
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
}
void round_f16(const void* src, float* dst, int64_t n) {
    const float* x = (const float*)src;
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

void quantize_q8_0_cpu(const float* x, void* y, int64_t n) { quantize_row_q8_0_cpu(x, (BlockQ8_0*)y, n); }

}  // namespace

const Kernels& kernels_scalar() {
    static const Kernels k = [] {
        Kernels s{};
        s.isa = simd::Isa::Scalar;
        s.dot[(int)Type::F32] = dot_float<kFloatF32>;
        s.dot[(int)Type::F16] = dot_float<kFloatF16>;
        s.dot[(int)Type::BF16] = dot_float<kFloatBF16>;
        s.dot[(int)Type::Q8_0] = dot_q8_0;
        s.dot[(int)Type::Q4_0] = dot_q4_0;
        s.dot[(int)Type::NVFP4] = dot_nvfp4;
        s.quantize[(int)Type::Q8_0] = quantize_q8_0_cpu;
        s.f16_to_f32 = f16_to_f32;
        s.round_f16 = round_f16;
        s.quantize_q8_0 = quantize_row_q8_0_cpu;
        add_quant_dots_scalar(s);
        return s;
    }();
    return k;
}

const FloatKernels& float_kernels_scalar() {
    static const FloatKernels k = [] {
        FloatKernels f{};
        f.lanes = kLanes;
        f.kb = kFloatKB;
        f.mr = kFloatMR;
        f.nr = kFloatNR;
        f.mc = 16 * kFloatMR;
        f.nc = 16 * kFloatNR;
        f.direct[kFloatF32] = direct<kFloatF32>;
        f.direct[kFloatF16] = direct<kFloatF16>;
        f.direct[kFloatBF16] = direct<kFloatBF16>;
        f.direct_f16b = direct<kFloatF16, kFloatF16>;
        f.micro = float_micro;
        f.pack_a[kFloatF32] = pack_a<kFloatF32>;
        f.pack_a[kFloatF16] = pack_a<kFloatF16>;
        f.pack_a[kFloatBF16] = pack_a<kFloatBF16>;
        f.pack_b = pack_b;
        f.direct_cols = 4;
        for (int c = 0; c <= kMaxDirectCols; ++c) f.direct_rows[c] = 4;
        return f;
    }();
    return k;
}

}  // namespace pyggml::cpu::mm

namespace pyggml::cpu {
namespace {
// The levels whose kernel (by which(level)) is non-null and none of the lower levels' kernels:
// a level that reuses a lower level's kernel for this path is not listed.
template <class Which>
std::vector<const char*> own_kernels(Which which) {
    const simd::Isa levels[] = {simd::Isa::Scalar, simd::Isa::Avx2, simd::Isa::Avx512};
    std::vector<const char*> out;
    for (int i = 0; i < 3; ++i) {
        const void* f = which(levels[i]);
        bool own = f != nullptr;
        for (int j = 0; j < i && own; ++j) own = which(levels[j]) != f;
        if (own) out.push_back(simd::isa_name(levels[i]));
    }
    return out;
}
}  // namespace

std::vector<const char*> mul_mat_kernel_isas(Type t) {
    const int id = (int)t;
    if (id < 0 || id >= kTypeIdLimit || !mm::kernels_scalar().dot[id]) return {};
    return own_kernels([id](simd::Isa l) { return (const void*)mm::kernels_for(l).dot[id]; });
}

std::vector<std::pair<const char*, std::vector<const char*>>> mul_mat_path_isas(Type t) {
    const int id = (int)t;
    std::vector<std::pair<const char*, std::vector<const char*>>> out;
    if (id < 0 || id >= kTypeIdLimit || !mm::kernels_scalar().dot[id]) return out;
    auto mm_path = [&](const char* name, auto member) {
        out.emplace_back(name, own_kernels([&](simd::Isa l) { return (const void*)(mm::kernels_for(l).*member)[id]; }));
    };
    mm_path("dot", &mm::Kernels::dot);
    mm_path("dot2", &mm::Kernels::dot2);
    mm_path("dot1x", &mm::Kernels::dot1x);
    mm_path("dot1x2", &mm::Kernels::dot1x2);
    mm_path("dot2x", &mm::Kernels::dot2x);
    mm_path("gemm", &mm::Kernels::qg_tile);
    out.emplace_back("repack", own_kernels([id](simd::Isa l) {
        const rp::Kernels& k = l == simd::Isa::Avx512 ? rp::kernels_avx512()
                               : l == simd::Isa::Avx2 ? rp::kernels_avx2() : rp::kernels_scalar();
        return (const void*)k.tile[id];
    }));
    out.emplace_back("ktile", own_kernels([id](simd::Isa l) {
        return l == simd::Isa::Avx512 ? (const void*)kt::kernels_avx512().tile[id] : nullptr;
    }));
    return out;
}
}  // namespace pyggml::cpu
