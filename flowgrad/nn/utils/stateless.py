"""torch.nn.utils.stateless: the deprecated home of `functional_call` (torch.func's now).

>>> import flowgrad as flow
>>> from flowgrad.nn.utils.stateless import functional_call
>>> m = flow.nn.Linear(2, 1, bias=False)
>>> import warnings
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     functional_call(m, {"weight": flow.ones(1, 2)}, (flow.tensor([[1.0, 2.0]]),))
tensor([[3.]])
"""
from __future__ import annotations

import warnings

__all__ = ["functional_call"]


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """`flowgrad.func.functional_call`, with torch's deprecation warning."""
    from ...func import functional_call as _functional_call

    warnings.warn("This API is deprecated as of PyTorch 2.0 and will be removed in a future "
                  "version of PyTorch. Please use torch.func.functional_call instead which is "
                  "a drop-in replacement.", FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, () if args is None else args,
                            kwargs, tie_weights=tie_weights, strict=strict)
