"""The CPU backend's large buffers on transparent huge pages (cpu/host_memory.h): an arena of
4 MiB or more starts on a 2 MiB boundary and its mapping is advised huge (the kernel's smaps
then marks it THPeligible where THP runs in "madvise" or "always" mode), so a GEMV streaming a
weight crosses no 4 KiB page. Smaller arenas keep the plain 64-byte alignment. The values a
tensor holds do not depend on where it lives."""
import sys
from pathlib import Path

import numpy as np
import pytest

import pyggml as gg

HUGE = 2 << 20
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def thp_mode():
    """The bracketed THP mode ('always', 'madvise', 'never'), or None off Linux / without THP."""
    try:
        text = THP.read_text()
    except OSError:
        return None
    return text[text.index("[") + 1:text.index("]")]


def smaps_entry(addr):
    """The fields of the /proc/self/smaps mapping holding addr, as {name: value string}."""
    fields, inside = {}, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            if inside:
                break
            inside = lo <= addr < hi
        elif inside:
            name, _, value = line.partition(":")
            fields[name.strip()] = value.strip()
    return fields


@pytest.mark.parametrize("mem_mib", [4, 9, 33])
def test_large_arena_starts_on_a_huge_page(mem_mib):
    ctx = gg.Context(mem_size=mem_mib << 20)
    t = ctx.new_tensor(gg.F32, [1024])
    assert t.data_ptr % HUGE == 0


def test_small_arena_keeps_plain_alignment():
    ctx = gg.Context(mem_size=1 << 20)
    t = ctx.new_tensor(gg.F32, [1024])
    assert t.data_ptr % 64 == 0


@pytest.mark.skipif(not sys.platform.startswith("linux") or thp_mode() not in ("madvise", "always"),
                    reason="transparent huge pages are off (or not Linux)")
def test_large_arena_is_advised_huge():
    ctx = gg.Context(mem_size=8 << 20)
    t = ctx.new_tensor(gg.F32, [2 << 20])
    x = np.arange(2 << 20, dtype=np.float32)
    t.set(x)
    assert smaps_entry(t.data_ptr).get("THPeligible") == "1"
    np.testing.assert_array_equal(t.numpy(), x)
