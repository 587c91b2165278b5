// CPU kernel of GLU: rows split across threads, computed in f32 and rounded to
// the storage type; every op's rows go through the SIMD table of cpu/glu_simd.h.
#include <vector>

#include "cpu/glu_simd.h"
#include "cpu/kernels.h"
#include "pyggml/error.h"

namespace pyggml::cpu {

namespace {

// A whole-row function of the SIMD table as the row functor of glu_rows.
template <class R>
struct RowFn {
    R row;
    void operator()(const float* g, const float* u, float* o, int64_t n) const { row(g, u, o, n); }
};

template <class F>
void glu_rows(const ComputeParams& p, Tensor* dst, F f) {
    const Tensor* a = dst->src[0];
    const Tensor* b = dst->src[1];
    const int64_t nc = dst->ne[0];
    const bool swapped = dst->param_i32(1) != 0;
    const size_t es = type_size(a->type);
    // Fused form: gate and up are the two halves of a's row (an odd last element is ignored).
    const size_t gate_offs = b ? 0 : (swapped ? nc * es : 0);
    const size_t up_offs = b ? 0 : (swapped ? 0 : nc * es);
    const bool f32 = a->type == Type::F32;
    std::vector<float> gb(f32 ? 0 : nc), ub(f32 ? 0 : nc), ob(f32 ? 0 : nc);
    int64_t r0, r1;
    split_range(dst->nrows(), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
        const char* grow = a->row(i1, i2, i3) + gate_offs;
        const char* urow = (b ? b->row(i1, i2, i3) : a->row(i1, i2, i3)) + up_offs;
        char* orow = dst->row(i1, i2, i3);
        if (f32) {
            f((const float*)grow, (const float*)urow, (float*)orow, nc);
        } else {
            to_float_row(a->type, grow, gb.data(), nc);
            to_float_row(a->type, urow, ub.data(), nc);
            f(gb.data(), ub.data(), ob.data(), nc);
            from_float_row(dst->type, ob.data(), orow, nc);
        }
    }
}

}  // namespace

void cpu_forward_GLU(const ComputeParams& p, Tensor* dst) {
    const float alpha = dst->param_f32(2);
    const float limit = dst->param_f32(3);
    const glu::GluOps& ops = glu::kernels();
    auto row = [](auto fn) { return RowFn<decltype(fn)>{fn}; };
    switch ((GluOp)dst->param_i32(0)) {
        case GluOp::REGLU:
            return glu_rows(p, dst, row(ops.reglu));
        case GluOp::GEGLU:
            return glu_rows(p, dst, row(ops.geglu));
        case GluOp::SWIGLU:
            return glu_rows(p, dst, row(ops.swiglu));
        case GluOp::GEGLU_ERF:
            return glu_rows(p, dst, row(ops.geglu_erf));
        case GluOp::GEGLU_QUICK:
            return glu_rows(p, dst, row(ops.geglu_quick));
        case GluOp::SWIGLU_OAI:
            return glu_rows(p, dst, row([&ops, alpha, limit](const float* g, const float* u, float* o, int64_t n) {
                ops.swiglu_oai(g, u, o, n, alpha, limit);
            }));
        case GluOp::SWIGLU_CLAMP:
            return glu_rows(p, dst, row([&ops, limit](const float* g, const float* u, float* o, int64_t n) {
                ops.swiglu_clamp(g, u, o, n, limit);
            }));
        default:
            throw UnsupportedError("[glu] unsupported glu op id " + std::to_string(dst->param_i32(0)));
    }
}
size_t cpu_work_size_GLU(const Tensor*, int) { return 0; }

}  // namespace pyggml::cpu
