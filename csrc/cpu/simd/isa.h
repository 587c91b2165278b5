// The one run-time choice of SIMD instruction set (the wheel is built without -march=native).
// Levels: Scalar (plain loops, the reference), Avx2 (AVX2+FMA+F16C), Avx512 (F/BW/VL/DQ +
// VNNI, plus the AVX2 set). Every SIMD family (mul_mat, row ops, seed ops, conversions, flash
// attention) fills a function table per level from simd/<family>_<level>.cpp and picks the
// table of cpu_isa(); nothing else looks at CPU features.
//
// The cap: PYGGML_ISA=scalar|avx2|avx512 sets it once at start-up; set_isa_cap() changes it at
// run time (gg.set_isa from Python; tests run every path on one machine). A level the CPU lacks
// is never used. A compute pins the level for its whole run (IsaPin), so every thread of a
// graph uses the same tables even if the cap changes meanwhile.
#pragma once
#include <string>

namespace pyggml::cpu::simd {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

Isa detected_isa();          // the best level this CPU runs
Isa isa_cap();               // the current cap (Avx512 when uncapped)
void set_isa_cap(Isa cap);
Isa cpu_isa();               // min(detected, cap), or the pinned level inside a compute

// AVX512-BF16 (vdpbf16ps), a sub-feature of the Avx512 level: where the CPU has it, the avx512
// set dots bf16 weights as bf16 pairs (cpu/mul_mat_float.h). avx512_bf16(): detected, allowed
// and the level in use is Avx512. set_avx512_bf16(false) turns the pair form off (the level's
// f32 form then serves, as on an AVX-512 CPU without BF16; tests run both); it returns the
// previous setting and takes effect at the next compute (a compute pins it with the level).
bool detected_avx512_bf16();
bool avx512_bf16();
bool set_avx512_bf16(bool allowed);
bool avx512_bf16_allowed();  // the setting (what a compute pins)

const char* isa_name(Isa i);  // "scalar", "avx2", "avx512"
// Parses a level name (case-sensitive, as isa_name spells it); false when unknown.
bool parse_isa(const std::string& name, Isa* out);

// Pins cpu_isa() and the AVX512-BF16 setting on this thread for the pin's lifetime (one per
// compute thread, and one on the calling thread while it sizes the work buffer).
class IsaPin {
public:
    IsaPin(Isa isa, bool bf16_allowed);
    ~IsaPin();
    IsaPin(const IsaPin&) = delete;
    IsaPin& operator=(const IsaPin&) = delete;
private:
    int saved_, saved_bf16_;
};

}  // namespace pyggml::cpu::simd
