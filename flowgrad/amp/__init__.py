"""`flowgrad.amp`: automatic mixed precision, as `torch.amp`.

`autocast` runs matmuls, linear layers and convolutions in bfloat16 or float16 and losses,
linalg and fft in float32 (torch's CPU policy, `policy.py`); `GradScaler` scales the loss
for float16 training. `flow.autocast` is the same class; `flow.cpu.amp` and
`flow.cuda.amp` are torch's older spellings (the CUDA ones disable themselves with a
warning, as torch's do without CUDA).

>>> import flowgrad as flow
>>> with flow.amp.autocast("cpu"):
...     flow.nn.Linear(3, 2)(flow.ones(1, 3)).dtype
flowgrad.bfloat16
"""
from . import cuda_amp  # noqa: F401 - registers flowgrad.cuda.amp
from .autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available"]
