"""flowgrad.utils: data loading (`data`), memory reuse (`memory`), activation checkpointing
(`checkpoint`) and pictures of the backward graph (`viz`)."""
from . import checkpoint, data, memory, viz
