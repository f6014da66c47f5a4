"""flowgrad.utils: data loading (`data`), memory reuse (`memory`), activation checkpointing
(`checkpoint`), pictures of the backward graph (`viz`) and zero-copy exchange (`dlpack`)."""
from . import checkpoint, data, dlpack, hooks, memory, model_zoo, viz
