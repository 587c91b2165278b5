// CUDA: FLASH_ATTN_EXT, one warp per (query row, head, sequence) with an online softmax in
// f32. K/V F32/F16/BF16/Q8_0/Q4_0, F16 mask broadcast by modulo, GQA, ALiBi, softcap, sinks;
// fully masked rows give zeros. Rows the mask excludes (-inf) are skipped, so a sparse mask
// (set_n_kv_max) already costs little; the tensor-core and gather kernels of the CUDA issue
// replace this reference kernel.
#include <cmath>

#include "kernels.cuh"
#include "quant.cuh"

namespace pyggml::cuda {

namespace {
constexpr int kMaxDv = 1024;  // per-lane accumulator slots: Dv / 32 <= 32

__device__ inline float kv_at(const char* row, int64_t i, int type, int64_t nb0) {
    if (type == (int)Type::Q8_0) return dequant_q8_0(row, i);
    if (type == (int)Type::Q4_0) return dequant_q4_0(row, i);
    return load_as_f32(row + i * nb0, type);
}

struct FaParams {
    float scale, max_bias, softcap, m0, m1;
    int n_head_log2;
};

__global__ void flash_attn_kernel(const char* q, Dims dq, const char* k, Dims dk, int tk, const char* v,
                                  Dims dv, int tv, const char* mask, Dims dm, const float* sinks,
                                  float* o, Dims dd, FaParams p) {
    const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    const int64_t N = dq.ne[1], H = dq.ne[2], S = dq.ne[3];
    if (warp >= N * H * S) return;
    const int64_t t = warp % N, h = (warp / N) % H, s = warp / (N * H);
    const int64_t hk = h / (H / dk.ne[2]), hv = h / (H / dv.ne[2]);
    const int64_t Dk = dq.ne[0], Dv = dv.ne[0], KV = dk.ne[1];
    const float slope = p.max_bias > 0.f
        ? (h < p.n_head_log2 ? powf(p.m0, (float)(h + 1)) : powf(p.m1, (float)(2 * (h - p.n_head_log2) + 1)))
        : 1.f;
    const char* qrow = q + t * dq.nb[1] + h * dq.nb[2] + s * dq.nb[3];
    const char* mrow = mask ? mask + t * dm.nb[1] + (h % dm.ne[2]) * dm.nb[2] + (s % dm.ne[3]) * dm.nb[3] : nullptr;
    float acc[kMaxDv / 32];
    for (int i = 0; i < kMaxDv / 32; ++i) acc[i] = 0.f;
    float M = -INFINITY, Z = 0.f;
    for (int64_t j = 0; j < KV; ++j) {
        const float mv = mrow ? slope * __half2float(*(const __half*)(mrow + j * dm.nb[0])) : 0.f;
        if (mv == -INFINITY) continue;
        const char* krow = k + j * dk.nb[1] + hk * dk.nb[2] + s * dk.nb[3];
        float d = 0.f;
        for (int64_t i = lane; i < Dk; i += 32) d += *(const float*)(qrow + i * dq.nb[0]) * kv_at(krow, i, tk, dk.nb[0]);
        for (int off = 16; off > 0; off >>= 1) d += __shfl_xor_sync(0xffffffff, d, off);
        float x = d * p.scale;
        if (p.softcap != 0.f) x = p.softcap * tanhf(x / p.softcap);
        x += mv;
        const float M_new = fmaxf(M, x);
        const float corr = expf(M - M_new), w = expf(x - M_new);
        const char* vrow = v + j * dv.nb[1] + hv * dv.nb[2] + s * dv.nb[3];
        for (int64_t i = lane, c = 0; i < Dv; i += 32, ++c) acc[c] = acc[c] * corr + w * kv_at(vrow, i, tv, dv.nb[0]);
        Z = Z * corr + w;
        M = M_new;
    }
    if (sinks) {
        const float sk = sinks[h];
        const float M_new = fmaxf(M, sk);
        const float corr = expf(M - M_new);
        for (int c = 0; c < kMaxDv / 32; ++c) acc[c] *= corr;
        Z = Z * corr + expf(sk - M_new);
    }
    const float inv = Z != 0.f ? 1.f / Z : 0.f;
    // result [Dv, H, N, S]: row (h, t, s)
    float* out = (float*)((char*)o + h * dd.nb[1] + t * dd.nb[2] + s * dd.nb[3]);
    for (int64_t i = lane, c = 0; i < Dv; i += 32, ++c) out[i] = Z != 0.f ? acc[c] * inv : 0.f;
}
}  // namespace

void cuda_forward_FLASH_ATTN_EXT(const Launch& l, Tensor* dst) {
    const Tensor* q = dst->src[0];
    const Tensor* k = dst->src[1];
    const Tensor* v = dst->src[2];
    const Tensor* mask = dst->src[3];
    const Tensor* sinks = dst->src[4];
    if (v->ne[0] > kMaxDv) unsupported(dst, "head size above 1024");
    if (!cuda_reads_type(k->type) || !cuda_reads_type(v->type)) unsupported(dst, "K/V block type other than q8_0/q4_0");
    FaParams p;
    p.scale = dst->param_f32(0);
    p.max_bias = dst->param_f32(1);
    p.softcap = dst->param_f32(2);
    const int H = (int)q->ne[2];
    p.n_head_log2 = 1 << (int)std::floor(std::log2((double)H));
    p.m0 = std::pow(2.0f, -p.max_bias / p.n_head_log2);
    p.m1 = std::pow(2.0f, -(p.max_bias / 2.0f) / p.n_head_log2);
    const int64_t warps = q->ne[1] * q->ne[2] * q->ne[3];
    flash_attn_kernel<<<blocks_for(warps * 32, 128), 128, 0, l.stream>>>(
        (const char*)q->data, dims_of(q), (const char*)k->data, dims_of(k), (int)k->type,
        (const char*)v->data, dims_of(v), (int)v->type, mask ? (const char*)mask->data : nullptr,
        mask ? dims_of(mask) : Dims{}, sinks ? (const float*)sinks->data : nullptr, (float*)dst->data,
        dims_of(dst), p);
}

}  // namespace pyggml::cuda
