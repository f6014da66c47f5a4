"""The generated kernel wrappers (ops/kernel_wrappers.py) keep the kernel's parameters,
defaults and behaviour: in_float32's half-precision path and dtype pass-through, the
C-ordered outputs, variadic array arguments, parameter names that could clash with the
wrapper's own locals, and kernels with **kwargs."""
import inspect

import numpy as np
import pytest

from flowgrad import dtypes
from flowgrad.ops.halfprec import in_float32
from flowgrad.ops.registry import _c_contiguous_output

BF16 = dtypes.bfloat16.np if dtypes.bfloat16 is not None else None


SEEN = []


def _kernel(xp, a, b=None, *rest, scale, out=2.0, low=1.0):
    SEEN.append(a.dtype)  # the dtype the kernel computes in
    return a * scale + (0 if b is None else b) + sum(rest, 0) + out - low


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16] +
                         ([BF16] if BF16 is not None else []))
def test_in_float32_wrapper(dtype):
    run = in_float32(_kernel)
    a, b, c = (np.full(3, v, dtype) for v in (1.0, 2.0, 3.0))
    got = run(np, a, b, c, scale=4.0, low=0.5)
    assert got.dtype == dtype and got.tolist() == [1 * 4 + 2 + 3 + 2.0 - 0.5] * 3
    half = dtype in (np.float16, BF16)
    assert SEEN[-1] == (np.float32 if half else dtype)
    assert run(np, a, scale=1.0).tolist() == [1.0 + 2.0 - 1.0] * 3  # the defaults
    assert run.half_in_float32 and run.__wrapped__ is not None
    assert list(inspect.signature(run).parameters) == ["xp", "a", "b", "rest", "scale", "out",
                                                       "low"]


def test_c_contiguous_wrapper_keeps_parameters():
    def kernel(xp, x, *, axes=(1, 0)):
        return x.transpose(axes), x

    run = _c_contiguous_output(kernel)
    x = np.arange(6.0).reshape(2, 3)
    first, second = run(np, x)
    assert first.flags.c_contiguous and first.tolist() == x.T.tolist()
    assert second is x and run(np, x, axes=(0, 1))[0].tolist() == x.tolist()
    with pytest.raises(TypeError):
        run(np, x, (1, 0))  # keyword-only, as the kernel's


def test_kwargs_kernels_get_generic_parameters():
    def kernel(xp, *arrays, **attrs):
        return np.asarray(sum(a.sum() for a in arrays) * attrs.get("k", 1))

    run = in_float32(kernel)
    assert run(np, np.ones(2, np.float16), np.ones(1, np.float16), k=3).item() == 9.0
