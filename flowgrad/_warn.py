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
