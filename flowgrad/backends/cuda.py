"""`flow.backends.cuda`: matmul precision flags (recorded, no effect on the CPU).

>>> import flowgrad as flow
>>> flow.backends.cuda.matmul.allow_tf32 = True
>>> flow.backends.cuda.matmul.allow_tf32, flow.backends.cuda.is_built()
(True, False)
"""
import contextlib


class _Matmul:
    """`cuda.matmul`: allow_tf32 and the reduced-precision reduction switches."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True
        self.fp32_precision = "none"


matmul = _Matmul()
# the attention kernels F.scaled_dot_product_attention may use (its `_check_backends`)
_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True,
        "overrideable": True}


def is_built() -> bool:
    """False: flowgrad has no CUDA build."""
    return False


def _flag(name):
    def enable(enabled):
        _sdp[name] = bool(enabled)

    def query():
        return _sdp[name]
    return enable, query


enable_flash_sdp, flash_sdp_enabled = _flag("flash")
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _flag("mem_efficient")
enable_math_sdp, math_sdp_enabled = _flag("math")
enable_cudnn_sdp, cudnn_sdp_enabled = _flag("cudnn")


@contextlib.contextmanager
def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True,
               enable_cudnn=True):
    """Context manager choosing attention kernels (flowgrad.nn.attention.sdpa_kernel's
    older form)."""
    saved = dict(_sdp)
    _sdp.update(flash=enable_flash, math=enable_math, mem_efficient=enable_mem_efficient,
                cudnn=enable_cudnn)
    try:
        yield
    finally:
        _sdp.update(saved)


def preferred_linalg_library(backend=None):
    """'default': NumPy's LAPACK serves every linalg call."""
    return "default"
