"""Warnings attributed to the user's line.

A flowgrad function reaches the `warnings.warn` inside it through wrappers (the argument
guard, out= handling, autocast), so a fixed `stacklevel` would name one of them; `warn` walks
up to the first frame outside the flowgrad package instead, as torch's warnings name the line
of the call in the user's script.
"""
from __future__ import annotations

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message, category=UserWarning, stacklevel=None):
    """`warnings.warn(message, category)` for the innermost frame outside flowgrad
    (`stacklevel` is accepted for warnings.warn's signature and not needed).

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn("careful")
    >>> caught[0].message.args[0], caught[0].filename.startswith(_PACKAGE)
    ('careful', False)
    """
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)


_WARNED_ONCE = set()


def warn_once(message, category=UserWarning):
    """`warn`, the first time only in this process (torch's TORCH_WARN_ONCE).

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_once("once"); warn_once("once")
    >>> len(caught)
    1
    """
    if message not in _WARNED_ONCE:
        _WARNED_ONCE.add(message)
        warn(message, category)


# the modules whose functions only pass a call on (the argument guard, out=, numpy's axis=
# spellings, autocast's casts): a function they wrap is called by whoever called them
_PASSING_ON = frozenset(os.path.join(_PACKAGE, *name.split("/")) for name in (
    "errors.py", "_warn.py", "ops/out_arg.py", "ops/torch_spellings.py", "amp/policy.py",
    "amp/autocast_mode.py"))


TENSOR_FILE = os.path.join(_PACKAGE, "tensor.py")  # (Tensor's own methods)


def called_by_user(depth=2, through_tensor=False):
    """Whether the function `depth` frames up (2: the caller of `called_by_user`) was called
    by code outside flowgrad: flowgrad's own calls are no mistake of the user's to warn of.
    With `through_tensor`, Tensor's own methods (float() calling item()) pass a call on too.

    >>> called_by_user(1)
    True
    """
    frame = sys._getframe(depth)
    while frame is not None and (frame.f_code.co_filename in _PASSING_ON or
                                 through_tensor and frame.f_code.co_filename == TENSOR_FILE):
        frame = frame.f_back
    return frame is None or not frame.f_code.co_filename.startswith(_PACKAGE)
