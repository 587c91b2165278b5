// Resampling (ggml's UPSCALE op): nearest, bilinear (optionally align-corners or antialiased),
// bicubic. Nearest applies to all four dims; the 2-D modes interpolate dims 0 and 1 and pick
// dims 2 and 3 by nearest index.
#pragma once
#include <cstdint>

#include "pyggml/context.h"

namespace pyggml {

constexpr uint32_t kScaleModeNearest = 0, kScaleModeBilinear = 1, kScaleModeBicubic = 2;
constexpr uint32_t kScaleFlagAlignCorners = 1u << 8, kScaleFlagAntialias = 1u << 9;

// ne0, ne1 times scale_factor (> 1).
Tensor* upscale(Context* ctx, Tensor* a, int scale_factor, uint32_t mode);
// To the given size (up or down); mode = scale mode | flags.
Tensor* interpolate(Context* ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, uint32_t mode);
// The older name of interpolate.
Tensor* upscale_ext(Context* ctx, Tensor* a, int ne0, int ne1, int ne2, int ne3, uint32_t mode);

}  // namespace pyggml
