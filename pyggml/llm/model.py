"""Model loading from GGUF: hyperparameters, vocabulary and weight tensors.

``Model.load(path)`` parses and validates the header with
:func:`pyggml.llm.gguf_check.read_gguf_header` (bounded reads; it also decodes the metadata,
which is ~100x faster than ``gguf.GGUFReader`` on large vocabularies; the tests cross-check
the two) and creates one pyggml tensor per GGUF tensor directly over a read-only memory map
of the file (the model's context keeps the map alive). Then, by default, the CPU's repacked
copies of the matrices it has kernels for are built and the rest is copied into one block of
the model's own (huge pages; ``use_mmap`` in :meth:`Model.load`).

Hyperparameters follow llama.cpp's loader (``src/llama-model.cpp``): keys are
``<arch>.<name>`` with llama.cpp's spelling, missing optional keys take llama.cpp's defaults.
"""
from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from .gguf_check import GGML_TYPE_NAMES, GGUFError, GGUFHeader, read_gguf_header

__all__ = ["HParams", "Model", "ROPE_TYPE_NONE", "ROPE_TYPE_NORM", "ROPE_TYPE_NEOX", "rope_type_for_arch"]

ROPE_TYPE_NONE, ROPE_TYPE_NORM, ROPE_TYPE_NEOX = -1, 0, 2
ROPE_TYPE_MROPE, ROPE_TYPE_IMROPE = 8, 40

# llama_model_rope_type (src/llama-model.cpp): architectures with NEOX-style RoPE. Everything
# else that uses RoPE is NORM (llama, deci, baichuan, deepseek2, deepseek4, granite, ...).
_NEOX_ARCHS = frozenset({
    "falcon", "falcon-h1", "grok", "dbrx", "bert", "jina-bert-v3", "nomic-bert", "nomic-bert-moe",
    "stablelm", "bitnet", "qwen", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "qwen3next", "olmo2", "olmoe", "phi2", "phi3", "phimoe", "plamo", "plamo2", "gemma", "gemma2",
    "gemma3", "gemma3n", "gemma-embedding", "starcoder2", "openelm", "gptneox", "codeshell",
    "orion", "nemotron", "exaone", "exaone4", "minicpm3", "dots1", "hunyuan-moe", "hunyuan-dense",
    "openai-moe", "lfm2", "lfm2moe", "smallthinker", "ernie4_5", "ernie4_5-moe", "seed_oss",
    "grovemoe", "apertus", "glm4", "glm4moe", "bailingmoe", "bailingmoe2", "neo-bert",
})
_MROPE_ARCHS = frozenset({"qwen2vl", "paddleocr"})
_IMROPE_ARCHS = frozenset({"qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe"})
_NO_ROPE_ARCHS = frozenset({"gpt2", "gptj", "mpt", "refact", "bloom", "mamba", "mamba2", "jamba",
                            "jina-bert-v2", "t5", "t5encoder", "rwkv6", "rwkv7", "arwkv7", "wavtokenizer-dec",
                            "nemotron-h"})

_LLAMA_FAMILY = frozenset({"llama", "qwen2", "qwen3"})   # archs whose keys we require strictly
_NO_ATTN_ARCHS = frozenset({"mamba", "mamba2"})


def rope_type_for_arch(arch: str) -> int:
    """llama.cpp's RoPE mode for an architecture (NORM 0, NEOX 2, MROPE 8, IMROPE 40, none -1)."""
    if arch in _NEOX_ARCHS:
        return ROPE_TYPE_NEOX
    if arch in _MROPE_ARCHS:
        return ROPE_TYPE_MROPE
    if arch in _IMROPE_ARCHS:
        return ROPE_TYPE_IMROPE
    if arch in _NO_ROPE_ARCHS:
        return ROPE_TYPE_NONE
    return ROPE_TYPE_NORM


@dataclass
class HParams:
    """Architecture constants from the GGUF keys ``<arch>.*`` (llama.cpp names in comments)."""
    arch: str                 # general.architecture
    n_vocab: int              # <arch>.vocab_size, else len(tokenizer.ggml.tokens), else token_embd ne[1], else 0
    n_ctx_train: int          # <arch>.context_length
    n_embd: int               # <arch>.embedding_length
    n_layer: int              # <arch>.block_count (trunk + NextN blocks)
    n_ff: int                 # <arch>.feed_forward_length (0 when absent)
    n_head: int               # <arch>.attention.head_count
    n_head_kv: int            # <arch>.attention.head_count_kv (default n_head)
    head_dim_k: int           # <arch>.attention.key_length (default n_embd / n_head)
    head_dim_v: int           # <arch>.attention.value_length (default n_embd / n_head)
    n_rot: int                # <arch>.rope.dimension_count (default head_dim_k)
    rope_freq_base: float     # <arch>.rope.freq_base (default 10000)
    rope_freq_scale: float    # 1 / <arch>.rope.scaling.factor (or rope.scale_linear); 1 when absent
    rope_type: int            # llama_model_rope_type: NORM 0 (llama), NEOX 2 (qwen2/qwen3), ...
    rms_eps: float            # <arch>.attention.layer_norm_rms_epsilon
    n_swa: int = 0            # <arch>.attention.sliding_window
    bos_id: int | None = None   # tokenizer.ggml.bos_token_id
    eos_id: int | None = None   # tokenizer.ggml.eos_token_id
    # ---- extras (not needed by the LLaMA graph, kept for completeness) ----
    norm_eps: float = 1e-5              # <arch>.attention.layer_norm_epsilon (non-RMS norms)
    rope_scaling_type: str = "none"     # <arch>.rope.scaling.type: none / linear / yarn / longrope
    n_ctx_orig_yarn: int = 0            # <arch>.rope.scaling.original_context_length (default n_ctx_train)
    n_expert: int = 0                   # <arch>.expert_count
    n_expert_used: int = 0              # <arch>.expert_used_count

    @property
    def n_embd_k_gqa(self) -> int:
        return self.head_dim_k * self.n_head_kv

    @property
    def n_embd_v_gqa(self) -> int:
        return self.head_dim_v * self.n_head_kv


def _gg():
    import pyggml as gg
    return gg


def _supported_types() -> dict[int, Any]:
    gg = _gg()
    return {row["id"]: row["type"] for row in gg.type_traits()}


class Model:
    """Weights (read-only views of the GGUF memory map or of the model's own copy, see
    Model.load), hyperparameters and vocabulary."""

    arch: str
    hparams: HParams
    tensors: dict
    vocab: list | None
    ctx: Any
    path: str
    kv: dict

    def __init__(self, path: str, hparams: HParams, tensors: dict, vocab, ctx, kv: dict, header: GGUFHeader):
        self.path = path
        self.arch = hparams.arch
        self.hparams = hparams
        self.tensors = tensors
        self.vocab = vocab
        self.ctx = ctx
        self.kv = kv
        self.header = header
        self._repacked = {}
        self._copied = set()

    def __repr__(self):
        h = self.hparams
        return (f"<pyggml.llm.Model {self.arch} {os.path.basename(self.path)!r}: {h.n_layer} layers, "
                f"n_embd={h.n_embd}, heads={h.n_head}/{h.n_head_kv}, vocab={h.n_vocab}, "
                f"{len(self.tensors)} tensors>")

    def get(self, name: str, required: bool = True):
        """The tensor called `name` (GGUF spelling, e.g. ``blk.0.attn_q.weight``). Missing
        tensors raise KeyError when `required`, else return None."""
        t = self.tensors.get(name)
        if t is None and required:
            raise KeyError(f"{os.path.basename(self.path)}: model ({self.arch}) has no tensor '{name}'")
        return t

    def get_kv(self, key: str, default=None):
        """A metadata value by its full GGUF key (``llama.context_length``...)."""
        return self.kv.get(key, default)

    @property
    def n_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors.values())

    # ------------------------------------------------------------------ repacked weights
    def repack_weights(self) -> int:
        """Give the CPU's mul_mat row-interleaved copies of the 2-D weight
        matrices of the types it takes (q4_0, q4_1, q5_0, q8_0, q4_K, q5_K, q6_K;
        gg.repack_weights): every column count then runs one kernel whose results do
        not depend on the batch, faster for decode, verify batches and prompts alike. The token
        embedding is copied only when it is also the output matrix (tied); get_rows keeps
        reading the original. Costs about the copied tensors' size in memory; returns the bytes
        held. Model.load does this unless ``repack=False`` or PYGGML_REPACK=0."""
        gg = _gg()
        for name, t in self.tensors.items():
            if name in self._repacked or t.ne[2] != 1 or t.ne[3] != 1 or not gg.repack_supported(t):
                continue
            if self._read_by_get_rows_only(name):
                continue
            self._repacked[name] = gg.repack_weights(t)
        return self.repacked_bytes

    def _read_by_get_rows_only(self, name: str) -> bool:
        """An untied token embedding: get_rows reads a few of its rows per token, mul_mat none."""
        return name == "token_embd.weight" and "output.weight" in self.tensors

    def _mapped_weight_names(self) -> list:
        """Tensors still read from the file's memory map: all but the repacked ones and an
        untied token embedding."""
        return [n for n, t in self.tensors.items()
                if n not in self._repacked and n not in self._copied
                and not self._read_by_get_rows_only(n) and t.nbytes > 0]

    def mapped_weight_bytes(self) -> int:
        """Bytes copy_mapped_weights would copy."""
        return sum(self.tensors[n].nbytes for n in self._mapped_weight_names())

    def copy_mapped_weights(self, progress: bool | None = None) -> int:
        """Copy the weights that mul_mat still streams from the file's memory map into one
        host buffer of the model's own. Page-cache pages are 4 KiB: a streamed product stops
        its prefetchers and misses the TLB at every one of them, while the copy sits on 2 MiB
        pages where the system offers them (a ~110M F16 model decodes ~1.2x faster). The
        values are the same bytes, so every result is too. Costs the copied size in memory
        (the file's pages stay in the page cache only until the system needs them); returns
        the bytes copied. Call it before building contexts: graphs already built keep reading
        the mapped tensors. `progress`: a tqdm bar (default: copies over 64 MiB)."""
        gg = _gg()
        names = self._mapped_weight_names()
        if not names:
            return 0
        sizes = [-(-self.tensors[n].nbytes // 64) * 64 for n in names]
        total = sum(sizes)
        # One block from the CPU backend's allocator (huge pages from 4 MiB on), seen as bytes;
        # the tensors are read-only views of it, as the mapped ones were.
        arena = gg.Context(mem_size=total)
        raw = arena.new_tensor(gg.I32, [total // 4]).numpy().view(np.uint8)
        bar = None
        if progress is None:
            progress = total > (64 << 20)
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=total, unit="B", unit_scale=True,
                       desc=f"copying {os.path.basename(self.path)}", leave=False)
        try:
            offsets, off = [], 0
            for n, size in zip(names, sizes):
                src = self.tensors[n]  # a read-only view of the mapped bytes
                raw[off:off + src.nbytes] = np.asarray(src.numpy()).view(np.uint8).reshape(-1)
                offsets.append(off)
                off += size
                if bar is not None:
                    bar.update(size)
        finally:
            if bar is not None:
                bar.close()
        raw.flags.writeable = False
        for n, off in zip(names, offsets):
            src = self.tensors[n]
            dst = self.ctx.tensor_from_buffer(raw[off:off + src.nbytes], src.type, list(src.ne))
            dst.name = n
            self.tensors[n] = dst
            self._copied.add(n)
        return total

    def drop_repack(self) -> None:
        """Release the repacked copies: mul_mat returns to the plain kernels."""
        self._repacked.clear()

    @property
    def repacked_bytes(self) -> int:
        return sum(h.nbytes for h in self._repacked.values())

    # ------------------------------------------------------------------ text
    @property
    def tokenizer(self):
        """The model's :class:`~pyggml.llm.vocab.Vocab`, built on first use from the GGUF
        metadata already read (ValueError when the file has no tokenizer)."""
        tok = self.__dict__.get("_tokenizer")
        if tok is None:
            from .vocab import Vocab
            try:
                tok = Vocab.from_kv(self.kv)
            except ValueError as e:
                raise ValueError(f"{os.path.basename(self.path)}: {e}") from None
            self._tokenizer = tok
        return tok

    def tokenize(self, text, add_special: bool = True, parse_special: bool = False) -> list[int]:
        """Text -> token ids (llama_tokenize). `add_special` adds BOS/EOS as the vocabulary
        asks; `parse_special` turns control-token texts ("<|im_start|>") into their ids."""
        return self.tokenizer.tokenize(text, add_special, parse_special)

    def detokenize(self, ids, remove_special: bool = False, unparse_special: bool = False) -> str:
        """Token ids -> text (llama_detokenize); bytes that are not valid UTF-8 become U+FFFD."""
        return self.tokenizer.detokenize(ids, remove_special, unparse_special)

    def token_to_piece(self, token_id: int, special: bool = True) -> bytes:
        """The bytes of one token (a token may hold part of a UTF-8 character, hence bytes);
        control tokens give b"" unless `special`."""
        return self.tokenizer.token_to_piece(token_id, special)

    def is_eog(self, token_id: int) -> bool:
        """Whether the token ends a generation (EOS, EOT, <|im_end|>, ...)."""
        return self.tokenizer.is_eog(int(token_id))

    @property
    def chat_template(self):
        """The model's :class:`~pyggml.llm.chat.ChatTemplate` (``tokenizer.chat_template``),
        compiled on first use; None when the file has none."""
        if "_chat_template" not in self.__dict__:
            tmpl = None
            if isinstance(self.kv.get("tokenizer.chat_template"), str):
                from .chat import ChatTemplate
                tmpl = ChatTemplate.from_vocab(self.tokenizer)
            self._chat_template = tmpl
        return self._chat_template

    def apply_chat_template(self, messages, add_generation_prompt: bool = True, **variables) -> str:
        """The prompt text for `messages` ([{"role": ..., "content": ...}, ...]) rendered with
        the model's own template. Tokenize it with ``parse_special=True``."""
        tmpl = self.chat_template
        if tmpl is None:
            raise ValueError(f"{os.path.basename(self.path)}: the model has no chat template "
                             "(tokenizer.chat_template)")
        return tmpl.render(messages, add_generation_prompt=add_generation_prompt, **variables)

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path, progress: bool | None = None, repack: bool | None = None,
             use_mmap: bool | None = None) -> "Model":
        """Validate and load a GGUF model. `progress`: show a tqdm bar (default: files > 64 MiB).
        `repack`: build the CPU's repacked weight copies (Model.repack_weights; default: on
        unless the environment has PYGGML_REPACK=0). `use_mmap`: False copies the weights that
        were not repacked out of the file's memory map (Model.copy_mapped_weights), True keeps
        them mapped; the default (or PYGGML_USE_MMAP=0/1) copies them when the copy takes at
        most half of the memory available.

        Raises FileNotFoundError for a missing file, GGUFError (a ValueError naming the file)
        for a malformed or truncated one or missing required keys, and NotImplementedError for
        tensor types pyggml does not implement."""
        path = os.fspath(path)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, "no such GGUF file", path)
        try:
            model = cls._load(path, progress)
        except (GGUFError, NotImplementedError, MemoryError, KeyboardInterrupt):
            raise
        except (ValueError, TypeError, KeyError, IndexError, OverflowError, UnicodeError, struct.error) as e:
            # The file is untrusted input: whatever it trips in the loader is a defect of the file.
            raise GGUFError(f"{path}: malformed GGUF file ({type(e).__name__}: {e})") from e
        if repack is None:
            repack = os.environ.get("PYGGML_REPACK", "1") != "0"
        if repack:
            model.repack_weights()
        if use_mmap is None and os.environ.get("PYGGML_USE_MMAP") in ("0", "1"):
            use_mmap = os.environ["PYGGML_USE_MMAP"] == "1"
        if use_mmap is None:
            avail = _mem_available()
            use_mmap = avail is None or model.mapped_weight_bytes() > avail // 2
        if not use_mmap:
            model.copy_mapped_weights(progress)
        return model

    @classmethod
    def _load(cls, path: str, progress: bool | None) -> "Model":
        header = read_gguf_header(path, values=True)
        kv = header.kv
        hp = _hparams_from_kv(path, kv, header)
        vocab = kv.get("tokenizer.ggml.tokens")
        if vocab is not None and not (isinstance(vocab, list) and all(isinstance(x, str) for x in vocab)):
            raise GGUFError(f"{path}: tokenizer.ggml.tokens must be an array of strings")

        gg = _gg()
        types = _supported_types()
        for ti in header.tensors:
            if ti.type_id not in types:
                raise NotImplementedError(
                    f"{path}: tensor '{ti.name}' has type {GGML_TYPE_NAMES.get(ti.type_id, ti.type_id)}, "
                    f"which pyggml does not implement (supported: "
                    f"{', '.join(GGML_TYPE_NAMES[i] for i in sorted(types))})")

        if progress is None:
            progress = header.file_size > (64 << 20)
        mm = np.memmap(path, dtype=np.uint8, mode="r") if header.tensors else None
        ctx = gg.Context(mem_size=0, no_alloc=True)
        tensors = {}
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=sum(t.nbytes for t in header.tensors), unit="B", unit_scale=True,
                       desc=f"loading {os.path.basename(path)}", leave=False)
            _advise_willneed(mm)
        try:
            for ti in header.tensors:
                buf = mm[ti.data_offset:ti.data_offset + ti.nbytes]
                t = ctx.tensor_from_buffer(buf, types[ti.type_id], list(ti.ne))
                t.name = ti.name
                tensors[ti.name] = t
                if bar is not None:
                    bar.update(ti.nbytes)
        finally:
            if bar is not None:
                bar.close()
        return cls(path, hp, tensors, vocab, ctx, kv, header)


def _mem_available() -> int | None:
    """MemAvailable from /proc/meminfo in bytes, None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _advise_willneed(mm) -> None:
    """Ask the kernel to start reading the file in the background (best effort)."""
    try:
        import mmap as _mmap
        raw = getattr(mm, "_mmap", None)
        if raw is not None and hasattr(raw, "madvise") and hasattr(_mmap, "MADV_WILLNEED"):
            raw.madvise(_mmap.MADV_WILLNEED)
    except (OSError, ValueError):
        pass


def _hparams_from_kv(path: str, kv: dict, header: GGUFHeader) -> HParams:
    arch = kv.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise GGUFError(f"{path}: missing or invalid general.architecture")

    def err(msg):
        return GGUFError(f"{path}: {msg}")

    def get(name, default=None, required=False, kind=int):
        key = f"{arch}.{name}"
        if key not in kv:
            if required:
                raise err(f"missing required key '{key}'")
            return default
        v = kv[key]
        if isinstance(v, list):              # per-layer arrays: accept when uniform
            if not v:
                raise err(f"key '{key}' is an empty array")
            if any(x != v[0] for x in v):
                raise NotImplementedError(f"{path}: per-layer values for '{key}' are not supported yet")
            v = v[0]
        if kind is int:
            if isinstance(v, bool) or not isinstance(v, int):
                raise err(f"key '{key}' must be an integer, got {type(v).__name__} {v!r}")
            if v < 0:
                raise err(f"key '{key}' must not be negative, got {v}")
            return v
        if kind is float:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise err(f"key '{key}' must be a number, got {type(v).__name__} {v!r}")
            return float(v)
        if not isinstance(v, kind):
            raise err(f"key '{key}' must be {kind.__name__}, got {type(v).__name__}")
        return v

    strict = arch in _LLAMA_FAMILY
    n_embd = get("embedding_length", required=True)
    n_layer = get("block_count", required=True)
    n_ctx_train = get("context_length", required=True)
    if arch in _NO_ATTN_ARCHS:
        # attention-free (converters write head_count 0 or nothing): one nominal head keeps
        # the generic fields defined; these builders never read them
        n_head = get("attention.head_count", 0) or 1
    else:
        n_head = get("attention.head_count", required=True)
    n_ff = get("feed_forward_length", 0, required=strict)
    if n_embd <= 0 or n_layer <= 0 or n_head <= 0:
        raise err(f"embedding_length={n_embd}, block_count={n_layer}, head_count={n_head} must be positive")
    n_head_kv = get("attention.head_count_kv", n_head)
    if n_head_kv <= 0 or n_head % n_head_kv:
        raise err(f"attention.head_count={n_head} must be a positive multiple of head_count_kv={n_head_kv}")
    head_k = get("attention.key_length", None)
    head_v = get("attention.value_length", None)
    if head_k is None or head_v is None:
        if n_embd % n_head:
            raise err(f"embedding_length={n_embd} is not a multiple of head_count={n_head} "
                      "and attention.key_length/value_length are absent")
    head_k = n_embd // n_head if head_k is None else head_k
    head_v = n_embd // n_head if head_v is None else head_v
    n_rot = get("rope.dimension_count", head_k)
    if n_rot > head_k or n_rot % 2:
        raise err(f"rope.dimension_count={n_rot} must be even and at most the head size {head_k}")
    if strict and n_rot != head_k:
        raise err(f"{arch}: rope.dimension_count={n_rot} must equal the head size {head_k} (as in llama.cpp)")
    rms_eps = get("attention.layer_norm_rms_epsilon", 1e-5, required=strict, kind=float)
    freq_base = get("rope.freq_base", 10000.0, kind=float)
    factor = get("rope.scaling.factor", None, kind=float)
    if not factor:
        factor = get("rope.scale_linear", None, kind=float)
    freq_scale = 1.0 / factor if factor else 1.0
    scaling_type = get("rope.scaling.type", "none", kind=str)

    n_vocab = get("vocab_size", None)
    tokens = kv.get("tokenizer.ggml.tokens")
    if n_vocab is None and isinstance(tokens, list):
        n_vocab = len(tokens)
    if n_vocab is None:
        emb = next((t for t in header.tensors if t.name == "token_embd.weight"), None)
        n_vocab = emb.ne[1] if emb is not None and len(emb.ne) > 1 else 0

    def token_id(key):
        v = kv.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    return HParams(
        arch=arch, n_vocab=n_vocab, n_ctx_train=n_ctx_train, n_embd=n_embd, n_layer=n_layer, n_ff=n_ff,
        n_head=n_head, n_head_kv=n_head_kv, head_dim_k=head_k, head_dim_v=head_v, n_rot=n_rot,
        rope_freq_base=freq_base, rope_freq_scale=freq_scale, rope_type=rope_type_for_arch(arch),
        rms_eps=rms_eps, n_swa=get("attention.sliding_window", 0),
        bos_id=token_id("tokenizer.ggml.bos_token_id"), eos_id=token_id("tokenizer.ggml.eos_token_id"),
        norm_eps=get("attention.layer_norm_epsilon", 1e-5, kind=float), rope_scaling_type=scaling_type,
        n_ctx_orig_yarn=get("rope.scaling.original_context_length", n_ctx_train),
        n_expert=get("expert_count", 0), n_expert_used=get("expert_used_count", 0),
    )
