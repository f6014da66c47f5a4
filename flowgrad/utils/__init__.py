"""flowgrad.utils: data loading (`flowgrad.utils.data`)."""
from . import data
