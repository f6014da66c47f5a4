"""Whether an index write's result depends on the order of its writes: a value sharing memory
with the elements written, read after the loop wrote them (flowgrad reads every value first,
so it refuses those where torch's loop order decides the result)."""
from __future__ import annotations

import numpy as np


def reads_what_it_wrote(written, read, ordered=False, accumulate=False):
    """Whether an index write (element addresses: `written` in the index's shape, `read` the
    value's) writes some location with another location's value and reads that location as a
    value too (the result then depends on the order of the writes); a location written with
    its own value only is read unchanged (not one accumulated into). `ordered`: only a read
    after such a write, in torch's (row-major) order of the writes, that reaches the result.
    Raises ValueError when the value does not broadcast."""
    while read.ndim > written.ndim and read.shape[0] == 1:  # (torch's setitem drops them)
        read = read[0]
    read = np.broadcast_to(read, written.shape).ravel()
    written = written.ravel()
    moved = np.flatnonzero((written != read) | accumulate)
    if not ordered:
        return bool(np.isin(written[moved], read).any())
    locs, first = np.unique(written[moved], return_index=True)
    if not locs.size:
        return False
    at = np.searchsorted(locs, read).clip(max=locs.size - 1)
    if not ((locs[at] == read) & (moved[first][at] < np.arange(read.size))).any():
        return False
    if accumulate or read.size > 1 << 14:
        return True
    # a read after the write: does it reach the result (a repeated index may write over it)?
    held, last = {}, {}
    for w, r in zip(written.tolist(), read.tolist()):
        held[w], last[w] = held.get(r, r), r
    return held != last
