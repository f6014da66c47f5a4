"""Where in the user's code an op was called: `user_site` (cheap enough for every traced op),
and the line it names for messages (`user_line`). A frame counts as the user's when its file
is outside the flowgrad package."""
from __future__ import annotations

import linecache
import os
import sys

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# file name -> whether it is flowgrad's (a str caches its hash; a code object hashes its
# bytecode on every lookup)
_INSIDE = {}


def user_site(skip=0):
    """Where the innermost frame outside flowgrad (the user's line in build) is, as cheaply as
    it can be kept: (its code object, its last instruction's offset), or None. `user_line`
    and `user_frame` turn it into a line (a line-table lookup, made only for a message).
    `skip` frames above the caller are known to be flowgrad's (not looked at)."""
    frame = sys._getframe(1 + skip)
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename
        inside = _INSIDE.get(filename)
        if inside is None:
            inside = _INSIDE[filename] = filename.startswith(_PACKAGE)
        if not inside:
            return code, frame.f_lasti
        frame = frame.f_back
    return None


def inside(frame):
    """Whether `frame` runs flowgrad's code (not the user's)."""
    filename = frame.f_code.co_filename
    known = _INSIDE.get(filename)
    if known is None:
        known = _INSIDE[filename] = filename.startswith(_PACKAGE)
    return known


def user_frame(skip=0):
    """(file, line) of the innermost frame outside flowgrad: the user's line in build. `skip`
    frames above the caller are known to be flowgrad's (not looked at)."""
    return _file_line(user_site(1 + skip))


def _file_line(site):
    """(file, line) of a `user_site`, as the frame's f_lineno said then."""
    if site is None:
        return "?", 0
    code, lasti = site
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return code.co_filename, line or 0
    return code.co_filename, 0


def user_line(where=None):
    """'file:line: code' of the user's line: of `where` (a `user_site`), else of the innermost
    frame outside flowgrad now."""
    filename, lineno = _file_line(where) if where is not None else user_frame()
    return f"{filename}:{lineno}: {linecache.getline(filename, lineno).strip()}"
