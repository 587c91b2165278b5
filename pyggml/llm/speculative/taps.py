"""Target hidden states that feature-fed drafts (EAGLE3, DFlash) read, and the checks that a
draft fits its target (vocabulary, width, tapped layers)."""
from __future__ import annotations

import numpy as np

# these builders name layer il's input "embd" (il = 0) or "l_out-{il-1}", uncropped (every
# token's row); qwen35 also exports the post-norm hidden state of every token as "h_nextn",
# which a tap one past the last layer reads (as llama.cpp's EAGLE3 does)
_TAPPABLE = ("llama", "qwen2", "qwen3", "qwen35", "mamba2")
_H_NEXTN_ALL_ROWS = ("qwen35",)


def layer_input_names(target_model, layer_ids, allow_output: bool = False) -> tuple:
    """cb names of the inputs of target layers `layer_ids` (rows for every decoded token);
    with `allow_output`, id n_layer names the target's unmasked h_nextn where it has one."""
    from ..models import load_hparams
    if target_model.arch not in _TAPPABLE:
        raise NotImplementedError(f"draft: reading layer inputs of a {target_model.arch!r} target "
                                  f"is not supported (supported targets: {', '.join(_TAPPABLE)})")
    n_layer = load_hparams(target_model).n_layer
    names = []
    for il in layer_ids:
        if il == n_layer and allow_output and target_model.arch in _H_NEXTN_ALL_ROWS:
            names.append("h_nextn")
            continue
        if not 0 <= il < n_layer:
            raise ValueError(f"draft: target layer {il} is out of range for a target with "
                             f"{n_layer} layers (taps read layer inputs 0..{n_layer - 1})")
        names.append("embd" if il == 0 else f"l_out-{il - 1}")
    return tuple(names)


def check_vocab(kind: str, target_model, draft_model, n_vocab_target: int, n_vocab_draft: int):
    """Refuse a draft whose token ids mean something else than the target's."""
    if n_vocab_draft != n_vocab_target:
        raise ValueError(f"{kind} draft: its vocabulary has {n_vocab_draft} tokens but the "
                         f"target's has {n_vocab_target}; a draft must share the target's "
                         "vocabulary")
    a = target_model.kv.get("tokenizer.ggml.tokens")
    b = draft_model.kv.get("tokenizer.ggml.tokens")
    if isinstance(a, list) and isinstance(b, list) and a != b:
        i = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
        raise ValueError(f"{kind} draft: token {i} is {b[i]!r} in the draft but {a[i]!r} in the "
                         "target; a draft must share the target's vocabulary")


def features(taps: dict, names: tuple, n_tokens: int) -> np.ndarray:
    """The tapped rows concatenated per token: [n_tokens, len(names) * width]."""
    missing = [n for n in names if n not in taps]
    if missing:
        raise KeyError(f"draft: the target rows {missing} were not handed to process() "
                       f"(the drafter asks for {list(names)} in target_outputs)")
    rows = [np.asarray(taps[n], np.float32).reshape(n_tokens, -1) for n in names]
    return np.ascontiguousarray(np.concatenate(rows, axis=1))


def top_prob(logits_row: np.ndarray, k: int = 10) -> float:
    """Probability of the top token after a top-k (k = 10) filter and softmax."""
    top = np.sort(np.asarray(logits_row, np.float64))[-k:]
    top = top[np.isfinite(top)]
    return float(1.0 / np.sum(np.exp(top - top[-1])))


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def check_d2t(kind: str, draft_model, n_vocab_target: int) -> None:
    """A reduced draft vocabulary must map into the target's ids."""
    d2t = draft_model.get("d2t", required=False)
    if d2t is None:
        return
    ids = np.asarray(d2t.numpy())
    if ids.size and (ids.min() < 0 or ids.max() >= n_vocab_target):
        raise ValueError(f"{kind} draft: d2t maps to ids outside the target's vocabulary "
                         f"[0, {n_vocab_target})")
