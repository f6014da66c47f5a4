"""flowgrad.nn: modules, parameters, initialisation and the functional API."""
from . import functional, init, utils
from .module import Module
from .modules import *  # noqa: F401,F403
from .parameter import Parameter
