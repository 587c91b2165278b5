#!/usr/bin/env bash
# Run the test suite against an AddressSanitizer + UndefinedBehaviorSanitizer build of the
# extension.
#
# Usage (from anywhere; paths are relative to the repository root):
#   tools/sanitize.sh                       # build build-asan/, then run the whole suite
#   tools/sanitize.sh tests/test_core.py    # ... or only the given pytest arguments
#   SANITIZE_BUILD_ONLY=1 tools/sanitize.sh # only (re)build
#
# What it does:
#   1. Configures and builds pyggml._core into build-asan/ (CPU only, no benchmarks) with
#      -fsanitize=address,undefined -fno-omit-frame-pointer -g (vptr checks off: pybind11's
#      hidden-visibility type info trips them falsely); the bindings at -O0 (tools/sanitize.cmake).
#      Incremental after the first run.
#   2. Runs pytest with PYGGML_BUILD_DIR=build-asan, the ASan runtime preloaded (the Python
#      interpreter itself is not instrumented, so the runtime must be loaded first), and
#      PYTHONMALLOC=malloc so that every Python allocation goes through the sanitizer too.
#   3. LeakSanitizer runs at interpreter exit. CPython and numpy keep many allocations alive
#      until the process ends by design (interned strings, type objects, module state); those are
#      suppressed by tools/sanitize.supp, which names only CPython's and numpy's own allocator
#      entry points, never a pyggml or pybind11 function: a leak of memory that pyggml's C++
#      code allocated with new/malloc is still reported.
#
# The process exits non-zero for a failed test, any ASan or UBSan report, or a leak report
# with a frame in pyggml's sources; leaks of other programs that tests start are only counted.
# Reports go, one file per process, to build-asan/reports/ (log_path), so that a
# report from a subprocess that a test started is not lost. The script ends by counting them.
# Settings already present in ASAN_OPTIONS / UBSAN_OPTIONS are kept (they come first; the
# sanitizers use the last occurrence of a key, so pass overrides via SANITIZE_EXTRA_ASAN /
# SANITIZE_EXTRA_UBSAN, e.g. SANITIZE_EXTRA_UBSAN=halt_on_error=0 to collect every report).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="$ROOT/build-asan"
SAN_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize=vptr -g"

if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPYGGML_BUILD_PYTHON=ON -DPYGGML_CUDA=OFF -DPYGGML_BUILD_BENCH=OFF \
    -DCMAKE_CXX_FLAGS="$SAN_FLAGS" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_PROJECT_INCLUDE="$ROOT/tools/sanitize.cmake" \
    -Dpybind11_DIR="$(python -c 'import pybind11; print(pybind11.get_cmake_dir())')"
fi
ninja -C "$BUILD" -j"${SANITIZE_JOBS:-2}" _core
[ -n "${SANITIZE_BUILD_ONLY:-}" ] && exit 0

LIBASAN="$(${CXX:-g++} -print-file-name=libasan.so)"
# libstdc++ too: the interpreter does not link it, and ASan's C++ exception interceptor must
# find it when the runtime starts.
LIBSTDCXX="$(${CXX:-g++} -print-file-name=libstdc++.so)"
PYTHON="$(python -c 'import sys; print(sys.executable)')"  # the interpreter, not a shell shim
REPORTS="$BUILD/reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
export LD_PRELOAD="$LIBASAN:$LIBSTDCXX${LD_PRELOAD:+:$LD_PRELOAD}"
export PYTHONMALLOC=malloc
export PYGGML_BUILD_DIR="$BUILD" PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# allocator_may_return_null: a huge request must become MemoryError (a tested behaviour),
# not a sanitizer abort. detect_odr_violation: pybind11 modules legitimately share symbols.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:allocator_may_return_null=1:detect_odr_violation=0:log_path=$REPORTS/asan:print_suppressions=0${SANITIZE_EXTRA_ASAN:+:$SANITIZE_EXTRA_ASAN}"
export LSAN_OPTIONS="suppressions=$ROOT/tools/sanitize.supp:print_suppressions=0"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:print_stacktrace=1:log_path=$REPORTS/ubsan${SANITIZE_EXTRA_UBSAN:+:$SANITIZE_EXTRA_UBSAN}"

set +e +o pipefail
nice "$PYTHON" -m pytest -q -p no:cacheprovider "${@:-tests}"
rc=$?
count() { cat "$REPORTS"/* 2>/dev/null | grep -E "$1" | wc -l; }
n_asan=$(count "^==[0-9]+==ERROR: AddressSanitizer")
n_leak=$(count "^==[0-9]+==ERROR: LeakSanitizer")
# leak reports with a frame in pyggml's own C++ sources (csrc/, cuda/) or its pybind11 glue
n_own_leak=$(grep -l "ERROR: LeakSanitizer" "$REPORTS"/* 2>/dev/null | xargs -r grep -l "/csrc/\|/cuda/\|/pybind11/" | wc -l)
n_ubsan=$(count "runtime error:")
# processes whose leak scan itself failed (their leaks are unknown)
n_lsan_fatal=$(count "LeakSanitizer has encountered a fatal error")
echo "sanitize: pytest exit $rc; AddressSanitizer reports: $n_asan; LeakSanitizer reports: $n_leak" \
     "($n_own_leak with a pyggml frame);" \
     "UndefinedBehaviorSanitizer reports: $n_ubsan; leak scans that failed: $n_lsan_fatal" \
     "(details in $REPORTS)"
[ "$rc" -eq 0 ] && [ "$n_asan" -eq 0 ] && [ "$n_own_leak" -eq 0 ] && [ "$n_ubsan" -eq 0 ]
