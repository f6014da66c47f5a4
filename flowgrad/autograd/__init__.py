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
- `forward_ad`: forward-mode AD (dual_level, make_dual, unpack_dual); `jvp_rules` its rules;
  `functional`: vjp, jvp, jacobian, hessian, vhp, hvp; `levels`: shared by the transforms
"""
from . import forward_ad, functional, graph
from .anomaly import (
           detect_anomaly,
           is_anomaly_check_nan_enabled,
           is_anomaly_enabled,
           set_detect_anomaly,
)
from .engine import backward, grad
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = ["backward", "grad", "forward_ad", "functional", "Function", "FunctionCtx",
           "once_differentiable", "no_grad",
           "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled", "graph",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled", "gradcheck", "gradgradcheck", "GradcheckError"]
