// Names and families of the ops, generated from the op table.
#include "pyggml/op_table.h"

namespace pyggml {

namespace {
struct OpInfo { const char* name; const char* family; const char* constructors; };
const OpInfo kOps[] = {
#define PYGGML_X(name, family, py) {#name, #family, py},
    PYGGML_OP_TABLE(PYGGML_X)
#undef PYGGML_X
};
}  // namespace

const char* op_name(Op op) { return op < Op::COUNT ? kOps[(int)op].name : "?"; }
const char* op_family(Op op) { return op < Op::COUNT ? kOps[(int)op].family : "?"; }
const char* op_constructors(Op op) { return op < Op::COUNT ? kOps[(int)op].constructors : ""; }
bool op_is_layout_only(Op op) {
    return op == Op::NONE || op == Op::VIEW || op == Op::RESHAPE || op == Op::PERMUTE ||
           op == Op::TRANSPOSE;
}

}  // namespace pyggml
