"""Defensive GGUF header validation.

The ``gguf`` package's reader trusts every length field it reads, so a damaged file can
make it allocate absurd amounts or loop for a very long time. :func:`validate_gguf` walks
the header itself first: every read is bounds-checked against the file size and every
loop is bounded by the bytes that remain, so it neither reads out of bounds nor hangs.
It also decodes the metadata values, so :mod:`pyggml.llm.model` needs no other parser
(``gguf.GGUFReader`` builds one numpy view per array element: seconds for a 32k vocabulary,
where this walk takes tens of milliseconds). The tests cross-check it against the reader.

File layout (GGUF v2/v3, little endian)::

    magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
    n_kv x  (string key | u32 value_type | value)
    n_tensors x (string name | u32 n_dims | n_dims x u64 ne | u32 ggml_type | u64 offset)
    padding to `general.alignment` (default 32) | tensor data

A string is ``u64 length`` followed by that many bytes (no terminator). An array value is
``u32 element_type | u64 count | count x element``. Tensor offsets are relative to the
start of the data section and must be multiples of the alignment.
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["GGUFError", "validate_gguf", "read_gguf_header", "GGUFHeader", "TensorInfo",
           "GGML_TYPE_BLOCKS", "GGML_TYPE_NAMES"]


class GGUFError(ValueError):
    """A GGUF file is malformed, truncated or uses something this loader does not accept."""


GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4
MAX_NAME_BYTES = 63          # ggml's GGML_MAX_NAME is 64 including the terminator
MAX_ARRAY_NESTING = 2        # an array may hold arrays, which may not hold arrays again

# GGUF metadata value types: id -> (name, fixed size in bytes or None)
VALUE_TYPES: dict[int, tuple[str, int | None]] = {
    0: ("u8", 1), 1: ("i8", 1), 2: ("u16", 2), 3: ("i16", 2), 4: ("u32", 4), 5: ("i32", 4),
    6: ("f32", 4), 7: ("bool", 1), 8: ("str", None), 9: ("arr", None), 10: ("u64", 8),
    11: ("i64", 8), 12: ("f64", 8),
}
_SCALAR_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<b",
               10: "<Q", 11: "<q", 12: "<d"}
T_STRING, T_ARRAY, T_UINT32 = 8, 9, 4

# ggml tensor types known to ggml: id -> (elements per block, bytes per block). Ids that
# ggml retired (4, 5, 31-33, ...) are unknown here on purpose.
GGML_TYPE_BLOCKS: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
    14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98),
    19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1),
    25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
    34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36), 41: (128, 18),
}
GGML_TYPE_NAMES: dict[int, str] = {
    0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 9: "q8_1",
    10: "q2_K", 11: "q3_K", 12: "q4_K", 13: "q5_K", 14: "q6_K", 15: "q8_K", 16: "iq2_xxs",
    17: "iq2_xs", 18: "iq3_xxs", 19: "iq1_s", 20: "iq4_nl", 21: "iq3_s", 22: "iq2_s",
    23: "iq4_xs", 24: "i8", 25: "i16", 26: "i32", 27: "i64", 28: "f64", 29: "iq1_m",
    30: "bf16", 34: "tq1_0", 35: "tq2_0", 39: "mxfp4", 40: "nvfp4", 41: "q1_0",
}


@dataclass
class TensorInfo:
    name: str
    type_id: int
    ne: list[int]            # ggml order, n_dims entries (at least 1)
    offset: int              # relative to the data section
    data_offset: int         # absolute file offset
    nbytes: int


@dataclass
class GGUFHeader:
    path: str
    file_size: int
    version: int
    alignment: int
    data_offset: int         # absolute offset of the data section
    kv_types: dict[str, int] = field(default_factory=dict)      # key -> value type id
    kv: dict[str, Any] = field(default_factory=dict)            # key -> value (arrays as lists)
    tensors: list[TensorInfo] = field(default_factory=list)


class _Cursor:
    """Bounds-checked little-endian reads over a read-only buffer."""

    def __init__(self, buf, size: int, path: str):
        self.buf, self.size, self.pos, self.path = buf, size, 0, path

    def fail(self, msg: str, at: int | None = None) -> GGUFError:
        where = self.pos if at is None else at
        return GGUFError(f"{self.path}: {msg} (at byte offset {where})")

    @property
    def remaining(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str) -> None:
        if n > self.remaining:
            raise self.fail(f"truncated file: {what} needs {n} bytes but only {self.remaining} remain "
                            f"(file size {self.size})")

    def scalar(self, fmt: str, what: str):
        n = struct.calcsize(fmt)
        self.need(n, what)
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return v

    def u32(self, what: str) -> int:
        return self.scalar("<I", what)

    def u64(self, what: str) -> int:
        return self.scalar("<Q", what)

    def string_len(self, what: str) -> int:
        start = self.pos
        n = self.u64(f"length of {what}")
        if n > self.remaining:
            raise self.fail(f"{what} claims {n} bytes but only {self.remaining} remain in the file", start)
        return n

    def string(self, what: str) -> str:
        start = self.pos
        n = self.string_len(what)
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{what} is not valid UTF-8 ({e.reason} at byte {e.start})", start) from None

    def skip_string(self, what: str) -> None:
        n = self.string_len(what)
        self.pos += n


def _min_value_size(vtype: int) -> int:
    """Fewest bytes a value of this type can occupy (used to bound counts)."""
    size = VALUE_TYPES[vtype][1]
    if size is not None:
        return size
    return 8 if vtype == T_STRING else 12          # string: u64 length; array: u32 type + u64 count


_NP_DTYPES = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<i1",
              10: "<u8", 11: "<i8", 12: "<f8"}


def _read_value(cur: _Cursor, vtype: int, key: str, depth: int, keep: bool):
    """Consume one value of type `vtype`; return it as a Python value when `keep` (arrays as
    lists), else None. Strings are decoded leniently (llama.cpp does not check values)."""
    if vtype not in VALUE_TYPES:
        raise cur.fail(f"key '{key}' has unknown value type {vtype} (valid: 0..12)", cur.pos - 4)
    if vtype == T_STRING:
        n = cur.string_len(f"string value of key '{key}'")
        raw = bytes(cur.buf[cur.pos:cur.pos + n]) if keep else None
        cur.pos += n
        return raw.decode("utf-8", errors="replace") if keep else None
    if vtype == T_ARRAY:
        if depth >= MAX_ARRAY_NESTING:
            raise cur.fail(f"key '{key}': arrays nested more than {MAX_ARRAY_NESTING} deep")
        etype = cur.u32(f"array element type of key '{key}'")
        if etype not in VALUE_TYPES:
            raise cur.fail(f"key '{key}' is an array of unknown value type {etype} (valid: 0..12)", cur.pos - 4)
        count_at = cur.pos
        count = cur.u64(f"array length of key '{key}'")
        min_size = _min_value_size(etype)
        if count > cur.remaining // min_size:
            raise cur.fail(f"key '{key}': array of {count} {VALUE_TYPES[etype][0]} elements needs at "
                           f"least {count * min_size} bytes but only {cur.remaining} remain", count_at)
        size = VALUE_TYPES[etype][1]
        if size is not None:
            out = None
            if keep:
                arr = np.frombuffer(cur.buf, dtype=_NP_DTYPES[etype], count=count, offset=cur.pos)
                out = (arr != 0).tolist() if etype == 7 else arr.tolist()
                del arr                               # drop the view before the map closes
            cur.pos += count * size                   # checked above
            return out
        out = [] if keep else None
        if etype == T_STRING:
            what = f"string element of key '{key}'"
            for _ in range(count):                    # each element consumes >= 8 bytes
                n = cur.string_len(what)
                if keep:
                    out.append(bytes(cur.buf[cur.pos:cur.pos + n]).decode("utf-8", errors="replace"))
                cur.pos += n
        else:
            for _ in range(count):                    # each element consumes >= 12 bytes
                v = _read_value(cur, T_ARRAY, key, depth + 1, keep)
                if keep:
                    out.append(v)
        return out
    v = cur.scalar(_SCALAR_FMT[vtype], f"value of key '{key}'")
    return bool(v) if vtype == 7 else v


def read_gguf_header(path, values: bool = True) -> GGUFHeader:
    """Parse and validate a GGUF file's header and tensor table; raise GGUFError on any defect.

    With `values`, every metadata value is decoded into ``GGUFHeader.kv`` (arrays as lists);
    otherwise only non-array values are kept."""
    path = os.fspath(path)

    def unreadable(e):
        return GGUFError(f"{path}: cannot read file: {getattr(e, 'strerror', None) or e}")

    try:
        fsize = os.path.getsize(path)
    except OSError as e:
        raise unreadable(e) from None
    if fsize < 4:
        raise GGUFError(f"{path}: truncated file: {fsize} bytes is too short to hold the GGUF magic")
    try:
        f = open(path, "rb")
    except OSError as e:
        raise unreadable(e) from None
    with f:
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as e:
            raise unreadable(e) from None
        with mm:
            buf = memoryview(mm)
            try:
                return _parse(_Cursor(buf, len(mm), path), values)
            finally:
                buf.release()


def _parse(cur: _Cursor, values: bool) -> GGUFHeader:
    magic = bytes(cur.buf[0:4])
    if magic != GGUF_MAGIC:
        raise cur.fail(f"bad magic {magic!r}: not a GGUF file (expected {GGUF_MAGIC!r})", 0)
    cur.pos = 4
    version = cur.u32("version")
    if version not in SUPPORTED_VERSIONS:
        hint = " (the file may be big-endian)" if version & 0xFFFF == 0 and version else ""
        raise cur.fail(f"unsupported GGUF version {version}{hint}; supported versions: 2, 3", 4)
    n_tensors = cur.u64("tensor count")
    n_kv = cur.u64("metadata key/value count")
    # Every KV needs >= 8 (key length) + 4 (type) + 1 (value) bytes; every tensor
    # info >= 8 + 1 + 4 + 4 + 8 (+ 8 per dim when it has one).
    if n_kv > cur.remaining // 13:
        raise cur.fail(f"absurd metadata key/value count {n_kv} for a file of {cur.size} bytes", 16)
    if n_tensors > cur.remaining // 25:
        raise cur.fail(f"absurd tensor count {n_tensors} for a file of {cur.size} bytes", 8)

    hdr = GGUFHeader(path=cur.path, file_size=cur.size, version=version,
                     alignment=DEFAULT_ALIGNMENT, data_offset=0)
    for i in range(n_kv):
        key_at = cur.pos
        key = cur.string(f"key of metadata entry {i}")
        if not key:
            raise cur.fail(f"metadata entry {i} has an empty key", key_at)
        if key in hdr.kv_types:
            raise cur.fail(f"duplicate metadata key '{key}'", key_at)
        vtype = cur.u32(f"value type of key '{key}'")
        if vtype not in VALUE_TYPES:
            raise cur.fail(f"key '{key}' has unknown value type {vtype} (valid: 0..12)", cur.pos - 4)
        hdr.kv_types[key] = vtype
        value = _read_value(cur, vtype, key, 0, keep=values or vtype != T_ARRAY)
        if values or vtype != T_ARRAY:
            hdr.kv[key] = value

    if "general.alignment" in hdr.kv_types:
        if hdr.kv_types["general.alignment"] != T_UINT32:
            raise cur.fail(f"general.alignment must be u32, not {VALUE_TYPES[hdr.kv_types['general.alignment']][0]}")
        a = hdr.kv["general.alignment"]
        if a == 0 or a & (a - 1):
            raise cur.fail(f"general.alignment {a} is not a power of two")
        hdr.alignment = a

    names: set[str] = set()
    for i in range(n_tensors):
        name_at = cur.pos
        name = cur.string(f"name of tensor {i}")
        if len(name.encode("utf-8")) > MAX_NAME_BYTES:
            raise cur.fail(f"tensor {i} name '{name[:80]}' is longer than {MAX_NAME_BYTES} bytes", name_at)
        if name in names:
            raise cur.fail(f"duplicate tensor name '{name}'", name_at)
        names.add(name)
        n_dims = cur.u32(f"n_dims of tensor '{name}'")
        if n_dims > MAX_DIMS:
            raise cur.fail(f"tensor '{name}' has n_dims={n_dims} (at most {MAX_DIMS})", cur.pos - 4)
        ne = []
        for d in range(n_dims):
            v = cur.scalar("<q", f"ne[{d}] of tensor '{name}'")
            if v <= 0:
                raise cur.fail(f"tensor '{name}' has ne[{d}]={v} (must be > 0)", cur.pos - 8)
            ne.append(v)
        if not ne:
            ne = [1]
        type_id = cur.u32(f"type of tensor '{name}'")
        if type_id not in GGML_TYPE_BLOCKS:
            raise cur.fail(f"tensor '{name}' has unknown ggml type id {type_id}", cur.pos - 4)
        blck, tsize = GGML_TYPE_BLOCKS[type_id]
        tname = GGML_TYPE_NAMES[type_id]
        if ne[0] % blck:
            raise cur.fail(f"tensor '{name}' of type {tname} has ne[0]={ne[0]}, not a multiple of the "
                           f"block size {blck}")
        nel = 1
        for v in ne:
            nel *= v                                      # Python ints: no overflow
        if nel >= 2**63:
            raise cur.fail(f"tensor '{name}' shape {ne} overflows int64 ({nel} elements)")
        nbytes = nel // blck * tsize
        if nbytes > cur.size:
            raise cur.fail(f"tensor '{name}' shape {ne} of type {tname} needs {nbytes} bytes, more "
                           f"than the whole file ({cur.size} bytes)")
        offset = cur.u64(f"data offset of tensor '{name}'")
        hdr.tensors.append(TensorInfo(name, type_id, ne, offset, 0, nbytes))

    a = hdr.alignment
    data_offset = (cur.pos + a - 1) // a * a if n_tensors else cur.pos
    if data_offset > cur.size:
        raise cur.fail(f"truncated file: the data section would start at {data_offset}, past the end "
                       f"of the file ({cur.size} bytes)")
    hdr.data_offset = data_offset
    for t in hdr.tensors:
        if t.offset % a:
            raise cur.fail(f"tensor '{t.name}' data offset {t.offset} is not a multiple of the "
                           f"alignment {a}", data_offset)
        t.data_offset = data_offset + t.offset
        if t.data_offset + t.nbytes > cur.size:
            raise cur.fail(f"tensor '{t.name}' data [{t.data_offset}, {t.data_offset + t.nbytes}) lies "
                           f"past the end of the file ({cur.size} bytes): truncated file?", data_offset)
    by_offset = sorted(hdr.tensors, key=lambda t: t.offset)
    for prev, nxt in zip(by_offset, by_offset[1:]):
        if prev.offset + prev.nbytes > nxt.offset:
            raise cur.fail(f"tensor data overlap: '{prev.name}' [{prev.offset}, {prev.offset + prev.nbytes}) "
                           f"and '{nxt.name}' starting at {nxt.offset} (offsets relative to the data "
                           f"section)", data_offset)
    return hdr


def validate_gguf(path) -> None:
    """Check that `path` is a well-formed GGUF v2/v3 file; raise :class:`GGUFError` otherwise.

    Reads only the header and tensor table, with bounded reads; never reads past the end of
    the file and never loops longer than the file size allows."""
    read_gguf_header(path, values=False)
