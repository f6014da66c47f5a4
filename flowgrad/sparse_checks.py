"""torch.sparse.check_sparse_tensor_invariants: torch's switch for checking sparse tensors'
indices at construction (off by default: torch then builds out-of-range indices unchecked and
its later uses are undefined). flowgrad's constructors always check, so the switch only keeps
torch's state for `is_enabled()`; the context manager and decorator forms work as torch's.

>>> import flowgrad as flow
>>> with flow.sparse.check_sparse_tensor_invariants():
...     flow.sparse.check_sparse_tensor_invariants.is_enabled()
True
>>> flow.sparse.check_sparse_tensor_invariants.is_enabled()
False
"""
from __future__ import annotations

import functools

_STATE = [False]


class check_sparse_tensor_invariants:
    """Turn torch's sparse invariant checks on (or off, `enable=False`) inside a `with` block
    or a decorated function; `enable()`, `disable()` and `is_enabled()` set and read the
    global flag. flowgrad checks the indices of every sparse tensor it builds either way."""

    @staticmethod
    def is_enabled():
        return _STATE[0]

    @staticmethod
    def enable():
        _STATE[0] = True

    @staticmethod
    def disable():
        _STATE[0] = False

    def __init__(self, enable=True):
        self.state = enable
        self.saved_state = None

    def __enter__(self):
        if self.saved_state is not None:
            raise RuntimeError("This context manager instance is already activated. Use a "
                               "different context manager instance for context nesting.")
        self.saved_state = _STATE[0]
        _STATE[0] = self.state

    def __exit__(self, type, value, traceback):
        _STATE[0] = self.saved_state
        self.saved_state = None

    def __call__(self, mth):
        @functools.wraps(mth)
        def test_mth(*args, **kwargs):
            with type(self)(self.state):
                return mth(*args, **kwargs)
        return test_mth
