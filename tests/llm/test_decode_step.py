"""decode_greedy's one-token shortcut (Context._decode_step with the C++ KvDecodeStep filler)
against the general path (fast_decode=False): the same ids, the same logits bit for bit and the
same cell table after long runs with sequence edits, several sequences, both attention paths
and both cache types; the shortcut is really taken; every case it cannot take (bad ids, a full
context, a pending K shift, a changed n_kv) still behaves as the general path. The filler
itself against find_slot and the numpy mask rule on random cell tables."""
import numpy as np
import pytest

import pyggml as gg
from llama_ref import ArrayModel, forward, make_hparams, make_weights
from test_host_fill import numpy_mask, random_table
from util import assert_close

from pyggml.llm import Context
from pyggml.llm.inputs import UBatch


@pytest.fixture(scope="module")
def model():
    hp = make_hparams(arch="llama", n_head=4, n_head_kv=2, n_layer=2)
    w = make_weights(hp, seed=5)
    return hp, w, ArrayModel(hp, w)


class CountingFill:
    """Wraps a KvDecodeStep to count the shortcut's steps."""

    def __init__(self, fill):
        self.fill, self.n = fill, 0

    def step(self, *a):
        cell = self.fill.step(*a)
        self.n += cell >= 0
        return cell


def run(model, fast, script, **kw):
    """Greedy decoding driven by `script`: a list of ("tok", seq, n) / ("rm", seq, p0, p1).
    Returns the ids, the logits after each
    block, the final cell table and how many steps took the shortcut."""
    ctx = Context(model, **kw)
    ctx.fast_decode = fast
    last, counters = {}, []

    def wrap():
        if ctx._step is not None and not isinstance(ctx._step.fill, CountingFill):
            ctx._step.fill = CountingFill(ctx._step.fill)
            counters.append(ctx._step.fill)

    ids, logits = [], []
    for op, *args in script:
        if op == "tok":
            seq, n = args
            tok = last.get(seq, [3, 1, 4, 1, 5, 9][: 2 + seq])
            tok = ctx.decode_greedy(tok if isinstance(tok, list) else [tok], seq_id=seq)
            for _ in range(n):
                wrap()
                tok = ctx.decode_greedy([tok], seq_id=seq)
                ids.append(tok)
            last[seq] = tok
            logits.append(np.array(ctx.logits))
        elif op == "rm":
            ctx.seq_rm(*args)
    n_fast = sum(c.n for c in counters)
    c = ctx.memory.cells
    table = (c.pos.copy(), c.seq.copy(), ctx.memory.head, c.used(), c.used_max_p1(),
             [c.seq_pos_max(s) for s in range(ctx.n_seq_max)])
    return ids, logits, table, n_fast, ctx


def assert_same_runs(a, b):
    ids_a, lg_a, tab_a = a[:3]
    ids_b, lg_b, tab_b = b[:3]
    assert ids_a == ids_b
    for x, y in zip(lg_a, lg_b):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(tab_a, tab_b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
@pytest.mark.parametrize("cache", [gg.F16, gg.F32], ids=["f16", "f32"])
def test_shortcut_equals_the_general_path_across_edits(model, flash_attn, cache):
    # crosses the 256-cell n_kv boundary, removes a middle range (holes the slot search
    # refills), truncates, and runs two sequences through one cache
    script = [("tok", 0, 40), ("rm", 0, 10, 25), ("tok", 0, 30), ("tok", 1, 20), ("tok", 0, 220),
              ("rm", 0, 200, -1), ("tok", 0, 12), ("rm", 1, -1, -1), ("tok", 1, 5)]
    kw = dict(n_ctx=600, n_threads=2, n_seq_max=2, flash_attn=flash_attn, type_k=cache, type_v=cache)
    fast = run(model[2], True, script, **kw)
    slow = run(model[2], False, script, **kw)
    assert_same_runs(fast, slow)
    assert slow[3] == 0
    assert fast[3] > 0


def test_shortcut_is_taken_and_matches_the_reference(model):
    hp, w, m = model
    ctx = Context(m, n_ctx=64, n_threads=1)
    prompt = [7, 3, 11]
    tok = ctx.decode_greedy(prompt)
    seq = prompt + [tok]
    assert ctx._step is None           # a prompt does not arm the shortcut
    tok = ctx.decode_greedy([tok])     # the first one-token step does
    seq.append(tok)
    builds = ctx.timings["n_graph_build"]
    ctx._step.fill = counting = CountingFill(ctx._step.fill)
    for _ in range(19):
        tok = ctx.decode_greedy([tok])
        seq.append(tok)
    assert counting.n == 19
    assert ctx.timings["n_graph_build"] == builds
    ref = forward(hp, w, seq[:-1])
    assert_close(ctx.logits[0], ref[-1], 1e-5, "shortcut logits")
    assert seq[1 + len(prompt):] == [int(np.argmax(r)) for r in ref[len(prompt):]]


def test_cases_the_shortcut_leaves_to_the_general_path(model):
    m = model[2]
    ctx = Context(m, n_ctx=40, n_threads=1)
    ref = Context(m, n_ctx=40, n_threads=1)
    ref.fast_decode = False
    for c in (ctx, ref):
        c.tok = c.decode_greedy([1, 2, 3])
        c.tok = c.decode_greedy([c.tok])
    assert ctx._step is not None
    with pytest.raises(ValueError, match="out of range"):
        ctx.decode_greedy([m.hparams.n_vocab])
    with pytest.raises(TypeError):
        ctx.decode_greedy([1], seq_id=1.0)
    # a pending K shift: the general path re-ropes first
    for c in (ctx, ref):
        c.seq_add(0, 0, -1, 2)
        c.tok = c.decode_greedy([c.tok])
        for _ in range(30):
            c.tok = c.decode_greedy([c.tok])
    np.testing.assert_array_equal(ctx.logits, ref.logits)
    assert ctx.tok == ref.tok
    while ctx.n_past() < ctx.n_ctx:
        ctx.tok = ctx.decode_greedy([ctx.tok])
    with pytest.raises(ValueError, match="n_ctx"):   # every position up to n_ctx is used
        ctx.decode_greedy([ctx.tok])
    # numpy ids and a stale shortcut after clear_graphs take the general path
    ctx.seq_rm(0, 30, -1)
    ref.seq_rm(0, 30, -1)
    ctx.clear_graphs()
    a = ctx.decode_greedy(np.array([5], np.int32))
    b = ref.decode_greedy([5])
    assert a == b
    np.testing.assert_array_equal(ctx.logits, ref.logits)


def test_shortcut_keeps_the_cache_full_error(model):
    # two sequences fill every cell (n_ctx is the total) while each is below n_ctx: the
    # shortcut finds no empty cell and the general path refuses the token, nothing changed
    ctx = Context(model[2], n_ctx=1024, n_threads=1, n_seq_max=2)
    ctx.decode_greedy([1 + i % 90 for i in range(600)], seq_id=0)
    tok = ctx.decode_greedy([5, 6], seq_id=1)
    while ctx.memory.cells.used() < ctx.memory.size:
        tok = ctx.decode_greedy([tok], seq_id=1)
    assert ctx._step is not None
    before = ctx.memory.cells.pos.copy()
    with pytest.raises(ValueError, match="no room"):
        ctx.decode_greedy([tok], seq_id=1)
    np.testing.assert_array_equal(ctx.memory.cells.pos, before)
    ctx.seq_rm(0, 100, -1)             # room again: decoding goes on
    assert isinstance(ctx.decode_greedy([tok], seq_id=1), int)


def make_inputs(gctx, n_kv, v_channels, mask_type):
    tokens = gctx.new_tensor(gg.I32, [1])
    pos = gctx.new_tensor(gg.I32, [1])
    out = gctx.new_tensor(gg.I32, [1])
    k = gctx.new_tensor(gg.I64, [1])
    v = gctx.new_tensor(gg.I64, [max(v_channels, 1)])
    mask = gctx.new_tensor(mask_type, [n_kv, 1, 1, 1])
    for t in (tokens, pos, out, k, v, mask):
        t.numpy()[...] = 7
    return tokens, pos, out, k, v, mask


@pytest.mark.parametrize("mask_type", [gg.F16, gg.F32], ids=["f16", "f32"])
@pytest.mark.parametrize("v_channels", [0, 6])
def test_filler_matches_find_slot_and_the_mask_rule(mask_type, v_channels):
    from pyggml.llm.kv_cache import KVCache
    rng = np.random.default_rng(11 + v_channels)
    gctx = gg.Context(1 << 20)
    for trial in range(30):
        n_cells, n_seq = int(rng.choice([256, 300, 600])), int(rng.integers(1, 4))
        pos, seq = random_table(rng, n_cells, n_seq, fill=float(rng.uniform(0.2, 0.95)))
        kv = KVCache(n_layer=1, n_embd_k_gqa=8, n_embd_v_gqa=8, head_dim_k=4, head_dim_v=4,
                     n_head_kv=2, size=n_cells, n_seq_max=n_seq)
        kv.cells.pos[:], kv.cells.seq[:] = pos, seq
        kv.cells.changed()
        head = int(rng.integers(0, n_cells))
        s, p = int(rng.integers(0, n_seq)), int(rng.integers(0, 3 * n_cells))
        max_p1 = kv.cells.used_max_p1()
        kv.head = head
        ub = UBatch(pos=np.array([p], np.int32), seq_id=np.array([s], np.int32),
                    output=np.ones(1, bool), token=np.array([9], np.int32))
        slot = kv.find_slot(ub)
        n_kv_if = None
        if slot is not None:
            cell = int(slot.idxs[0])
            mp = max(max_p1, cell + 1)
            n_kv_if = min(n_cells, max(256, -(-mp // 256) * 256))
        # a mask of the width the token gives, or (every third trial) a wrong width
        n_kv = n_kv_if if n_kv_if is not None else 256
        wrong = trial % 3 == 0 and n_kv < n_cells
        if wrong:
            n_kv = n_kv + 1 if n_kv + 1 <= n_cells else n_kv - 1
        tensors = make_inputs(gctx, n_kv, v_channels, mask_type)
        table_pos, table_seq = kv.cells.pos.copy(), kv.cells.seq.copy()
        f = gg._core.KvDecodeStep(kv.cells.pos, kv.cells.seq, *tensors, v_channels, 256, True)
        # the caller applies find_slot's refill-from-0 rule to head
        got = f.step(9, p, s, 0 if head > kv.cells.used() + 2 else head, max_p1)
        if slot is None or wrong:
            assert got == -1
            np.testing.assert_array_equal(kv.cells.pos, table_pos)
            np.testing.assert_array_equal(kv.cells.seq, table_seq)
            assert all(np.all(t.numpy() == 7) for t in tensors)
            continue
        assert got == cell
        assert kv.cells.pos[cell] == p and kv.cells.seq[cell, s]
        exp_pos, exp_seq = table_pos.copy(), table_seq.copy()
        exp_pos[cell], exp_seq[cell, s] = p, True
        np.testing.assert_array_equal(kv.cells.pos, exp_pos)
        np.testing.assert_array_equal(kv.cells.seq, exp_seq)
        tokens, tpos, out, k, v, mask = tensors
        assert tokens.numpy()[0] == 9 and tpos.numpy()[0] == p and out.numpy()[0] == 0
        assert k.numpy()[0] == cell
        want_v = [cell] if v_channels == 0 else [cell + j * n_cells for j in range(v_channels)]
        np.testing.assert_array_equal(v.numpy(), want_v)
        ref = numpy_mask(exp_pos, exp_seq, [p], [s], n_kv, True, 0, 0)
        np.testing.assert_array_equal(mask.numpy().astype(np.float32).reshape(1, -1), ref)


def test_filler_rejects_bad_tables_and_inputs():
    gctx = gg.Context(1 << 20)
    pos = np.full(300, -1, np.int64)
    seq = np.zeros((300, 1), bool)
    tensors = make_inputs(gctx, 256, 0, gg.F16)
    with pytest.raises(ValueError, match="cell table"):
        gg._core.KvDecodeStep(pos.astype(np.int32), seq, *tensors)
    with pytest.raises(ValueError, match="cell table"):
        gg._core.KvDecodeStep(pos, seq[:10], *tensors)
    ro = pos.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="cell table"):
        gg._core.KvDecodeStep(ro, seq, *tensors)
    bad = list(tensors)
    bad[3] = gctx.new_tensor(gg.I32, [1])
    with pytest.raises(ValueError, match="k_idxs"):
        gg._core.KvDecodeStep(pos, seq, *bad)
    bad = list(tensors)
    bad[5] = gctx.new_tensor(gg.F16, [400, 1])
    with pytest.raises(ValueError, match="kq_mask"):
        gg._core.KvDecodeStep(pos, seq, *bad)
    with pytest.raises(TypeError, match="Tensor"):
        gg._core.KvDecodeStep(pos, seq, np.zeros(1), *tensors[1:])
    f = gg._core.KvDecodeStep(pos, seq, *tensors)
    with pytest.raises(ValueError, match="seq"):
        f.step(1, 0, 3, 0, 0)


class CountingRows:
    """Wraps a KvDecodeStep to count decode_greedy_rows' shortcut fills."""

    def __init__(self, fill):
        self.fill, self.n = fill, 0

    def step_n(self, *a):
        cells = self.fill.step_n(*a)
        self.n += cells is not None
        return cells


def verify_run(model, fast, rounds, seed, **kw):
    """A speculative decoder's target calls: a plain step, then a verify of 2..5 ids
    (decode_greedy_rows), then the rejected tail removed (now and then a hole too); every
    round's ids and logits rows, the final cell table and the shortcut fills."""
    ctx = Context(model, **kw)
    ctx.fast_decode = fast
    ctx.MAX_GRAPHS = 12
    rng = np.random.default_rng(seed)
    n_vocab = model.hparams.n_vocab
    tok = ctx.decode_greedy([3, 1, 4, 1, 5])
    got, counters = [], []
    for r in range(rounds):
        if r == rounds // 2:       # a new text: n_kv back to 256, the graphs of both stay
            ctx.reset()
            tok = ctx.decode_greedy([2, 7, 1, 8])
        for st in (o for steps in ctx._row_steps.values() for o in steps):
            if not isinstance(st.fill, CountingRows):
                st.fill = CountingRows(st.fill)
                counters.append(st.fill)
        tok = ctx.decode_greedy([tok])
        if rng.random() < 0.1:
            # a hole of 4 cells before head, which stays past it: find_slot's refill rule
            # (from 0 only with more than 2 n free cells before head) decides the cells
            ctx.seq_rm(0, 5, 9)
            ctx.memory.head = ctx.memory.cells.used_max_p1() - 1
        p0 = ctx.n_past(0)
        batch = [tok] + [int(t) for t in rng.integers(0, n_vocab, int(rng.integers(1, 5)))]
        ids = ctx.decode_greedy_rows(batch)
        got.append((list(ids), np.array(ctx.logits)))
        keep = int(rng.integers(1, len(batch) + 1))
        ctx.seq_rm(0, p0 + keep, -1)
        tok = int(ids[keep - 1])
    c = ctx.memory.cells
    table = (c.pos.copy(), c.seq.copy(), ctx.memory.head, c.used(), c.used_max_p1(),
             c.seq_pos_max(0))
    return got, table, sum(c.n for c in counters)


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
@pytest.mark.parametrize("cache", [gg.F16, gg.F32], ids=["f16", "f32"])
def test_verify_shortcut_equals_the_general_path(model, flash_attn, cache):
    # verifies of every width with partial acceptance, across the 256-cell n_kv boundary:
    # the shortcut's ids, logits rows and cell table are the general path's bit for bit
    kw = dict(n_ctx=600, n_threads=2, flash_attn=flash_attn, type_k=cache, type_v=cache)
    fast = verify_run(model[2], True, 220, 3, **kw)
    slow = verify_run(model[2], False, 220, 3, **kw)
    # the general path runs once per width and graph (n_kv 256 and 512), across texts
    assert slow[2] == 0 and fast[2] >= 220 - 2 * 4
    for (ids_a, lg_a), (ids_b, lg_b) in zip(fast[0], slow[0]):
        assert ids_a == ids_b
        np.testing.assert_array_equal(lg_a, lg_b)
        assert ids_a == [int(np.argmax(r)) for r in lg_a]
    for x, y in zip(fast[1], slow[1]):
        np.testing.assert_array_equal(x, y)
    assert fast[1][5] > 256


def test_verify_shortcut_leaves_bad_ids_and_a_full_context_to_the_general_path(model):
    m = model[2]
    ctx = Context(m, n_ctx=24, n_threads=1)
    tok = ctx.decode_greedy([1, 2, 3])
    ctx.decode_greedy_rows([tok, 5, 6])
    assert 3 in ctx._row_steps
    with pytest.raises(ValueError, match="out of range"):
        ctx.decode_greedy_rows([1, m.hparams.n_vocab, 2])
    while ctx.n_past() < ctx.n_ctx - 2:
        tok = ctx.decode_greedy([tok])
    with pytest.raises(ValueError, match="n_ctx"):
        ctx.decode_greedy_rows([tok, 5, 6])
    assert ctx.n_past() == ctx.n_ctx - 2


def make_row_inputs(gctx, n, n_kv, v_channels, mask_type):
    tensors = [gctx.new_tensor(gg.I32, [n]), gctx.new_tensor(gg.I32, [n]),
               gctx.new_tensor(gg.I32, [n]), gctx.new_tensor(gg.I64, [n]),
               gctx.new_tensor(gg.I64, [n * max(v_channels, 1)]),
               gctx.new_tensor(mask_type, [n_kv, n, 1, 1])]
    for t in tensors:
        t.numpy()[...] = 7
    return tensors


@pytest.mark.parametrize("mask_type", [gg.F16, gg.F32], ids=["f16", "f32"])
@pytest.mark.parametrize("v_channels", [0, 6])
def test_row_filler_matches_find_slot_and_the_mask_rule(mask_type, v_channels):
    from pyggml.llm.kv_cache import KVCache
    rng = np.random.default_rng(23 + v_channels)
    gctx = gg.Context(1 << 22)
    for trial in range(40):
        n_cells, n_seq = int(rng.choice([256, 300, 600])), int(rng.integers(1, 4))
        n = int(rng.integers(2, 7))
        pos, seq = random_table(rng, n_cells, n_seq, fill=float(rng.uniform(0.2, 0.99)))
        kv = KVCache(n_layer=1, n_embd_k_gqa=8, n_embd_v_gqa=8, head_dim_k=4, head_dim_v=4,
                     n_head_kv=2, size=n_cells, n_seq_max=n_seq)
        kv.cells.pos[:], kv.cells.seq[:] = pos, seq
        kv.cells.changed()
        kv.head = int(rng.integers(0, n_cells))
        s, p = int(rng.integers(0, n_seq)), int(rng.integers(0, 3 * n_cells))
        max_p1 = kv.cells.used_max_p1()
        ub = UBatch(pos=np.arange(p, p + n, dtype=np.int32), seq_id=np.full(n, s, np.int32),
                    output=np.ones(n, bool), token=np.arange(9, 9 + n, dtype=np.int32))
        slot = kv.find_slot(ub)
        n_kv = 256
        if slot is not None:
            mp = max(max_p1, int(slot.idxs.max()) + 1)
            n_kv = min(n_cells, max(256, -(-mp // 256) * 256))
        wrong = trial % 3 == 0 and n_kv < n_cells
        if wrong:
            n_kv += 1
        tensors = make_row_inputs(gctx, n, n_kv, v_channels, mask_type)
        table_pos, table_seq = kv.cells.pos.copy(), kv.cells.seq.copy()
        f = gg._core.KvDecodeStep(kv.cells.pos, kv.cells.seq, *tensors, v_channels, 256, True, n)
        head = 0 if kv.head > kv.cells.used() + 2 * n else kv.head   # find_slot's refill rule
        got = f.step_n(list(range(9, 9 + n)), p, s, head, max_p1)
        if slot is None or wrong:
            assert got is None
            np.testing.assert_array_equal(kv.cells.pos, table_pos)
            np.testing.assert_array_equal(kv.cells.seq, table_seq)
            assert all(np.all(t.numpy() == 7) for t in tensors)
            continue
        cells = [int(c) for c in slot.idxs]
        assert got == (cells[-1], max(cells))
        exp_pos, exp_seq = table_pos.copy(), table_seq.copy()
        exp_pos[cells], exp_seq[cells, s] = np.arange(p, p + n), True
        np.testing.assert_array_equal(kv.cells.pos, exp_pos)
        np.testing.assert_array_equal(kv.cells.seq, exp_seq)
        tokens, tpos, out, k, v, mask = tensors
        np.testing.assert_array_equal(tokens.numpy(), np.arange(9, 9 + n))
        np.testing.assert_array_equal(tpos.numpy(), np.arange(p, p + n))
        np.testing.assert_array_equal(out.numpy(), np.arange(n))
        np.testing.assert_array_equal(k.numpy(), cells)
        want_v = cells if v_channels == 0 else \
            [c + j * n_cells for c in cells for j in range(v_channels)]
        np.testing.assert_array_equal(v.numpy(), want_v)
        ref = numpy_mask(exp_pos, exp_seq, np.arange(p, p + n), [s] * n, n_kv, True, 0, 0)
        np.testing.assert_array_equal(mask.numpy().astype(np.float32).reshape(n, -1), ref)


def test_row_filler_refuses_a_wrong_token_count():
    gctx = gg.Context(1 << 20)
    pos, seq = np.full(300, -1, np.int64), np.zeros((300, 1), bool)
    f = gg._core.KvDecodeStep(pos, seq, *make_row_inputs(gctx, 3, 256, 0, gg.F16), 0, 256, True, 3)
    with pytest.raises(ValueError, match="takes 3 tokens"):
        f.step_n([1, 2], 0, 0, 0, 0)
    with pytest.raises(ValueError, match="one token"):
        f.step(1, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="tokens must be .* of 4 elements"):
        gg._core.KvDecodeStep(pos, seq, *make_row_inputs(gctx, 3, 256, 0, gg.F16), 0, 256, True, 4)
    with pytest.raises(ValueError, match="n_tokens"):
        gg._core.KvDecodeStep(pos, seq, *make_row_inputs(gctx, 3, 256, 0, gg.F16), 0, 256, True, 0)
