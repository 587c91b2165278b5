"""EAGLE3 / DFlash / DSpark / DFlash2 drafts end to end through SpeculativeDecoder: with greedy
sampling the speculative stream must equal plain greedy decoding."""
import pytest

from pyggml.llm import Model, write_tiny_llama
from pyggml.llm.context import Context
from pyggml.llm.tiny import write_tiny_dflash, write_tiny_eagle3

DRAFTS = {
    "eagle3": lambda p: write_tiny_eagle3(p, target_layers=(0, 1, 3)),
    "dflash": lambda p: write_tiny_dflash(p, kind="dflash", target_layers=(1, 3)),
    "dspark": lambda p: write_tiny_dflash(p, kind="dspark", target_layers=(1, 2, 3)),
    "dflash2": lambda p: write_tiny_dflash(p, kind="dflash2", block_size=5),
}


@pytest.mark.parametrize("kind", list(DRAFTS))
def test_speculative_equals_greedy(tmp_path, kind):
    from pyggml.llm.speculative import SpeculativeDecoder
    target = Model.load(write_tiny_llama(tmp_path / "t.gguf", arch="qwen3", qk_norm=True,
                                         n_layer=4, n_embd=64, head_dim=16))
    draft = Model.load(DRAFTS[kind](tmp_path / f"{kind}.gguf"))
    prompt = [1, 5, 17, 42, 9, 77, 130]
    want = list(Context(target, n_ctx=256).generate(prompt, 32))
    dec = SpeculativeDecoder(Context(target, n_ctx=256), kind=kind, draft=draft, n_max=4)
    assert list(dec.generate(prompt, 32)) == want
    assert dec.stats["n_drafted"] > 0


@pytest.mark.parametrize("kind", ["dflash", "eagle3"])
def test_speculative_on_a_recurrent_target_equals_greedy(tmp_path, kind):
    from pyggml.llm.speculative import SpeculativeDecoder
    from pyggml.llm.tiny import write_tiny_qwen35
    target = Model.load(write_tiny_qwen35(tmp_path / "q35.gguf", n_layer=4,
                                          full_attention_interval=2, n_nextn=0))
    if kind == "dflash":
        draft = write_tiny_dflash(tmp_path / "d.gguf", target_layers=(1, 3), rope_sections=(8, 0, 0, 0))
    else:
        draft = write_tiny_eagle3(tmp_path / "e.gguf", target_layers=(1, 2, 4))
    prompt = [1, 5, 17, 42, 9, 77, 130]
    want = list(Context(target, n_ctx=256).generate(prompt, 24))
    dec = SpeculativeDecoder(Context(target, n_ctx=256, n_rs_seq=4), kind=kind,
                             draft=Model.load(draft), n_max=4)
    assert list(dec.generate(prompt, 24)) == want


def test_kind_must_match_the_draft_file(tmp_path):
    """One drafter class serves dflash/dflash2/dspark: the decoder passes the asked kind on,
    so a plain DFlash file is refused as a DSpark draft instead of running as DFlash."""
    from pyggml.llm.speculative import SpeculativeDecoder
    target = Model.load(write_tiny_llama(tmp_path / "t.gguf", arch="qwen3", qk_norm=True,
                                         n_layer=4, n_embd=64, head_dim=16))
    draft = Model.load(DRAFTS["dflash"](tmp_path / "dflash.gguf"))
    with pytest.raises(ValueError, match="dspark"):
        SpeculativeDecoder(Context(target, n_ctx=256), kind="dspark", draft=draft, n_max=4)


@pytest.mark.parametrize("p_min", [0.0, 0.5])
def test_dsv4_backbone_dspark_equals_greedy(tmp_path, p_min):
    """A DSpark draft on a DeepSeek V4 backbone (hyper-connection stages, MoE), greedy and
    with its confidence cut: still the target's greedy stream; the cut drafts less."""
    from pyggml.llm.speculative import SpeculativeDecoder
    from pyggml.llm.tiny import write_tiny_dspark_dsv4
    target = Model.load(write_tiny_llama(tmp_path / "t.gguf", arch="qwen3", qk_norm=True,
                                         n_layer=4, n_embd=64, head_dim=16))
    draft = Model.load(write_tiny_dspark_dsv4(tmp_path / "d.gguf", target_layers=(0, 2)))
    prompt = [1, 5, 17, 42, 9, 77, 130]
    want = list(Context(target, n_ctx=256).generate(prompt, 24))
    dec = SpeculativeDecoder(Context(target, n_ctx=256), kind="dspark", draft=draft, n_max=4,
                             p_min=p_min, adaptive=False)
    assert dec.n_max == 4                  # anchor-first: the whole block of 4 is usable
    assert list(dec.generate(prompt, 24)) == want
    full = [len(s["draft"]) for s in dec.stats["steps"]]
    body = full[:-3]                       # the last steps are cut by n as well
    if p_min == 0:
        assert body and all(n == 4 for n in body)
    else:
        assert any(n < 4 for n in body) or dec.stats["n_plain_steps"] > 0
