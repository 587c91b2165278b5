// CPU feature detection and the level cap (see isa.h).
#include "cpu/simd/isa.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace pyggml::cpu::simd {

namespace {

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c");
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni"))
        return Isa::Avx512;
    if (avx2) return Isa::Avx2;
#endif
    return Isa::Scalar;
}

int cap_from_env() {
    const char* e = std::getenv("PYGGML_ISA");
    if (!e || !*e) return (int)Isa::Avx512;
    Isa cap;
    if (parse_isa(e, &cap)) return (int)cap;
    std::fprintf(stderr, "pyggml: ignoring PYGGML_ISA=%s (expected scalar, avx2 or avx512)\n", e);
    return (int)Isa::Avx512;
}

std::atomic<int>& cap_ref() {
    static std::atomic<int> cap{cap_from_env()};
    return cap;
}

thread_local int t_pinned = -1;
thread_local int t_pinned_bf16 = -1;

std::atomic<bool> g_bf16_allowed{true};

}  // namespace

Isa detected_isa() {
    static const Isa d = detect();
    return d;
}

Isa isa_cap() { return (Isa)cap_ref().load(std::memory_order_relaxed); }

void set_isa_cap(Isa cap) { cap_ref().store((int)cap, std::memory_order_relaxed); }

Isa cpu_isa() {
    if (t_pinned >= 0) return (Isa)t_pinned;
    const int d = (int)detected_isa(), c = cap_ref().load(std::memory_order_relaxed);
    return (Isa)(c < d ? c : d);
}

bool detected_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool d = detected_isa() == Isa::Avx512 && __builtin_cpu_supports("avx512bf16");
    return d;
#else
    return false;
#endif
}

bool avx512_bf16_allowed() {
    return t_pinned_bf16 >= 0 ? t_pinned_bf16 != 0 : g_bf16_allowed.load(std::memory_order_relaxed);
}

bool avx512_bf16() { return cpu_isa() == Isa::Avx512 && detected_avx512_bf16() && avx512_bf16_allowed(); }

bool set_avx512_bf16(bool allowed) { return g_bf16_allowed.exchange(allowed, std::memory_order_relaxed); }

const char* isa_name(Isa i) {
    return i == Isa::Avx512 ? "avx512" : i == Isa::Avx2 ? "avx2" : "scalar";
}

bool parse_isa(const std::string& name, Isa* out) {
    for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
        if (name == isa_name(i)) { *out = i; return true; }
    return false;
}

IsaPin::IsaPin(Isa isa, bool bf16_allowed) : saved_(t_pinned), saved_bf16_(t_pinned_bf16) {
    t_pinned = (int)isa;
    t_pinned_bf16 = bf16_allowed;
}
IsaPin::~IsaPin() {
    t_pinned = saved_;
    t_pinned_bf16 = saved_bf16_;
}

}  // namespace pyggml::cpu::simd
