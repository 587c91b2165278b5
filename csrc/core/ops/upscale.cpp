// Constructors of the 'upscale' family (UPSCALE): validation and shape inference only.
#include "pyggml/ops/upscale.h"

#include "pyggml/error.h"

namespace pyggml {

Tensor* interpolate(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, uint32_t mode) {
    const char* op = "interpolate";
    if (!a) throw_type(OpMessage(op) << "a is required (got None)");
    PG_TYPE_CHECK(a->type == Type::F32, (OpMessage(op) << "a must be f32").with("a", a));
    const uint32_t m = mode & 0xFF, flags = mode & ~0xFFu;
    PG_SHAPE_CHECK(m <= kScaleModeBicubic,
                   (OpMessage(op) << "mode " << m << " is not a scale mode (0 nearest, 1 bilinear, 2 bicubic)"));
    PG_SHAPE_CHECK((flags & ~(kScaleFlagAlignCorners | kScaleFlagAntialias)) == 0,
                   (OpMessage(op) << "unknown scale flags 0x" << std::hex << flags));
    PG_SHAPE_CHECK(!(flags & kScaleFlagAntialias) || m == kScaleModeBilinear,
                   (OpMessage(op) << "the antialias flag needs bilinear mode"));
    PG_SHAPE_CHECK(ne0 >= 0 && ne1 >= 0 && ne2 >= 0 && ne3 >= 0,
                   (OpMessage(op) << "sizes must be >= 0, got [" << ne0 << ", " << ne1 << ", " << ne2 << ", " << ne3 << "]"));
    const int64_t in[4] = {a->ne[0], a->ne[1], a->ne[2], a->ne[3]}, out[4] = {ne0, ne1, ne2, ne3};
    for (int i = 0; i < 4; ++i)
        PG_SHAPE_CHECK(out[i] == 0 || in[i] > 0,
                       (OpMessage(op) << "cannot resample an empty dim " << i << " to size " << out[i]).with("a", a));
    Tensor* r = ctx->new_tensor(Type::F32, 4, out);
    r->set_param_i32(0, (int32_t)mode);
    r->op = Op::UPSCALE;
    r->src[0] = a;
    return r;
}

Tensor* upscale(Context* ctx, Tensor* a, int scale_factor, uint32_t mode) {
    if (!a) throw_type(OpMessage("upscale") << "a is required (got None)");
    PG_SHAPE_CHECK(scale_factor > 1, (OpMessage("upscale") << "scale_factor=" << scale_factor << " must be > 1"));
    return interpolate(ctx, a, a->ne[0] * scale_factor, a->ne[1] * scale_factor, a->ne[2], a->ne[3], mode);
}

Tensor* upscale_ext(Context* ctx, Tensor* a, int ne0, int ne1, int ne2, int ne3, uint32_t mode) {
    return interpolate(ctx, a, ne0, ne1, ne2, ne3, mode);
}

}  // namespace pyggml
