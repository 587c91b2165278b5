"""GGUF validation: one handcrafted file per defect class, plus a bounded mutation fuzz.

The handcrafted files are assembled byte by byte here (independently of gguf-py's writer)
from the GGUF layout: magic, u32 version, u64 n_tensors, u64 n_kv, KV entries, tensor
infos, padding to the alignment, data."""
import json
import os
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from pyggml.llm.gguf_check import GGUFError, read_gguf_header, validate_gguf

# value type ids
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)


def s(text) -> bytes:
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload: bytes) -> bytes:
    return s(key) + struct.pack("<I", vtype) + payload


def kv_u32(key, v):
    return kv(key, U32, struct.pack("<I", v))


def kv_str(key, v):
    return kv(key, STR, s(v))


def tinfo(name, ne, type_id=0, offset=0, n_dims=None) -> bytes:
    n_dims = len(ne) if n_dims is None else n_dims
    return (s(name) + struct.pack("<I", n_dims) + b"".join(struct.pack("<q", v) for v in ne)
            + struct.pack("<I", type_id) + struct.pack("<Q", offset))


def gguf_bytes(kvs=(), tensors=(), data=b"", *, version=3, n_kv=None, n_tensors=None, magic=b"GGUF",
               alignment=32) -> bytes:
    head = magic + struct.pack("<I", version)
    head += struct.pack("<QQ", len(tensors) if n_tensors is None else n_tensors,
                        len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(tensors)
    if tensors:
        body += b"\0" * ((-len(body)) % alignment)
    return body + data


def write(tmp_path, blob: bytes, name="f.gguf") -> str:
    p = tmp_path / name
    p.write_bytes(blob)
    return str(p)


def expect_error(tmp_path, blob, pattern):
    p = write(tmp_path, blob)
    with pytest.raises(GGUFError, match=pattern) as ei:
        validate_gguf(p)
    assert isinstance(ei.value, ValueError)
    assert p in str(ei.value)          # messages name the file
    return ei.value


ARCH = kv_str("general.architecture", "llama")


def one_tensor_file(ne=(8,), type_id=0, offset=0, data=None, extra_kvs=(), **kw):
    nbytes = int(np.prod(ne)) * 4
    data = b"\x00" * nbytes if data is None else data
    return gguf_bytes([ARCH, *extra_kvs], [tinfo("t", list(ne), type_id, offset)], data, **kw)


# ---------------------------------------------------------------- valid files
def test_minimal_valid_files(tmp_path):
    validate_gguf(write(tmp_path, gguf_bytes()))                        # no tensors, no KVs
    hdr = read_gguf_header(write(tmp_path, one_tensor_file(), "a.gguf"))
    assert [t.name for t in hdr.tensors] == ["t"] and hdr.tensors[0].ne == [8]
    assert hdr.data_offset % 32 == 0 and hdr.tensors[0].nbytes == 32
    validate_gguf(write(tmp_path, one_tensor_file(version=2), "v2.gguf"))   # v2 accepted
    # every scalar and array value type, nested array one level deep, custom alignment
    vals = [kv("u8", U8, b"\x01"), kv("i8", I8, b"\xff"), kv("u16", U16, b"\1\0"), kv("i16", I16, b"\1\0"),
            kv("i32", I32, b"\1\0\0\0"), kv("f32", F32, struct.pack("<f", 1.5)), kv("b", BOOL, b"\x01"),
            kv("u64", U64, b"\0" * 8), kv("i64", I64, b"\0" * 8), kv("f64", F64, b"\0" * 8),
            kv("arr", ARR, struct.pack("<IQ", STR, 2) + s("a") + s("bc")),
            kv("nest", ARR, struct.pack("<IQ", ARR, 1) + struct.pack("<IQ", U8, 2) + b"\1\2"),
            kv_u32("general.alignment", 64)]
    blob = gguf_bytes([ARCH, *vals], [tinfo("t", [8])], b"\0" * 32, alignment=64)
    hdr = read_gguf_header(write(tmp_path, blob, "all.gguf"))
    assert hdr.alignment == 64 and hdr.data_offset % 64 == 0
    assert hdr.kv["general.architecture"] == "llama" and hdr.kv["f32"] == 1.5 and hdr.kv["b"] is True
    assert hdr.kv["arr"] == ["a", "bc"] and hdr.kv["nest"] == [[1, 2]] and hdr.kv["i8"] == -1


# ---------------------------------------------------------------- one file per defect class
def test_empty_and_tiny_truncated(tmp_path):
    expect_error(tmp_path, b"", "truncated")
    expect_error(tmp_path, b"GG", "truncated")
    expect_error(tmp_path, b"GGUF\x03\x00", "truncated.*version")
    expect_error(tmp_path, b"GGUF" + struct.pack("<IQ", 3, 0), "truncated.*key/value count")


def test_truncated_inside_header_and_data(tmp_path):
    blob = one_tensor_file(ne=(16,), extra_kvs=[kv_str("general.name", "x" * 40)])
    cut_kv = blob[:60]                        # inside the general.name string
    expect_error(tmp_path, cut_kv, "truncated|remain")
    hdr_len = len(blob) - 64
    expect_error(tmp_path, blob[:hdr_len - 3], "truncated")      # inside the tensor info / padding
    expect_error(tmp_path, blob[:-1], "past the end of the file")


def test_bad_magic(tmp_path):
    e = expect_error(tmp_path, gguf_bytes(magic=b"GGML"), "bad magic")
    assert "GGML" in str(e)


@pytest.mark.parametrize("version", [0, 1, 4, 0x03000000])
def test_unsupported_version(tmp_path, version):
    e = expect_error(tmp_path, gguf_bytes(version=version), f"unsupported GGUF version {version}")
    if version == 0x03000000:
        assert "big-endian" in str(e)


def test_absurd_counts(tmp_path):
    # the "43-byte file" class: huge counts in a tiny file must fail at once
    t0 = time.perf_counter()
    expect_error(tmp_path, gguf_bytes(n_kv=2**63) + b"\0" * 19, "absurd metadata key/value count")
    expect_error(tmp_path, gguf_bytes(n_tensors=2**40) + b"\0" * 19, "absurd tensor count")
    expect_error(tmp_path, gguf_bytes([ARCH], n_kv=1000), "absurd metadata key/value count")
    # plausible by size, but the entries are not there
    expect_error(tmp_path, gguf_bytes([ARCH], n_kv=2) + b"\0" * 40, "remain|truncated|empty key")
    assert time.perf_counter() - t0 < 1.0


def test_string_longer_than_file(tmp_path):
    key = struct.pack("<Q", 2**62) + b"general.architecture"
    expect_error(tmp_path, gguf_bytes([key + b"\0" * 12]), r"key of metadata entry 0 claims \d+ bytes")
    val = s("general.name") + struct.pack("<I", STR) + struct.pack("<Q", 1000) + b"abc"
    expect_error(tmp_path, gguf_bytes([val]), "string value of key 'general.name' claims 1000 bytes")
    name = struct.pack("<Q", 10**6) + b"t"
    expect_error(tmp_path, gguf_bytes([ARCH], [name + b"\0" * 30]), "name of tensor 0 claims")


def test_array_longer_than_file(tmp_path):
    arr = kv("tokenizer.ggml.scores", ARR, struct.pack("<IQ", F32, 2**40) + b"\0" * 16)
    expect_error(tmp_path, gguf_bytes([arr]), "array of 1099511627776 f32 elements")
    arr = kv("tokenizer.ggml.tokens", ARR, struct.pack("<IQ", STR, 3) + s("a") + s("b"))
    expect_error(tmp_path, gguf_bytes([arr]), "array of 3 str elements|truncated")
    # the count fits the file size, an element's length does not
    arr = kv("tokenizer.ggml.tokens", ARR, struct.pack("<IQ", STR, 2) + s("a") + struct.pack("<Q", 99) + b"x")
    expect_error(tmp_path, gguf_bytes([arr]), "string element of key 'tokenizer.ggml.tokens' claims 99")


def test_unknown_value_types(tmp_path):
    expect_error(tmp_path, gguf_bytes([kv("k", 13, b"\0" * 8)]), "key 'k' has unknown value type 13")
    expect_error(tmp_path, gguf_bytes([kv("k", 0xFFFFFFFF, b"\0" * 8)]), "unknown value type 4294967295")
    expect_error(tmp_path, gguf_bytes([kv("k", ARR, struct.pack("<IQ", 77, 1) + b"\0" * 8)]),
                 "array of unknown value type 77")


def test_nested_arrays_too_deep(tmp_path):
    inner = struct.pack("<IQ", ARR, 1) + struct.pack("<IQ", ARR, 1) + struct.pack("<IQ", U8, 1) + b"\1"
    expect_error(tmp_path, gguf_bytes([kv("deep", ARR, inner)]), "nested more than 2 deep")


def test_bad_dims(tmp_path):
    expect_error(tmp_path, gguf_bytes([ARCH], [tinfo("t", [1, 1, 1, 1, 1])], b"\0" * 32), "n_dims=5")
    expect_error(tmp_path, gguf_bytes([ARCH], [tinfo("t", [8, 0])], b"\0" * 32), r"ne\[1\]=0")
    expect_error(tmp_path, gguf_bytes([ARCH], [tinfo("t", [-8])], b"\0" * 32), r"ne\[0\]=-8")
    expect_error(tmp_path, gguf_bytes([ARCH], [tinfo("t", [2**62, 2**62])], b"\0" * 32), "overflows int64")
    expect_error(tmp_path, gguf_bytes([ARCH], [tinfo("t", [2**31, 2**20])], b"\0" * 32),
                 "more than the whole file")
    # ne[0] not a multiple of the q8_0 block
    expect_error(tmp_path, gguf_bytes([ARCH], [tinfo("t", [33], type_id=8)], b"\0" * 64),
                 "not a multiple of the block size 32")


@pytest.mark.parametrize("type_id", [4, 5, 31, 42, 1000])
def test_unknown_tensor_type(tmp_path, type_id):
    expect_error(tmp_path, one_tensor_file(type_id=type_id), f"unknown ggml type id {type_id}")


def test_tensor_data_past_end(tmp_path):
    expect_error(tmp_path, one_tensor_file(ne=(8,), data=b"\0" * 16), r"'t' data \[\d+, \d+\) lies past the end")
    expect_error(tmp_path, one_tensor_file(ne=(8,), offset=2**20), "past the end")


def test_misaligned_offsets(tmp_path):
    expect_error(tmp_path, one_tensor_file(offset=4, data=b"\0" * 64), "offset 4 is not a multiple of the alignment 32")
    blob = gguf_bytes([ARCH, kv_u32("general.alignment", 64)], [tinfo("t", [8], offset=32)], b"\0" * 128,
                      alignment=64)
    expect_error(tmp_path, blob, "offset 32 is not a multiple of the alignment 64")
    expect_error(tmp_path, one_tensor_file(extra_kvs=[kv_u32("general.alignment", 24)]), "24 is not a power of two")
    expect_error(tmp_path, one_tensor_file(extra_kvs=[kv_u32("general.alignment", 0)]), "0 is not a power of two")
    expect_error(tmp_path, one_tensor_file(extra_kvs=[kv("general.alignment", U64, struct.pack("<Q", 32))]),
                 "general.alignment must be u32")


def test_duplicates(tmp_path):
    expect_error(tmp_path, gguf_bytes([ARCH, kv_str("general.architecture", "qwen2")]),
                 "duplicate metadata key 'general.architecture'")
    blob = gguf_bytes([ARCH], [tinfo("w", [8]), tinfo("w", [8], offset=32)], b"\0" * 64)
    expect_error(tmp_path, blob, "duplicate tensor name 'w'")


def test_overlapping_tensor_data(tmp_path):
    blob = gguf_bytes([ARCH], [tinfo("a", [16]), tinfo("b", [8], offset=32)], b"\0" * 128)
    expect_error(tmp_path, blob, r"overlap: 'a' \[0, 64\) and 'b' starting at 32")
    # identical offsets, listed in reverse order
    blob = gguf_bytes([ARCH], [tinfo("b", [8], offset=64), tinfo("a", [8], offset=64)], b"\0" * 128)
    expect_error(tmp_path, blob, "overlap")
    # adjacent is fine, and order in the table does not matter
    blob = gguf_bytes([ARCH], [tinfo("b", [8], offset=32), tinfo("a", [8], offset=0)], b"\0" * 64)
    validate_gguf(write(tmp_path, blob, "ok.gguf"))


def test_names_and_keys(tmp_path):
    expect_error(tmp_path, gguf_bytes([kv("", U8, b"\0")]), "empty key")
    expect_error(tmp_path, gguf_bytes([kv(b"\xff\xfe", U8, b"\0")]), "not valid UTF-8")
    expect_error(tmp_path, gguf_bytes([ARCH], [tinfo("x" * 64, [8])], b"\0" * 32), "longer than 63 bytes")
    expect_error(tmp_path, gguf_bytes([ARCH], [tinfo(b"\xc3", [8])], b"\0" * 32), "name of tensor 0 is not valid UTF-8")


def test_missing_file(tmp_path):
    with pytest.raises(GGUFError, match="cannot read file"):
        validate_gguf(str(tmp_path / "nope.gguf"))
    with pytest.raises(GGUFError, match="cannot read file"):
        validate_gguf(str(tmp_path))                              # a directory


def test_loader_never_uses_the_trusting_reader(tmp_path, monkeypatch):
    """Model.load parses with the bounded walker only: gguf.GGUFReader is never called."""
    import gguf
    from pyggml.llm import Model, write_tiny_llama

    def boom(*a, **k):
        raise AssertionError("GGUFReader called")

    monkeypatch.setattr(gguf, "GGUFReader", boom)
    p = write(tmp_path, gguf_bytes(n_kv=2**63) + b"\0" * 19)
    with pytest.raises(GGUFError):
        Model.load(p)
    Model.load(write_tiny_llama(str(tmp_path / "ok.gguf"), n_layer=1))


def test_loader_missing_keys(tmp_path):
    from pyggml.llm import Model
    p = write(tmp_path, one_tensor_file())
    with pytest.raises(GGUFError, match="missing required key 'llama.embedding_length'"):
        Model.load(p)
    p = write(tmp_path, gguf_bytes(), "noarch.gguf")
    with pytest.raises(GGUFError, match="general.architecture"):
        Model.load(p)


# ---------------------------------------------------------------- mutation fuzz
FUZZ_SEED = 1234
FUZZ_FILES = 2000


def _fuzz_worker(base_path: str, out_dir: str, n: int, seed: int) -> dict:
    """Mutate the base file n times; every result must load or raise an allowed error."""
    import signal

    from pyggml.llm import Model
    from pyggml.llm.gguf_check import read_gguf_header as rgh

    base = open(base_path, "rb").read()
    hdr = rgh(base_path)
    header_end = hdr.data_offset
    rng = np.random.default_rng(seed)
    stats = {"loaded": 0, "GGUFError": 0, "ValueError": 0, "NotImplementedError": 0, "max_s": 0.0}

    def on_alarm(signum, frame):
        raise TimeoutError

    signal.signal(signal.SIGALRM, on_alarm)
    path = os.path.join(out_dir, "mut.gguf")
    for i in range(n):
        b = bytearray(base)
        kind = i % 4
        if kind == 0:                                   # byte flips, mostly in the header
            for _ in range(int(rng.integers(1, 9))):
                end = header_end if rng.random() < 0.9 else len(b)
                b[int(rng.integers(0, end))] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1:                                 # truncation
            b = b[:int(rng.integers(0, len(b)))]
        elif kind == 2:                                 # random bytes over a header span
            at = int(rng.integers(0, header_end))
            k = int(rng.integers(1, 9))
            b[at:at + k] = rng.integers(0, 256, size=len(b[at:at + k]), dtype=np.uint8).tobytes()
        else:                                           # a large little-endian integer somewhere
            at = int(rng.integers(0, header_end - 8))
            v = int(rng.choice([2**31, 2**32 - 1, 2**63 - 1, 2**64 - 1, len(b), len(b) * 8, 0, 13, 9, 4]))
            width = int(rng.choice([4, 8]))
            b[at:at + width] = (v % (1 << (8 * width))).to_bytes(width, "little")
        with open(path, "wb") as f:
            f.write(bytes(b))
        print(f"fuzz {i}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, 10.0)
        try:
            m = Model.load(path, progress=False)
            for t in list(m.tensors.values())[:3]:      # touch the data: must be in bounds
                np.asarray(t.numpy()).tobytes()
            stats["loaded"] += 1
        except GGUFError:
            stats["GGUFError"] += 1
        except NotImplementedError:
            stats["NotImplementedError"] += 1
        except ValueError:
            stats["ValueError"] += 1
        except TimeoutError:
            return {"error": f"file {i} took more than 10 s", **stats}
        except Exception as e:  # noqa: BLE001  (report any other exception as a failure)
            bad = os.path.join(out_dir, f"bad_{i}.gguf")
            with open(bad, "wb") as f:
                f.write(bytes(b))
            return {"error": f"file {i} raised {type(e).__name__}: {e} (kept as {bad})", **stats}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        stats["max_s"] = max(stats["max_s"], time.perf_counter() - t0)
    return stats


def test_mutation_fuzz(tmp_path):
    """~2000 mutated copies of a tiny model (fixed seed), in a subprocess so a crash is a
    test failure, not a dead test run."""
    from pyggml.llm import write_tiny_llama
    base = write_tiny_llama(str(tmp_path / "base.gguf"), n_vocab=16, n_embd=32, n_layer=1, n_head=2,
                            n_head_kv=1, n_ff=32, seed=3)
    import pyggml
    root = os.path.dirname(os.path.dirname(os.path.abspath(pyggml.__file__)))   # where pyggml is imported from
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join([root] + [x for x in [env.get("PYTHONPATH")] if x])
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, base, str(tmp_path), str(FUZZ_FILES), str(FUZZ_SEED)],
                          capture_output=True, text=True, timeout=300, env=env)
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 0, (f"fuzz worker died (rc={proc.returncode}); last lines:\n"
                                  + "\n".join(proc.stderr.splitlines()[-5:]))
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "error" not in stats, stats["error"]
    total = stats["loaded"] + stats["GGUFError"] + stats["ValueError"] + stats["NotImplementedError"]
    assert total == FUZZ_FILES
    assert stats["GGUFError"] > FUZZ_FILES // 4 and stats["loaded"] > 0, stats
    assert stats["max_s"] < 5.0, stats
    print(f"fuzz: {stats} in {elapsed:.1f} s")


if __name__ == "__main__":
    result = _fuzz_worker(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    print(json.dumps(result))
