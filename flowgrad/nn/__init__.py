"""flowgrad.nn: modules, parameters and the functional API."""
from . import functional  # noqa: F401
