"""A real Q4_K_M model made from the cached SmolLM2-135M-Instruct Q4_1 file, for the K-quant
oracle test and bench/compare_llama_cpp.py. Model files are never committed: this builds one
into the cache folder once and reuses it.

Steps: the Q4_1 weights are dequantized (gguf.quants) into an F16 GGUF with the same metadata,
then llama.cpp's own quantizer (`llama_model_quantize`, ftype MOSTLY_Q4_K_M) turns that into
the usual Q4_K_M mix. SmolLM2's 576-wide rows are not a multiple of the K-quants' 256-value
super-block, so llama.cpp falls back to legacy types for those tensors (Q5_0/Q8_0) and keeps
the K-quants for the 1536-wide ffn_down rows: the file mixes Q4_K, Q6_K, Q5_0 and Q8_0."""
from __future__ import annotations

import ctypes
import os

import numpy as np

Q4_K_M_FILE = "SmolLM2-135M-Instruct.Q4_K_M.gguf"
F16_FILE = "SmolLM2-135M-Instruct.F16.gguf"


def _source_path() -> str | None:
    from pyggml.demo import SMOLLM2, cache_dir
    p = os.path.join(cache_dir(), SMOLLM2.file)
    return p if os.path.exists(p) else None


def dequantize_to_f16(src: str, dst: str) -> None:
    """dst: src with every quantized 2-D weight stored as F16 (1-D tensors stay F32)."""
    import gguf
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst + ".part", arch)
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if field.name == "general.file_type":
            value = int(gguf.LlamaFileType.MOSTLY_F16)
        writer.add_key_value(field.name, value, vtype, sub_type=sub)
    for t in reader.tensors:
        if t.tensor_type == gguf.GGMLQuantizationType.F32:
            data = np.asarray(t.data, np.float32)
        else:
            data = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float16)
        writer.add_tensor(t.name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(dst + ".part", dst)


def quantize_with_llama_cpp(src: str, dst: str, ftype: int, threads: int = 2) -> None:
    import llama_cpp as lc
    from llama_cpp_driver import _quiet
    _quiet(lc)
    params = lc.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads
    if lc.llama_model_quantize(src.encode(), (dst + ".part").encode(), ctypes.byref(params)) != 0:
        raise RuntimeError(f"llama_model_quantize failed on {src}")
    os.replace(dst + ".part", dst)


def smollm2_q4_k_m(folder: str | None = None) -> str | None:
    """Path of the Q4_K_M SmolLM2 (built on first use), or None when the Q4_1 source is not
    cached. Needs llama_cpp (ImportError otherwise)."""
    import llama_cpp as lc
    from pyggml.demo import cache_dir
    src = _source_path()
    if src is None:
        return None
    folder = folder or cache_dir()
    dst = os.path.join(folder, Q4_K_M_FILE)
    if not os.path.exists(dst):
        f16 = os.path.join(folder, F16_FILE)
        if not os.path.exists(f16):
            dequantize_to_f16(src, f16)
        quantize_with_llama_cpp(f16, dst, lc.LLAMA_FTYPE_MOSTLY_Q4_K_M)
        os.remove(f16)            # 270 MB, only the quantizer's input
    return dst
