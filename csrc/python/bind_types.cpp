// Conversion and quantization helpers exposed for tests and tools.
#include "bind_common.h"
#include "pyggml/error.h"

namespace pyggml::python {

namespace {
py::array_t<uint8_t> quantize(Type t, py::array_t<float, py::array::c_style | py::array::forcecast> x,
                              bool reference) {
    const int64_t n = x.size(), bs = blck_size(t);
    if (!is_quantized(t)) throw py::type_error("quantize: type must be a block type");
    if (n % bs != 0)
        throw py::value_error("quantize: element count " + std::to_string(n) +
                              " must be a multiple of the block size " + std::to_string(bs));
    py::array_t<uint8_t> out((py::ssize_t)row_size(t, n));
    const float* src = x.data();
    void* dst = out.mutable_data();
    if (t == Type::Q8_0)
        reference ? quantize_row_q8_0_ref(src, (BlockQ8_0*)dst, n) : quantize_row_q8_0_cpu(src, (BlockQ8_0*)dst, n);
    else if (t == Type::Q4_0)
        quantize_row_q4_0_ref(src, (BlockQ4_0*)dst, n);
    else
        quantize_row_nvfp4_ref(src, (BlockNVFP4*)dst, n);
    return out;
}

py::array_t<float> dequantize(Type t, py::array_t<uint8_t, py::array::c_style | py::array::forcecast> b) {
    if (!is_quantized(t)) throw py::type_error("dequantize: type must be a block type");
    const size_t ts = type_size(t);
    if (b.size() % ts != 0)
        throw py::value_error("dequantize: byte count must be a multiple of " + std::to_string(ts));
    const int64_t n = (int64_t)(b.size() / ts) * blck_size(t);
    py::array_t<float> out(n);
    to_float_row(t, b.data(), out.mutable_data(), n);
    return out;
}
}  // namespace

void bind_types(py::module_& m) {
    m.def("type_size", [](Type t) { return type_size(t); });
    m.def("blck_size", [](Type t) { return blck_size(t); });
    m.def("type_name", [](Type t) { return std::string(type_name(t)); });
    m.def("row_size", [](Type t, int64_t ne0) { return row_size(t, ne0); });
    m.def("is_quantized", [](Type t) { return is_quantized(t); });
    m.def("quantize", &quantize, py::arg("type"), py::arg("x"), py::arg("reference") = true,
          "Quantize float32 values to block bytes (reference quantizer of spec 1.5; "
          "reference=False gives the CPU backend's Q8_0 form).");
    m.def("dequantize", &dequantize, py::arg("type"), py::arg("data"));
    m.def("fp32_to_fp16_bits", [](py::array_t<float, py::array::c_style | py::array::forcecast> x) {
        py::array_t<uint16_t> out(x.size());
        for (py::ssize_t i = 0; i < x.size(); ++i) out.mutable_data()[i] = fp32_to_fp16(x.data()[i]);
        return out;
    });
    m.def("fp32_to_bf16_bits", [](py::array_t<float, py::array::c_style | py::array::forcecast> x) {
        py::array_t<uint16_t> out(x.size());
        for (py::ssize_t i = 0; i < x.size(); ++i) out.mutable_data()[i] = fp32_to_bf16(x.data()[i]);
        return out;
    });
}

}  // namespace pyggml::python
