"""Reference of FILL."""
import numpy as np


def fill(shape, c, type_name="f32"):
    """Bit patterns of a filled tensor: uint32 for f32, uint16 for f16."""
    c32 = np.full(shape, c, dtype=np.float32)
    if type_name == "f32":
        return c32.view(np.uint32)
    from references.copy import f16_bits
    return f16_bits(c32)
