"""torch.nn.modules.module's names: `Module` (flowgrad/nn/module.py) and its helpers."""
from ..module import Module, _addindent
from ..module_state import _IncompatibleKeys

__all__ = ["Module", "_IncompatibleKeys", "_addindent"]
