// Exceptions thrown by the core; the Python bindings map them to Python exception types.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace pyggml {

struct Tensor;

struct Error : std::runtime_error { using std::runtime_error::runtime_error; };
struct ShapeError : Error { using Error::Error; };        // -> ValueError
struct TypeMismatchError : Error { using Error::Error; }; // -> TypeError
struct OutOfMemoryError : Error { using Error::Error; };  // -> MemoryError
struct UnsupportedError : Error { using Error::Error; };  // -> NotImplementedError
// A compute stopped by its abort callback (ComputeOptions::abort); the context stays usable.
// From Python, Ctrl-C during Graph.compute raises KeyboardInterrupt instead.
struct AbortedError : Error { using Error::Error; };      // -> RuntimeError

// "f32 [4, 5, 1, 1]" (plus ", nb=[...]" when not contiguous)
std::string describe(const Tensor* t);

// Builds "[op] rule (a: f32 [..], b: ...)" messages.
class OpMessage {
public:
    explicit OpMessage(const char* op) { os_ << "[" << op << "] "; }
    template <class T> OpMessage& operator<<(const T& v) { os_ << v; return *this; }
    OpMessage& with(const char* name, const Tensor* t);
    std::string str() const { return os_.str() + (operands_.empty() ? "" : " (" + operands_ + ")"); }
private:
    std::ostringstream os_;
    std::string operands_;
};

[[noreturn]] void throw_shape(const OpMessage& m);
[[noreturn]] void throw_type(const OpMessage& m);
[[noreturn]] void throw_unsupported(const OpMessage& m);

}  // namespace pyggml

// Validation in op constructors: PG_SHAPE_CHECK(cond, OpMessage("op") << ...) throws ShapeError
// (-> ValueError) when cond is false, PG_TYPE_CHECK throws TypeMismatchError (-> TypeError).
#define PG_SHAPE_CHECK(cond, msg) do { if (!(cond)) ::pyggml::throw_shape(msg); } while (0)
#define PG_TYPE_CHECK(cond, msg) do { if (!(cond)) ::pyggml::throw_type(msg); } while (0)
