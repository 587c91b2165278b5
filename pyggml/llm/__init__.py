"""pyggml.llm: the Python analog of llama.cpp's model loader and llama-graph.

Loading (owned by the gguf helper): :class:`Model` (GGUF -> read-only weight tensors, hparams,
vocab), :func:`validate_gguf` / :class:`GGUFError` (bounded header validation) and
:func:`write_tiny_llama` (random-weight LLaMA/Qwen GGUF files for tests).
"""
from .gguf_check import GGUFError, validate_gguf
from .model import HParams, Model
from .tiny import write_small_llama, write_tiny_llama

__all__ = ["Model", "HParams", "GGUFError", "validate_gguf", "write_tiny_llama", "write_small_llama"]

# ---- graph / runtime layer (llmgraph): add its imports and __all__ entries below ----
from .context import Context  # noqa: E402
from .graph import GraphContext, GraphParams, GraphResult  # noqa: E402
from .inputs import UBatch  # noqa: E402
from .kv_cache import KVCache  # noqa: E402
from .kv_cache_iswa import KVCacheISWA  # noqa: E402
from .memory import Memory, MemoryContext  # noqa: E402
from .sampling import Sampler, greedy  # noqa: E402
from .tiny import write_tiny_deepseek4  # noqa: E402

__all__ += ["Context", "GraphContext", "GraphParams", "GraphResult", "UBatch", "KVCache",
            "KVCacheISWA", "Memory", "MemoryContext", "Sampler", "greedy", "write_tiny_deepseek4"]

# ---- text layer (vocab): tokenizers and chat templates ----
from .chat import ChatTemplate, apply_chat_template  # noqa: E402
from .vocab import Vocab  # noqa: E402

__all__ += ["Vocab", "ChatTemplate", "apply_chat_template"]
