"""Model.load on untrusted files: a missing file is FileNotFoundError; a valid tiny GGUF cut at
many offsets or with bytes flipped gives only GGUFError (a ValueError naming the file) or
NotImplementedError, never another exception and never a crash. Deterministic."""
import os

import numpy as np
import pytest

from pyggml.llm import Model, write_tiny_llama
from pyggml.llm.gguf_check import GGUFError

CLEAN = (GGUFError, NotImplementedError)


@pytest.fixture(scope="module")
def tiny_bytes(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "t.gguf"
    write_tiny_llama(path, n_vocab=16, n_embd=8, n_layer=1, n_head=2, n_head_kv=1, n_ff=16, seed=3)
    return path.read_bytes()


def _load_cleanly(path):
    try:
        Model.load(path)
    except CLEAN as e:
        if isinstance(e, GGUFError):
            assert str(path) in str(e), str(e)   # the message names the file
        return False
    return True


def test_missing_file_is_file_not_found(tmp_path):
    missing = tmp_path / "nope.gguf"
    with pytest.raises(FileNotFoundError, match="nope.gguf"):
        Model.load(missing)


def test_directory_and_empty_file_are_clean_errors(tmp_path):
    with pytest.raises(GGUFError, match=str(tmp_path)):
        Model.load(tmp_path)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(GGUFError, match="empty.gguf"):
        Model.load(empty)


def test_truncated_at_many_offsets(tiny_bytes, tmp_path):
    blob = tiny_bytes
    assert _load_cleanly(_write(tmp_path, blob))           # the intact file loads
    # every offset through the first 2 KiB (the header), then spread over the rest
    cuts = sorted(set(range(0, min(2048, len(blob)))) | set(np.linspace(2048, len(blob) - 1, 200, dtype=int)))
    loaded = 0
    for n in cuts:
        loaded += _load_cleanly(_write(tmp_path, blob[:n]))
    assert loaded == 0, f"{loaded} truncated files loaded"  # a cut file always lacks data


def test_flipped_bytes(tiny_bytes, tmp_path):
    blob = tiny_bytes
    rng = np.random.default_rng(0)
    header_end = min(len(blob), 4096)
    positions = np.concatenate([np.arange(0, min(64, len(blob))),               # magic, counts
                                rng.integers(0, header_end, 600),                # keys, tensor table
                                rng.integers(0, len(blob), 100)])                # anywhere
    n_clean_errors = 0
    for i, pos in enumerate(positions):
        bad = bytearray(blob)
        bad[pos] ^= int(rng.integers(1, 256))
        if i % 3 == 0 and pos + 8 <= len(bad):     # also plant large 64-bit values (counts, offsets)
            bad[pos:pos + 8] = [2**63 - 1, 2**32, 2**64 - 1, 1 << 40][int(rng.integers(0, 4))].to_bytes(8, "little")
        n_clean_errors += not _load_cleanly(_write(tmp_path, bytes(bad)))
    assert n_clean_errors > 100    # the corruptions were mostly noticed (not all: data bytes are free)


def _write(tmp_path, data: bytes):
    p = tmp_path / "bad.gguf"
    with open(p, "wb") as f:
        f.write(data)
    return os.fspath(p)
