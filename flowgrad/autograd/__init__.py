"""flowgrad's autograd: the seed's engine, interpreter and grad-function machinery.

- `meta`: AutogradMeta (requires_grad, is_leaf, acc_grad, current_grad, hooks)
- `node`: FunctionNode, AccumulateGrad, SavedTensor
- `interpreter`: AutogradInterpreter.apply / add_node; `inplace`: in-place writes (checks,
  version bump, rebase)
- `engine`: GraphTask, backward, grad
- `grad_mode`: no_grad, enable_grad, set_grad_enabled, inference_mode
- `function`: custom autograd.Function
- `graph`: torch.autograd.graph (Node API, node hooks, saved-tensor hooks); `node_hooks`,
  `saved_hooks` implement them; `anomaly`: detect_anomaly
- `forward_ad`: forward-mode AD (dual_level, make_dual, unpack_dual; its written rules are
  in flowgrad/ops/jvp_rules.py);
  `functional`: vjp, jvp, jacobian, hessian, vhp, hvp; `levels`: shared by the transforms
- `functional` and `gradcheck` are tools built on the op library and the func transforms, the
  layers above this package: `_load_tools` loads them once those exist (flowgrad/__init__.py
  calls it last), so they import those layers at module level
"""
import importlib

from . import forward_ad, graph
from .anomaly import (
           detect_anomaly,
           is_anomaly_check_nan_enabled,
           is_anomaly_enabled,
           set_detect_anomaly,
)
from .engine import _is_checkpoint_valid, backward, grad
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_multithreading_enabled,
    no_grad,
    set_grad_enabled,
    set_multithreading_enabled,
)

__all__ = ["backward", "grad", "forward_ad", "functional", "Function", "FunctionCtx",
           "once_differentiable", "no_grad",
           "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled", "graph",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled", "gradcheck", "gradgradcheck", "GradcheckError",
           "is_multithreading_enabled", "set_multithreading_enabled", "Variable"]

_TOOLS = ("functional", "gradcheck", "gradgradcheck", "GradcheckError", "Variable", "profiler")


def _load_tools():
    """Load `functional`, `gradcheck`, `Variable` and `profiler` (see above) and bind their
    names here."""
    checks = importlib.import_module(__name__ + ".gradcheck")
    globals().update(functional=importlib.import_module(__name__ + ".functional"),
                     gradcheck=checks.gradcheck, gradgradcheck=checks.gradgradcheck,
                     GradcheckError=checks.GradcheckError,
                     Variable=importlib.import_module(__name__ + ".variable").Variable,
                     profiler=importlib.import_module(__name__ + ".profiler"))


def __getattr__(name):  # a tool asked for before flowgrad/__init__ loaded them
    if name not in _TOOLS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _load_tools()
    return globals()[name]
