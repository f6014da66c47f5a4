"""torch's global switches for determinism and float32 matmul precision.

flowgrad's CPU kernels are deterministic (NumPy's and MKL's loops give the same bits run
after run on one machine) and its float32 GEMMs always run in full float32, so these record
what a script asked for and report it back, with torch's checks of the arguments: torch code
that sets them runs unchanged.

>>> import flowgrad as flow
>>> flow.use_deterministic_algorithms(True, warn_only=True)
>>> flow.are_deterministic_algorithms_enabled(), flow.get_deterministic_debug_mode()
(True, 1)
>>> flow.use_deterministic_algorithms(False)
"""
from __future__ import annotations

from ._warn import warn

_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}
_state = {"debug_mode": 0, "matmul_precision": "highest"}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Ask for deterministic algorithms only (torch raises, or warns with `warn_only`, where
    an op has none): every flowgrad op already is, so this records the request.

    >>> import flowgrad as flow
    >>> flow.use_deterministic_algorithms(True); flow.are_deterministic_algorithms_enabled()
    True
    >>> flow.use_deterministic_algorithms(False)
    """
    if type(mode) is not bool:
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' must be bool, not "
                        f"{type(mode).__name__}")
    if type(warn_only) is not bool:
        raise TypeError(f"use_deterministic_algorithms(): argument 'warn_only' must be bool, "
                        f"not {type(warn_only).__name__}")
    _state["debug_mode"] = (1 if warn_only else 2) if mode else 0


def are_deterministic_algorithms_enabled() -> bool:
    """Whether `use_deterministic_algorithms(True)` is in force (with or without warn_only)."""
    return _state["debug_mode"] > 0


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether deterministic algorithms were asked for with `warn_only=True`."""
    return _state["debug_mode"] == 1


def set_deterministic_debug_mode(debug_mode) -> None:
    """The same switch as torch's debug mode: 0 / "default" (off), 1 / "warn" (warn only),
    2 / "error" (deterministic algorithms only).

    >>> import flowgrad as flow
    >>> flow.set_deterministic_debug_mode("warn"); flow.get_deterministic_debug_mode()
    1
    >>> flow.set_deterministic_debug_mode(0)
    """
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, "
                               f"`warn`, `error`, but got {debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    elif isinstance(debug_mode, int) and not isinstance(debug_mode, bool):
        if debug_mode not in (0, 1, 2):
            raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got "
                               f"{debug_mode}")
    else:
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    _state["debug_mode"] = debug_mode


def get_deterministic_debug_mode() -> int:
    """0 (off), 1 (warn only) or 2 (error), as `set_deterministic_debug_mode` set it."""
    return _state["debug_mode"]


def set_float32_matmul_precision(precision) -> None:
    """torch's float32 matmul precision ("highest", "high", "medium": TF32 or bfloat16 passes
    on GPUs). flowgrad's float32 GEMMs always run in full float32; the setting is recorded. An
    unknown value warns and changes nothing, as torch's.

    >>> import flowgrad as flow
    >>> flow.set_float32_matmul_precision("high"); flow.get_float32_matmul_precision()
    'high'
    >>> flow.set_float32_matmul_precision("highest")
    """
    if precision not in ("highest", "high", "medium"):
        warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
             f"set_float32_matmul_precision call has no effect.", stacklevel=2)
        return
    _state["matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    """The precision `set_float32_matmul_precision` last set ("highest" by default)."""
    return _state["matmul_precision"]


def set_warn_always(b: bool) -> None:
    """torch's switch for warnings that fire once per process: recorded (flowgrad's own
    once-only notes do not read it)."""
    _state["warn_always"] = bool(b)


def is_warn_always_enabled() -> bool:
    """The value `set_warn_always` last set (False by default).

    >>> import flowgrad as flow
    >>> flow.is_warn_always_enabled()
    False
    """
    return _state.get("warn_always", False)


def set_flush_denormal(mode: bool) -> bool:
    """Whether flushing denormals to zero took effect: NumPy's kernels cannot flush them, so
    turning it on is refused (False) and turning it off succeeds (True), which is the state
    flowgrad always computes in.

    >>> import flowgrad as flow
    >>> flow.set_flush_denormal(True), flow.set_flush_denormal(False)
    (False, True)
    """
    return not mode


def init_num_threads() -> None:
    """torch's per-thread pool initialisation: flowgrad's BLAS pool needs none."""


__all__ = ["use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
           "get_deterministic_debug_mode", "set_float32_matmul_precision",
           "get_float32_matmul_precision", "set_warn_always", "is_warn_always_enabled",
           "set_flush_denormal", "init_num_threads"]
