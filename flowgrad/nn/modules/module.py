"""torch.nn.modules.module's names: `Module` (flowgrad/nn/module.py), its helpers, and the
global module hooks (flowgrad/nn/module_hooks.py)."""
from ..module import Module, _addindent
from ..module_hooks import (
    register_module_backward_hook,
    register_module_buffer_registration_hook,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
    register_module_module_registration_hook,
    register_module_parameter_registration_hook,
)
from ..module_state import _IncompatibleKeys

__all__ = ["Module", "_IncompatibleKeys", "_addindent", "register_module_backward_hook",
           "register_module_buffer_registration_hook", "register_module_forward_hook",
           "register_module_forward_pre_hook", "register_module_full_backward_hook",
           "register_module_full_backward_pre_hook", "register_module_module_registration_hook",
           "register_module_parameter_registration_hook"]
