"""flowgrad.utils: data loading (`flowgrad.utils.data`) and memory reuse (`memory`)."""
from . import data, memory
