"""`flowgrad.cpu.amp`: torch.cpu.amp's deprecated spellings of `flowgrad.amp`'s CPU autocast
and GradScaler (they warn as torch's do, then work).

>>> import warnings
>>> import flowgrad as flow
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with flow.cpu.amp.autocast():
...         (flow.ones(2, 2) @ flow.ones(2, 2)).dtype
flowgrad.bfloat16
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..amp.cuda_amp import old_spellings

__all__ = ["autocast", "GradScaler"]

autocast, GradScaler = old_spellings("cpu", _dt.bfloat16, __name__)
