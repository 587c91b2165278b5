// Python bindings of the 'upscale' family.
#include "bind_common.h"

namespace pyggml::python {

void bind_upscale(py::module_& m) {
    using py::arg;
    static std::string upscale_doc, interpolate_doc;  // docstrings must outlive the module
    m.attr("SCALE_MODE_NEAREST") = kScaleModeNearest;
    m.attr("SCALE_MODE_BILINEAR") = kScaleModeBilinear;
    m.attr("SCALE_MODE_BICUBIC") = kScaleModeBicubic;
    m.attr("SCALE_FLAG_ALIGN_CORNERS") = kScaleFlagAlignCorners;
    m.attr("SCALE_FLAG_ANTIALIAS") = kScaleFlagAntialias;
    static const std::string modes =
        " mode: gg.SCALE_MODE_NEAREST (0, floor(i*in/out)), SCALE_MODE_BILINEAR (1, half-pixel samples, "
        "edges clamped) or SCALE_MODE_BICUBIC (2), or-ed with SCALE_FLAG_ALIGN_CORNERS (256) or "
        "SCALE_FLAG_ANTIALIAS (512, bilinear only). 2-D modes interpolate dims 0 and 1.";
    def_op(m, "upscale", &upscale, arg("ctx"), arg("a"), arg("scale_factor"), arg("mode"),
           (upscale_doc = "a f32 [ne0, ne1, ne2, ne3] -> [ne0*f, ne1*f, ne2, ne3] (f > 1)." + modes).c_str());
    def_op(m, "interpolate", &interpolate, arg("ctx"), arg("a"), arg("ne0"), arg("ne1"), arg("ne2"), arg("ne3"),
           arg("mode"), (interpolate_doc = "Resamples a f32 to [ne0, ne1, ne2, ne3]." + modes).c_str());
    def_op(m, "upscale_ext", &upscale_ext, arg("ctx"), arg("a"), arg("ne0"), arg("ne1"), arg("ne2"), arg("ne3"),
           arg("mode"), "The older name of interpolate.");
}

}  // namespace pyggml::python
