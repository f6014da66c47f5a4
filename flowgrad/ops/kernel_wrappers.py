"""Wrappers around kernels with the kernel's own parameter list. A generic
`def run(xp, *arrays, **attrs)` repacks the keyword attributes into a new dict on every call
(~0.3 us in CPython 3.11, more than many small kernels take); a wrapper generated with the
kernel's exact parameters passes them on as they came. Used for the half-precision-in-float32
kernels (halfprec.in_float32) and the registry's output layouts (`layout=`: "contiguous",
"elementwise", "column_major").

>>> import numpy as np
>>> def kernel(xp, x, *, scale):
...     return x * scale
>>> doubled = wrapped(kernel, "    return kernel({call}) * 2\\n")
>>> doubled(np, np.ones(2), scale=3.0)
array([6., 6.])
"""
from __future__ import annotations

import functools
import inspect

__all__ = ["wrapped"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def wrapped(kernel, body, **names):
    """A function with `kernel`'s parameters whose body is `body`, formatted with
    `{call}`: the kernel's arguments as passed on; `{arrays}`: a tuple expression of its
    array arguments (every positional one after `xp`); `{all_c}`: an expression true when
    every array argument is C-contiguous; `{rebind}`: lines (indented 4) that replace each
    array argument `a` by `cast(xp, a)`. `names` are globals of the body;
    `kernel` is one too. A kernel taking **kwargs gets the body with generic parameters."""
    params = list(inspect.signature(kernel).parameters.values())
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        head, call, arrays = "xp, *arrays, **attrs", "xp, *arrays, **attrs", "arrays"
        rebind = "    arrays = tuple(cast(xp, a) for a in arrays)\n"
        defaults, kwdefaults = None, None
        all_c = "all(_a.flags.c_contiguous for _a in arrays)"
    else:
        positional = [p.name for p in params if p.kind in _POSITIONAL]
        variadic = next((p.name for p in params
                         if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
        keywords = [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
        head = ", ".join(positional + ([f"*{variadic}"] if variadic else
                                       ["*"] if keywords else []) + keywords)
        call = ", ".join(positional + ([f"*{variadic}"] if variadic else []) +
                         [f"{k}={k}" for k in keywords])
        listed = "".join(f"{a}, " for a in positional[1:])
        arrays = f"({listed})" + (f" + {variadic}" if variadic else "")
        all_c = " and ".join([f"{a}.flags.c_contiguous" for a in positional[1:]] + (
            [f"all(_a.flags.c_contiguous for _a in {variadic})"] if variadic else [])) or "True"
        rebind = "".join(f"    {a} = cast(xp, {a})\n" for a in positional[1:]) + (
            f"    {variadic} = tuple(cast(xp, a) for a in {variadic})\n" if variadic else "")
        defaults = tuple(p.default for p in params if p.kind in _POSITIONAL and
                         p.default is not inspect.Parameter.empty) or None
        kwdefaults = {p.name: p.default for p in params if p.kind is
                      inspect.Parameter.KEYWORD_ONLY and p.default is not
                      inspect.Parameter.empty} or None
    source = f"def run({head}):\n" + body.format(call=call, arrays=arrays, all_c=all_c,
                                                         rebind=rebind)
    namespace = dict(names, kernel=kernel)
    exec(compile(source, f"<wrapper of {kernel.__qualname__}>", "exec"), namespace)  # noqa: S102
    run = namespace["run"]
    run.__defaults__, run.__kwdefaults__ = defaults, kwdefaults
    return functools.wraps(kernel)(run)
