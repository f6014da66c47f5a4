"""One call run in torch and in flowgrad: its outcome, and the check that both raise or
neither (the dtype tables' shared steps)."""
from __future__ import annotations

import warnings

import numpy as np

# what a bad call raises (a test's own assertion errors are never caught)
ERRORS = (RuntimeError, ValueError, TypeError, NotImplementedError, IndexError,
          ZeroDivisionError, OverflowError)


def magnitude(values):
    """The largest finite |value| in `values`, at least 1: the scale of an absolute tolerance
    (taken over all values, one inf would let every finite position pass)."""
    values = np.asarray(values)
    finite = np.abs(values[np.isfinite(values)])
    return max(1.0, float(finite.max())) if finite.size else 1.0


def outcome(call):
    """(call(), None), or (None, the exception) when it raises one of ERRORS; warnings off."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return call(), None
        except ERRORS as error:
            return None, error


def outcome_out(call, out):
    """`outcome(lambda: call(out))` of a call given one `out=` tensor: (out, None), the result
    checked to be `out` itself, or (None, the exception)."""
    result, error = outcome(lambda: call(out))
    assert error is not None or result is out
    return (None, error) if error is not None else (out, None)


def outcome_into(call, outs):
    """`outcome(lambda: call(outs))` of a call given a tuple of outs: the result (each of its
    tensors checked to be its `out`), or the exception."""
    result, error = outcome(lambda: call(outs))
    if error is None:
        assert all(r is o for r, o in zip(result, outs))
    return result, error


def assert_same_raise(torch_error, error):
    """Both raised, or neither did."""
    assert (torch_error is None) == (error is None), (
        f"torch: {torch_error!r}, flowgrad: {error!r}")


def assert_program_as_torch(name, program, rtol=1e-12):
    """`program(m)`, a function of the module (torch or flowgrad) returning a list of tensors
    (or None): both raise a RuntimeError, or neither does and each tensor has torch's dtype,
    shape and values."""
    import numpy as np
    import torch

    import flowgrad

    def run(m):
        try:
            return [None if t is None else np.asarray(t.numpy()) for t in program(m)]
        except RuntimeError:
            return "raises"
    want, got = run(torch), run(flowgrad)
    assert (want == "raises") == (got == "raises"), (name, want, got)
    if want != "raises":
        assert len(want) == len(got)
        for w, g in zip(want, got):
            assert (w is None) == (g is None), (name, w, g)
            if w is not None:
                assert g.dtype == w.dtype and g.shape == w.shape, (name, g, w)
                np.testing.assert_allclose(g, w, rtol=rtol, atol=0, err_msg=name)
