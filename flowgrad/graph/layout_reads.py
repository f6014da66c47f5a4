"""Layout reads in build: user code branching on a traced tensor's `is_contiguous()`,
`stride()`, `storage_offset()` or `dim_order()` (`x * x.stride(0)`, `if x.is_contiguous():`).
The plan keeps the branch taken and the numbers read at trace time, where eagerly each call
reads its inputs' layouts anew; so while build is traced these methods note a read by the
user's code of a tensor the plan recomputes, and the plan then checks every input's strides
and storage offset on each call (`Graph._run`: another layout raises StalePlanError, and
flow.compile traces anew). flowgrad's own reads are not noted: its ops replay the layout
they see.
"""
from __future__ import annotations

import contextlib
import sys

from ..tensor import Tensor
from .sites import _INSIDE, _PACKAGE

_READERS = ("stride", "is_contiguous", "storage_offset", "dim_order")


def exact_layout(tensor):
    """A tensor's strides (in elements) and storage offset, as the user's code reads them."""
    return tensor.stride(), tensor.storage_offset()


@contextlib.contextmanager
def watching_layout_reads(tracer, found):
    """Patch the layout readers for the duration of build's trace; each read by the user's
    code of a tensor that varies per run (an input, state, or what is computed from them)
    appends the method's name to `found`."""
    originals = {name: Tensor.__dict__[name] for name in _READERS}

    def watched(name, method):
        def read(self, *args, **kwargs):
            if not found:
                filename = sys._getframe(1).f_code.co_filename
                inside = _INSIDE.get(filename)
                if inside is None:
                    inside = _INSIDE[filename] = filename.startswith(_PACKAGE)
                if not inside and tracer.varies(self):
                    found.append(name)
            return method(self, *args, **kwargs)
        read.__name__, read.__doc__ = method.__name__, method.__doc__
        return read

    for name, method in originals.items():
        setattr(Tensor, name, watched(name, method))
    try:
        yield
    finally:
        for name, method in originals.items():
            setattr(Tensor, name, method)


def layout_changed(graph_name, flat, i, traced):
    strides, offset = exact_layout(flat[i])
    return (f"nn.Graph {graph_name}: build() read a layout (is_contiguous(), stride() or "
            f"storage_offset()) while it was traced, when input {i} had strides {traced[0]} "
            f"and storage offset {traced[1]}; it has strides {strides} and storage offset "
            f"{offset} this call. The plan keeps what build computed from the traced layout "
            f"(a branch taken, a number read). Pass inputs of one layout (x.contiguous()), "
            f"keep build's code independent of layouts, or use flow.compile, which traces anew "
            f"for another layout")
