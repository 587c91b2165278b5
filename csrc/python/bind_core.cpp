// Bindings of Type, Tensor, Context, Graph and the error mapping.
#include <cctype>
#include <chrono>
#include <optional>
#include <thread>

#include "bind_common.h"
#include "cpu/backend.h"
#include "cpu/schedule.h"  // set_plan_reuse
#include "cpu/simd/isa.h"
#include "cpu/threadpool.h"
#include "dlpack_export.h"
#include "pyggml/backend.h"
#include "pyggml/error.h"

namespace pyggml::python {

namespace {

py::dtype storage_dtype(Type t) {
    switch (t) {
        case Type::F32: return py::dtype("float32");
        case Type::F16: return py::dtype("float16");
        case Type::BF16: return py::dtype("uint16");
        case Type::I32: return py::dtype("int32");
        case Type::I64: return py::dtype("int64");
        default: return py::dtype("uint8");
    }
}

void* resolve_data(Tensor* t) {
    if (!t->data && t->view_src && t->view_src->data) t->data = (char*)t->view_src->data + t->view_offs;
    return t->data;
}

Backend* backend_of(const Tensor* t) { return t->ctx ? t->ctx->backend() : cpu_backend(); }
int device_of(const Tensor* t) { return backend_of(t)->device_index(); }

// numpy/DLPack rank: through the last dim whose size is not 1, so that a size-0 dim is kept
// (ne [4, 0] reads as shape (0, 4), not (4,)); at least 1.
int array_ndim(const Tensor* t) {
    for (int i = kMaxDims - 1; i >= 1; --i)
        if (t->ne[i] != 1) return i + 1;
    return 1;
}

// More threads than this only wait on each other (and thousands exhaust the process): the
// pool's one cap, 4x the hardware threads, at least 16.
int max_threads() { return cpu::max_threads(); }
int hardware_threads() { return cpu::hardware_threads(); }

// Zero-copy numpy view: shape reversed from ne, strides from nb; block types expose bytes.
// For a tensor in device memory the result is a read-only host copy.
py::array tensor_numpy(py::object self) {
    Tensor* t = self.cast<Tensor*>();
    if (!resolve_data(t) && t->nbytes() > 0)
        throw py::value_error("tensor '" + t->name + "' (" + describe(t) +
                              ") has no storage yet: it lives in a no_alloc context; call "
                              "Graph.alloc() or Graph.compute() first");
    std::vector<py::ssize_t> shape, strides;
    if (is_quantized(t->type)) {
        if (t->nb[0] != type_size(t->type))
            throw py::value_error("numpy(): block-typed tensor rows must be packed: " + describe(t));
        shape = {t->ne[3], t->ne[2], t->ne[1], (py::ssize_t)t->row_bytes()};
        strides = {(py::ssize_t)t->nb[3], (py::ssize_t)t->nb[2], (py::ssize_t)t->nb[1], 1};
    } else {
        shape = {t->ne[3], t->ne[2], t->ne[1], t->ne[0]};
        strides = {(py::ssize_t)t->nb[3], (py::ssize_t)t->nb[2], (py::ssize_t)t->nb[1],
                   (py::ssize_t)t->nb[0]};
    }
    // Drop leading size-1 dims so a [n] tensor reads as shape (n,).
    int keep = array_ndim(t);
    shape.erase(shape.begin(), shape.begin() + (4 - keep));
    strides.erase(strides.begin(), strides.begin() + (4 - keep));
    static char dummy[64];
    void* ptr = t->data ? t->data : dummy;
    if (!backend_of(t)->host_memory() && t->data) {
        const size_t n = t->nbytes();
        char* host = new char[n ? n : 1];
        backend_of(t)->get(host, t->data, n);
        py::capsule owner(host, [](void* p) { delete[] (char*)p; });
        py::array copy(storage_dtype(t->type), shape, strides, host, owner);
        py::detail::array_proxy(copy.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
        return copy;
    }
    py::array view(storage_dtype(t->type), shape, strides, ptr, self);
    const Tensor* root = t->view_src ? t->view_src : t;
    if (root->flags & kFlagReadOnly)
        py::detail::array_proxy(view.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    return view;
}

// Upload packed bytes into a contiguous tensor (host or device).
void tensor_upload(Tensor* t, py::buffer buf) {
    py::buffer_info info = buf.request();
    const size_t have = (size_t)info.size * (size_t)info.itemsize;
    if (!resolve_data(t)) throw py::value_error("upload: tensor '" + t->name + "' has no storage yet");
    if (!t->is_contiguous()) throw py::value_error("upload: tensor must be contiguous: " + describe(t));
    if ((t->view_src ? t->view_src : t)->flags & kFlagReadOnly)
        throw py::value_error("upload: tensor '" + t->name + "' is read-only (memory-mapped)");
    if (have != t->nbytes())
        throw py::value_error("upload: tensor '" + t->name + "' holds " + std::to_string(t->nbytes()) +
                              " bytes, got " + std::to_string(have));
    backend_of(t)->set(t->data, info.ptr, have);
}

dlpack::Device dl_device(const Tensor* t) {
    const Backend* b = backend_of(t);
    if (b->host_memory()) return {dlpack::kDLCPU, 0};
    if (b->kind() == "cuda") return {dlpack::kDLCUDA, b->device_index()};
    throw py::type_error("__dlpack__: backend " + b->name() + " has no DLPack device type");
}

dlpack::DataType dl_dtype(Type t) {
    switch (t) {
        case Type::F32: return {dlpack::kDLFloat, 32, 1};
        case Type::F16: return {dlpack::kDLFloat, 16, 1};
        case Type::BF16: return {dlpack::kDLBfloat, 16, 1};
        case Type::I32: return {dlpack::kDLInt, 32, 1};
        case Type::I64: return {dlpack::kDLInt, 64, 1};
        default: break;
    }
    throw py::type_error(std::string("__dlpack__: block type ") + type_name(t) + " has no DLPack dtype");
}

struct DLHolder {
    dlpack::ManagedTensor managed;
    int64_t shape[4], strides[4];
    PyObject* owner;  // the Python tensor, which keeps its context alive
};

py::capsule tensor_dlpack(py::object self, py::object /*stream*/) {
    Tensor* t = self.cast<Tensor*>();
    if (!resolve_data(t) && t->nbytes() > 0)
        throw py::value_error("__dlpack__: tensor '" + t->name + "' has no storage yet");
    dl_device(t);  // throws for a backend DLPack cannot name, before anything is allocated
    static char empty_storage[64];  // an empty tensor needs no storage, but DLPack wants a pointer
    const dlpack::DataType dtype = dl_dtype(t->type);  // throws for block types: before any allocation
    auto holder = std::make_unique<DLHolder>();      // owned here until the capsule takes it
    DLHolder* h = holder.get();
    const int nd = array_ndim(t);
    const size_t es = type_size(t->type);
    h->managed.dl_tensor.dtype = dtype;
    for (int i = 0; i < nd; ++i) {  // DLPack order is numpy order: ne reversed
        h->shape[i] = t->ne[nd - 1 - i];
        if (t->nb[nd - 1 - i] % es) throw py::value_error("__dlpack__: strides are not element multiples");
        h->strides[i] = (int64_t)(t->nb[nd - 1 - i] / es);
    }
    h->managed.dl_tensor.data = t->data ? t->data : empty_storage;
    h->managed.dl_tensor.device = dl_device(t);
    h->managed.dl_tensor.ndim = nd;
    h->managed.dl_tensor.shape = h->shape;
    h->managed.dl_tensor.strides = h->strides;
    h->managed.dl_tensor.byte_offset = 0;
    h->owner = self.ptr();
    Py_INCREF(h->owner);
    holder.release();  // from here the deleter frees it
    h->managed.manager_ctx = h;
    h->managed.deleter = [](dlpack::ManagedTensor* m) {
        DLHolder* holder = (DLHolder*)m->manager_ctx;
        PyGILState_STATE st = PyGILState_Ensure();
        Py_DECREF(holder->owner);
        PyGILState_Release(st);
        delete holder;
    };
    // A consumer renames the capsule to "used_dltensor"; if it never does, free it here.
    return py::capsule(&h->managed, "dltensor", [](PyObject* cap) {
        if (PyCapsule_IsValid(cap, "dltensor")) {
            auto* m = (dlpack::ManagedTensor*)PyCapsule_GetPointer(cap, "dltensor");
            if (m && m->deleter) m->deleter(m);
        }
    });
}

// Graph.compute without the GIL; Ctrl-C stops it between nodes. The abort callback runs on the
// calling thread (thread 0 of the CPU pool, the host loop of a device backend): at most every
// 20 ms it takes the GIL and runs Python's pending signal handlers. When one raises (SIGINT ->
// KeyboardInterrupt) the compute stops and that exception propagates; the graph and its
// context stay usable.
void graph_compute(Graph& g, int n_threads) {
    if (n_threads <= 0) n_threads = hardware_threads();
    bool interrupted = false;
    auto last = std::chrono::steady_clock::now();
    auto abort = [&]() -> bool {
        const auto now = std::chrono::steady_clock::now();
        if (now - last < std::chrono::milliseconds(20)) return false;
        last = now;
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) interrupted = true;  // the exception stays set on this thread
        return interrupted;
    };
    try {
        py::gil_scoped_release release;
        g.compute(n_threads, abort);  // off the main thread PyErr_CheckSignals answers 0 at once
    } catch (const AbortedError&) {
        if (interrupted) throw py::error_already_set();
        throw;
    }
}

std::vector<int64_t> ne_list(const Tensor* t) { return {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}; }
std::vector<size_t> nb_list(const Tensor* t) { return {t->nb[0], t->nb[1], t->nb[2], t->nb[3]}; }

}  // namespace

void bind_core(py::module_& m) {
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const ShapeError& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        } catch (const TypeMismatchError& e) {
            PyErr_SetString(PyExc_TypeError, e.what());
        } catch (const OutOfMemoryError& e) {
            PyErr_SetString(PyExc_MemoryError, e.what());
        } catch (const UnsupportedError& e) {
            PyErr_SetString(PyExc_NotImplementedError, e.what());
        } catch (const Error& e) {
            PyErr_SetString(PyExc_RuntimeError, e.what());
        }
    });

    {  // one enum value per row of the type table, named as ggml names it, upper-cased
        py::enum_<Type> types(m, "Type", "Tensor element types, numbered as in ggml/GGUF");
        static std::vector<std::string> names;  // pybind11 keeps the char pointers
        Type valid[kTypeIdLimit];
        const int n = valid_types(valid);
        names.reserve(n);
        for (int i = 0; i < n; ++i) {
            std::string u = type_name(valid[i]);
            for (char& c : u) c = (char)std::toupper((unsigned char)c);
            names.push_back(u);
            types.value(names.back().c_str(), valid[i]);
        }
        reject_unknown_values(types);
    }

    py::enum_<UnaryOp> unary_enum(m, "UnaryOp");
    unary_enum
        .value("ABS", UnaryOp::ABS).value("SGN", UnaryOp::SGN).value("NEG", UnaryOp::NEG)
        .value("STEP", UnaryOp::STEP).value("TANH", UnaryOp::TANH).value("ELU", UnaryOp::ELU)
        .value("RELU", UnaryOp::RELU).value("SIGMOID", UnaryOp::SIGMOID)
        .value("GELU", UnaryOp::GELU).value("GELU_QUICK", UnaryOp::GELU_QUICK)
        .value("SILU", UnaryOp::SILU).value("HARDSWISH", UnaryOp::HARDSWISH)
        .value("HARDSIGMOID", UnaryOp::HARDSIGMOID).value("EXP", UnaryOp::EXP)
        .value("EXPM1", UnaryOp::EXPM1).value("SOFTPLUS", UnaryOp::SOFTPLUS)
        .value("GELU_ERF", UnaryOp::GELU_ERF).value("XIELU", UnaryOp::XIELU).value("FLOOR", UnaryOp::FLOOR)
        .value("CEIL", UnaryOp::CEIL).value("ROUND", UnaryOp::ROUND).value("TRUNC", UnaryOp::TRUNC);
    reject_unknown_values(unary_enum);

    py::enum_<GluOp> glu_enum(m, "GluOp");
    glu_enum.value("REGLU", GluOp::REGLU).value("GEGLU", GluOp::GEGLU).value("SWIGLU", GluOp::SWIGLU)
        .value("SWIGLU_OAI", GluOp::SWIGLU_OAI).value("GEGLU_ERF", GluOp::GEGLU_ERF)
        .value("GEGLU_QUICK", GluOp::GEGLU_QUICK).value("SWIGLU_CLAMP", GluOp::SWIGLU_CLAMP);
    reject_unknown_values(glu_enum);

    m.def("op_table", [] {
        py::list out;
        for (int i = 0; i < (int)Op::COUNT; ++i)
            out.append(py::make_tuple(op_name((Op)i), op_family((Op)i), op_constructors((Op)i)));
        return out;
    }, "The op table: (name, family, constructors) for every op.");
    m.def("cpu_schedule_counts", [] {
        const cpu::ScheduleCounts c = cpu::schedule_counts();
        py::dict d;
        d["computes"] = c.computes;
        d["computes_with_workers"] = c.computes_with_workers;
        d["solo_steps"] = c.solo_steps;
        d["split_steps"] = c.split_steps;
        d["shared_steps"] = c.shared_steps;
        d["back_claimed_units"] = c.back_claimed_units;
        d["quiet_solo_steps"] = c.quiet_solo_steps;
        d["plans_built"] = c.plans_built;
        d["plans_reused"] = c.plans_reused;
        d["plan_ns"] = c.plan_ns;
        d["grouped_nodes"] = c.grouped_nodes;
        return d;
    }, "What the CPU schedule did, summed over every compute of the process: computes, those "
       "that woke the thread pool's workers, steps run on thread 0 alone (solo) and split over "
       "threads (shared_steps: those of them run as shares, without barriers), the units of "
       "shared products that shares other than the first claimed from the back, and the solo "
       "steps thread 0 did not publish to the workers (a solo step followed it), and the "
       "schedules planned (plans_built) or taken from the graph's last compute (plans_reused) and "
       "the wall nanoseconds spent on that (plan_ns), and the nodes run in group steps "
       "(grouped_nodes: independent nodes whose items the threads take from one counter). "
       "Take the difference around a compute.");
    m.def("cpu_poison_scratch", [](bool on) { return cpu::set_poison_scratch(on); }, py::arg("on"),
          "Whether each CPU compute first fills the kernels' scratch with 0xff bytes (NaN), so that "
          "a kernel reading scratch before another thread wrote it shows NaN instead of the last "
          "compute's values; returns the previous setting. For tests.");
    m.def("cpu_slow_claimed_conversions", [](int64_t us) { return cpu::set_claimed_conversion_delay(us); },
          py::arg("us"),
          "Microseconds every item of a conversion that a shared step's shares claim (the "
          "activations of a shared quantized product) sleeps before it converts (0: none); "
          "returns the previous setting. For tests: with the scratch poisoned, a share that went "
          "on before the others' items were converted then reads NaN.");
    m.def("cpu_plan_reuse", [](bool on) { return cpu::set_plan_reuse(on); }, py::arg("on"),
          "Whether a graph computed again reuses the CPU schedule of its last compute (the default) "
          "or plans afresh; returns the previous setting. For benchmarks and tests.");
    m.def("cuda_built", [] { return find_backend_kind("cuda") != nullptr; },
          "Whether this build includes the CUDA backend.");
    m.def("cuda_device_count", [] {
        const BackendKind* k = find_backend_kind("cuda");
        return k ? k->device_count() : 0;
    });
    m.def("cuda_device_info", [](int dev) {
        DeviceInfo i = find_backend("cuda:" + std::to_string(dev))->info();
        py::dict d;
        d["name"] = i.name; d["total_bytes"] = i.total_bytes; d["free_bytes"] = i.free_bytes;
        d["compute_capability"] = py::make_tuple(i.cc_major, i.cc_minor); d["sm_count"] = i.sm_count;
        return d;
    });
    m.def("isa", [](bool detected) {
        return std::string(cpu::simd::isa_name(detected ? cpu::simd::detected_isa() : cpu::simd::cpu_isa()));
    }, py::arg("detected") = false,
          "The SIMD level of the CPU kernels: 'scalar', 'avx2' or 'avx512' (detected=True: the best "
          "level this CPU runs, ignoring the cap).");
    m.def("set_isa", [](const std::string& level) {
        namespace simd = cpu::simd;
        simd::Isa cap = simd::Isa::Avx512;
        if (level != "native" && !simd::parse_isa(level, &cap))
            throw py::value_error("set_isa: unknown level '" + level + "'; expected 'scalar', 'avx2', 'avx512' or 'native'");
        const simd::Isa prev = simd::isa_cap();
        simd::set_isa_cap(cap);
        return std::string(prev == simd::Isa::Avx512 ? "native" : simd::isa_name(prev));
    }, py::arg("level"),
          "Cap the SIMD level of the CPU kernels ('scalar', 'avx2', 'avx512'; 'native' removes the cap, "
          "as does leaving PYGGML_ISA unset). A level the CPU lacks is never used. Takes effect at the "
          "next compute. Returns the previous cap, so `prev = set_isa('scalar'); ...; set_isa(prev)`.");
    m.def("avx512_bf16", [](bool detected) {
        return detected ? cpu::simd::detected_avx512_bf16() : cpu::simd::avx512_bf16();
    }, py::arg("detected") = false,
          "Whether bf16 weights are dotted as bf16 pairs (AVX512-BF16 vdpbf16ps) at the current level "
          "(detected=True: whether the CPU has the instruction).");
    m.def("set_avx512_bf16", &cpu::simd::set_avx512_bf16, py::arg("allowed"),
          "Allow (default) or forbid the AVX512-BF16 pair dots of bf16 weights; forbidden, the avx512 "
          "level dots them in f32 as on a CPU without BF16. Takes effect at the next compute. Returns "
          "the previous setting.");
    m.def("set_debug", &set_debug, py::arg("on"),
          "Debug mode: kernels check contracts (e.g. flash attention n_kv_max) and raise.");
    m.def("debug_enabled", &debug_enabled);

    py::class_<Tensor, std::unique_ptr<Tensor, py::nodelete>>(m, "Tensor",
        "A tensor in ggml layout. Owned by its Context; ne/nb are in ggml order (ne0 innermost).")
        .def_property_readonly("ne", &ne_list, "element counts, ggml order (4 entries)")
        .def_property_readonly("nb", &nb_list, "byte strides, ggml order (4 entries)")
        .def_property_readonly("type", [](const Tensor& t) { return t.type; })
        .def_property("name", [](const Tensor& t) { return t.name; },
                      [](Tensor& t, const std::string& n) { t.name = n.substr(0, 63); })
        .def_property_readonly("op", [](const Tensor& t) { return std::string(op_name(t.op)); })
        .def_property_readonly("op_params", [](const Tensor& t) {
            return std::vector<int32_t>(t.op_params, t.op_params + kMaxOpParams); })
        .def_property_readonly("src", [](const Tensor& t) {
            std::vector<Tensor*> s;
            for (Tensor* x : t.src) s.push_back(x);
            while (!s.empty() && !s.back()) s.pop_back();
            return s; }, py::return_value_policy::reference_internal)
        .def_property_readonly("view_src", [](const Tensor& t) { return t.view_src; },
                               py::return_value_policy::reference_internal)
        .def_property_readonly("view_offs", [](const Tensor& t) { return t.view_offs; })
        .def_property_readonly("flags", [](const Tensor& t) { return t.flags; })
        .def_property_readonly("nbytes", &Tensor::nbytes)
        .def_property_readonly("nelements", &Tensor::nelements)
        .def_property_readonly("nrows", &Tensor::nrows)
        .def_property_readonly("n_dims", &Tensor::n_dims)
        .def_property_readonly("has_data", [](Tensor& t) { return resolve_data(&t) != nullptr; })
        .def_property_readonly("data_ptr", [](Tensor& t) { return (uintptr_t)resolve_data(&t); })
        .def("is_contiguous", &Tensor::is_contiguous)
        .def("is_contiguous_rows", &Tensor::is_contiguous_rows)
        .def("is_permuted", &Tensor::is_permuted)
        .def("set_output", [](Tensor& t) { t.flags |= kFlagOutput; if (t.view_src) t.view_src->flags |= kFlagOutput; },
             "Keep this tensor's storage alive through the memory planner.")
        .def("set_input", [](Tensor& t) { t.flags |= kFlagInput; })
        .def("_upload", &tensor_upload, py::arg("buffer"))
        .def_property_readonly("device", [](const Tensor& t) { return device_of(&t); },
                               "-1 for host memory, else the device index on its backend")
        .def_property_readonly("backend_name", [](const Tensor& t) { return backend_of(&t)->name(); })
        .def("__dlpack__", &tensor_dlpack, py::arg("stream") = py::none(),
             "DLPack capsule (zero copy) for torch.from_dlpack / numpy.from_dlpack.")
        .def("__dlpack_device__", [](const Tensor& t) {
            const dlpack::Device d = dl_device(&t);
            return py::make_tuple((int)d.device_type, (int)d.device_id);
        })
        .def("to_dlpack", [](py::object self) { return tensor_dlpack(self, py::none()); })
        .def("numpy", &tensor_numpy,
             "Zero-copy numpy view: shape is ne reversed (trailing size-1 dims of ne dropped), "
             "strides from nb. F16 -> float16, BF16 -> uint16 bits, block types -> uint8 bytes.")
        .def("__repr__", [](const Tensor& t) {
            return "<pyggml.Tensor '" + t.name + "' " + op_name(t.op) + " " + describe(&t) + ">";
        });

    py::class_<Context>(m, "Context", py::dynamic_attr(),
        "Creates tensors. With no_alloc=False every tensor gets storage in an arena of "
        "mem_size bytes; with no_alloc=True storage is assigned by Graph.alloc().")
        .def(py::init([](size_t mem_size, bool no_alloc, const std::string& backend) {
            return new Context(mem_size, no_alloc, find_backend(backend));
        }), py::arg("mem_size") = size_t(64) << 20, py::arg("no_alloc") = false, py::arg("backend") = "cpu")
        .def_property_readonly("backend_name", [](const Context& c) { return c.backend()->name(); },
                               "The backend holding this context's tensors: 'cpu', 'cuda:0', ...")
        .def_property_readonly("device", [](const Context& c) { return c.backend()->device_index(); },
                               "-1 for host memory, else the device index on its backend")
        .def("new_tensor", [](Context& c, Type type, const std::vector<int64_t>& ne) {
            return c.new_tensor(type, (int)ne.size(), ne.data());
        }, py::arg("type"), py::arg("ne"), py::return_value_policy::reference, keep_ctx_alive(),
           "New packed tensor; ne in ggml order, 1 to 4 dims.")
        .def("tensor_from_buffer", [](py::object self, py::buffer buf, Type type, const std::vector<int64_t>& ne) {
            Context& c = self.cast<Context&>();
            py::buffer_info info = buf.request();
            if (info.ndim != 1 || info.strides[0] != info.itemsize)
                throw py::value_error("tensor_from_buffer: the buffer must be 1-D and contiguous (e.g. a uint8 memmap slice)");
            const size_t have = (size_t)info.size * (size_t)info.itemsize;
            if (ne.empty() || ne.size() > 4) throw py::value_error("tensor_from_buffer: ne must have 1..4 dims");
            for (size_t i = 0; i < ne.size(); ++i)
                if (ne[i] < 0)
                    throw py::value_error("tensor_from_buffer: ne[" + std::to_string(i) + "]=" + std::to_string(ne[i]) +
                                          " must be >= 0");
            int64_t n = blck_size(type) ? ne[0] : 0;
            if (ne[0] % blck_size(type) != 0)
                throw py::value_error("tensor_from_buffer: ne[0] must be a multiple of the block size");
            size_t need = row_size(type, n);
            for (size_t i = 1; i < ne.size(); ++i) need *= (size_t)ne[i];
            if (need > have)
                throw py::value_error("tensor_from_buffer: " + std::string(type_name(type)) + " tensor needs " +
                                      std::to_string(need) + " bytes, the buffer has " + std::to_string(have));
            Tensor* t = c.new_tensor_external(type, (int)ne.size(), ne.data(), info.ptr);
            if (info.readonly) t->flags |= kFlagReadOnly;
            if (!py::hasattr(self, "_buffers")) self.attr("_buffers") = py::list();
            self.attr("_buffers").attr("append")(buf);  // keep the memory alive with the context
            return t;
        }, py::arg("buffer"), py::arg("type"), py::arg("ne"), py::return_value_policy::reference,
           keep_ctx_alive(),
           "A tensor over an existing buffer without copying (e.g. a numpy memmap of a GGUF file). "
           "The context keeps the buffer alive.")
        .def_property_readonly("mem_size", &Context::mem_size)
        .def_property_readonly("mem_used", &Context::mem_used)
        .def_property_readonly("no_alloc", &Context::no_alloc)
        .def_property_readonly("n_tensors", [](const Context& c) { return c.tensors().size(); });

    py::class_<Graph>(m, "Graph", "A computation graph over tensors of one context.")
        .def(py::init([](ContextArg ctx, size_t capacity) {
                 return new Graph(to_context(ctx.obj, "Graph", "ctx"), capacity);
             }),
             py::arg("ctx"), py::arg("capacity") = 8192, py::keep_alive<1, 2>())
        .def("build_forward_expand", [](Graph& g, TensorArg t) {
                 g.build_forward_expand(to_tensor(t.obj, "build_forward_expand", "tensor", true));
             },
             py::arg("tensor"), py::keep_alive<1, 2>(),
             "Add the tensor and everything it depends on (post-order, deduplicated).")
        .def("alloc", &Graph::alloc, "Assign storage to tensors that have none (memory planner).")
        .def("compute", [](Graph& g, std::optional<int> threads) {
            const int hw = hardware_threads();
            const int n_threads = threads.value_or(hw);
            if (n_threads < 1)
                throw py::value_error("[compute] n_threads=" + std::to_string(n_threads) +
                                      ": must be >= 1 (or None for one per hardware thread)");
            if (n_threads > max_threads())
                throw py::value_error("[compute] n_threads=" + std::to_string(n_threads) + " is more than " +
                                      std::to_string(max_threads()) + " (4x the " + std::to_string(hw) +
                                      " hardware threads, at least 16): extra threads only wait on "
                                      "each other; use fewer, or None for one per hardware thread");
            graph_compute(g, n_threads);
        }, py::arg("n_threads") = py::none(),
           "Compute every node in order on the context's backend (the GIL is released; Ctrl-C "
           "raises KeyboardInterrupt between nodes). n_threads: None for one per hardware thread; "
           "1 up to max(16, 4x hardware threads). Raises NotImplementedError before anything runs "
           "when a node's op is not supported by the backend.")
        .def_property_readonly("nodes", &Graph::nodes, py::return_value_policy::reference_internal)
        .def_property_readonly("leafs", &Graph::leafs, py::return_value_policy::reference_internal)
        .def_property_readonly("n_nodes", [](const Graph& g) { return g.nodes().size(); })
        .def("plan_stats", [](const Graph& g) {
            const PlanStats& s = g.plan_stats();
            py::dict d;
            d["peak_bytes"] = s.peak_bytes;
            d["sum_intermediate_bytes"] = s.sum_intermediate_bytes;
            d["leaf_bytes"] = s.leaf_bytes;
            d["n_planned"] = s.n_planned;
            return d;
        })
        .def("set_profiling", &Graph::set_profiling)
        .def_property_readonly("node_times", &Graph::node_times)
        .def_property_readonly("cpu_schedule", [](const Graph& g) {
            py::list out;
            const auto* plan = dynamic_cast<const cpu::SchedulePlan*>(g.backend_plan());
            if (!plan) return out;
            static const char* const kModes[] = {"solo", "shared", "gang", "group"};
            for (const cpu::Step& s : plan->steps) {
                py::list nodes;
                if (s.mode == cpu::Mode::Group)
                    for (uint32_t i = 0; i < s.count; ++i) nodes.append(plan->members[s.first + i].node);
                else
                    nodes.append(s.node);
                out.append(py::make_tuple(kModes[(int)s.mode], nodes));
            }
            return out;
        }, "The CPU schedule of the last compute, one (mode, node indices) per step in the order "
           "they ran: mode 'solo' (thread 0 alone), 'shared' (thread shares), 'gang' (every thread "
           "at once) or 'group' (independent nodes run at once). Empty before a CPU compute.");

    // After the Tensor class, so that signatures name it.
    m.def("backend_kinds", [] {
        py::list out;
        for (const BackendKind& k : backend_kinds()) out.append(py::make_tuple(k.name, k.device_count()));
        return out;
    }, "(kind, device count) of every backend kind in this build, 'cpu' first.");
    m.def("backend_names", &backend_names, "Every present backend device: 'cpu', then e.g. 'cuda:0'.");
    m.def("backend_unsupported_reason", [](const std::string& name, Tensor* node) {
        if (!node) throw py::type_error("backend_unsupported_reason: tensor is None");
        if (name.find(':') == std::string::npos) {  // a kind: answerable without a device
            const BackendKind* k = find_backend_kind(name);
            if (!k) find_backend(name);  // throws naming what exists
            return op_is_layout_only(node->op) ? std::string() : k->unsupported_reason(node);
        }
        return find_backend(name)->unsupported_reason(node);
    }, py::arg("backend"), py::arg("tensor"),
       "Why `backend` (a device such as 'cuda:0', or a kind such as 'cuda') cannot compute "
       "`tensor`'s op with its types and parameters; '' when it can.");
}

}  // namespace pyggml::python
