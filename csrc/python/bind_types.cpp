// Conversion and quantization helpers exposed for tests and tools.
#include "bind_common.h"
#include "cpu/mul_mat_kernels.h"
#include "cpu/quant_ktile.h"
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
    const TypeTraits& tt = type_traits(t);
    FromFloatFn fn = reference ? tt.from_float_ref : tt.from_float;
    if (!fn) throw py::type_error(std::string("quantize: no quantizer for ") + tt.name);
    py::array_t<uint8_t> out((py::ssize_t)row_size(t, n));
    fn(x.data(), out.mutable_data(), n);
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
py::list type_table() {
    py::list out;
    Type valid[kTypeIdLimit];
    const int n = valid_types(valid);
    for (int i = 0; i < n; ++i) {
        const Type t = valid[i];
        const TypeTraits& tt = type_traits(t);
        py::dict d;
        d["type"] = t;
        d["id"] = (int)t;
        d["name"] = std::string(tt.name);
        d["blck_size"] = tt.blck_size;
        d["type_size"] = tt.type_size;
        d["is_quantized"] = tt.is_quantized;
        d["vec_dot_type"] = tt.vec_dot_type;
        d["is_weight"] = tt.is_weight;
        d["has_to_float"] = tt.to_float != nullptr;
        d["has_from_float"] = tt.from_float != nullptr;
        py::list isas;
        for (const char* isa : cpu::mul_mat_kernel_isas(t)) isas.append(std::string(isa));
        d["mul_mat"] = isas;
        py::dict paths;
        for (const auto& [path, levels] : cpu::mul_mat_path_isas(t)) {
            py::list l;
            for (const char* isa : levels) l.append(std::string(isa));
            paths[path] = l;
        }
        d["mul_mat_paths"] = paths;
        out.append(d);
    }
    return out;
}
}  // namespace

void bind_types(py::module_& m) {
    // MUL_MAT with q2_K..q6_K weights takes the K-quant tiles (another summation order) at the
    // avx512 level from this many columns on, MUL_MAT_ID from this many tokens an expert on
    // (cpu/quant_ktile.h)
    m.attr("KTILE_MIN_COLUMNS") = cpu::kt::kMinColumns;
    m.def("type_size", [](Type t) { return type_size(t); });
    m.def("blck_size", [](Type t) { return blck_size(t); });
    m.def("type_name", [](Type t) { return std::string(type_name(t)); });
    m.def("row_size", [](Type t, int64_t ne0) { return row_size(t, ne0); });
    m.def("is_quantized", [](Type t) { return is_quantized(t); });
    m.def("quantize", &quantize, py::arg("type"), py::arg("x"), py::arg("reference") = true,
          "Quantize float32 values to block bytes with ggml's reference quantizer of the type "
          "(reference=False: the CPU backend's form behind cpy/set_rows; they differ for q8_0/q8_1).");
    m.def("type_traits", &type_table,
          "The type table: one dict per type (id, name, blck_size, type_size, is_quantized, "
          "vec_dot_type, is_weight, has_to_float, has_from_float, mul_mat: the CPU instruction "
          "sets with a mul_mat dot kernel of their own for weights of this type, mul_mat_paths: "
          "the same per path, {dot, dot2, dot1x, dot1x2, gemm, repack, ktile} -> sets).");
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
