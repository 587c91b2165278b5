"""Per-architecture graph builders, registered by their GGUF `general.architecture` name.

Each model file defines, next to its builder (a GraphContext subclass):
* `HParams`: a dataclass with `from_gguf(kv, arch)` reading its `<arch>.*` keys with
  llama.cpp's defaults,
* `TENSORS`: its tensor list (attribute -> GGUF name under `blk.{il}.`),
* `create_memory(model, hparams, cparams)`: the Memory a Context decodes with (for
  `cparams.ctx_type == "mtp"`: a memory over the NextN layers only),
* optionally `MtpGraph`: the builder of its NextN draft graph (GraphType.DECODER_MTP).

The attention architectures (llama, phi3, gemma2/3, step35) build on `decoder.py`: the common
hparams fields, KV cache arguments, self-attention, dense/MoE FFN, the layer loop and the
output head, so that their files keep only what is specific to them.
"""
from __future__ import annotations

MODELS: dict = {}


def register(*archs):
    """Class decorator: make a GraphContext subclass the builder for these architectures."""
    def deco(cls):
        for a in archs:
            MODELS[a] = cls
        return cls
    return deco


def builder_for(arch: str):
    try:
        return MODELS[arch]
    except KeyError:
        raise NotImplementedError(f"no graph builder for architecture {arch!r}; "
                                  f"supported: {sorted(MODELS)}") from None


def load_hparams(model):
    """The architecture's own hyperparameters for `model`, from its GGUF metadata."""
    import dataclasses
    cls = builder_for(model.arch)
    hp = cls.HParams.from_gguf(model.kv, model.arch)
    if not hp.n_vocab:
        emb = model.get("token_embd.weight", required=False)
        if emb is not None:
            hp = dataclasses.replace(hp, n_vocab=emb.ne[1])
    return hp


def build_graph(model, params, res):
    """Emit the graph for `params` into `res` (a GraphResult) and mark its outputs."""
    cls = builder_for(params.arch)
    from ..graph import GraphType
    if params.gtype == GraphType.DECODER_MTP:
        mtp = getattr(cls, "MtpGraph", None)
        if mtp is None:
            raise NotImplementedError(f"architecture {params.arch!r} has no NextN (MTP) draft graph")
        cls = mtp
    if not isinstance(params.hparams, cls.HParams):
        # a caller holding only the loader's generic hparams: use the architecture's own
        params.hparams = load_hparams(model)
    cls(model, params, res).build()
    res.set_outputs()
    return res


from . import llama  # noqa: E402,F401  (registers llama, qwen2, qwen3)
from . import deepseek4  # noqa: E402,F401
from . import mamba2  # noqa: E402,F401
from . import qwen35  # noqa: E402,F401
from . import eagle3  # noqa: E402,F401
from . import dflash  # noqa: E402,F401
from . import step35  # noqa: E402,F401
from . import gemma2  # noqa: E402,F401
from . import gemma3  # noqa: E402,F401
from . import phi3  # noqa: E402,F401
