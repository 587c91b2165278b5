// CPU kernels of the 'conv' family.
//  - IM2COL / IM2COL_3D: one output row (one output pixel) per work item, split across threads.
//  - CONV_2D / CONV_3D (direct): per image, chunks of output pixels are unfolded into patches
//    in the kernel's type (f16 kernels round the image to f16, as ggml does), then the MUL_MAT
//    kernel multiplies patches x kernel straight into the output planes (the fast GEMM).
//  - CONV_2D_DW: per (channel, image) plane and output row, taps accumulate into a row buffer
//    in (ky, kx) order; any input strides (WHCN or CWHN).
//  - CONV_TRANSPOSE_1D / _2D: kernel and input are repacked channel-innermost into wdata, then
//    every (input pixel, tap) is one dot product over input channels added into the output.
//  - COL2IM_1D: gather per output sample.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/convert.h"
#include "cpu/kernels.h"
#include "cpu/seed_simd.h"
#include "cpu/simd/isa.h"

namespace pyggml::cpu {

namespace {

// The geometry of one unfold: input sizes, kernel sizes, output sizes, stride/padding/dilation
// per axis (0 = width, 1 = height, 2 = depth) and the byte strides of the image along
// width, height, depth, channel and image.
struct Unfold {
    int64_t IW = 1, IH = 1, ID = 1, IC = 1, KW = 1, KH = 1, KD = 1, OW = 1, OH = 1, OD = 1;
    int64_t s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1};
    size_t sw = 0, sh = 0, sd = 0, sc = 0, sn = 0;
    Type type = Type::F32;
    const char* data = nullptr;
    int64_t row_len() const { return IC * KD * KH * KW; }
};

// One patch (output pixel ow, oh, od of image n) as IC*KD*KH*KW floats, index
// ((ic*KD + kd)*KH + kh)*KW + kw; zero outside the image.
void unfold_patch(const Unfold& u, int64_t ow, int64_t oh, int64_t od, int64_t n, float* row) {
    const int64_t iw0 = ow * u.s[0] - u.p[0], ih0 = oh * u.s[1] - u.p[1], id0 = od * u.s[2] - u.p[2];
    // taps kw in [kw_lo, kw_hi) land inside the image row; the others are padding
    const int64_t d0 = u.d[0];
    const int64_t kw_lo = std::min<int64_t>(u.KW, iw0 >= 0 ? 0 : (-iw0 + d0 - 1) / d0);
    const int64_t kw_hi = std::max<int64_t>(kw_lo, std::min<int64_t>(u.KW, u.IW - 1 - iw0 < 0 ? 0 : (u.IW - 1 - iw0) / d0 + 1));
    const bool packed = u.type == Type::F32 && u.sw == sizeof(float) && d0 == 1;
    for (int64_t ic = 0; ic < u.IC; ++ic) {
        const char* plane = u.data + n * u.sn + ic * u.sc;
        for (int64_t kd = 0; kd < u.KD; ++kd) {
            const int64_t id = id0 + kd * u.d[2];
            for (int64_t kh = 0; kh < u.KH; ++kh, row += u.KW) {
                const int64_t ih = ih0 + kh * u.d[1];
                if (id < 0 || id >= u.ID || ih < 0 || ih >= u.IH) {
                    std::fill(row, row + u.KW, 0.0f);
                    continue;
                }
                const char* src = plane + id * u.sd + ih * u.sh;
                for (int64_t kw = 0; kw < kw_lo; ++kw) row[kw] = 0.0f;
                for (int64_t kw = kw_hi; kw < u.KW; ++kw) row[kw] = 0.0f;
                if (packed) {  // kernel rows are short: a plain loop beats a memcpy call
                    const float* sf = (const float*)src + iw0;
                    for (int64_t kw = kw_lo; kw < kw_hi; ++kw) row[kw] = sf[kw];
                } else if (u.type == Type::F32) {
                    for (int64_t kw = kw_lo; kw < kw_hi; ++kw) row[kw] = *(const float*)(src + (iw0 + kw * d0) * u.sw);
                } else {
                    for (int64_t kw = kw_lo; kw < kw_hi; ++kw) row[kw] = conv::load_f32(u.type, src + (iw0 + kw * d0) * u.sw);
                }
            }
        }
    }
}

Unfold unfold_2d(const Tensor* a, const Tensor* b, const Tensor* dst, bool is_2D) {
    Unfold u;
    u.type = b->type;
    u.data = (const char*)b->data;
    u.IW = b->ne[0];
    u.KW = a->ne[0];
    u.sw = b->nb[0];
    if (is_2D) {
        u.IH = b->ne[1]; u.IC = b->ne[2]; u.KH = a->ne[1];
        u.sh = b->nb[1]; u.sc = b->nb[2]; u.sn = b->nb[3];
    } else {
        u.IC = b->ne[1]; u.sc = b->nb[1]; u.sn = b->nb[2];
    }
    return u;
}

Unfold unfold_3d(const Tensor* a, const Tensor* b, int64_t IC) {
    Unfold u;
    u.type = b->type;
    u.data = (const char*)b->data;
    u.IW = b->ne[0]; u.IH = b->ne[1]; u.ID = b->ne[2]; u.IC = IC;
    u.KW = a->ne[0]; u.KH = a->ne[1]; u.KD = a->ne[2];
    u.sw = b->nb[0]; u.sh = b->nb[1]; u.sd = b->nb[2]; u.sc = b->nb[3]; u.sn = IC * b->nb[3];
    return u;
}

// Writes rows [r0, r1) of an im2col result: row r is pixel (ow, oh, od) of image n with
// r = ((n*OD + od)*OH + oh)*OW + ow.
void unfold_rows(const Unfold& u, Tensor* dst, int64_t r0, int64_t r1) {
    const int64_t L = u.row_len();
    std::vector<float> row(L);
    const size_t row_bytes = row_size(dst->type, L);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t ow = r % u.OW, oh = (r / u.OW) % u.OH, od = (r / (u.OW * u.OH)) % u.OD,
                      n = r / (u.OW * u.OH * u.OD);
        char* out = (char*)dst->data + r * row_bytes;
        if (dst->type == Type::F32) {
            unfold_patch(u, ow, oh, od, n, (float*)out);
        } else {
            unfold_patch(u, ow, oh, od, n, row.data());
            conv::from_float_row_fast(dst->type, row.data(), out, L);
        }
    }
}

}  // namespace

void cpu_forward_IM2COL(const ComputeParams& p, Tensor* dst) {
    const bool is_2D = dst->param_i32(6) == 1;
    Unfold u = unfold_2d(dst->src[0], dst->src[1], dst, is_2D);
    u.s[0] = dst->param_i32(0); u.s[1] = dst->param_i32(1);
    u.p[0] = dst->param_i32(2); u.p[1] = dst->param_i32(3);
    u.d[0] = dst->param_i32(4); u.d[1] = dst->param_i32(5);
    u.OW = dst->ne[1];
    u.OH = is_2D ? dst->ne[2] : 1;
    if (dst->is_empty()) return;
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    unfold_rows(u, dst, r0, r1);
}
size_t cpu_work_size_IM2COL(const Tensor*, int) { return 0; }

void cpu_forward_IM2COL_3D(const ComputeParams& p, Tensor* dst) {
    const int64_t IC = dst->param_i32(9);
    Unfold u = unfold_3d(dst->src[0], dst->src[1], IC);
    for (int i = 0; i < 3; ++i) {
        u.s[i] = dst->param_i32(i);
        u.p[i] = dst->param_i32(3 + i);
        u.d[i] = dst->param_i32(6 + i);
    }
    u.OW = dst->ne[1];
    u.OH = dst->ne[2];
    const int64_t N = dst->src[1]->ne[3] / IC;
    u.OD = N > 0 ? dst->ne[3] / N : 1;
    if (dst->is_empty()) return;
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    unfold_rows(u, dst, r0, r1);
}
size_t cpu_work_size_IM2COL_3D(const Tensor*, int) { return 0; }

// ---- direct convolutions: unfold + MUL_MAT ----

namespace {

constexpr size_t kPatchBudget = size_t(8) << 20;  // bytes of unfolded patches per chunk

struct DirectConv {
    Unfold u;
    int64_t OC = 1, N = 1;
    size_t plane_stride = 0;  // bytes between output channels of one image
    size_t image_stride = 0;  // bytes between images
    const Tensor* kernel = nullptr;
    int64_t chunk = 1;        // output pixels per GEMM
};

DirectConv direct_conv(const Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    DirectConv c;
    c.kernel = a;
    if (dst->op == Op::CONV_2D) {
        c.u = unfold_2d(a, b, dst, true);
        for (int i = 0; i < 2; ++i) {
            c.u.s[i] = dst->param_i32(i);
            c.u.p[i] = dst->param_i32(2 + i);
            c.u.d[i] = dst->param_i32(4 + i);
        }
        c.OC = a->ne[3];
        c.N = b->ne[3];
        c.plane_stride = dst->nb[2];
        c.image_stride = dst->nb[3];
    } else {  // CONV_3D
        const int64_t IC = dst->param_i32(9);
        c.u = unfold_3d(a, b, IC);
        for (int i = 0; i < 3; ++i) {
            c.u.s[i] = dst->param_i32(i);
            c.u.p[i] = dst->param_i32(3 + i);
            c.u.d[i] = dst->param_i32(6 + i);
        }
        c.OC = dst->param_i32(11);
        c.N = dst->param_i32(10);
        c.u.OD = dst->ne[2];
        c.plane_stride = dst->nb[3];
        c.image_stride = c.OC * dst->nb[3];
    }
    c.u.OW = dst->ne[0];
    c.u.OH = dst->ne[1];
    const int64_t pixels = c.u.OW * c.u.OH * c.u.OD;
    const size_t patch_bytes = std::max<size_t>(1, row_size(a->type, c.u.row_len()));
    c.chunk = std::max<int64_t>(1, std::min<int64_t>(pixels, int64_t(kPatchBudget / patch_bytes)));
    if (c.chunk >= 64) c.chunk = c.chunk / 64 * 64;
    return c;
}

// The MUL_MAT node that multiplies `np` patches (rows of `patches`) by the kernel, writing
// output pixel i of channel o at out + i*4 + o*plane_stride.
struct GemmNode {
    Tensor A, B, D;
    GemmNode(const DirectConv& c, void* patches, int64_t np, char* out) {
        const Type kt = c.kernel->type;
        const int64_t L = c.u.row_len();
        const size_t ts = type_size(kt);
        A.type = kt;
        A.ne[0] = L; A.ne[1] = np;
        A.nb[0] = ts; A.nb[1] = L * ts; A.nb[2] = A.nb[3] = A.nb[1] * np;
        A.data = patches;
        B.type = kt;
        B.ne[0] = L; B.ne[1] = c.OC;
        B.nb[0] = ts; B.nb[1] = L * ts; B.nb[2] = B.nb[3] = B.nb[1] * c.OC;
        B.data = c.kernel->data;
        D.type = Type::F32;
        D.ne[0] = np; D.ne[1] = c.OC;
        D.nb[0] = sizeof(float); D.nb[1] = c.plane_stride; D.nb[2] = D.nb[3] = c.plane_stride * c.OC;
        D.data = out;
        D.op = Op::MUL_MAT;
        D.src[0] = &A;
        D.src[1] = &B;
    }
};

size_t align64(size_t n) { return (n + 63) & ~size_t(63); }

size_t direct_patch_bytes(const DirectConv& c) { return align64(c.chunk * row_size(c.kernel->type, c.u.row_len())); }

void direct_forward(const ComputeParams& p, Tensor* dst) {
    if (dst->is_empty()) return;
    const DirectConv c = direct_conv(dst);
    const int64_t L = c.u.row_len();
    const int64_t pixels = c.u.OW * c.u.OH * c.u.OD;
    const Type kt = c.kernel->type;
    const size_t rowb = row_size(kt, L);
    char* patches = (char*)p.wdata;
    ComputeParams gp = p;
    gp.wdata = patches + direct_patch_bytes(c);
    gp.wsize = p.wsize - direct_patch_bytes(c);
    std::vector<float> row(L);
    for (int64_t n = 0; n < c.N; ++n) {
        for (int64_t q0 = 0; q0 < pixels; q0 += c.chunk) {
            const int64_t np = std::min(c.chunk, pixels - q0);
            int64_t i0, i1;
            split_range(np, p.ith, p.nth, i0, i1);
            for (int64_t i = i0; i < i1; ++i) {
                const int64_t q = q0 + i;
                const int64_t ow = q % c.u.OW, oh = (q / c.u.OW) % c.u.OH, od = q / (c.u.OW * c.u.OH);
                char* out = patches + i * rowb;
                if (kt == Type::F32) {
                    unfold_patch(c.u, ow, oh, od, n, (float*)out);
                } else {
                    unfold_patch(c.u, ow, oh, od, n, row.data());
                    conv::from_float_row_fast(kt, row.data(), out, L);
                }
            }
            p.barrier();
            GemmNode g(c, patches, np, (char*)dst->data + n * c.image_stride + q0 * sizeof(float));
            cpu_forward_MUL_MAT(gp, &g.D);
            p.barrier();  // the next chunk overwrites the patches
        }
    }
}

size_t direct_work_size(const Tensor* dst, int nth) {
    if (dst->is_empty()) return 0;
    const DirectConv c = direct_conv(dst);
    GemmNode g(c, nullptr, c.chunk, nullptr);
    return direct_patch_bytes(c) + align64(cpu_work_size_MUL_MAT(&g.D, nth));
}

}  // namespace

void cpu_forward_CONV_2D(const ComputeParams& p, Tensor* dst) { direct_forward(p, dst); }
size_t cpu_work_size_CONV_2D(const Tensor* dst, int nth) { return direct_work_size(dst, nth); }
void cpu_forward_CONV_3D(const ComputeParams& p, Tensor* dst) { direct_forward(p, dst); }
size_t cpu_work_size_CONV_3D(const Tensor* dst, int nth) { return direct_work_size(dst, nth); }

// ---- depth-wise ----

namespace {
// acc += w * x over a contiguous run; the AVX2+FMA clone is picked at run time.
void tap_row(float* acc, float w, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) acc[i] += w * x[i];
}
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2,fma"))) void tap_row_avx2(float* acc, float w, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) acc[i] += w * x[i];
}
#else
void tap_row_avx2(float* acc, float w, const float* x, int64_t n) { tap_row(acc, w, x, n); }
#endif
}  // namespace

void cpu_forward_CONV_2D_DW(const ComputeParams& p, Tensor* dst) {
    const Tensor* k = dst->src[0];
    const Tensor* b = dst->src[1];
    const int64_t s0 = dst->param_i32(0), s1 = dst->param_i32(1), p0 = dst->param_i32(2), p1 = dst->param_i32(3),
                  d0 = dst->param_i32(4), d1 = dst->param_i32(5);
    const int64_t IW = b->ne[0], IH = b->ne[1], C = b->ne[2], N = b->ne[3];
    const int64_t KW = k->ne[0], KH = k->ne[1], OW = dst->ne[0], OH = dst->ne[1];
    if (dst->is_empty()) return;
    const size_t sw = b->nb[0];
    const auto tap = simd::cpu_isa() != simd::Isa::Scalar ? tap_row_avx2 : tap_row;
    std::vector<float> acc(OW), taps(KW * KH);
    int64_t r0, r1;
    split_range(C * N * OH, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t oy = r % OH, c = (r / OH) % C, n = r / (OH * C);
        for (int64_t ky = 0; ky < KH; ++ky)
            for (int64_t kx = 0; kx < KW; ++kx) taps[ky * KW + kx] = conv::load_f32(k->type, k->ptr(kx, ky, 0, c));
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t ky = 0; ky < KH; ++ky) {
            const int64_t iy = oy * s1 + ky * d1 - p1;
            if (iy < 0 || iy >= IH) continue;
            const char* srow = b->ptr(0, iy, c, n);
            for (int64_t kx = 0; kx < KW; ++kx) {
                const float w = taps[ky * KW + kx];
                const int64_t off = kx * d0 - p0;  // ix = ox*s0 + off must lie in [0, IW)
                const int64_t lo = off >= 0 ? 0 : (-off + s0 - 1) / s0;
                const int64_t hi = std::min<int64_t>(OW, IW - 1 - off < 0 ? 0 : (IW - 1 - off) / s0 + 1);
                if (sw == sizeof(float) && s0 == 1) {
                    if (hi > lo) tap(acc.data() + lo, w, (const float*)srow + off + lo, hi - lo);
                } else {
                    for (int64_t ox = lo; ox < hi; ++ox) acc[ox] += w * *(const float*)(srow + (ox * s0 + off) * sw);
                }
            }
        }
        char* orow = dst->ptr(0, oy, c, n);
        for (int64_t ox = 0; ox < OW; ++ox) *(float*)(orow + ox * dst->nb[0]) = acc[ox];
    }
}
size_t cpu_work_size_CONV_2D_DW(const Tensor*, int) { return 0; }

// ---- transposed ----

namespace {

// Kernel [KW, KH, OC, IC] -> wdata [OC][KH][KW][IC] and image [W, H, IC, N] -> [N][H][W][IC]
// (values rounded to f16 for an f16 kernel), then each (image pixel, tap) of an output channel
// adds one IC-long dot product.
void transpose_conv(const ComputeParams& p, Tensor* dst, int64_t KW, int64_t KH, int64_t OC, int64_t IC, int64_t W,
                    int64_t H, int64_t N, int64_t stride) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    float* wk = (float*)p.wdata;
    float* wx = wk + KW * KH * OC * IC;
    const bool f16 = a->type == Type::F16;
    const bool is_1d = dst->op == Op::CONV_TRANSPOSE_1D;
    // kernel element (kx, ky, oc, ic): 1-D kernels are [K, OC, IC]
    auto kernel_at = [&](int64_t kx, int64_t ky, int64_t oc, int64_t ic) {
        return conv::load_f32(a->type, is_1d ? a->ptr(kx, oc, ic) : a->ptr(kx, ky, oc, ic));
    };
    auto image_at = [&](int64_t x, int64_t y, int64_t ic, int64_t n) {
        const float v = *(const float*)(is_1d ? b->ptr(x, ic) : b->ptr(x, y, ic, n));
        return f16 ? fp16_to_fp32(fp32_to_fp16(v)) : v;
    };
    const size_t ob0 = dst->nb[0], ob1 = is_1d ? 0 : dst->nb[1], obc = is_1d ? dst->nb[1] : dst->nb[2],
                 obn = is_1d ? 0 : dst->nb[3];
    auto out_at = [=](int64_t x, int64_t y, int64_t oc, int64_t n) {
        return (float*)((char*)dst->data + x * ob0 + y * ob1 + oc * obc + n * obn);
    };
    int64_t r0, r1;
    split_range(OC * KH * KW, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t kx = r % KW, ky = (r / KW) % KH, oc = r / (KW * KH);
        for (int64_t ic = 0; ic < IC; ++ic) wk[r * IC + ic] = kernel_at(kx, ky, oc, ic);
    }
    split_range(N * H * W, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t x = r % W, y = (r / W) % H, n = r / (W * H);
        for (int64_t ic = 0; ic < IC; ++ic) wx[r * IC + ic] = image_at(x, y, ic, n);
    }
    p.barrier();
    const seed::SeedOps& kern = seed::kernels_for(seed::isa());
    const int64_t OW = dst->ne[0], OH = is_1d ? 1 : dst->ne[1];
    // threads own output channels (and images), so their writes never overlap
    split_range(OC * N, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t oc = r % OC, n = r / OC;
        for (int64_t oy = 0; oy < OH; ++oy)
            for (int64_t ox = 0; ox < OW; ++ox) *out_at(ox, oy, oc, n) = 0.0f;
        for (int64_t y = 0; y < H; ++y)
            for (int64_t x = 0; x < W; ++x) {
                const float* xv = wx + ((n * H + y) * W + x) * IC;
                for (int64_t ky = 0; ky < KH; ++ky)
                    for (int64_t kx = 0; kx < KW; ++kx) {
                        const float v = kern.dot(xv, wk + ((oc * KH + ky) * KW + kx) * IC, IC);
                        *out_at(x * stride + kx, y * stride + ky, oc, n) += v;
                    }
            }
    }
}

}  // namespace

void cpu_forward_CONV_TRANSPOSE_1D(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    if (dst->is_empty()) return;
    transpose_conv(p, dst, a->ne[0], 1, a->ne[1], a->ne[2], b->ne[0], 1, 1, dst->param_i32(0));
}
size_t cpu_work_size_CONV_TRANSPOSE_1D(const Tensor* dst, int) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    return sizeof(float) * size_t(a->ne[0] * a->ne[1] * a->ne[2] + b->ne[0] * b->ne[1]);
}

void cpu_forward_CONV_TRANSPOSE_2D(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    if (dst->is_empty()) return;
    transpose_conv(p, dst, a->ne[0], a->ne[1], a->ne[2], a->ne[3], b->ne[0], b->ne[1], b->ne[3], dst->param_i32(0));
}
size_t cpu_work_size_CONV_TRANSPOSE_2D(const Tensor* dst, int) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    return sizeof(float) * size_t(a->nelements() + b->nelements());
}

void cpu_forward_COL2IM_1D(const ComputeParams& p, Tensor* dst) {
    const Tensor* a = dst->src[0];
    const int64_t s0 = dst->param_i32(0), OC = dst->param_i32(1), p0 = dst->param_i32(2);
    const int64_t KOC = a->ne[0], T_in = a->ne[1], K = KOC / OC, T_out = dst->ne[0];
    int64_t t0, t1;
    split_range(T_out, p.ith, p.nth, t0, t1);
    for (int64_t oc = 0; oc < OC; ++oc)
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t ta = t + p0;  // position in the uncropped signal
            const int64_t lo = ta - K + 1 <= 0 ? 0 : (ta - K + s0) / s0;  // first ti with ti*s0 > ta - K
            const int64_t hi = std::min<int64_t>(T_in - 1, ta / s0);
            float sum = 0.0f;
            for (int64_t ti = lo; ti <= hi; ++ti) {
                const int64_t k = ta - ti * s0;
                if (k >= 0 && k < K) sum += conv::load_f32(a->type, a->ptr(oc * K + k, ti));
            }
            if (a->type == Type::F32) *(float*)dst->ptr(t, oc) = sum;
            else from_float_row(a->type, &sum, dst->ptr(t, oc), 1);
        }
}
size_t cpu_work_size_COL2IM_1D(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
