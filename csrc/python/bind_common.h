// Shared helpers for the pybind11 op bindings.
//
// How a binding gets argument checking: bind it with def_op (op constructors, first parameter
// `Context*`) or def_modifier (functions that change an existing node), with one py::arg per
// parameter, as every bind_*.cpp does. Both wrap the function so that each `Context*` and
// `Tensor*` parameter arrives as the raw Python object and is converted here:
//   - a wrong object raises TypeError naming the op and the argument
//     ("[add] b must be a pyggml Tensor, got numpy.ndarray; use ctx.from_numpy(...)") instead of
//     pybind11's "incompatible function arguments";
//   - None as the context raises TypeError (it would be a null pointer in C++);
//   - None as a tensor passes nullptr: the op's C++ constructor knows which inputs are optional
//     and raises TypeError for a missing required one (tests/test_fuzz_constructors.py puts None
//     in every position of every constructor to hold each op to that);
//   - a tensor of another context makes the op's context keep that context alive, so a graph
//     never points into a freed context.
//   - an enum parameter takes a member or its int id (to_enum).
// Other parameter types (ints, floats, lists) keep pybind11's own conversion. Code
// outside def_op (Graph, methods) calls to_context / to_tensor directly.
#pragma once
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "pyggml/graph.h"
#include "pyggml/ops.h"

namespace py = pybind11;

namespace pyggml::python {
// Call policy: the returned tensor keeps argument 1 (the context) alive. Same as
// py::keep_alive<0, 1>, except that it does nothing when the call did not happen: pybind11
// 3.1 runs keep_alive's post-call hook even after an argument conversion failure, on the
// sentinel result (PyObject*)1, which segfaults on any wrong argument type
// (pybind/pybind11 PR #6154).
struct keep_ctx_alive {};

// A parameter received as the Python object itself; converted by to_context / to_tensor.
template <class T>
struct ObjectArg {
    py::handle obj;
};
using ContextArg = ObjectArg<Context>;
using TensorArg = ObjectArg<Tensor>;
}  // namespace pyggml::python

namespace pybind11::detail {
template <>
struct process_attribute<pyggml::python::keep_ctx_alive>
    : process_attribute_default<pyggml::python::keep_ctx_alive> {
    static void postcall(function_call& call, handle ret) {
        if (!ret || ret.ptr() == PYBIND11_TRY_NEXT_OVERLOAD) return;
        keep_alive_impl(0, 1, call, ret);
    }
};

// Accepts any object (checked after loading, where the op and argument names are known); the
// signature shows the class name, as for a plain Context* / Tensor* parameter.
template <class T>
struct type_caster<pyggml::python::ObjectArg<T>> {
    PYBIND11_TYPE_CASTER(pyggml::python::ObjectArg<T>, make_caster<T>::name);
    bool load(handle src, bool) {
        value.obj = src;
        return true;
    }
    static handle cast(const pyggml::python::ObjectArg<T>& v, return_value_policy, handle) {
        return v.obj.inc_ref();
    }
};
}  // namespace pybind11::detail

namespace pyggml::python {

// "None", "int", "numpy.ndarray", "pyggml.Context": how an error message names an object's type.
inline std::string type_label(py::handle obj) {
    if (obj.is_none()) return "None";
    py::handle tp = (PyObject*)Py_TYPE(obj.ptr());
    std::string mod = py::str(py::getattr(tp, "__module__", py::str("")));
    std::string name = py::str(py::getattr(tp, "__qualname__", py::str("?")));
    if (mod.rfind("pyggml", 0) == 0) return "pyggml." + name;
    return mod.empty() || mod == "builtins" ? name : mod + "." + name;
}

// The Context behind `obj`, or TypeError "[op] arg must be a pyggml Context, got ...".
inline Context* to_context(py::handle obj, const char* op, const char* arg) {
    if (py::isinstance<Context>(obj)) return obj.cast<Context*>();
    std::string msg = std::string("[") + op + "] " + arg + " must be a pyggml Context, got " + type_label(obj);
    if (obj.is_none()) msg += "; create one with gg.Context()";
    else if (py::isinstance<Tensor>(obj)) msg += std::string("; ops take the context first: gg.") + op + "(ctx, ...)";
    throw py::type_error(msg);
}

// The Tensor behind `obj` (nullptr for None unless `required`), or TypeError naming the op.
inline Tensor* to_tensor(py::handle obj, const char* op, const char* arg, bool required = false) {
    if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor*>();
    if (obj.is_none() && !required) return nullptr;
    std::string msg = std::string("[") + op + "] " + arg + " must be a pyggml Tensor, got " + type_label(obj);
    const bool array_like = py::isinstance<py::array>(obj) || py::isinstance<py::list>(obj) ||
                            py::isinstance<py::tuple>(obj) || py::isinstance<py::float_>(obj) ||
                            py::isinstance<py::int_>(obj);
    if (array_like) msg += "; use ctx.from_numpy(...) to make a tensor of it";
    throw py::type_error(msg);
}

// An enum parameter (gg.UnaryOp, gg.Type, ...): a member, or its integer id as ggml numbers
// it. Any int32 passes for op enums (the op rejects unknown ids with its own message); a Type
// id must name a type pyggml has.
template <class E>
E to_enum(py::handle obj, const char* op, const char* arg) {
    py::handle enum_type = py::detail::get_type_handle(typeid(E), false);
    if (!enum_type || py::isinstance(obj, enum_type)) {  // a member, or an enum pybind11 converts itself
        try {
            return obj.cast<E>();
        } catch (const py::cast_error&) {
            throw py::type_error(std::string("[") + op + "] " + arg + ": cannot convert " + type_label(obj));
        }
    }
    const std::string enum_name = py::str(enum_type.attr("__name__"));
    if (PyLong_Check(obj.ptr())) {
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
        using U = std::underlying_type_t<E>;
        const long long lo = std::max<long long>(INT32_MIN, (long long)std::numeric_limits<U>::min());
        const long long hi = std::min<long long>(INT32_MAX, (long long)std::numeric_limits<U>::max());
        if (!overflow && v >= lo && v <= hi) {
            if constexpr (std::is_same<E, Type>::value) {
                if (!type_id_is_valid((int32_t)v))
                    throw py::value_error(std::string("[") + op + "] " + arg + "=" + std::to_string(v) +
                                          " is not a type id pyggml has (see gg.Type.__members__)");
            }
            return static_cast<E>(v);
        }
        throw py::value_error(std::string("[") + op + "] " + arg + " is out of range for gg." + enum_name);
    }
    throw py::type_error(std::string("[") + op + "] " + arg + " must be a gg." + enum_name + " or its int id, got " +
                         type_label(obj));
}

// Makes `owner` keep `peer` alive (the graph of an op in owner may read tensors of peer).
inline void keep_context_alive(Context* owner, Context* peer) {
    if (!owner || !peer || owner == peer) return;
    const auto* info = py::detail::get_type_info(typeid(Context));
    py::handle o = py::detail::get_object_handle(owner, info);
    py::handle p = py::detail::get_object_handle(peer, info);
    if (!o || !p) return;
    py::object peers = py::getattr(o, "_peer_contexts", py::none());
    if (peers.is_none()) {
        peers = py::dict();
        py::setattr(o, "_peer_contexts", peers);
    }
    peers[py::int_((uintptr_t)peer)] = p;
}

namespace detail {
// What one call of a wrapped op knows while converting its arguments.
struct OpCall {
    const char* op;
    const std::vector<std::string>* names;
    Context* ctx = nullptr;  // the op's context, else the first tensor's (modifiers)
    const char* name(size_t i) const { return i < names->size() ? (*names)[i].c_str() : "argument"; }
};

template <class T, class = void>
struct Param {  // any other parameter type: pybind11 converts it
    using type = T;
    static type& take(type& v, OpCall&, size_t) { return v; }
};
template <>
struct Param<Context*> {
    using type = ContextArg;
    static Context* take(const type& v, OpCall& call, size_t i) {
        call.ctx = to_context(v.obj, call.op, call.name(i));
        return call.ctx;
    }
};
template <>
struct Param<Tensor*> {
    using type = TensorArg;
    static Tensor* take(const type& v, OpCall& call, size_t i) {
        Tensor* t = to_tensor(v.obj, call.op, call.name(i));
        if (t && t->ctx) {
            if (!call.ctx) call.ctx = t->ctx;
            else keep_context_alive(call.ctx, t->ctx);
        }
        return t;
    }
};

template <>
struct Param<const Tensor*> : Param<Tensor*> {};
template <class E>
struct Param<E, std::enable_if_t<std::is_enum<E>::value>> {
    using type = ObjectArg<E>;
    static E take(const type& v, OpCall& call, size_t i) { return to_enum<E>(v.obj, call.op, call.name(i)); }
};

template <class T>
struct Signature : Signature<decltype(&T::operator())> {};
template <class R, class... A>
struct Signature<R (*)(A...)> {
    using ret = R;
    using args = std::tuple<A...>;
};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...) const> : Signature<R (*)(A...)> {};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...)> : Signature<R (*)(A...)> {};

template <class R, class... A, size_t... I, class F>
auto checked(const char* op, std::shared_ptr<const std::vector<std::string>> names, F f, std::tuple<A...>*,
             std::index_sequence<I...>) {
    return [op = std::string(op), names, f](typename Param<A>::type... args) -> R {
        OpCall call{op.c_str(), names.get()};
        // A braced list converts left to right: the context (first) before the tensors.
        std::tuple<A...> converted{Param<A>::take(args, call, I)...};
        return f(std::get<I>(std::move(converted))...);
    };
}

template <class T>
void collect_name(std::vector<std::string>& names, const T& extra) {
    if constexpr (std::is_base_of<py::arg, T>::value) names.emplace_back(extra.name ? extra.name : "argument");
}

// f with every Context* / Tensor* parameter checked as described at the top of this file.
template <class F, class... Extra>
auto with_checked_args(const char* op, F&& f, const Extra&... extra) {
    using Fn = std::decay_t<F>;
    using Sig = Signature<Fn>;
    auto names = std::make_shared<std::vector<std::string>>();
    (collect_name(*names, extra), ...);
    using Args = typename Sig::args;
    return checked<typename Sig::ret>(op, std::move(names), Fn(std::forward<F>(f)), (Args*)nullptr,
                                      std::make_index_sequence<std::tuple_size<Args>::value>());
}
}  // namespace detail

// Binds an op constructor `gg.name(ctx, ...)`. The returned tensor is owned by the context
// (reference policy) and keeps the context alive (keep_alive<0, 1>).
template <class F, class... Extra>
void def_op(py::module_& m, const char* name, F&& f, const Extra&... extra) {
    m.def(name, detail::with_checked_args(name, std::forward<F>(f), extra...), py::return_value_policy::reference,
          keep_ctx_alive(), extra...);
}

// Binds a function that modifies an existing node (e.g. flash_attn_ext_add_sinks).
template <class F, class... Extra>
void def_modifier(py::module_& m, const char* name, F&& f, const Extra&... extra) {
    m.def(name, detail::with_checked_args(name, std::forward<F>(f), extra...), extra...);
}

// Makes `Enum(value)` raise ValueError for a value that names no member, instead of making an
// unnamed member that prints as "Type.???". Call after the last .value().
template <class E>
void reject_unknown_values(py::enum_<E>& e) {
    std::vector<long long> valid;
    for (auto item : py::dict(e.attr("__members__"))) valid.push_back(item.second.attr("value").cast<long long>());
    std::string what = " is not a valid " + std::string(py::str(e.attr("__name__"))) + " (members:";
    for (auto item : py::dict(e.attr("__members__")))
        what += " " + std::string(py::str(item.first)) + "=" + std::to_string(item.second.attr("value").cast<long long>());
    what += ")";
    e.def(py::init([valid, what](long long v) {
              for (long long x : valid)
                  if (x == v) return static_cast<E>(v);
              throw py::value_error(std::to_string(v) + what);
          }),
          py::arg("value"), py::prepend());
}

#define PYGGML_FAMILY(fam) void bind_##fam(py::module_& m);
PYGGML_FAMILY(layout) PYGGML_FAMILY(copy) PYGGML_FAMILY(binary) PYGGML_FAMILY(unary)
PYGGML_FAMILY(reduce) PYGGML_FAMILY(sort) PYGGML_FAMILY(norm) PYGGML_FAMILY(mul_mat)
PYGGML_FAMILY(misc) PYGGML_FAMILY(fill) PYGGML_FAMILY(rows) PYGGML_FAMILY(softmax)
PYGGML_FAMILY(rope) PYGGML_FAMILY(flash_attn) PYGGML_FAMILY(ssm) PYGGML_FAMILY(glu)
PYGGML_FAMILY(dsv4_hc) PYGGML_FAMILY(lightning_indexer)
PYGGML_FAMILY(set) PYGGML_FAMILY(diag) PYGGML_FAMILY(linalg)
PYGGML_FAMILY(conv) PYGGML_FAMILY(pool) PYGGML_FAMILY(upscale) PYGGML_FAMILY(window)
PYGGML_FAMILY(linear_attn) PYGGML_FAMILY(delta_net)
#undef PYGGML_FAMILY

void bind_core(py::module_& m);   // Type, Tensor, Context, Graph, errors
void bind_types(py::module_& m);  // conversion and quantization helpers

}  // namespace pyggml::python
