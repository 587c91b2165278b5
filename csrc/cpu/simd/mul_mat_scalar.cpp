// Plain-loop MUL_MAT kernels: the reference the SIMD sets are tested against, and the fallback
// on CPUs without AVX2.
#include <cstring>

#include "cpu/mul_mat_kernels.h"

namespace pyggml::cpu::mm {

namespace {

void dot_f32(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float*) {
    const float* x = (const float*)a;
    for (int j = 0; j < nc; ++j) {
        const float* y = (const float*)((const char*)b + j * bs);
        float s = 0.0f;
        for (int64_t i = 0; i < k; ++i) s += x[i] * y[i];
        out[j] = s;
    }
}

void dot_f16(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float*) {
    const uint16_t* x = (const uint16_t*)a;
    for (int j = 0; j < nc; ++j) {
        const float* y = (const float*)((const char*)b + j * bs);
        float s = 0.0f;
        for (int64_t i = 0; i < k; ++i) s += fp16_to_fp32(x[i]) * y[i];
        out[j] = s;
    }
}

void dot_bf16(int64_t k, const void* a, const void* b, size_t bs, int nc, float* out, const float*) {
    const uint16_t* x = (const uint16_t*)a;
    for (int j = 0; j < nc; ++j) {
        const float* y = (const float*)((const char*)b + j * bs);
        float s = 0.0f;
        for (int64_t i = 0; i < k; ++i) s += bf16_to_fp32(x[i]) * y[i];
        out[j] = s;
    }
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

constexpr int MR = 8, NR = 4;
void micro(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, bool accumulate) {
    float acc[NR][MR] = {};
    for (int64_t k = 0; k < kc; ++k, ap += MR, bp += NR)
        for (int j = 0; j < NR; ++j)
            for (int i = 0; i < MR; ++i) acc[j][i] += ap[i] * bp[j];
    for (int j = 0; j < NR; ++j)
        for (int i = 0; i < MR; ++i) c[j * ldc + i] = accumulate ? c[j * ldc + i] + acc[j][i] : acc[j][i];
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
        s.dot[(int)Type::F32] = dot_f32;
        s.dot[(int)Type::F16] = dot_f16;
        s.dot[(int)Type::BF16] = dot_bf16;
        s.dot[(int)Type::Q8_0] = dot_q8_0;
        s.dot[(int)Type::Q4_0] = dot_q4_0;
        s.dot[(int)Type::NVFP4] = dot_nvfp4;
        s.quantize[(int)Type::Q8_0] = quantize_q8_0_cpu;
        for (int t = 0; t < kTypeIdLimit; ++t) s.dequant[t] = type_traits((Type)t).to_float;
        s.mr = MR;
        s.nr = NR;
        s.micro = micro;
        s.f16_to_f32 = f16_to_f32;
        s.round_f16 = round_f16;
        s.quantize_q8_0 = quantize_row_q8_0_cpu;
        add_quant_dots_scalar(s);
        return s;
    }();
    return k;
}

}  // namespace pyggml::cpu::mm

namespace pyggml::cpu {
std::vector<const char*> mul_mat_kernel_isas(Type t) {
    const int id = (int)t;
    std::vector<const char*> out;
    if (id < 0 || id >= kTypeIdLimit || !mm::kernels_scalar().dot[id]) return out;
    out.push_back("scalar");
    if (mm::kernels_avx2().dot[id] != mm::kernels_scalar().dot[id]) out.push_back("avx2");
    if (mm::kernels_avx512().dot[id] != mm::kernels_scalar().dot[id]) out.push_back("avx512");
    return out;
}
}  // namespace pyggml::cpu
