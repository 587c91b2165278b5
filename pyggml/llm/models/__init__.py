"""Per-architecture graph builders, registered by their GGUF `general.architecture` name."""
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


def build_graph(model, params, res):
    """Emit the graph for `params` into `res` (a GraphResult) and mark its outputs."""
    builder_for(params.arch)(model, params, res).build()
    res.set_outputs()
    return res


from . import llama  # noqa: E402,F401  (registers llama, qwen2, qwen3)
