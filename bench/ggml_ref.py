"""ggml's CPU backend through ctypes, for same-run speed comparisons (bench only).

Loads the libggml-base / libggml-cpu shared libraries bundled with llama-cpp-python (the
``lib`` folder of the ``llama_cpp`` package). ``load()`` returns None when that package or its
libraries are absent, so callers can skip cleanly. Graphs run on one persistent ggml threadpool
per thread count (as pyggml's Graph.compute runs on its persistent pool), with the work buffer
planned once per graph. The pool is paused after every compute (the next compute resumes it):
ggml's workers otherwise poll for new work for a long while and take the cores from whatever
runs next, which in an alternating comparison is the other side.

    g = load()
    ctx = g.context(256 << 20)
    a = ctx.tensor(g.TYPE["q4_0"], [4096, 4096], raw_bytes)
    b = ctx.tensor(g.TYPE["f32"], [4096, 1], np_f32)
    run = ctx.graph(g.lib.ggml_mul_mat(ctx.ptr, a, b), n_threads=2)
    run()  # one compute
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

# ggml_type ids (ggml.h)
TYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "q2_K": 10, "q3_K": 11,
        "q4_K": 12, "q5_K": 13, "q6_K": 14, "iq4_nl": 20, "i32": 26, "bf16": 30, "mxfp4": 39, "nvfp4": 40}

_MAX_N_THREADS = 512  # GGML_MAX_N_THREADS: size of the cpumask in ggml_threadpool_params


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


class _CPlan(ctypes.Structure):
    _fields_ = [("work_size", ctypes.c_size_t), ("work_data", ctypes.c_void_p), ("n_threads", ctypes.c_int),
                ("threadpool", ctypes.c_void_p), ("abort_callback", ctypes.c_void_p),
                ("abort_callback_data", ctypes.c_void_p), ("use_ref", ctypes.c_bool)]


def _lib_dir():
    try:
        import llama_cpp  # noqa: F401  (also loads the libraries with their dependencies)
    except Exception:
        return None
    # llama_cpp itself loads its libraries from LLAMA_CPP_LIB_PATH when set: use the same ones
    d = os.environ.get("LLAMA_CPP_LIB_PATH") or os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
    return d if os.path.isfile(os.path.join(d, "libggml-cpu.so")) else None


class Ggml:
    TYPE = TYPE

    def __init__(self, lib_dir):
        self.lib_dir = lib_dir
        base = ctypes.CDLL(os.path.join(lib_dir, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
        cpu = ctypes.CDLL(os.path.join(lib_dir, "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
        P, I64, I = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
        sig = {
            (base, "ggml_init"): (P, [_InitParams]),
            (base, "ggml_free"): (None, [P]),
            (base, "ggml_new_tensor"): (P, [P, I, I, ctypes.POINTER(I64)]),
            (base, "ggml_get_data"): (P, [P]),
            (base, "ggml_nbytes"): (ctypes.c_size_t, [P]),
            (base, "ggml_mul_mat"): (P, [P, P, P]),
            (base, "ggml_mul_mat_id"): (P, [P, P, P, P]),
            (base, "ggml_gated_delta_net"): (P, [P, P, P, P, P, P, P, I64]),
            (base, "ggml_ssm_scan"): (P, [P, P, P, P, P, P, P, P, I64]),
            (base, "ggml_flash_attn_ext"): (P, [P, P, P, P, P, ctypes.c_float, ctypes.c_float, ctypes.c_float]),
            (base, "ggml_view_3d"): (P, [P, P, I64, I64, I64, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t]),
            (base, "ggml_permute"): (P, [P, P, I, I, I, I]),
            (base, "ggml_new_graph"): (P, [P]),
            (base, "ggml_build_forward_expand"): (None, [P, P]),
            (base, "ggml_threadpool_params_init"): (None, [P, I]),
            (base, "ggml_tensor_overhead"): (ctypes.c_size_t, []),
            (base, "ggml_graph_overhead"): (ctypes.c_size_t, []),
            (cpu, "ggml_cpu_init"): (None, []),
            (cpu, "ggml_threadpool_new"): (P, [P]),
            (cpu, "ggml_threadpool_free"): (None, [P]),
            (cpu, "ggml_threadpool_pause"): (None, [P]),
            (cpu, "ggml_graph_plan"): (_CPlan, [P, I, P]),
            (cpu, "ggml_graph_compute"): (I, [P, ctypes.POINTER(_CPlan)]),
        }
        for (h, name), (res, args) in sig.items():
            fn = getattr(h, name)
            fn.restype, fn.argtypes = res, args
            setattr(self, name, fn)
        self.ggml_cpu_init()
        self._pools = {}
        has = {}
        for feature in ("avx2", "avx512", "avx512_vnni", "avx512_bf16"):
            fn = getattr(cpu, f"ggml_cpu_has_{feature}")
            fn.restype, fn.argtypes = ctypes.c_int, []
            has[feature] = bool(fn())
        self.compiled_for = has  # the instruction sets this libggml-cpu was compiled to use

    def threadpool(self, n_threads):
        if n_threads not in self._pools:
            params = ctypes.create_string_buffer(_MAX_N_THREADS + 64)
            self.ggml_threadpool_params_init(params, n_threads)
            self._pools[n_threads] = self.ggml_threadpool_new(params)
        return self._pools[n_threads]

    def context(self, mem_size):
        return _Context(self, mem_size)


class _Context:
    def __init__(self, g, mem_size):
        self.g = g
        mem_size += g.ggml_graph_overhead() + 64 * g.ggml_tensor_overhead()
        self.ptr = g.ggml_init(_InitParams(mem_size, None, False))
        if not self.ptr:
            raise MemoryError(f"ggml_init({mem_size}) failed")
        self._keep = []

    def tensor(self, type_id, ne, data=None):
        """New tensor of ggml type id `type_id` and shape ne (ggml order); data: array or bytes."""
        arr = (ctypes.c_int64 * len(ne))(*ne)
        t = self.g.ggml_new_tensor(self.ptr, type_id, len(ne), arr)
        if data is not None:
            raw = np.ascontiguousarray(data).view(np.uint8).ravel()
            n = self.g.ggml_nbytes(t)
            if raw.size != n:
                raise ValueError(f"tensor of {n} bytes given {raw.size}")
            ctypes.memmove(self.g.ggml_get_data(t), raw.ctypes.data, n)
        return t

    def read_f32(self, t, count):
        buf = (ctypes.c_float * count).from_address(self.g.ggml_get_data(t))
        return np.frombuffer(buf, dtype=np.float32, count=count).copy()

    def graph(self, out, n_threads):
        """A callable computing the graph of `out` (a tensor, or a list of them) on n_threads
        (plan and work buffer made once); its `out` attribute is `out`."""
        g = self.g
        gf = g.ggml_new_graph(self.ptr)
        for o in out if isinstance(out, list) else [out]:
            g.ggml_build_forward_expand(gf, o)
        pool = g.threadpool(n_threads)
        plan = g.ggml_graph_plan(gf, n_threads, pool)
        work = ctypes.create_string_buffer(max(1, plan.work_size) + 64)
        plan.work_data = ctypes.addressof(work)
        self._keep.append(work)

        def run():
            status = g.ggml_graph_compute(gf, ctypes.byref(plan))
            g.ggml_threadpool_pause(pool)  # its workers would otherwise poll through the other side's run
            if status != 0:
                raise RuntimeError(f"ggml_graph_compute returned {status}")
        run.out, run.gf, run.plan = out, gf, plan
        return run

    def free(self):
        if self.ptr:
            self.g.ggml_free(self.ptr)
            self.ptr = None
            self._keep.clear()

    def __del__(self):
        self.free()


_loaded = False
_instance = None


def avx512_flavour_reason():
    """Why bit-for-bit comparisons with this ggml cannot hold, or None when they can.

    pyggml's plain kernels reproduce the arithmetic of ggml's AVX2 build. An AVX-512 build sums
    F16/F32 vectors 16 lanes wide and takes other matmul paths, so its results differ from the
    AVX2 build's (and from pyggml's) in the last bits, which a quantized model amplifies."""
    g = load()
    if g is None or not g.compiled_for["avx512"]:
        return None
    return ("llama.cpp's ggml here is an AVX-512 build, whose sums differ from its AVX2 build's in the "
            "last bits; point LLAMA_CPP_LIB_PATH at the lib folder of an AVX2 build of "
            "llama-cpp-python for the bit-exact oracle (README, Developing)")


# Run in a child: initialise llama.cpp's backends and compute one quantized product on ggml's
# CPU backend, where a build for another CPU traps (ggml_cpu_init, or a quantized kernel).
_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import llama_cpp
llama_cpp.llama_backend_init()
import numpy as np, ggml_ref
g = ggml_ref.Ggml(ggml_ref._lib_dir())
ctx = g.context(1 << 20)
a = ctx.tensor(g.TYPE["q8_0"], [64, 4], np.zeros(4 * 68, np.uint8))
b = ctx.tensor(g.TYPE["f32"], [64, 8], np.ones((8, 64), np.float32))
ctx.graph(g.ggml_mul_mat(ctx.ptr, a, b), 1)()
"""
_cpu_reason = ...  # not probed yet


def cpu_mismatch_reason():
    """Why llama.cpp's libraries cannot run on this CPU (a child that loaded them and computed
    one product died of a signal, e.g. SIGILL for a build with instructions this CPU lacks), or
    None: they run, or llama_cpp is not installed (callers handle that themselves). Probed once
    per process, in a child, so the caller survives."""
    global _cpu_reason
    if _cpu_reason is not ...:
        return _cpu_reason
    _cpu_reason = None
    import importlib.util
    import signal
    import subprocess
    import sys
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    try:
        r = subprocess.run([sys.executable, "-c", _PROBE, os.path.dirname(os.path.abspath(__file__))],
                           capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode < 0:
        sig = signal.Signals(-r.returncode).name if -r.returncode in signal.valid_signals() else -r.returncode
        _cpu_reason = (f"llama_cpp's libraries die on this CPU ({sig} in a child that initialised them); "
                       "it was built for another CPU: reinstall llama-cpp-python with CMAKE_ARGS naming "
                       "only the instruction sets this CPU has (README, Developing)")
    return _cpu_reason


def load():
    """The ggml wrapper, or None when llama_cpp or its bundled libraries are not available or
    cannot run on this CPU (cpu_mismatch_reason)."""
    global _loaded, _instance
    if not _loaded:
        _loaded = True
        d = _lib_dir() if cpu_mismatch_reason() is None else None
        if d is not None:
            try:
                _instance = Ggml(d)
            except (OSError, AttributeError):
                _instance = None
    return _instance
