"""Anomaly mode: find the forward line behind a NaN in backward.

While anomaly mode is on, every recorded node keeps the stack of the forward call that made
it (`node.metadata["traceback_"]`), and a backward run checks each node's gradients: one
holding NaN raises naming the node (an inf passes, as torch's), and any error raised by a
node first prints (as a warning) the forward traceback of that node. Off, it costs one flag
check per recorded op and one per backward run.

>>> import flowgrad as flow
>>> x = flow.tensor([0.0, 1.0], requires_grad=True)
>>> with flow.autograd.set_detect_anomaly(True):
...     flow.is_anomaly_enabled()
True
>>> flow.is_anomaly_enabled()
False
"""
from __future__ import annotations

import os
import sys
import traceback

from .._warn import warn
from ..device import array_module
from .graph import node_metadata

enabled = False      # read by interpreter.add_node and GraphTask.apply
check_nan = True

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_anomaly_enabled() -> bool:
    """Whether anomaly mode is on (`detect_anomaly` / `set_detect_anomaly`)."""
    return enabled


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly mode checks backward results for NaN."""
    return check_nan


def _set(mode, nan):
    global enabled, check_nan
    enabled, check_nan = bool(mode), bool(nan)


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """torch.set_anomaly_enabled: anomaly mode on or off for the process (no restore).

    >>> import flowgrad as flow
    >>> flow.set_anomaly_enabled(True); flow.is_anomaly_enabled()
    True
    >>> flow.set_anomaly_enabled(False); flow.is_anomaly_enabled()
    False
    """
    _set(enabled, check_nan)


class set_detect_anomaly:  # noqa: N801 - torch's name
    """Turn anomaly mode on or off; takes effect at once, restores on leaving a `with`.

    >>> import flowgrad as flow
    >>> _ = flow.autograd.set_detect_anomaly(True); flow.is_anomaly_enabled()
    True
    >>> _ = flow.autograd.set_detect_anomaly(False); flow.is_anomaly_enabled()
    False
    """

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = (enabled, globals()["check_nan"])
        _set(mode, check_nan)

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _set(*self.prev)
        return False


class detect_anomaly:  # noqa: N801 - torch's name
    """Context manager (or decorator) running its block in anomaly mode.

    >>> import flowgrad as flow
    >>> import warnings
    >>> x = flow.tensor([0.0, 1.0], requires_grad=True)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with flow.autograd.detect_anomaly():
    ...         y = (x / x).sum()
    ...         try:
    ...             y.backward()
    ...         except RuntimeError as e:
    ...             print(str(e).split(".")[0])
    Function 'div_backward' returned nan values in its 1th output
    """

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        warn("Anomaly Detection has been enabled. This mode will increase the runtime "
             "and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self):
        self.prev = (enabled, check_nan)
        _set(True, self.check_nan)

    def __exit__(self, *exc):
        _set(*self.prev)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


def record_traceback(node):
    """Keep the forward stack of a node being recorded (called by add_node in anomaly mode).

    Only (code, line) pairs are kept, outermost first; file names and source lines are
    looked up when an error needs them, so recording stays cheap.
    """
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        frames.append((frame.f_code, frame.f_lineno))
        frame = frame.f_back
    frames.reverse()
    node_metadata(node)["traceback_"] = frames


def forward_traceback(node) -> str:
    """The user's part of the forward stack that created `node` ('' when not recorded)."""
    frames = node_metadata(node).get("traceback_")
    if not frames:
        return ""
    summary = [traceback.FrameSummary(code.co_filename, line, code.co_name)
               for code, line in frames]
    user = [f for f in summary if not f.filename.startswith(_PACKAGE)] or summary
    return "".join(traceback.StackSummary.from_list(user).format())


def warn_forward_traceback(node):
    text = forward_traceback(node)
    if text:
        warn(f"Error detected in {node.name}. Traceback of forward call that caused "
             f"the error:\n{text}", stacklevel=2)
    else:
        warn(f"Error detected in {node.name}. No forward pass information available."
             f" Enable detect anomaly during forward pass for more information.",
             stacklevel=2)


def check_results(node, in_grads):
    """Raise when one of a node's gradients holds NaN (torch's check and message; an inf
    passes, as torch's)."""
    grads = in_grads if isinstance(in_grads, (tuple, list)) else (in_grads,)
    for i, g in enumerate(grads):
        data = None if g is None else g._data
        if data is not None and data.dtype.kind in "fcV" and array_module(data).isnan(
                data).any():
            raise RuntimeError(f"Function '{node.name}' returned nan values in its {i}th "
                               f"output.")
