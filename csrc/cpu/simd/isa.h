// Run-time selection of the SIMD instruction set (the wheel is built without -march=native).
// Levels: Scalar (plain loops, the reference), Avx2 (AVX2+FMA+F16C), Avx512 (F/BW/VL/DQ +
// VNNI). The environment variable PYGGML_ISA=scalar|avx2|avx512 caps the level (tests use it to
// run every path on one machine); it is read on every call, so it can change between computes.
#pragma once
#include <cstdlib>
#include <cstring>

namespace pyggml::cpu::simd {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

inline Isa cpu_isa_detected() {
#if defined(__x86_64__) || defined(__i386__)
    static const Isa detected = [] {
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") &&
            __builtin_cpu_supports("f16c"))
            return Isa::Avx512;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
            return Isa::Avx2;
        return Isa::Scalar;
    }();
    return detected;
#else
    return Isa::Scalar;
#endif
}

// The detected level, capped by PYGGML_ISA.
inline Isa cpu_isa() {
    Isa isa = cpu_isa_detected();
    if (const char* e = std::getenv("PYGGML_ISA")) {
        Isa cap = isa;
        if (!std::strcmp(e, "scalar")) cap = Isa::Scalar;
        else if (!std::strcmp(e, "avx2")) cap = Isa::Avx2;
        if ((int)cap < (int)isa) isa = cap;
    }
    return isa;
}

inline const char* isa_name(Isa i) {
    return i == Isa::Avx512 ? "avx512" : i == Isa::Avx2 ? "avx2" : "scalar";
}

}  // namespace pyggml::cpu::simd
