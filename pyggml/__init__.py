"""pyggml: ggml's tensor model and ops in C++, driven from Python.

Shapes are in ggml order: ``ne = [ne0, ne1, ne2, ne3]`` with ``ne0`` innermost
(contiguous). ``Tensor.numpy()`` returns a zero-copy view whose numpy shape is ``ne``
reversed, e.g. a tensor with ``ne = [4096, 32]`` reads as a ``(32, 4096)`` array.
"""
from ._loader import load_core as _load_core

_core = _load_core()

from ._api import *  # noqa: F401,F403,E402
from ._api import __all__  # noqa: E402

__version__ = "0.1.0"
