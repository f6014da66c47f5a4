"""`flow.backends.opt_einsum`: whether einsum orders its contractions with the opt_einsum
package. flowgrad's einsum contracts by NumPy's own path search (`np.einsum_path`), so the
package is never needed; `enabled` and `strategy` are recorded.

>>> import flowgrad as flow
>>> flow.backends.opt_einsum.enabled, flow.backends.opt_einsum.strategy
(True, 'auto')
"""
import importlib.util

enabled = True
strategy = "auto"


def is_available() -> bool:
    """True when the opt_einsum package is installed (as torch reports it)."""
    return importlib.util.find_spec("opt_einsum") is not None


def get_opt_einsum():
    """The opt_einsum module if installed, else None."""
    if not is_available():
        return None
    import opt_einsum

    return opt_einsum
