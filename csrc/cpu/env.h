// Settings read from the environment (benchmark and test overrides of CPU tuning constants).
#pragma once
#include <cstdint>
#include <cstdlib>

namespace pyggml::cpu {

// The non-negative integer in environment variable `name`, or `fallback` when it is unset,
// empty or not such a number.
inline int64_t env_nonnegative(const char* name, int64_t fallback) {
    const char* e = std::getenv(name);
    if (e && *e) {
        char* end = nullptr;
        const long long x = std::strtoll(e, &end, 10);
        if (end && *end == 0 && x >= 0) return (int64_t)x;
    }
    return fallback;
}

// False when environment variable `name` is exactly "0" (a feature switched off for a
// benchmark), true otherwise.
inline bool env_not_zero(const char* name) {
    const char* e = std::getenv(name);
    return !(e && e[0] == '0' && e[1] == 0);
}

}  // namespace pyggml::cpu
