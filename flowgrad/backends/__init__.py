"""`flow.backends`: torch's backend switches, answered for the CPU (NumPy) flowgrad runs on.

Scripts set `cudnn.benchmark`, `cudnn.deterministic`, `cuda.matmul.allow_tf32`: the flags are
recorded (reading them back gives what was set) and change nothing, since there is neither
cuDNN nor TF32 here. Availability checks answer False.

>>> import flowgrad as flow
>>> flow.backends.cudnn.benchmark = True
>>> flow.backends.cudnn.is_available(), flow.backends.mps.is_available()
(False, False)
"""
from . import cpu, cuda, cudnn, mkldnn, mps, opt_einsum

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "mps", "opt_einsum"]
