"""flowgrad.nn: modules, parameters, initialisation and the functional API."""
from . import attention, common_types, functional, grad, init, parallel, utils
from .module import Module
from .modules import *  # noqa: F401,F403
from .parallel import DataParallel  # torch.nn has it too
from .parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter


def __getattr__(name):
    if name == "Graph":  # lazy mode lives in flowgrad.graph, which builds on nn and optim
        from ..graph import Graph

        return Graph
    raise AttributeError(f"module 'flowgrad.nn' has no attribute {name!r}")
