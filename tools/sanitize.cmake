# Injected by tools/sanitize.sh (CMAKE_PROJECT_INCLUDE): compile the pybind11 glue of the
# sanitizer build at -O0. ASan-instrumented pybind11 templates at -O2 take minutes per file on a
# small machine; the glue does not need speed, and the core keeps its own -O3.
file(GLOB _pyggml_san_bind_sources ${CMAKE_SOURCE_DIR}/csrc/python/*.cpp)
# EVAL expands the list now; DEFER runs the call once the targets exist.
cmake_language(EVAL CODE "cmake_language(DEFER CALL set_source_files_properties ${_pyggml_san_bind_sources} PROPERTIES COMPILE_OPTIONS -O0)")
