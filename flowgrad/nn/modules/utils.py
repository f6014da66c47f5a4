"""torch.nn.modules.utils: the argument helpers custom layers import (`_pair`, ...) and
`consume_prefix_in_state_dict_if_present`."""
from __future__ import annotations

from ._utils import _ntuple, _pair, _reverse_repeat_tuple, _single, _triple

_quadruple = _ntuple(4, "_quadruple")


def _list_with_default(out_size, defaults):
    """out_size with each None taken from the trailing `defaults` (adaptive pooling's sizes).

    >>> _list_with_default([None, 3], [8, 8, 5, 6])
    [5, 3]
    """
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict, prefix):
    """Strip `prefix` from the keys that have it, in place (a DataParallel/DDP checkpoint's
    "module." before loading it into the bare model), and from its `_metadata` keys.

    >>> from collections import OrderedDict
    >>> sd = OrderedDict([("module.w", 1), ("b", 2)])
    >>> consume_prefix_in_state_dict_if_present(sd, "module."); list(sd)
    ['b', 'w']
    """
    for key in sorted(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            if len(key) == 0:
                continue
            if key == prefix.replace(".", "") or key.startswith(prefix):
                metadata[key[len(prefix):]] = metadata.pop(key)


__all__ = ["_ntuple", "_single", "_pair", "_triple", "_quadruple", "_reverse_repeat_tuple",
           "_list_with_default", "consume_prefix_in_state_dict_if_present"]
