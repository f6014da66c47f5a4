"""The few names of torch._C that Python code uses to write Tensor subclasses: the switches
of the `__torch_function__` protocol and the implementation that opts a class out of it
(`__torch_function__ = torch._C._disabled_torch_function_impl`). See `flowgrad.overrides`."""
from .overrides import (  # noqa: F401
    DisableTorchFunction,
    DisableTorchFunctionSubclass,
    _disabled_torch_function_impl,
)
