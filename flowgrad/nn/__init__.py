"""flowgrad.nn: modules, parameters and the functional API."""
from . import functional
from .parameter import Parameter
