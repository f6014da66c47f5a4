"""Checks on values that eager code makes with `bool(ok.all())` and a raise (a distribution's
argument and sample validation): inside build, reading the value would freeze the trace's
answer into the plan, so the tracer checks it now and puts a `ValueCheck` node in the plan,
which checks it again on every call and raises the same error class."""
from __future__ import annotations

from .ir import CONST, Node
from .sites import user_site


class ValueCheck:
    """The op of a check node: its input (a boolean array) must be all true."""

    n_out = 0
    effect = True  # dead-code elimination keeps it
    name = "check_values"

    def __init__(self, message, error):
        self.message, self.error = message, error

    def kernel(self, xp, ok):
        if not ok.all():  # (the plan's error names the line of build that made the check)
            raise self.error(f"{self.message}, checked by the compiled plan on this call's "
                             f"values")


def record(tracer, ok, message, error=ValueError):
    """Check `ok` (a boolean tensor) now and, unless it is a constant, on every run of the
    plan; False when it is a constant, which the caller checks as eagerly."""
    value = tracer.value_of.get(id(ok._data))
    if value is None or value.kind == CONST or tracer.phase == "backward":
        return False
    if not ok._data.all():
        raise error(message)
    node = Node(ValueCheck(message, error), [tracer.value(ok)], {}, [], tracer.phase)
    node.where = tracer.where or user_site()
    tracer.program.nodes.append(node)
    return True
