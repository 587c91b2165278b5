// ggml's CPU type traits, loaded at run time from llama-cpp-python's libggml-cpu (the folder in
// GGML_LIB_DIR), for the cycle-count tools that time one row against ggml's vec_dot.
#pragma once
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <string>

struct GTraits { void (*from_float)(const float*, void*, int64_t); void (*vec_dot)(int, float*, size_t, const void*, size_t, const void*, size_t, int); int vec_dot_type; int64_t nrows; };
using GetTraits = const GTraits* (*)(int);

// ggml_get_type_traits_cpu after ggml_cpu_init, or null (the reason printed).
inline GetTraits load_ggml_cpu_traits() {
    const char* dir = getenv("GGML_LIB_DIR");
    if (!dir) { fprintf(stderr, "set GGML_LIB_DIR to the folder of libggml-cpu.so\n"); return nullptr; }
    std::string b = std::string(dir) + "/libggml-base.so", c = std::string(dir) + "/libggml-cpu.so";
    dlopen(b.c_str(), RTLD_NOW | RTLD_GLOBAL);
    void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return nullptr; }
    ((void (*)())dlsym(h, "ggml_cpu_init"))();
    return (GetTraits)dlsym(h, "ggml_get_type_traits_cpu");
}
