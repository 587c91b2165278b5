// Python bindings of the unary ops.
#include "bind_common.h"

namespace pyggml::python {

void bind_unary(py::module_& m) {
    py::implicitly_convertible<py::int_, UnaryOp>();  // enum args also accept plain ints
    def_op(m, "unary", &unary, py::arg("ctx"), py::arg("a"), py::arg("op"));
    def_op(m, "unary_inplace", &unary_inplace, py::arg("ctx"), py::arg("a"), py::arg("op"));
    struct Named { const char* name; UnaryOp op; };
    const Named named[] = {
        {"abs", UnaryOp::ABS}, {"sgn", UnaryOp::SGN}, {"neg", UnaryOp::NEG}, {"step", UnaryOp::STEP},
        {"tanh", UnaryOp::TANH}, {"elu", UnaryOp::ELU}, {"relu", UnaryOp::RELU},
        {"sigmoid", UnaryOp::SIGMOID}, {"gelu", UnaryOp::GELU}, {"gelu_quick", UnaryOp::GELU_QUICK},
        {"silu", UnaryOp::SILU}, {"hardswish", UnaryOp::HARDSWISH},
        {"hardsigmoid", UnaryOp::HARDSIGMOID}, {"exp", UnaryOp::EXP}, {"expm1", UnaryOp::EXPM1},
        {"softplus", UnaryOp::SOFTPLUS}, {"gelu_erf", UnaryOp::GELU_ERF}, {"floor", UnaryOp::FLOOR},
        {"ceil", UnaryOp::CEIL}, {"round", UnaryOp::ROUND}, {"trunc", UnaryOp::TRUNC},
    };
    for (const Named& n : named) {
        UnaryOp op = n.op;
        def_op(m, n.name, [op](Context* c, Tensor* a) { return unary(c, a, op); }, py::arg("ctx"), py::arg("a"));
        def_op(m, (std::string(n.name) + "_inplace").c_str(),
               [op](Context* c, Tensor* a) { return unary_inplace(c, a, op); }, py::arg("ctx"), py::arg("a"));
    }
    def_op(m, "sqr", &sqr, py::arg("ctx"), py::arg("a"));
    def_op(m, "sqr_inplace", &sqr_inplace, py::arg("ctx"), py::arg("a"));
    def_op(m, "sqrt", &sqrt, py::arg("ctx"), py::arg("a"));
    def_op(m, "sqrt_inplace", &sqrt_inplace, py::arg("ctx"), py::arg("a"));
    def_op(m, "log", &log, py::arg("ctx"), py::arg("a"), "Natural log (f32 math; log(0) = -inf, log(x<0) = NaN).");
    def_op(m, "log_inplace", &log_inplace, py::arg("ctx"), py::arg("a"));
    def_op(m, "sin", &sin, py::arg("ctx"), py::arg("a"), "Sine (f32 math).");
    def_op(m, "sin_inplace", &sin_inplace, py::arg("ctx"), py::arg("a"));
    def_op(m, "cos", &cos, py::arg("ctx"), py::arg("a"), "Cosine (f32 math).");
    def_op(m, "cos_inplace", &cos_inplace, py::arg("ctx"), py::arg("a"));
    def_op(m, "leaky_relu", &leaky_relu, py::arg("ctx"), py::arg("a"), py::arg("negative_slope"),
           py::arg("inplace"), "x > 0 ? x : negative_slope*x; inplace=True returns a view of a.");
    def_op(m, "xielu", &xielu, py::arg("ctx"), py::arg("a"), py::arg("alpha_n"), py::arg("alpha_p"),
           py::arg("beta"), py::arg("eps"),
           "xIELU: an = beta + softplus(alpha_n), ap = softplus(alpha_p); x > 0 ? ap*x*x + beta*x : "
           "(expm1(min(x, eps)) - x)*an + beta*x.");
}

}  // namespace pyggml::python
