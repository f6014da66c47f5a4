"""Autocast: run chosen ops in a lower precision, as torch's CPU autocast.

`autocast("cpu", dtype=bfloat16 | float16)` makes matmuls, linear layers and convolutions run
in the lower precision and losses, linalg and fft run in float32 (the tables and casts are in
`policy.py`). The state is per thread, as torch's. While some autocast region is enabled the
`AutocastInterpreter` wraps the interpreter that was current (`interpreter.using_interpreter`,
as the function transforms do): `Op.__call__` reaches it first, it casts the inputs of the
primitives in `policy.PRIMITIVES` and hands every op on. Casts are `cast` ops recorded by
autograd, so a gradient flows back to each input in its own dtype. With no autocast region
nothing is wrapped: the eager path does not change.

>>> import flowgrad as flow
>>> w = flow.ones(3, 2, requires_grad=True)
>>> with flow.autocast("cpu"):
...     y = flow.ones(4, 3) @ w
...     y.dtype, flow.is_autocast_enabled("cpu")
(flowgrad.bfloat16, True)
>>> y.float().sum().backward()
>>> w.grad.dtype, flow.is_autocast_enabled("cpu")
(flowgrad.float32, False)
"""
from __future__ import annotations

import functools
import threading

from .. import dtypes as _dt
from .._warn import warn
from ..autograd import interpreter as _interpreter
from . import policy as _policy

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled", "set_autocast_enabled",
           "get_autocast_dtype", "set_autocast_dtype", "is_autocast_cache_enabled",
           "set_autocast_cache_enabled", "clear_autocast_cache", "autocast_increment_nesting",
           "autocast_decrement_nesting", "is_autocast_cpu_enabled", "set_autocast_cpu_enabled",
           "get_autocast_cpu_dtype", "set_autocast_cpu_dtype", "get_autocast_gpu_dtype",
           "set_autocast_gpu_dtype", "custom_fwd", "custom_bwd"]

_DEVICES = ("cpu", "cuda")
_F32 = _policy._F32


class _State(threading.local):
    def __init__(self):
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = {"cpu": _dt.bfloat16, "cuda": _dt.float16}
        self.cache_enabled = True
        self.nesting = 0
        self.cache = {}  # id(float32 leaf) -> (leaf, its lower-precision cast)


state = _State()


def _device(device_type):
    name = getattr(device_type, "type", device_type)
    if name not in _DEVICES:
        raise RuntimeError(f"autocast: unsupported device_type {name!r}; flowgrad's autocast "
                           f"knows 'cpu' (and 'cuda', which is never available here)")
    return name


def is_autocast_available(device_type) -> bool:
    """Whether autocast knows `device_type` ('cpu' and 'cuda' here, as torch's list has them).

    >>> import flowgrad as flow
    >>> flow.amp.is_autocast_available("cpu")
    True
    """
    return getattr(device_type, "type", device_type) in _DEVICES


def is_autocast_enabled(device_type=None) -> bool:
    """Whether this thread is in an enabled autocast region of `device_type`; without an
    argument the CUDA one, as torch's (its old spelling).

    >>> import flowgrad as flow
    >>> with flow.autocast("cpu"):
    ...     flow.is_autocast_enabled("cpu"), flow.is_autocast_enabled()
    (True, False)
    """
    return state.enabled[_device("cuda" if device_type is None else device_type)]


def _install():
    """Make the AutocastInterpreter current unless it already is; True if installed here."""
    if type(_interpreter.current) is AutocastInterpreter:
        return None
    wrapper = AutocastInterpreter(_interpreter.current)
    _interpreter.install(wrapper)
    return wrapper


def _uninstall(wrapper):
    if wrapper is not None and _interpreter.current is wrapper:
        _interpreter.install(wrapper.restore)


def set_autocast_enabled(device_type, enabled=None) -> None:
    """Turn autocast on or off for `device_type` in this thread (torch's low-level switch;
    `autocast` is the usual way). `set_autocast_enabled(flag)` alone is the CUDA one.

    >>> import flowgrad as flow
    >>> flow.set_autocast_enabled("cpu", True); flow.is_autocast_enabled("cpu")
    True
    >>> flow.set_autocast_enabled("cpu", False); flow.is_autocast_enabled("cpu")
    False
    """
    position = 2
    if enabled is None:  # torch's one-argument spelling: set_autocast_enabled(flag) is CUDA's
        device_type, enabled, position = "cuda", device_type, 1
    if not isinstance(enabled, bool):
        raise TypeError(f"set_autocast_enabled(): argument 'enabled' (position {position}) must "
                        f"be bool, not {type(enabled).__name__}")
    device = _device(device_type)
    state.enabled[device] = bool(enabled)
    if device == "cpu":
        if enabled:
            _ready()
            _install()
        elif state.nesting == 0 and type(_interpreter.current) is AutocastInterpreter:
            _uninstall(_interpreter.current)


def get_autocast_dtype(device_type):
    """The lower-precision dtype of `device_type`'s autocast in this thread (bfloat16 for
    'cpu', float16 for 'cuda' unless set).

    >>> import flowgrad as flow
    >>> flow.get_autocast_dtype("cpu")
    flowgrad.bfloat16
    """
    return state.dtype[_device(device_type)]


def set_autocast_dtype(device_type, dtype) -> None:
    """Set the lower-precision dtype of `device_type`'s autocast for this thread.

    >>> import flowgrad as flow
    >>> flow.set_autocast_dtype("cpu", flow.float16); flow.get_autocast_dtype("cpu")
    flowgrad.float16
    >>> flow.set_autocast_dtype("cpu", flow.bfloat16)
    """
    state.dtype[_device(device_type)] = _dt.as_dtype(dtype)


def is_autocast_cache_enabled() -> bool:
    """Whether autocast keeps the lower-precision casts of float32 leaves (weights) for
    reuse within the outermost region.

    >>> import flowgrad as flow
    >>> flow.is_autocast_cache_enabled()
    True
    """
    return state.cache_enabled


def set_autocast_cache_enabled(enabled) -> None:
    """Turn the weight-cast cache on or off for this thread.

    >>> import flowgrad as flow
    >>> flow.set_autocast_cache_enabled(True)
    """
    _check_bool(enabled)
    state.cache_enabled = enabled


def clear_autocast_cache() -> None:
    """Drop the cached weight casts (done when the outermost autocast region exits).

    >>> import flowgrad as flow
    >>> flow.clear_autocast_cache()
    """
    state.cache.clear()


def autocast_increment_nesting() -> int:
    """Count one more autocast region entered; returns the depth.

    >>> import flowgrad as flow
    >>> flow.autocast_increment_nesting(), flow.autocast_decrement_nesting()
    (1, 0)
    """
    state.nesting += 1
    return state.nesting


def autocast_decrement_nesting() -> int:
    """Count one autocast region left; returns the depth (0: outside all of them)."""
    state.nesting -= 1
    return state.nesting


def is_autocast_cpu_enabled() -> bool:
    """torch's old spelling of `is_autocast_enabled('cpu')`."""
    return state.enabled["cpu"]


def set_autocast_cpu_enabled(enabled) -> None:
    """torch's old spelling of `set_autocast_enabled('cpu', enabled)`."""
    _check_bool(enabled)
    set_autocast_enabled("cpu", enabled)


def _check_bool(enabled):
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool (got {type(enabled).__name__})")


def get_autocast_cpu_dtype():
    """torch's old spelling of `get_autocast_dtype('cpu')`."""
    return state.dtype["cpu"]


def set_autocast_cpu_dtype(dtype) -> None:
    """torch's old spelling of `set_autocast_dtype('cpu', dtype)`."""
    set_autocast_dtype("cpu", dtype)


def get_autocast_gpu_dtype():
    """torch's old spelling of `get_autocast_dtype('cuda')`."""
    return state.dtype["cuda"]


def set_autocast_gpu_dtype(dtype) -> None:
    """torch's old spelling of `set_autocast_dtype('cuda', dtype)`."""
    set_autocast_dtype("cuda", dtype)


class autocast:  # noqa: N801 - torch's name
    """Context manager (or decorator): ops in the region run under torch's CPU autocast
    policy in `dtype` (bfloat16 or float16; default `get_autocast_dtype(device_type)`).

    `enabled=False` turns it off for a nested region; `cache_enabled` keeps each float32
    weight's lower-precision copy for the region. `device_type='cuda'` warns and disables
    itself, as torch does where CUDA is not available (flowgrad has no CUDA device).

    >>> import flowgrad as flow
    >>> a = flow.ones(2, 2)
    >>> with flow.autocast("cpu", dtype=flow.float16):
    ...     with flow.autocast("cpu", enabled=False):
    ...         (a @ a).dtype
    ...     (a @ a).dtype
    flowgrad.float32
    flowgrad.float16
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if not is_autocast_available(device_type):
            raise RuntimeError(
                f"User specified an unsupported autocast device_type '{device_type}'")
        self.device = device_type
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else \
            _dt.as_dtype(dtype)
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else \
            cache_enabled
        if enabled:
            if device_type == "cuda":
                warn("CUDA is not available or torch_xla is imported. Disabling "
                     "autocast.", stacklevel=2)
                enabled = False
            elif self.fast_dtype not in (_dt.bfloat16, _dt.float16):
                warn(
                    f"In CPU autocast, but the target dtype is not supported. Disabling "
                    f"autocast.\nCPU Autocast only supports dtypes of flowgrad.bfloat16, "
                    f"flowgrad.float16 currently (got {self.fast_dtype}).", stacklevel=2)
                enabled = False
        self._enabled = enabled  # (entering refuses a non-bool, as torch's)

    def __enter__(self):
        device = self.device
        if not isinstance(self._enabled, bool):
            raise TypeError(f"set_autocast_enabled(): argument 'enabled' (position 2) must be "
                            f"bool, not {type(self._enabled).__name__}")
        self.prev_cache_enabled = state.cache_enabled
        self.prev = state.enabled[device]
        self.prev_fastdtype = state.dtype[device]
        state.enabled[device] = self._enabled
        state.dtype[device] = self.fast_dtype
        state.nesting += 1
        state.cache_enabled = self._cache_enabled
        self._installed = None
        if self._enabled and device == "cpu":
            _ready()
            self._installed = _install()
        return self

    def __exit__(self, *exc):
        device = self.device
        state.nesting -= 1
        if state.nesting == 0:
            state.cache.clear()
        state.enabled[device] = self.prev
        state.dtype[device] = self.prev_fastdtype
        state.cache_enabled = self.prev_cache_enabled
        _uninstall(self._installed)
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(f"autocast()(func) requires a callable, but got "
                            f"{type(func).__name__}. Did you mean to use autocast as a "
                            f"context manager? For example:\n    with flow.autocast("
                            f"device_type=...):\n        output = model(input)")

        @functools.wraps(func)
        def decorated(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)
        return decorated


def _cast(t, np_dtype, inner):
    """`t` as `np_dtype` through `inner`: a recorded `cast` op, whose gradient comes back in
    t's dtype."""
    return inner.apply(_CAST, (t,), {"dtype": np_dtype})


def _cacheable(t):
    """torch caches the lower-precision casts of float32 leaves that require grad (weights)
    for the outermost autocast region."""
    meta = t._meta
    return state.cache_enabled and meta is not None and meta.requires_grad and \
        t._grad_fn is None and t._view is None and t._data.dtype == _F32


def _cast_all(tensors, np_dtype, inner, low=None):
    """Each eligible tensor as `np_dtype`; casts to the autocast dtype `low` of weights are
    cached (`_cacheable`)."""
    return tuple((_to_low(t, low, inner) if np_dtype == low else _cast(t, np_dtype, inner))
                 if _policy.eligible(t) and t._data.dtype != np_dtype else t for t in tensors)


def _to_low(t, low, inner):
    if t._data.dtype == low:
        return t
    cache = state.cache if _cacheable(t) else None
    if cache is not None:
        hit = cache.get(id(t))
        if hit is not None and hit[0] is t and hit[1] == low:
            return hit[2]
    out = _cast(t, low, inner)
    if cache is not None:
        cache[id(t)] = (t, low, out)
    return out


def _lowered(t, low, inner):
    """`t` rounded to the autocast dtype, as float32: for a lower-precision op whose kernel
    does not itself compute half precision in float32 (`halfprec.in_float32`: matmul, linear,
    conv, einsum do; the fused recurrent layers do not), it computes in float32 on rounded
    inputs and rounds its result, as torch's CPU kernels accumulate in float32."""
    return _cast(_to_low(t, low, inner), _F32, inner)


def _round(out, low, inner):
    if type(out) is tuple:
        return tuple(_round(o, low, inner) for o in out)
    return _cast(out, low, inner) if out._data.dtype == _F32 else out


class AutocastInterpreter:
    """The interpreter in force while autocast is on in some thread: casts the inputs of the
    primitives torch's policy names (this thread's autocast dtype), then hands the op to the
    interpreter it wraps. Other ops, other threads, `enabled=False` regions: passed on."""

    def __init__(self, inner):
        from ..autograd.inference import InferenceInterpreter

        self.restore = inner
        # inference_mode installs its interpreter only over the plain eager one; it falls
        # back to eager itself outside inference mode, so wrap it here in eager's place
        self.inner = InferenceInterpreter if inner is _interpreter.AutogradInterpreter else inner

    def apply(self, op, inputs, attrs):
        inner = self.inner
        policy = _PRIMITIVES.get(op.name)
        if policy is None or not state.enabled["cpu"]:
            return inner.apply(op, inputs, attrs)
        low = state.dtype["cpu"].np
        if policy == _policy.LOWER:
            if getattr(op.kernel, "half_in_float32", False):  # rounds its own result
                return inner.apply(op, _cast_all(inputs, low, inner, low), attrs)
            inputs = tuple(_lowered(t, low, inner) if _policy.eligible(t) else t
                           for t in inputs)
            return _round(inner.apply(op, inputs, attrs), low, inner)
        np_dtype = _policy.target_dtype(policy, inputs, low)
        if np_dtype is not None:
            inputs = _cast_all(inputs, np_dtype, inner, low)
        return inner.apply(op, inputs, attrs)

    def __getattr__(self, name):  # the tracer's and transforms' hooks (read, backward...)
        return getattr(self.restore, name)


def _wrap_composite(fn, policy):
    """`fn` cast by `policy` when this thread's autocast is on, and run with it off (torch
    excludes autocast inside a wrapped op, so its pieces are not cast again). A lower-precision
    composite keeps it on: its primitives (conv, then the bias add) run on cast inputs."""
    from ..tensor import Tensor

    def run(*args, **kwargs):
        if not state.enabled["cpu"]:
            return fn(*args, **kwargs)
        tensors = [a for a in _flat(args) + _flat(kwargs.values()) if isinstance(a, Tensor)]
        np_dtype = _policy.target_dtype(policy, tensors, state.dtype["cpu"].np)
        inner = _interpreter.current
        if np_dtype is not None:
            low = state.dtype["cpu"].np
            cast = dict(zip(map(id, tensors), _cast_all(tensors, np_dtype, inner, low)))
            args = _replace(args, cast)
            kwargs = dict(zip(kwargs, _replace(tuple(kwargs.values()), cast)))
        if policy == _policy.LOWER:  # its pieces see lower-precision inputs: no cast needed
            return fn(*args, **kwargs)
        state.enabled["cpu"] = False
        try:
            return fn(*args, **kwargs)
        finally:
            state.enabled["cpu"] = True
    return run


def _flat(values):
    out = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(v)
        else:
            out.append(v)
    return out


def _replace(values, cast):
    out = []
    for v in values:
        if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
            out.append(type(v)(cast.get(id(x), x) for x in v))
        else:
            out.append(cast.get(id(v), v))
    return tuple(out)


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for a custom Function's `forward` (torch.amp.custom_fwd): with `cast_inputs`
    the floating tensor arguments are cast to it and forward runs with autocast off; without,
    forward runs in the autocast state of the call and backward (`custom_bwd`) in the same.

    >>> import flowgrad as flow
    >>> class Square(flow.autograd.Function):
    ...     @staticmethod
    ...     @flow.amp.custom_fwd(device_type="cpu", cast_inputs=flow.float32)
    ...     def forward(ctx, x):
    ...         return x @ x
    ...     @staticmethod
    ...     @flow.amp.custom_bwd(device_type="cpu")
    ...     def backward(ctx, g):
    ...         return g
    >>> with flow.autocast("cpu"):
    ...     Square.apply(flow.ones(2, 2)).dtype
    flowgrad.float32
    """
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    device = _device(device_type)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = state.dtype[device]
        # with cast_inputs, forward runs with autocast off and so does backward (torch's)
        ctx._fwd_used_autocast = state.enabled[device] and cast_inputs is None
        if cast_inputs is None or not state.enabled[device]:
            return fwd(*args, **kwargs)
        target = _dt.as_dtype(cast_inputs).np
        from ..tensor import Tensor

        def cast(v):
            if isinstance(v, Tensor) and _policy.eligible(v):
                return v.to(_dt.from_numpy_dtype(target))
            return v
        with autocast(device, enabled=False):
            return fwd(*(cast(a) for a in args), **{k: cast(v) for k, v in kwargs.items()})
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for a custom Function's `backward`: it runs in the autocast state its
    forward ran in (torch.amp.custom_bwd). See `custom_fwd`."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    device = _device(device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd


_CAST, _PRIMITIVES = None, {}


def _ready():
    """On first use: find the cast op and the primitives' policies in the registry, and wrap
    the composite ops (policy.install_composites)."""
    global _CAST, _PRIMITIVES
    if _CAST is None:
        from ..ops.registry import REGISTRY

        _PRIMITIVES = {name: p for name, p in _policy.PRIMITIVES.items() if name in REGISTRY}
        _policy.install_composites(_wrap_composite)
        _CAST = REGISTRY["cast"]
