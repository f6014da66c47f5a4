"""`flow.backends.cpu`: what the CPU offers NumPy's kernels.

>>> import flowgrad as flow
>>> flow.backends.cpu.get_cpu_capability() in ("DEFAULT", "AVX2", "AVX512")
True
"""


def get_cpu_capability() -> str:
    """The widest SIMD NumPy's kernels were dispatched for: "AVX512", "AVX2" or "DEFAULT"."""
    import numpy as np

    try:
        found = np._core._multiarray_umath.__cpu_features__
    except AttributeError:  # NumPy < 2 keeps it under np.core
        found = getattr(np.core._multiarray_umath, "__cpu_features__", {})
    if found.get("AVX512F"):
        return "AVX512"
    return "AVX2" if found.get("AVX2") else "DEFAULT"
