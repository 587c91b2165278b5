// Host-side helpers of the DeepSeek V4 memory's per-ubatch input: the compressor plan (which
// rows every completed block reads, where it writes, which ring slots the ubatch persists,
// restores and snapshots) and the compressed rows' visibility mask. They run for every
// decoded token and every ratio, where building the same lists with numpy costs more in call
// overhead than the whole plan; here they are plain loops. The numpy definition of the plan
// is tests/llm/test_dsv4_comp_plan.py's reference.
#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "bind_common.h"
#include "pyggml/backend.h"
#include "pyggml/context.h"
#include "pyggml/error.h"

namespace pyggml::python {

namespace {

using I32Array = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

[[noreturn]] void fail(const char* op, const std::string& what) {
    throw py::value_error(std::string("[") + op + "] " + what);
}

// The ubatch's positions: one sequence, consecutive, non-negative. Returns (seq, first pos).
std::pair<int64_t, int64_t> check_ubatch(const I32Array& pos, const I32Array& seq, int64_t n_seq, const char* op) {
    if (pos.ndim() != 1 || seq.ndim() != 1 || pos.shape(0) != seq.shape(0) || pos.shape(0) == 0)
        fail(op, "pos and seq_id must be 1-D with the same non-zero length");
    const int32_t* p = pos.data();
    const int32_t* s = seq.data();
    const int64_t T = pos.shape(0);
    for (int64_t i = 1; i < T; ++i)
        if (s[i] != s[0] || p[i] != p[i - 1] + 1)
            fail(op, "dsv4 memory: a ubatch must hold consecutive positions of one sequence");
    if (s[0] < 0 || s[0] >= n_seq) fail(op, "seq_id " + std::to_string(s[0]) + " is outside [0, " + std::to_string(n_seq) + ")");
    if (p[0] < 0) fail(op, "positions must be >= 0, got " + std::to_string(p[0]));
    return {s[0], p[0]};
}

template <class T>
py::array_t<T> array_of(const std::vector<T>& v) {
    py::array_t<T> a((py::ssize_t)v.size());
    if (!v.empty()) std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
}

// Rows of the compressor's source table [ring plane 0 (rows_state) | this ubatch (T) | one
// synthetic row]; ring row (plane k, seq s, slot q) = (k * n_seq + s) * S + q; the snapshot
// source is [all planes (rows_all) | this ubatch]. Blocks: one per position p completing one
// ((p + 1) % ratio == 0), padded with dummies to ceil(T / ratio) when any completes (none: no
// block at all); overlap lists every block's previous window first, then every current one.
py::tuple comp_plan(const I32Array& pos, const I32Array& seq, int64_t ratio, int64_t S, int64_t size,
                    int64_t rows_state, int64_t rows_all, int64_t n_seq, int64_t n_rs, bool overlap, int64_t rs) {
    const char* op = "dsv4_comp_plan";
    if (ratio < 1 || S < 1 || size < 1 || n_seq < 1 || n_rs < 0)
        fail(op, "ratio, S, size and n_seq must be >= 1 and n_rs >= 0");
    if (rs < 0 || rs > n_rs) fail(op, "rs=" + std::to_string(rs) + " is outside [0, n_rs=" + std::to_string(n_rs) + "]");
    const auto [s, p0] = check_ubatch(pos, seq, n_seq, op);
    const int64_t T = pos.shape(0), p_end = p0 + T - 1;
    const int64_t ring0 = s * S, syn = rows_state + T;
    auto src = [&](int64_t p) -> int64_t {
        if (p < 0) return syn;
        if (p >= p0) return rows_state + p - p0;
        return ring0 + p % S;
    };
    std::vector<int32_t> state_pos(T), prev, cur, write_pos, persist_src, restore_src, snap_src;
    std::vector<int64_t> write_idxs, persist_dst, restore_dst, snap_dst;
    for (int64_t i = 0; i < T; ++i) state_pos[i] = (int32_t)((p0 + i) % ratio);
    for (int64_t p = p0; p <= p_end; ++p) {
        if ((p + 1) % ratio) continue;
        const int64_t b = p + 1 - ratio;
        write_idxs.push_back(s * size + p / ratio);
        write_pos.push_back((int32_t)b);
        for (int64_t j = 0; j < ratio; ++j) {
            if (overlap) prev.push_back((int32_t)src(b - ratio + j));
            cur.push_back((int32_t)src(b + j));
        }
    }
    if (!write_idxs.empty()) {
        const int64_t n_slots = (T + ratio - 1) / ratio;
        while ((int64_t)write_idxs.size() < n_slots) {  // dummies: finite garbage into a row no token sees yet
            write_idxs.push_back(s * size + size - 1);
            write_pos.push_back(0);
            for (int64_t j = 0; j < ratio; ++j) {
                if (overlap) prev.push_back((int32_t)rows_state);
                cur.push_back((int32_t)rows_state);
            }
        }
    }
    prev.insert(prev.end(), cur.begin(), cur.end());
    // the last token of each ring slot the ubatch touches, by slot
    std::vector<std::pair<int64_t, int32_t>> last;
    for (int64_t i = std::max<int64_t>(0, T - S); i < T; ++i) last.emplace_back((p0 + i) % S, (int32_t)i);
    std::sort(last.begin(), last.end());
    for (const auto& [q, i] : last) {
        persist_src.push_back(i);
        persist_dst.push_back(ring0 + q);
    }
    if (rs)
        for (int64_t q = 0; q < S; ++q) {
            restore_src.push_back((int32_t)((rs * n_seq + s) * S + q));
            restore_dst.push_back(ring0 + q);
        }
    for (int64_t d = 1; d <= n_rs; ++d)
        for (int64_t q = 0; q < S; ++q) {
            snap_dst.push_back((d * n_seq + s) * S + q);
            if (d < T) {
                const int64_t top = p_end - d;                   // latest position kept in plane d
                const int64_t m = ((top - q) % S + S) % S;
                const int64_t p_q = top - m;                     // latest position <= top in slot q
                snap_src.push_back((int32_t)(p_q >= p0 ? rows_all + p_q - p0 : ring0 + q));
            } else {                                             // before this ubatch: an older plane
                const int64_t plane = rs + d - T;
                snap_src.push_back((int32_t)(((plane <= n_rs ? plane : 0) * n_seq + s) * S + q));
            }
        }
    return py::make_tuple(array_of(state_pos), array_of(prev), array_of(write_idxs), array_of(write_pos),
                          array_of(persist_src), array_of(persist_dst), array_of(restore_src),
                          array_of(restore_dst), array_of(snap_src), array_of(snap_dst));
}

// dst [n_kv, T, 1, 1] (F16 or F32, contiguous, host memory) <- 0 where token t sees compressed
// row j (j < (pos[t] + 1) / ratio), -inf elsewhere.
void fill_comp_mask(TensorArg dst_arg, const I32Array& pos, int64_t ratio) {
    const char* op = "dsv4_fill_comp_mask";
    Tensor* dst = to_tensor(dst_arg.obj, op, "dst", true);
    if (dst->type != Type::F16 && dst->type != Type::F32) fail(op, "dst must be f16 or f32, got " + describe(dst));
    if (!dst->is_contiguous()) fail(op, "dst must be contiguous: " + describe(dst));
    if ((dst->ctx ? dst->ctx->backend() : cpu_backend()) != cpu_backend())
        fail(op, "dst must live in host (CPU) memory: " + describe(dst));
    if (!dst->data && dst->view_src && dst->view_src->data) dst->data = (char*)dst->view_src->data + dst->view_offs;
    if (!dst->data && dst->nbytes() > 0) fail(op, "dst has no storage yet (allocate its graph): " + describe(dst));
    if (ratio < 1) fail(op, "ratio must be >= 1");
    const int64_t n_kv = dst->ne[0], n_rows = dst->ne[1] * dst->ne[2] * dst->ne[3];
    if (pos.ndim() != 1 || pos.shape(0) != n_rows)
        fail(op, "pos must have one entry per mask row (" + std::to_string(n_rows) + ")");
    const int32_t* p = pos.data();
    const bool f16 = dst->type == Type::F16;
    for (int64_t t = 0; t < n_rows; ++t) {
        const int64_t vis = std::clamp<int64_t>(((int64_t)p[t] + 1) / ratio, 0, n_kv);
        if (f16) {
            uint16_t* row = (uint16_t*)dst->data + t * n_kv;
            std::fill(row, row + vis, (uint16_t)0x0000);
            std::fill(row + vis, row + n_kv, (uint16_t)0xFC00);  // -inf in IEEE half
        } else {
            float* row = (float*)dst->data + t * n_kv;
            std::fill(row, row + vis, 0.0f);
            std::fill(row + vis, row + n_kv, -std::numeric_limits<float>::infinity());
        }
    }
}

}  // namespace

void bind_dsv4_host(py::module_& m) {
    m.def("dsv4_comp_plan", &comp_plan, py::arg("pos"), py::arg("seq_id"), py::arg("ratio"), py::arg("S"),
          py::arg("size"), py::arg("rows_state"), py::arg("rows_all"), py::arg("n_seq"), py::arg("n_rs"),
          py::arg("overlap"), py::arg("rs"),
          "The dsv4 compressor plan of one ubatch (consecutive positions of one sequence): "
          "(state_pos i32, read_idxs i32, write_idxs i64, write_pos i32, persist_src i32, "
          "persist_dst i64, restore_src i32, restore_dst i64, snap_src i32, snap_dst i64).");
    m.def("dsv4_fill_comp_mask", &fill_comp_mask, py::arg("dst"), py::arg("pos"), py::arg("ratio"),
          "Fill dst [n_kv, T, 1, 1] (f16 or f32, host memory): 0 where token t sees compressed row j "
          "(j < (pos[t] + 1) // ratio), -inf elsewhere.");
}

}  // namespace pyggml::python
