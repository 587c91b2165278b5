// Command-line arguments of the bench binaries: -h / --help prints the usage and exits 0; an
// argument that is not understood is named on one line, with the usage, and the run ends with
// exit status 2 before anything is measured (never a run on a misread value).
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace bench {

struct Args {
    const char* usage;

    [[noreturn]] void fail(const char* what, const char* arg) const {
        std::fprintf(stderr, "error: %s: '%s'\nusage: %s\n", what, arg, usage);
        std::exit(2);
    }
    void help_if_asked(int argc, char** argv) const {
        for (int i = 1; i < argc; ++i)
            if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
                std::printf("usage: %s\n", usage);
                std::exit(0);
            }
    }
    long long positive(const char* arg, const char* what) const {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(arg, &end, 10);
        if (end == arg || *end || errno || v <= 0) fail(what, arg);
        return v;
    }
    const char* one_of(const char* arg, std::initializer_list<const char*> choices, const char* what) const {
        for (const char* c : choices)
            if (!std::strcmp(arg, c)) return c;
        fail(what, arg);
    }
};

}  // namespace bench
