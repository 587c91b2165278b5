"""The EAGLE3 and DFlash-family draft graphs against a float64 numpy forward written here
from their definitions: DFlash KV injection and the non-causal block (plain, per-layer sliding
window, after a rollback), DSpark's chained Markov bias and confidences, DFlash2's block
convolutions and selector lattice, EAGLE3's encoder and its decoder chain with d2t. Plus the
drafters' refusals (vocabulary, tapped layers, kinds) and the n_max clamp."""
import numpy as np
import pytest

import pyggml as gg
from pyggml.llm import Model
from pyggml.llm.context import Context
from pyggml.llm.context_draft import DraftContext
from pyggml.llm.speculative.dflash import DFlashDrafter
from pyggml.llm.speculative.eagle3 import Eagle3Drafter
from pyggml.llm.tiny import write_tiny_dflash, write_tiny_eagle3
from util import tiny_qwen3_target

MAX_NMSE = 1e-6
DRAFTS = {
    "dflash": dict(kind="dflash", target_layers=(1, 3)),
    "dflash_swa": dict(kind="dflash", n_layer=2, target_layers=(0, 2), swa=(4, (True, False))),
    "dspark": dict(kind="dspark", target_layers=(1, 2, 3), block_size=5),
    "dspark_bonus": dict(kind="dspark", sample_from_anchor=False),
    "dflash2": dict(kind="dflash2", block_size=5, n_layer=2),
    "dflash_extras": dict(kind="dflash", n_layer=2, extras=True),
    "dflash2_extras": dict(kind="dflash2", block_size=5, extras=True),
    "eagle3": dict(target_layers=(0, 1, 3)),
    "eagle3_d2t": dict(target_layers=(1, 2, 3), n_draft_vocab=97, norm_before_fc=True,
                       norm_before_residual=True),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("draft_models")
    out = {"target": tiny_qwen3_target(d, "target.gguf", n_head=4, n_head_kv=2)}
    for name, kw in DRAFTS.items():
        writer = write_tiny_eagle3 if name.startswith("eagle3") else write_tiny_dflash
        out[name] = writer(d / f"{name}.gguf", **kw)
    return out


def W(m, name):
    t = m.get(name, required=False)
    return None if t is None else np.asarray(t.numpy()).astype(np.float64)


def nmse(a, b):
    ok = np.isfinite(b)
    assert np.array_equal(ok, np.isfinite(a))
    return float(np.mean((a[ok] - b[ok]) ** 2) / np.mean(b[ok] ** 2))


def rms(x, w=None, eps=1e-6):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def rope(x, pos, base, neox):
    """x (T, heads, d): NEOX rotates (i, i + d/2), NORM rotates (2i, 2i + 1)."""
    d = x.shape[-1]
    theta = np.asarray(pos, np.float64)[:, None] * base ** (-2.0 * np.arange(d // 2) / d)
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    out = x.copy()
    if neox:
        a, b = x[..., : d // 2], x[..., d // 2:]
        out[..., : d // 2], out[..., d // 2:] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
    return out


def attend(q, k, v, allowed, scale=None, sinks=None):
    """q (T, H, d); k, v (S, Hkv, d); allowed (T, S); a sink adds exp(sink) to the softmax's
    denominator of its head."""
    H, Hkv, d = q.shape[1], k.shape[1], q.shape[2]
    scale = 1 / np.sqrt(d) if scale is None else scale
    out = np.zeros_like(q)
    for h in range(H):
        kh, vh = k[:, h // (H // Hkv)], v[:, h // (H // Hkv)]
        s = np.where(allowed, q[:, h] @ kh.T * scale, -np.inf)
        mx = s.max(1, keepdims=True)
        if sinks is not None:
            mx = np.maximum(mx, sinks[h])
        p = np.exp(s - mx)
        den = p.sum(1, keepdims=True) + (0 if sinks is None else np.exp(sinks[h] - mx))
        out[:, h] = (p / den) @ vh
    return out.reshape(len(q), -1)


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1 + np.exp(-x))


# ---- DFlash family ----------------------------------------------------------------------------
class DFlashRef:
    def __init__(self, m, tgt):
        self.m, self.hp = m, m.hparams_draft
        self.E = W(tgt, "token_embd.weight")
        self.out = W(tgt, "output.weight")
        self.cache = [dict() for _ in range(self.hp.n_layer)]   # pos -> (k, v) per layer

    def L(self, il, n):
        return W(self.m, f"blk.{il}.{n}")

    def kv(self, il, h, pos):
        hp = self.hp
        k = (h @ self.L(il, "attn_k.weight").T).reshape(len(h), hp.n_head_kv, -1)
        wv = self.L(il, "attn_v.weight")
        v = rms(k, None, hp.rms_eps) if wv is None else (h @ wv.T).reshape(len(h), hp.n_head_kv, -1)
        k = rope(rms(k, self.L(il, "attn_k_norm.weight"), hp.rms_eps), pos, hp.rope_freq_base, True)
        return k, v

    def inject(self, feats, pos):
        g = feats @ W(self.m, "fc.weight").T
        if W(self.m, "fc.scale") is not None:
            g = g * W(self.m, "fc.scale")
        g = rms(g, W(self.m, "enc.output_norm.weight"), self.hp.rms_eps)
        for il in range(self.hp.n_layer):
            k, v = self.kv(il, g, pos)
            for i, p in enumerate(pos):
                self.cache[il][int(p)] = (k[i], v[i])

    def rollback(self, p0):
        for c in self.cache:
            for p in [p for p in c if p >= p0]:
                del c[p]

    def conv(self, h, base, proj_dyn, side):
        hp = self.hp
        K, g = hp.conv_kernel, hp.conv_group
        T, D = h.shape
        dyn = proj_dyn.reshape(T, 2, K, D // g)
        out = np.zeros_like(h)
        for t in range(T):
            for tap in range(min(K, T)):
                if t - tap >= 0:
                    wgt = np.repeat(dyn[t, side, tap], g) + base[side, tap]
                    out[t] += wgt * h[t - tap]
        return out

    def block(self, tokens, pos):
        hp, T = self.hp, len(tokens)
        x = self.E[tokens] * (hp.embedding_scale or 1.0)
        for il in range(hp.n_layer):
            h = rms(x, self.L(il, "attn_norm.weight"), hp.rms_eps)
            dyn = None
            if self.L(il, "attn_conv_proj.weight") is not None:
                dyn = h @ self.L(il, "attn_conv_proj.weight").T
                h = self.conv(h, self.L(il, "attn_conv_base"), dyn, 0)
            q = (h @ self.L(il, "attn_q.weight").T).reshape(T, hp.n_head, -1)
            q = rope(rms(q, self.L(il, "attn_q_norm.weight"), hp.rms_eps), pos, hp.rope_freq_base, True)
            k, v = self.kv(il, h, pos)
            for i, p in enumerate(pos):
                self.cache[il][int(p)] = (k[i], v[i])
            ps = np.array(sorted(self.cache[il]))
            K = np.stack([self.cache[il][p][0] for p in ps])
            V = np.stack([self.cache[il][p][1] for p in ps])
            allowed = np.ones((T, len(ps)), bool)
            if hp.n_swa and hp.swa_layers[il]:
                allowed &= (np.asarray(pos)[:, None] - ps[None, :]) < hp.n_swa
            a = attend(q, K, V, allowed, hp.attention_scale or None, self.L(il, "attn_sinks.weight")) \
                @ self.L(il, "attn_output.weight").T
            a = a * (hp.value_scale or 1.0)
            if dyn is not None:
                a = self.conv(a, self.L(il, "attn_conv_base"), dyn, 1)
            if self.L(il, "post_attention_norm.weight") is not None:
                a = rms(a, self.L(il, "post_attention_norm.weight"), hp.rms_eps)
            f = a + x
            y = rms(f, self.L(il, "ffn_norm.weight"), hp.rms_eps)
            fdyn = None
            if self.L(il, "ffn_conv_proj.weight") is not None:
                fdyn = y @ self.L(il, "ffn_conv_proj.weight").T
                y = self.conv(y, self.L(il, "ffn_conv_base"), fdyn, 0)
            act = gelu if hp.ffn_op == 1 else silu
            y = (act(y @ self.L(il, "ffn_gate.weight").T) * (y @ self.L(il, "ffn_up.weight").T)) \
                @ self.L(il, "ffn_down.weight").T
            if fdyn is not None:
                y = self.conv(y, self.L(il, "ffn_conv_base"), fdyn, 1)
            if self.L(il, "post_ffw_norm.weight") is not None:
                y = rms(y, self.L(il, "post_ffw_norm.weight"), hp.rms_eps)
            x = y + f
            if self.L(il, "layer_output_scale.weight") is not None:
                x = x * self.L(il, "layer_output_scale.weight")
        h = rms(x, W(self.m, "output_norm.weight"), hp.rms_eps)
        z = h @ self.out.T
        if W(self.m, "selector_hidden.weight") is not None:
            z = z * (hp.logit_scale or 1.0)
            if hp.final_logit_softcapping:
                z = np.tanh(z / hp.final_logit_softcapping) * hp.final_logit_softcapping
        return h, z

    def markov(self, tokens, h, z):
        hp = self.hp
        w1, w2 = W(self.m, "markov_w1.weight"), W(self.m, "markov_w2.weight")
        cw, cb = W(self.m, "conf_proj.weight"), W(self.m, "conf_proj.bias")
        z = z.copy()
        conf = np.zeros(len(tokens))
        first = 0 if hp.sample_from_anchor else 1
        if first:
            conf[0] = 1 / (1 + np.exp(-z[0, 0]))
        prev = tokens[0]
        for i in range(first, len(tokens)):
            u = w1[prev]
            z[i] = z[i] + w2 @ u
            conf[i] = 1 / (1 + np.exp(-(cw @ np.concatenate([h[i], u]) + cb)[0]))
            prev = int(np.argmax(z[i]))
        return z, conf

    def lattice(self, tokens, h, z):
        hp = self.hp
        k, D = hp.selector_top_k, hp.n_embd
        tp, tn = W(self.m, "selector_predecessor.weight"), W(self.m, "selector_successor.weight")
        gate = h @ W(self.m, "selector_hidden.weight").T
        rows = np.zeros((min(len(tokens), hp.block_size), D))
        cands = [np.argsort(-z[p], kind="stable")[:k] for p in range(len(tokens))]
        for p in range(1, len(rows)):
            preds = [tokens[0]] if p == 1 else list(cands[p - 1])
            sc = np.array([[tn[s] @ (tp[j] * gate[p]) for s in cands[p]] for j in preds])
            if len(preds) == 1:
                sc = np.repeat(sc, k, axis=0)
            sc = sc + z[p, cands[p]][None, :]
            rows[p, :k] = cands[p]
            rows[p, k:k + k * k] = sc.ravel()
        return rows


def _load_draft(path):
    m = Model.load(path)
    from pyggml.llm.models import load_hparams
    m.hparams_draft = load_hparams(m)
    return m


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "nofa"])
@pytest.mark.parametrize("name", ["dflash", "dflash_swa", "dspark", "dspark_bonus", "dflash2",
                                  "dflash_extras", "dflash2_extras"])
def test_dflash_block_matches_numpy(files, name, flash_attn):
    tgt, dm = Model.load(files["target"]), _load_draft(files[name])
    hp = dm.hparams_draft
    rng = np.random.default_rng(7)
    ctx = DraftContext(dm, other=tgt, causal_attn=False, n_ctx=64, type_k=gg.F32,
                       type_v=gg.F32, flash_attn=flash_attn)
    ref = DFlashRef(dm, tgt)
    P, B = 9, 4
    feats = rng.standard_normal((P + 3, hp.n_embd_enc)).astype(np.float32)
    # two injections, then a block, a rollback into the context and a block again
    for lo, hi in ((0, P), (P, P + 3)):
        ctx.process(np.arange(lo, hi), embd=feats[lo:hi])
        ref.inject(feats[lo:hi].astype(np.float64), np.arange(lo, hi))
    for p0, anchor in ((P + 3, 17), (P + 1, 42)):
        ctx.seq_rm(0, p0, -1)
        ref.rollback(p0)
        tokens = [anchor] + [hp.mask_id] * (B - 1)
        pos = np.arange(p0, p0 + B)
        got = ctx.process(pos, token=tokens, output=np.ones(B, bool))
        h, z = ref.block(tokens, pos)
        assert nmse(ctx.embd_out, h) <= MAX_NMSE
        if name.startswith("dspark"):
            z, conf = ref.markov(tokens, h, z)
            assert np.allclose(ctx.h_nextn, conf[:, None], atol=1e-5)
        assert nmse(got, z) <= MAX_NMSE
        if name == "dflash2":
            lat = ref.lattice(tokens, h, z)
            assert ctx.h_nextn.shape == lat.shape
            assert np.array_equal(ctx.h_nextn[:, :hp.selector_top_k], lat[:, :hp.selector_top_k])
            assert nmse(ctx.h_nextn, lat) <= MAX_NMSE


def test_dspark_chain_follows_biased_argmax(files):
    """prev(i) is the argmax of slot i-1's biased logits, not of its base logits."""
    tgt, dm = Model.load(files["target"]), _load_draft(files["dspark"])
    hp = dm.hparams_draft
    ctx = DraftContext(dm, other=tgt, causal_attn=False, n_ctx=64, type_k=gg.F32, type_v=gg.F32)
    feats = np.random.default_rng(3).standard_normal((6, hp.n_embd_enc)).astype(np.float32)
    ctx.process(np.arange(6), embd=feats)
    tokens = [11] + [hp.mask_id] * 4
    got = ctx.process(np.arange(6, 11), token=tokens, output=np.ones(5, bool))
    w1, w2 = W(dm, "markov_w1.weight"), W(dm, "markov_w2.weight")
    base = got.astype(np.float64).copy()
    prev = 11
    for i in range(5):
        base[i] -= w2 @ w1[prev]
        prev = int(np.argmax(got[i]))
    # removing the bias chained on the biased argmaxes must leave the block's plain logits
    ref = DFlashRef(dm, tgt)
    ref.inject(feats.astype(np.float64), np.arange(6))
    _, z = ref.block(tokens, np.arange(6, 11))
    assert nmse(base, z) <= MAX_NMSE


# ---- EAGLE3 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["eagle3", "eagle3_d2t"])
def test_eagle3_encoder_and_chain_match_numpy(files, name):
    tgt, dm = Model.load(files["target"]), _load_draft(files[name])
    hp = dm.hparams_draft
    rng = np.random.default_rng(5)
    P = 7
    feats = rng.standard_normal((P, hp.n_embd_enc)).astype(np.float32)
    toks = rng.integers(3, 200, size=P + 1)
    ctx = DraftContext(dm, other=tgt, n_ctx=64, type_k=gg.F32, type_v=gg.F32)
    ctx.process(np.arange(P), embd=feats, output=np.ones(P, bool), memory=False)
    g = ctx.h_nextn.copy()
    f = feats.astype(np.float64)
    if hp.norm_before_fc:
        f = rms(f, W(dm, "enc.output_norm.weight"), hp.rms_eps)
    g_ref = f @ W(dm, "fc.weight").T
    assert nmse(g, g_ref) <= MAX_NMSE
    assert ctx.memory.seq_pos_max(0) == -1, "the encoder must not touch the draft cache"

    L = lambda n: W(dm, f"blk.0.{n}")  # noqa: E731
    E = W(dm, "token_embd.weight")
    E = W(tgt, "token_embd.weight") if E is None else E
    out = W(dm, "output.weight")
    d2t = dm.get("d2t", required=False)
    cache_k, cache_v = [], []

    def step(tok, gr, p):
        e = rms(E[[tok]], L("attn_norm.weight"), hp.rms_eps)
        gn = rms(gr[None], L("attn_norm_2.weight"), hp.rms_eps)
        x = np.concatenate([e, gn], 1)
        q = rope((x @ L("attn_q.weight").T).reshape(1, hp.n_head, -1), [p], hp.rope_freq_base, False)
        k = rope((x @ L("attn_k.weight").T).reshape(1, hp.n_head_kv, -1), [p], hp.rope_freq_base, False)
        cache_k.append(k[0])
        cache_v.append((x @ L("attn_v.weight").T).reshape(hp.n_head_kv, -1))
        a = attend(q, np.stack(cache_k), np.stack(cache_v), np.ones((1, len(cache_k)), bool))
        ffn_inp = a @ L("attn_output.weight").T + (gn if hp.norm_before_residual else gr[None])
        y = rms(ffn_inp, L("ffn_norm.weight"), hp.rms_eps)
        y = (silu(y @ L("ffn_gate.weight").T) * (y @ L("ffn_up.weight").T)) @ L("ffn_down.weight").T
        pre = y + ffn_inp
        z = rms(pre, W(dm, "output_norm.weight"), hp.rms_eps) @ out.T
        if d2t is not None:
            full = np.full((1, hp.n_vocab), -np.inf)
            full[:, np.asarray(d2t.numpy())] = z
            z = full
        return pre[0], z[0]

    # pairs (tok[k+1], g[k]) @ k, then the chain from (tok[P], g[P-1]) @ P-1
    ctx.process(np.arange(P - 1), token=toks[1:P], embd=g[:P - 1])
    for k in range(P - 1):
        step(int(toks[k + 1]), g_ref[k], k)
    got = ctx.process([P - 1], token=[int(toks[P])], embd=g[P - 1:P], output=[True])
    pre, z = step(int(toks[P]), g_ref[P - 1], P - 1)
    assert nmse(got[0], z) <= MAX_NMSE and nmse(ctx.h_nextn[0], pre) <= MAX_NMSE
    d1 = int(np.argmax(got[0]))
    got = ctx.process([P], token=[d1], embd=ctx.h_nextn, output=[True])
    _, z = step(d1, pre, P)
    assert nmse(got[0], z) <= MAX_NMSE


# ---- drafters: refusals and clamps ------------------------------------------------------------
def test_drafters_refuse_mismatched_drafts(files, tmp_path):
    tgt = Model.load(files["target"])
    ctx = Context(tgt, n_ctx=64)
    small = write_tiny_dflash(tmp_path / "v200.gguf", n_vocab=200)
    with pytest.raises(ValueError, match="vocabulary has 200 tokens but the target's has 256"):
        DFlashDrafter(ctx, Model.load(small))
    wide = write_tiny_dflash(tmp_path / "wide.gguf", n_embd=96, head_dim=24)
    with pytest.raises(ValueError, match="width 96 differs from the target's 64"):
        DFlashDrafter(ctx, Model.load(wide))
    deep = write_tiny_dflash(tmp_path / "deep.gguf", target_layers=(1, 4))
    with pytest.raises(ValueError, match="target layer 4 is out of range"):
        DFlashDrafter(ctx, Model.load(deep))
    with pytest.raises(ValueError, match="kind 'dspark' but the draft model is a dflash draft"):
        DFlashDrafter(ctx, Model.load(files["dflash"]), kind="dspark")
    with pytest.raises(ValueError, match="expected 'dflash'"):
        DFlashDrafter(ctx, Model.load(files["eagle3"]))
    with pytest.raises(ValueError, match="expected 'eagle3'"):
        Eagle3Drafter(ctx, Model.load(files["dflash"]))
    e3 = write_tiny_eagle3(tmp_path / "e3v.gguf", n_vocab=300)
    with pytest.raises(ValueError, match="vocabulary has 300 tokens"):
        Eagle3Drafter(ctx, Model.load(e3))


def test_eagle3_needs_exactly_three_layers(tmp_path):
    import gguf
    p = write_tiny_eagle3(tmp_path / "e3.gguf")
    r = gguf.GGUFReader(p)
    kv = {f.name: f.contents() for f in r.fields.values()}
    from pyggml.llm.models.eagle3 import Eagle3HParams
    kv["eagle3.target_layers"] = [0, 1]
    with pytest.raises(ValueError, match="exactly 3 target layer"):
        Eagle3HParams.from_gguf(kv, "eagle3")


def test_n_max_clamped_to_block(files):
    ctx = Context(Model.load(files["target"]), n_ctx=64)
    for name, want in (("dflash", 3), ("dspark", 5), ("dspark_bonus", 3), ("dflash2", 4)):
        d = DFlashDrafter(ctx, Model.load(files[name]))
        assert d.bind(ctx, 99) == want, name
        assert d.bind(ctx, 2) == 2, name
    assert Eagle3Drafter(ctx, Model.load(files["eagle3"])).bind(ctx, 9) == 9


@pytest.mark.parametrize("name", ["dflash", "dspark", "dflash2_extras"])
def test_blocks_of_two_sequences_in_one_batch(files, name):
    """All drafting sequences decode in one batch (block-major); each block must come out as
    if it had been decoded alone (the Markov chain, the convolution and the selector run per
    block)."""
    tgt, dm = Model.load(files["target"]), _load_draft(files[name])
    hp = dm.hparams_draft
    rng = np.random.default_rng(11)
    lens, anchors, B = (9, 5), (17, 99), 4
    feats = [rng.standard_normal((n, hp.n_embd_enc)).astype(np.float32) for n in lens]
    blocks = [[a] + [hp.mask_id] * (B - 1) for a in anchors]
    kw = dict(other=tgt, causal_attn=False, n_ctx=64, type_k=gg.F32, type_v=gg.F32)
    alone = []
    for f, blk, n in zip(feats, blocks, lens):
        c = DraftContext(dm, **kw)
        c.process(np.arange(n), embd=f)
        alone.append((c.process(np.arange(n, n + B), token=blk, output=np.ones(B, bool)), c.h_nextn))
    both = DraftContext(dm, n_seq_max=2, **kw)
    for s, (f, n) in enumerate(zip(feats, lens)):
        both.process(np.arange(n), embd=f, seq_id=s)
    got = both.process(np.concatenate([np.arange(n, n + B) for n in lens]),
                       token=blocks[0] + blocks[1], output=np.ones(2 * B, bool),
                       seq_id=[0] * B + [1] * B)
    for s in range(2):
        assert nmse(got[s * B:(s + 1) * B], alone[s][0]) <= MAX_NMSE
        if alone[s][1] is not None:
            assert nmse(both.h_nextn[s * B:(s + 1) * B], alone[s][1]) <= MAX_NMSE


def _drafter_after_prompt(files, name, **kw):
    tgt, dm = Model.load(files["target"]), Model.load(files[name])
    cls = Eagle3Drafter if name.startswith("eagle3") else DFlashDrafter
    probe = cls(Context(tgt, n_ctx=64), dm)
    ctx = Context(tgt, n_ctx=64, outputs=probe.target_outputs)
    d = cls(ctx, dm, **kw)
    n_max = d.bind(ctx, 4)
    prompt = [1, 5, 17, 42, 9]
    ctx.decode(prompt)
    d.process(np.asarray(prompt), 0, {n: ctx.output(n) for n in d.target_outputs})
    return d, n_max, int(np.argmax(ctx.logits[-1]))


def _top10_prob(row):
    top = np.sort(row.astype(np.float64))[-10:]
    return 1 / np.exp(top - top[-1]).sum()


@pytest.mark.parametrize("name", ["dflash", "dspark", "dflash2", "eagle3"])
def test_p_min_cuts_the_draft_where_confidence_drops(files, name):
    full, n_max, id_last = _drafter_after_prompt(files, name)
    want = full.draft(id_last, 5, n_max)
    assert len(want.ids) == n_max
    if name == "dflash2":
        k = full.hp.selector_top_k
        lat, pred, conf = full.ctx.h_nextn, 0, []
        for i in range(1, n_max + 1):
            s = lat[i, k + pred * k: k + pred * k + k].astype(np.float64)
            pred = int(np.argmax(s))
            conf.append(1 / np.exp(s - s[pred]).sum())
    elif name == "dspark":
        conf = list(full.ctx.h_nextn[:n_max, 0])
    else:
        conf = [_top10_prob(r) for r in want.logits]
    p_min = float(np.median(conf))
    cut = next((i for i, c in enumerate(conf) if c < p_min), len(conf))
    d, _, _ = _drafter_after_prompt(files, name, p_min=p_min)
    got = d.draft(id_last, 5, n_max)
    assert got.ids == want.ids[:cut]
    d, _, _ = _drafter_after_prompt(files, name, n_min=n_max)
    assert d.draft(id_last, 5, n_max).ids == want.ids
    d, _, _ = _drafter_after_prompt(files, name, p_min=p_min, n_min=cut + 1)
    assert d.draft(id_last, 5, n_max).ids == []


def test_dspark_p_min_needs_a_confidence_head(files, tmp_path):
    ctx = Context(Model.load(files["target"]), n_ctx=64)
    p = write_tiny_dflash(tmp_path / "noconf.gguf", kind="dspark", confidence_head=False)
    DFlashDrafter(ctx, Model.load(p))
    with pytest.raises(ValueError, match="needs a confidence head"):
        DFlashDrafter(ctx, Model.load(p), p_min=0.5)


def test_draft_context_refuses_bad_batches(files):
    tgt, dm = Model.load(files["target"]), Model.load(files["dflash"])
    ctx = DraftContext(dm, other=tgt, causal_attn=False, n_ctx=64, n_ubatch=8)
    with pytest.raises(ValueError, match="expected 3 rows of width 128"):
        ctx.process(np.arange(3), embd=np.zeros((3, 64), np.float32))
    assert ctx.memory.seq_pos_max(0) == -1, "a failed batch must leave no cells behind"
    with pytest.raises(ValueError, match="exceed n_ubatch=8"):
        ctx.process(np.arange(9), embd=np.zeros((9, 128), np.float32))
    with pytest.raises(ValueError, match="pass token ids, float rows or both"):
        ctx.process(np.arange(2))
    with pytest.raises(ValueError, match="out of range"):
        ctx.process([0], token=[300])
    with pytest.raises(KeyError, match="has no tensor 'token_embd.weight'"):
        DraftContext(dm, causal_attn=False, n_ctx=64).process([0], token=[5])
