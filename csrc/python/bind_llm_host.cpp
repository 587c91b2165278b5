// Host-side helpers of the llm layer's per-token path: the KQ mask filled from a KV cell table
// and the slot search over that table. Both run once per decoded token, where the numpy
// versions cost tens of microseconds in call overhead alone; here they are plain loops over
// the cells (the mask) or over the cells scanned until the ubatch fits (the slot).
//
// The cell table stays owned by Python (numpy arrays): pos int64 [n_cells] (-1 = empty) and
// seq bool [n_cells, n_seq] (C order), so every other cache operation keeps working on it.
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bind_common.h"
#include "pyggml/backend.h"
#include "pyggml/context.h"
#include "pyggml/error.h"

namespace pyggml::python {

namespace {

enum SwaType : int { kSwaNone = 0, kSwaStandard = 1, kSwaChunked = 2, kSwaSymmetric = 3 };

// Key position p0 outside the window of query position p1.
inline bool masked_swa(int swa_type, int64_t n_swa, int64_t p0, int64_t p1) {
    if (n_swa <= 0) return false;
    switch (swa_type) {
        case kSwaStandard: return p1 - p0 >= n_swa;
        case kSwaChunked: {
            // floor division (positions are >= 0 in practice; stay right for negatives)
            int64_t q = p1 / n_swa;
            if ((p1 % n_swa != 0) && ((p1 < 0) != (n_swa < 0))) --q;
            return p0 < q * n_swa;
        }
        case kSwaSymmetric: return (p1 > p0 ? p1 - p0 : p0 - p1) > n_swa / 2;
        default: return false;
    }
}

void check_swa_type(int swa_type, const char* op) {
    if (swa_type < kSwaNone || swa_type > kSwaSymmetric)
        throw py::value_error(std::string("[") + op + "] swa_type=" + std::to_string(swa_type) +
                              " must be 0 (none), 1 (standard), 2 (chunked) or 3 (symmetric)");
}

using PosArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using SeqArray = py::array_t<bool, py::array::c_style | py::array::forcecast>;
using I32Array = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

struct CellTable {
    const int64_t* pos;
    const bool* seq;
    int64_t n_cells, n_seq;
};

CellTable cell_table(const PosArray& pos, const SeqArray& seq, const char* op) {
    if (pos.ndim() != 1) throw py::value_error(std::string("[") + op + "] cell_pos must be 1-D");
    if (seq.ndim() != 2 || seq.shape(0) != pos.shape(0))
        throw py::value_error(std::string("[") + op + "] cell_seq must be [n_cells, n_seq] with n_cells = " +
                              std::to_string(pos.shape(0)));
    return {pos.data(), seq.data(), (int64_t)pos.shape(0), (int64_t)seq.shape(1)};
}

// The mask's two per-cell passes, branch-free so that they vectorize (AVX2 and AVX-512 clones
// where the CPU has them: the int64 compares are what SSE2 lacks; AVX-512 compares 8 cells
// into a mask register, about twice as fast on a decode step's 4096-cell row while it is in
// cache). kHidden marks a cell the query's sequence does not see; it is the largest position,
// so a causal test rejects it by itself.
constexpr int64_t kHidden = std::numeric_limits<int64_t>::max();

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PYGGML_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define PYGGML_SIMD_CLONES
#endif

PYGGML_SIMD_CLONES
void visible_positions(const int64_t* pos, const bool* seq_flags, int64_t n_seq, int32_t s, int64_t n,
                       int64_t* key_pos) {
    const uint8_t* seq = (const uint8_t*)seq_flags;  // bytes: gcc vectorizes no loads of bool
    if (n_seq == 1) {  // the usual table: unit stride
        for (int64_t j = 0; j < n; ++j) key_pos[j] = (pos[j] >= 0) & (seq[j] != 0) ? pos[j] : kHidden;
        return;
    }
    for (int64_t j = 0; j < n; ++j) {
        const int64_t p = pos[j];
        key_pos[j] = (p >= 0) & (seq[j * n_seq + s] != 0) ? p : kHidden;
    }
}

// One F16 mask row without SWA: 0.0 where the key is visible (causal: not after p1), -inf elsewhere.
PYGGML_SIMD_CLONES
void mask_row_f16(const int64_t* key_pos, int64_t n, int64_t p1, bool causal, uint16_t* row) {
    const int64_t limit = causal ? p1 : kHidden - 1;
    for (int64_t j = 0; j < n; ++j) row[j] = key_pos[j] <= limit ? 0x0000 : 0xFC00;  // 0.0 / -inf
}

// The same row straight from a one-sequence cell table (n_seq 1, a decode step's usual case):
// one pass over the table instead of two with a key_pos array between them.
PYGGML_SIMD_CLONES
void mask_row_f16_one_seq(const int64_t* pos, const bool* seq_flags, int64_t n, int64_t limit, uint16_t* row) {
    const uint8_t* seq = (const uint8_t*)seq_flags;
    for (int64_t j = 0; j < n; ++j)
        row[j] = (pos[j] >= 0) & (seq[j] != 0) & (pos[j] <= limit) ? 0x0000 : 0xFC00;
}

// dst [n_kv, T, 1, 1] (F16 or F32, contiguous) <- 0 where query token i may attend cell j,
// -inf elsewhere. A cell is visible when it holds the query's sequence, and (causal) its
// position is not after the query's, and (SWA) it is inside the query's window.
void fill_kq_mask(TensorArg dst_arg, const PosArray& cell_pos, const SeqArray& cell_seq,
                  const I32Array& q_pos, const I32Array& q_seq, bool causal, int swa_type,
                  int64_t n_swa) {
    const char* op = "llm_fill_kq_mask";
    Tensor* dst = to_tensor(dst_arg.obj, op, "dst", true);
    check_swa_type(swa_type, op);
    const CellTable c = cell_table(cell_pos, cell_seq, op);
    if (dst->type != Type::F16 && dst->type != Type::F32)
        throw py::type_error(std::string("[") + op + "] dst must be f16 or f32, got " + describe(dst));
    if (!dst->is_contiguous())
        throw py::value_error(std::string("[") + op + "] dst must be contiguous: " + describe(dst));
    if ((dst->ctx ? dst->ctx->backend() : cpu_backend()) != cpu_backend())
        throw py::value_error(std::string("[") + op + "] dst must live in host (CPU) memory: " + describe(dst));
    if (!dst->data && dst->view_src && dst->view_src->data)
        dst->data = (char*)dst->view_src->data + dst->view_offs;
    if (!dst->data && dst->nbytes() > 0)
        throw py::value_error(std::string("[") + op + "] dst has no storage yet (allocate its graph): " +
                              describe(dst));
    const int64_t n_kv = dst->ne[0];
    const int64_t n_rows = dst->ne[1] * dst->ne[2] * dst->ne[3];
    if (q_pos.ndim() != 1 || q_seq.ndim() != 1 || q_pos.shape(0) != n_rows || q_seq.shape(0) != n_rows)
        throw py::value_error(std::string("[") + op + "] q_pos and q_seq must have one entry per mask row (" +
                              std::to_string(n_rows) + ")");
    if (n_kv > c.n_cells)
        throw py::value_error(std::string("[") + op + "] the mask is " + std::to_string(n_kv) +
                              " cells wide but the table has " + std::to_string(c.n_cells));
    const int32_t* qp = q_pos.data();
    const int32_t* qs = q_seq.data();
    for (int64_t i = 0; i < n_rows; ++i)
        if (qs[i] < 0 || qs[i] >= c.n_seq)
            throw py::value_error(std::string("[") + op + "] q_seq[" + std::to_string(i) + "]=" +
                                  std::to_string(qs[i]) + " is outside [0, " + std::to_string(c.n_seq) + ")");

    py::gil_scoped_release release;
    // Per sequence: the position of every cell it sees, or kHidden for cells it does not.
    thread_local std::vector<int64_t> key_pos;  // kept between calls: no allocation per token
    if (key_pos.size() < (size_t)n_kv) key_pos.resize((size_t)n_kv);
    int32_t cur_seq = -1;
    const bool f16 = dst->type == Type::F16;
    const bool swa = swa_type != kSwaNone && n_swa > 0;
    for (int64_t i = 0; i < n_rows; ++i) {
        if (qs[i] != cur_seq) {
            cur_seq = qs[i];
            visible_positions(c.pos, c.seq, c.n_seq, cur_seq, n_kv, key_pos.data());
        }
        const int64_t p1 = qp[i];
        if (f16 && !swa) {
            mask_row_f16(key_pos.data(), n_kv, p1, causal, (uint16_t*)dst->data + i * n_kv);
        } else if (f16) {
            uint16_t* row = (uint16_t*)dst->data + i * n_kv;
            for (int64_t j = 0; j < n_kv; ++j) {
                const int64_t p0 = key_pos[j];
                bool ok = p0 != kHidden && (!causal || p0 <= p1);
                if (ok && swa) ok = !masked_swa(swa_type, n_swa, p0, p1);
                row[j] = ok ? 0x0000 : 0xFC00;  // 0.0 / -inf in IEEE half
            }
        } else {
            float* row = (float*)dst->data + i * n_kv;
            const float neg_inf = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < n_kv; ++j) {
                const int64_t p0 = key_pos[j];
                bool ok = p0 != kHidden && (!causal || p0 <= p1);
                if (ok && swa) ok = !masked_swa(swa_type, n_swa, p0, p1);
                row[j] = ok ? 0.0f : neg_inf;
            }
        }
    }
}

// The first n_tokens usable cells scanning from `head` with wrap-around, or None when fewer
// exist. Usable: empty, or (SWA) holding exactly one sequence whose entry has slid out of the
// window of that sequence's next position seq_next_pos[s].
py::object find_slot(const PosArray& cell_pos, const SeqArray& cell_seq, int64_t head, int64_t n_tokens,
                     int swa_type, int64_t n_swa, const std::optional<PosArray>& seq_next_pos) {
    const char* op = "llm_kv_find_slot";
    check_swa_type(swa_type, op);
    const CellTable c = cell_table(cell_pos, cell_seq, op);
    const bool swa = swa_type != kSwaNone && n_swa > 0;
    if (swa && (!seq_next_pos || seq_next_pos->ndim() != 1 || seq_next_pos->shape(0) != c.n_seq))
        throw py::value_error(std::string("[") + op + "] seq_next_pos must have one entry per sequence (" +
                              std::to_string(c.n_seq) + ")");
    if (n_tokens < 0) throw py::value_error(std::string("[") + op + "] n_tokens must be >= 0");
    if (c.n_cells == 0 || n_tokens > c.n_cells) return py::none();
    if (head < 0 || head >= c.n_cells) head = 0;
    py::array_t<int64_t> out((py::ssize_t)n_tokens);
    int64_t* o = out.mutable_data();
    const int64_t* next = swa ? seq_next_pos->data() : nullptr;
    int64_t found = 0;
    for (int64_t k = 0; k < c.n_cells && found < n_tokens; ++k) {
        int64_t j = head + k;
        if (j >= c.n_cells) j -= c.n_cells;
        bool ok = c.pos[j] < 0;
        if (!ok && swa) {
            int64_t owner = -1, count = 0;
            const bool* s = c.seq + j * c.n_seq;
            for (int64_t q = 0; q < c.n_seq && count < 2; ++q)
                if (s[q]) { owner = q; ++count; }
            ok = count == 1 && masked_swa(swa_type, n_swa, c.pos[j], next[owner]);
        }
        if (ok) o[found++] = j;
    }
    if (found < n_tokens) return py::none();
    return std::move(out);
}

// (cells used, highest used cell + 1, each sequence's last position or -1) in one pass.
py::tuple count_cells(const PosArray& cell_pos, const SeqArray& cell_seq) {
    const CellTable c = cell_table(cell_pos, cell_seq, "llm_kv_count");
    py::array_t<int64_t> seq_max((py::ssize_t)c.n_seq);
    int64_t* sm = seq_max.mutable_data();
    std::fill(sm, sm + c.n_seq, (int64_t)-1);
    int64_t used = 0, max_p1 = 0;
    for (int64_t j = 0; j < c.n_cells; ++j) {
        const int64_t p = c.pos[j];
        if (p < 0) continue;
        ++used;
        max_p1 = j + 1;
        const bool* s = c.seq + j * c.n_seq;
        for (int64_t q = 0; q < c.n_seq; ++q)
            if (s[q] && p > sm[q]) sm[q] = p;
    }
    return py::make_tuple(used, max_p1, seq_max);
}


// Remove positions [p0, p1) of sequence seq (seq < 0: of every sequence) from a cell table in
// one pass: the sequence's flag is cleared and a cell left with none is freed (pos -1, shift 0).
// Returns the lowest freed cell, or -1. The numpy version costs ~25 us in call overhead, paid
// after every verify step that rejects a draft.
// (Plain py::array arguments: a forcecast copy would take the writes.)
int64_t seq_rm_cells(py::array cell_pos, py::array cell_seq, py::array cell_shift, int64_t seq, int64_t p0,
                     int64_t p1) {
    const char* op = "llm_kv_seq_rm";
    auto writeable = [](const py::array& a, const py::dtype& dt, int nd) {
        return a.ndim() == nd && a.dtype().is(dt) && (a.flags() & py::array::c_style) && a.writeable();
    };
    const py::dtype i64 = py::dtype::of<int64_t>();
    if (!writeable(cell_pos, i64, 1) || !writeable(cell_seq, py::dtype::of<bool>(), 2) ||
        !writeable(cell_shift, i64, 1) ||
        cell_seq.shape(0) != cell_pos.shape(0) || cell_shift.shape(0) != cell_pos.shape(0))
        throw py::value_error(std::string("[") + op + "] the cell table must be writeable C-order arrays: "
                              "pos int64 [n_cells], seq bool [n_cells, n_seq], shift int64 [n_cells]");
    const int64_t n_cells = cell_pos.shape(0), n_seq = cell_seq.shape(1);
    if (seq >= n_seq) throw py::value_error(std::string("[") + op + "] seq out of range");
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = std::numeric_limits<int64_t>::max();
    int64_t* pos = (int64_t*)cell_pos.mutable_data();
    bool* flags = (bool*)cell_seq.mutable_data();
    int64_t* shift = (int64_t*)cell_shift.mutable_data();
    int64_t first = -1;
    for (int64_t j = 0; j < n_cells; ++j) {
        if (pos[j] < p0 || pos[j] >= p1) continue;  // empty cells (-1) are below p0 >= 0
        bool* s = flags + j * n_seq;
        if (seq >= 0) {
            if (!s[seq]) continue;
            s[seq] = false;
            bool any = false;
            for (int64_t q = 0; q < n_seq && !any; ++q) any = s[q];
            if (any) continue;
        } else {
            std::fill(s, s + n_seq, false);
        }
        pos[j] = -1;
        shift[j] = 0;
        if (first < 0) first = j;
    }
    return first;
}

// The inputs of one reused decode graph (n_tokens tokens of one sequence, every token an output
// row when n_tokens > 1, a unified KV cache without SWA), filled in one call per decode: the
// tokens' cells (the first empty ones from head), their entries in the cell table, and the graph's
// token, position, output-row, K/V row-index and KQ-mask inputs. The Python path (find_slot,
// KVCells.add, every GraphInput's set_input) does the same in a dozen calls; this is its
// one-sequence case (one token: a decode step; k + 1: a speculative verify), kept in step with it
// by the tests.
class KvDecodeStep {
public:
    KvDecodeStep(py::array cell_pos, py::array cell_seq, py::object tokens, py::object pos, py::object out_ids,
                 py::object k_idxs, py::object v_idxs, py::object kq_mask, int64_t v_channels, int64_t n_pad,
                 bool causal, int64_t n_tokens)
        : cell_pos_(std::move(cell_pos)), cell_seq_(std::move(cell_seq)), n_pad_(n_pad), v_channels_(v_channels),
          n_tokens_(n_tokens), causal_(causal) {
        const char* op = "KvDecodeStep";
        auto table_ok = [](const py::array& a, const py::dtype& dt, int nd) {
            return a.ndim() == nd && a.dtype().is(dt) && (a.flags() & py::array::c_style) && a.writeable();
        };
        if (!table_ok(cell_pos_, py::dtype::of<int64_t>(), 1) || !table_ok(cell_seq_, py::dtype::of<bool>(), 2) ||
            cell_seq_.shape(0) != cell_pos_.shape(0))
            throw py::value_error(std::string("[") + op + "] the cell table must be writeable C-order arrays: "
                                  "pos int64 [n_cells], seq bool [n_cells, n_seq]");
        n_cells_ = cell_pos_.shape(0);
        n_seq_ = cell_seq_.shape(1);
        if (n_pad_ <= 0) throw py::value_error(std::string("[") + op + "] n_pad must be positive");
        if (n_tokens_ < 1 || n_tokens_ > n_cells_)
            throw py::value_error(std::string("[") + op + "] n_tokens must be in [1, n_cells]");
        keep_ = {tokens, pos, out_ids, k_idxs, v_idxs, kq_mask};
        tokens_ = input(tokens, "tokens", Type::I32, n_tokens_);
        pos_ = input(pos, "pos", Type::I32, n_tokens_);
        out_ids_ = input(out_ids, "out_ids", Type::I32, n_tokens_);
        k_idxs_ = input(k_idxs, "k_idxs", Type::I64, n_tokens_);
        v_idxs_ = input(v_idxs, "v_idxs", Type::I64, n_tokens_ * (v_channels_ > 0 ? v_channels_ : 1));
        mask_ = to_tensor(kq_mask, op, "kq_mask", true);
        if ((mask_->type != Type::F16 && mask_->type != Type::F32) || !mask_->is_contiguous() ||
            mask_->nrows() != n_tokens_ || mask_->ne[0] > n_cells_)
            throw py::value_error(std::string("[") + op + "] kq_mask must be a contiguous f16/f32 [n_kv <= n_cells, " +
                                  std::to_string(n_tokens_) + "] tensor: " + describe(mask_));
        cells_.resize((size_t)n_tokens_);
    }

    // One token: its cell (its inputs filled, its table entry written), or -1 when this graph
    // cannot take it: no empty cell, or the cell would change the attended width n_kv.
    // Nothing is written then. max_p1: the highest used cell + 1 before this token.
    int64_t step(int32_t token, int32_t pos, int32_t seq, int64_t head, int64_t max_p1) {
        if (n_tokens_ != 1) throw py::value_error("[KvDecodeStep] step takes one token; use step_n");
        return fill(&token, pos, seq, head, max_p1) ? cells_[0] : -1;
    }

    // n_tokens tokens at positions pos0.. : (the last token's cell, the highest cell), or None
    // (nothing written) as step. The cells are find_slot's: the first empty ones from head.
    py::object step_n(const py::list& tokens, int32_t pos0, int32_t seq, int64_t head, int64_t max_p1) {
        if ((int64_t)tokens.size() != n_tokens_)
            throw py::value_error("[KvDecodeStep] step_n takes " + std::to_string(n_tokens_) + " tokens, got " +
                                  std::to_string(tokens.size()));
        thread_local std::vector<int32_t> ids;
        ids.resize((size_t)n_tokens_);
        for (int64_t i = 0; i < n_tokens_; ++i) ids[i] = tokens[(size_t)i].cast<int32_t>();
        if (!fill(ids.data(), pos0, seq, head, max_p1)) return py::none();
        return py::make_tuple(cells_.back(), *std::max_element(cells_.begin(), cells_.end()));
    }

private:
    bool fill(const int32_t* tokens, int32_t pos0, int32_t seq, int64_t head, int64_t max_p1) {
        if (seq < 0 || seq >= n_seq_) throw py::value_error("[KvDecodeStep] seq out of range");
        int64_t* cpos = (int64_t*)cell_pos_.mutable_data();
        bool* cseq = (bool*)cell_seq_.mutable_data();
        if (head < 0 || head >= n_cells_) head = 0;
        int64_t found = 0, top = -1;
        for (int64_t k = 0; k < n_cells_ && found < n_tokens_; ++k) {
            const int64_t j = head + k < n_cells_ ? head + k : head + k - n_cells_;
            if (cpos[j] < 0) {
                cells_[found++] = j;
                top = std::max(top, j);
            }
        }
        if (found < n_tokens_) return false;
        const int64_t used_p1 = std::max(max_p1, top + 1);
        const int64_t n_kv = std::min(n_cells_, std::max(n_pad_, (used_p1 + n_pad_ - 1) / n_pad_ * n_pad_));
        if (n_kv != mask_->ne[0]) return false;
        for (int64_t i = 0; i < n_tokens_; ++i) {
            cpos[cells_[i]] = pos0 + i;
            cseq[cells_[i] * n_seq_ + seq] = true;
        }
        if (void* d = data(tokens_)) std::copy(tokens, tokens + n_tokens_, (int32_t*)d);
        if (void* d = data(pos_))
            for (int64_t i = 0; i < n_tokens_; ++i) ((int32_t*)d)[i] = pos0 + (int32_t)i;
        if (void* d = data(out_ids_))
            for (int64_t i = 0; i < n_tokens_; ++i) ((int32_t*)d)[i] = (int32_t)i;
        if (void* d = data(k_idxs_)) std::copy(cells_.begin(), cells_.end(), (int64_t*)d);
        if (void* d = data(v_idxs_)) {
            int64_t* v = (int64_t*)d;
            if (v_channels_ <= 0) std::copy(cells_.begin(), cells_.end(), v);
            else  // transposed V: channel j of cell c at j * n_cells + c, token-major
                for (int64_t i = 0; i < n_tokens_; ++i)
                    for (int64_t j = 0; j < v_channels_; ++j) v[i * v_channels_ + j] = cells_[i] + j * n_cells_;
        }
        if (void* d = data(mask_); d && n_seq_ == 1 && mask_->type == Type::F16) {
            for (int64_t i = 0; i < n_tokens_; ++i)
                mask_row_f16_one_seq(cpos, cseq, n_kv, causal_ ? pos0 + i : kHidden - 1, (uint16_t*)d + i * n_kv);
        } else if (d) {
            thread_local std::vector<int64_t> key_pos;
            if (key_pos.size() < (size_t)n_kv) key_pos.resize((size_t)n_kv);
            visible_positions(cpos, cseq, n_seq_, seq, n_kv, key_pos.data());
            for (int64_t i = 0; i < n_tokens_; ++i) {
                const int64_t p = pos0 + i;
                if (mask_->type == Type::F16) {
                    mask_row_f16(key_pos.data(), n_kv, p, causal_, (uint16_t*)d + i * n_kv);
                } else {
                    float* row = (float*)d + i * n_kv;
                    const int64_t limit = causal_ ? p : kHidden - 1;
                    const float neg_inf = -std::numeric_limits<float>::infinity();
                    for (int64_t j = 0; j < n_kv; ++j) row[j] = key_pos[j] <= limit ? 0.0f : neg_inf;
                }
            }
        }
        return true;
    }

    // An input tensor (None: the graph has none), checked for its type and element count.
    Tensor* input(const py::object& obj, const char* what, Type type, int64_t n) {
        Tensor* t = to_tensor(obj, "KvDecodeStep", what);
        if (t && (t->type != type || t->nelements() != n || !t->is_contiguous()))
            throw py::value_error(std::string("[KvDecodeStep] ") + what + " must be a contiguous " +
                                  type_name(type) + " tensor of " + std::to_string(n) + " elements: " + describe(t));
        if (t && (t->ctx ? t->ctx->backend() : cpu_backend()) != cpu_backend())
            throw py::value_error(std::string("[KvDecodeStep] ") + what + " must live in host memory");
        return t;
    }
    // Storage of an input, or nullptr where the planner left it out (nothing reads it).
    static void* data(Tensor* t) {
        if (!t) return nullptr;
        if (!t->data && t->view_src && t->view_src->data) t->data = (char*)t->view_src->data + t->view_offs;
        return t->data;
    }

    py::array cell_pos_, cell_seq_;
    std::vector<py::object> keep_;  // the tensors stay alive as long as this object
    Tensor *tokens_ = nullptr, *pos_ = nullptr, *out_ids_ = nullptr, *k_idxs_ = nullptr, *v_idxs_ = nullptr,
           *mask_ = nullptr;
    int64_t n_cells_ = 0, n_seq_ = 0, n_pad_ = 256, v_channels_ = 0, n_tokens_ = 1;
    bool causal_ = true;
    std::vector<int64_t> cells_;  // the cells of the last fill, token order
};

}  // namespace

void bind_llm_host(py::module_& m) {
    m.def("llm_kv_count", &count_cells, py::arg("cell_pos"), py::arg("cell_seq"),
          "(cells used, highest used cell + 1, int64 [n_seq] last position of each sequence or -1) "
          "of a KV cell table, in one pass.");
    m.def("llm_kv_seq_rm", &seq_rm_cells, py::arg("cell_pos"), py::arg("cell_seq"), py::arg("cell_shift"),
          py::arg("seq"), py::arg("p0"), py::arg("p1"),
          "Remove positions [p0, p1) (p0 < 0: from 0, p1 < 0: to the end) of sequence seq (< 0: every "
          "sequence) from a KV cell table in place; cells left without a sequence are freed (pos -1, "
          "shift 0). Returns the lowest freed cell or -1.");
    m.def("llm_fill_kq_mask", &fill_kq_mask, py::arg("dst"), py::arg("cell_pos"), py::arg("cell_seq"),
          py::arg("q_pos"), py::arg("q_seq"), py::arg("causal") = true, py::arg("swa_type") = 0,
          py::arg("n_swa") = 0,
          "Fill the KQ mask dst [n_kv, T, 1, 1] (f16 or f32, host memory) from a KV cell table: "
          "cell_pos int64 [n_cells] (-1 empty), cell_seq bool [n_cells, n_seq]; q_pos, q_seq int32 [T]. "
          "0 where token i may attend cell j (cell holds its sequence; causal: not after it; SWA: "
          "inside its window), -inf elsewhere.");
    m.def("llm_kv_find_slot", &find_slot, py::arg("cell_pos"), py::arg("cell_seq"), py::arg("head"),
          py::arg("n_tokens"), py::arg("swa_type") = 0, py::arg("n_swa") = 0,
          py::arg("seq_next_pos") = py::none(),
          "The first n_tokens usable cells (int64) scanning from head with wrap-around, or None. "
          "Usable: empty, or (SWA) owned by one sequence s and outside the window of position "
          "seq_next_pos[s].");
    py::class_<KvDecodeStep>(m, "KvDecodeStep",
                             "The inputs of one reused decode graph of n_tokens tokens of one sequence (all of "
                             "them output rows) over a unified KV cache without SWA, filled in one call per "
                             "decode (the Context's decode and verify fast paths).")
        .def(py::init<py::array, py::array, py::object, py::object, py::object, py::object, py::object,
                      py::object, int64_t, int64_t, bool, int64_t>(),
             py::arg("cell_pos"), py::arg("cell_seq"), py::arg("tokens"), py::arg("pos"), py::arg("out_ids"),
             py::arg("k_idxs"), py::arg("v_idxs"), py::arg("kq_mask"), py::arg("v_channels") = 0,
             py::arg("n_pad") = 256, py::arg("causal") = true, py::arg("n_tokens") = 1)
        .def("step", &KvDecodeStep::step, py::arg("token"), py::arg("pos"), py::arg("seq"), py::arg("head"),
             py::arg("max_p1"),
             "Take the first empty cell from head for the token at position pos of sequence seq: write it "
             "into the cell table and fill the graph's inputs; returns the cell, or -1 (nothing written) "
             "when no cell is empty or the cell would change the mask width n_kv (max_p1: highest used "
             "cell + 1 before the token).")
        .def("step_n", &KvDecodeStep::step_n, py::arg("tokens"), py::arg("pos0"), py::arg("seq"), py::arg("head"),
             py::arg("max_p1"),
             "step for the n_tokens tokens (a list of ints) at positions pos0..: the first n_tokens empty cells "
             "from head; returns (the last token's cell, the highest cell), or None (nothing written) as step.");
}

}  // namespace pyggml::python
