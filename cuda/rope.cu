// CUDA: ROPE for the NORMAL and NEOX modes with YaRN and freq_factors.
// Multi-section modes (MROPE, IMROPE, VISION) raise NotImplementedError for now.
#include <cmath>

#include "kernels.cuh"

namespace pyggml::cuda {

namespace {
struct RopeParams {
    int n_dims, mode, n_offs;
    float freq_base, freq_scale, ext_factor, attn_factor, corr_lo, corr_hi, theta_scale;
    bool backward;
};

__global__ void rope_kernel(const char* a, Dims da, const int32_t* pos, const float* ff, char* o,
                            Dims dd, int type, RopeParams p, int64_t n_pairs_total) {
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t half = dd.ne[0] / 2;
    if (t >= n_pairs_total) return;
    const int64_t pair = t % half;
    int64_t rest = t / half;
    const int64_t i1 = rest % dd.ne[1];
    rest /= dd.ne[1];
    const int64_t i2 = rest % dd.ne[2], i3 = rest / dd.ne[2];
    const bool neox = p.mode & 2;
    int64_t e0, e1;  // element indices of the pair (or of two pass-through elements)
    bool rotate = pair < p.n_dims / 2;
    if (rotate) {
        const int64_t i = pair;
        e0 = p.n_offs + (neox ? i : 2 * i);
        e1 = p.n_offs + (neox ? i + p.n_dims / 2 : 2 * i + 1);
    } else {
        // copy the elements outside the rotated window, two per thread
        const int64_t k = pair - p.n_dims / 2;
        const int64_t outside = dd.ne[0] - p.n_dims;
        int64_t idx0 = 2 * k, idx1 = 2 * k + 1;
        auto map = [&](int64_t j) { return j < p.n_offs ? j : j + p.n_dims; };
        e0 = idx0 < outside ? map(idx0) : -1;
        e1 = idx1 < outside ? map(idx1) : -1;
    }
    const char* x = a + offset_of(da, 0, i1, i2, i3);
    char* y = o + offset_of(dd, 0, i1, i2, i3);
    if (!rotate) {
        if (e0 >= 0) store_from_f32(y + e0 * dd.nb[0], type, load_as_f32(x + e0 * da.nb[0], type));
        if (e1 >= 0) store_from_f32(y + e1 * dd.nb[0], type, load_as_f32(x + e1 * da.nb[0], type));
        return;
    }
    const int64_t i = pair;
    const float theta_ext = (float)pos[i2] * powf(p.theta_scale, (float)i) / (ff ? ff[i] : 1.f);
    const float theta_int = p.freq_scale * theta_ext;
    float theta = theta_int, mscale = p.attn_factor;
    if (p.ext_factor != 0.f) {
        const float y_ = ((float)i - p.corr_lo) / fmaxf(0.001f, p.corr_hi - p.corr_lo);
        const float ramp = 1.f - fminf(1.f, fmaxf(0.f, y_));
        const float mix = ramp * p.ext_factor;
        theta = theta_int * (1.f - mix) + theta_ext * mix;
        mscale *= 1.f + 0.1f * logf(1.f / p.freq_scale);
    }
    const float c = cosf(theta) * mscale;
    const float s = (p.backward ? -sinf(theta) : sinf(theta)) * mscale;
    const float x0 = load_as_f32(x + e0 * da.nb[0], type), x1 = load_as_f32(x + e1 * da.nb[0], type);
    store_from_f32(y + e0 * dd.nb[0], type, x0 * c - x1 * s);
    store_from_f32(y + e1 * dd.nb[0], type, x0 * s + x1 * c);
}

float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * std::log(n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * std::log(base));
}
}  // namespace

void cuda_forward_ROPE(const Launch& l, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* pos = dst->src[1];
    const Tensor* ff = dst->src[2];
    RopeParams p;
    p.n_dims = dst->op_params[1];
    p.mode = dst->op_params[2];
    if (p.mode != 0 && p.mode != 2) unsupported(dst, "only the NORMAL and NEOX modes");
    const int n_ctx_orig = dst->op_params[4];
    p.freq_base = dst->param_f32(5);
    p.freq_scale = dst->param_f32(6);
    p.ext_factor = dst->param_f32(7);
    p.attn_factor = dst->param_f32(8);
    const float beta_fast = dst->param_f32(9), beta_slow = dst->param_f32(10);
    p.n_offs = dst->op_params[15];
    p.backward = dst->op_params[0] != 0;  // slot 0: rope_ext_back / rope_multi_back
    p.theta_scale = std::pow(p.freq_base, -2.0f / p.n_dims);
    p.corr_lo = std::fmax(0.0f, std::floor(corr_dim(p.n_dims, n_ctx_orig, beta_fast, p.freq_base)));
    p.corr_hi = std::fmin((float)(p.n_dims - 1), std::ceil(corr_dim(p.n_dims, n_ctx_orig, beta_slow, p.freq_base)));
    const int64_t total = (dst->ne[0] / 2) * dst->ne[1] * dst->ne[2] * dst->ne[3];
    rope_kernel<<<blocks_for(total, 256), 256, 0, l.stream>>>(
        (const char*)a->data, dims_of(a), (const int32_t*)pos->data, ff ? (const float*)ff->data : nullptr,
        (char*)dst->data, dims_of(dst), (int)dst->type, p, total);
}

}  // namespace pyggml::cuda
