// NVFP4 blocks (spec 1.5): 64 values, four 16-element sub-blocks with UE4M3 scales.
// TODO(seed-ops issue): implement the reference quantizer and dequantizer.
#include "pyggml/error.h"
#include "pyggml/types.h"

namespace pyggml {

float nvfp4_ue4m3_to_scale(uint8_t) { throw UnsupportedError("nvfp4: not implemented yet"); }
void quantize_row_nvfp4_ref(const float*, BlockNVFP4*, int64_t) {
    throw UnsupportedError("nvfp4: not implemented yet");
}
void dequantize_row_nvfp4(const BlockNVFP4*, float*, int64_t) {
    throw UnsupportedError("nvfp4: not implemented yet");
}

}  // namespace pyggml
