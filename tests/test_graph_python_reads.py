"""What a compiled plan froze from Python while build was traced, checked on each call against
eager: layout reads (is_contiguous, stride, storage_offset of an input), long lists and big
NumPy arrays build reads, an optimizer's param group options read through a global. A call
that would change what build computed raises StalePlanError in nn.Graph, and flow.compile
traces anew (its numbers are eager's)."""
from __future__ import annotations

import pytest

import flowgrad as flow
from flowgrad.graph.graph import StalePlanError


def _by_contiguity(x):
    return x * 2 if x.is_contiguous() else x * 3


def _by_stride(x):
    return x * x.stride(0)


def _by_offset(x):
    return x + x.storage_offset()


@pytest.mark.parametrize("fn", [_by_contiguity, _by_stride, _by_offset])
def test_build_reading_an_inputs_layout_is_checked_on_each_call(fn):
    """build branching on an input's layout: a later call with another layout took the traced
    branch (or number) and gave it silently."""
    first = flow.arange(9.0).reshape(3, 3)
    other = flow.arange(9.0).reshape(3, 3).t() if fn is not _by_offset else \
        flow.arange(10.0)[1:].reshape(3, 3)
    graph = flow.nn.Graph.trace(fn)
    assert graph(first).tolist() == fn(first).tolist()
    with pytest.raises(StalePlanError, match="read a layout"):
        graph(other)
    compiled = flow.compile(fn)
    for x in (first, other, first):
        assert compiled(x).tolist() == fn(x).tolist()


def test_flowgrads_own_layout_reads_add_no_check():
    graph = flow.nn.Graph.trace(lambda x: x.reshape(-1) * 2)
    graph(flow.ones(2, 3))
    assert graph(flow.arange(6.0).reshape(3, 2).t()).tolist() == [0, 4, 8, 2, 6, 10]
