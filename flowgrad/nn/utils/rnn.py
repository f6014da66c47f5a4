"""Variable-length sequences for the recurrent layers, as torch.nn.utils.rnn: PackedSequence
and pad_sequence / pack_padded_sequence / pad_packed_sequence / pack_sequence /
unpad_sequence / unpack_sequence.

A PackedSequence stores the steps one after another: `batch_sizes[t]` rows for step t, the
sequences sorted longest first (`sorted_indices` maps back to the caller's order). RNN, LSTM
and GRU take one and run each step on its rows only.

>>> import flowgrad as flow
>>> from flowgrad.nn.utils.rnn import pack_sequence, pad_packed_sequence
>>> p = pack_sequence([flow.tensor([1., 2., 3.]), flow.tensor([4., 5.])])
>>> p.data, p.batch_sizes
(tensor([1., 4., 2., 5., 3.]), tensor([2, 2, 1]))
>>> pad_packed_sequence(p, batch_first=True)[0]
tensor([[1., 2., 3.],
        [4., 5., 0.]])
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ... import dtypes
from ...ops.creation import full, tensor
from ...ops.index_functions import index_select
from ...ops.shape import cat, stack
from ...tensor import Tensor
from ...torch_format import loadable

__all__ = ["PackedSequence", "pad_sequence", "pack_padded_sequence", "pad_packed_sequence",
           "pack_sequence", "unpad_sequence", "unpack_sequence", "invert_permutation"]


def invert_permutation(permutation):
    """The inverse of an index permutation (None stays None)."""
    if permutation is None:
        return None
    p = np.asarray(permutation.tolist(), dtype=np.int64)
    inv = np.empty_like(p)
    inv[p] = np.arange(len(p))
    return tensor(inv)


@loadable  # (load(weights_only=False) rebuilds it)
class PackedSequence(namedtuple("PackedSequence",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """Packed steps of sorted sequences: `data` (sum of lengths, *), `batch_sizes` (int64,
    rows per step), `sorted_indices` / `unsorted_indices` (or None when already sorted)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # torch's PackedSequence((data, batch_sizes))
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        if "copy" in kwargs:
            raise RuntimeError("PackedSequence.to() does not accept copy argument")
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def cuda(self, *args, **kwargs):
        return self.to(*args, **{**kwargs, "device": "cuda"})

    def cpu(self):
        return self

    def pin_memory(self):
        return type(self)(self.data.pin_memory(), self.batch_sizes, self.sorted_indices,
                          self.unsorted_indices)

    def double(self):
        return self.to(dtype=dtypes.float64)

    def float(self):
        return self.to(dtype=dtypes.float32)

    def half(self):
        return self.to(dtype=dtypes.float16)

    def long(self):
        return self.to(dtype=dtypes.int64)

    def int(self):
        return self.to(dtype=dtypes.int32)

    def short(self):
        return self.to(dtype=dtypes.int16)

    def char(self):
        return self.to(dtype=dtypes.int8)

    def byte(self):
        return self.to(dtype=dtypes.uint8)

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def _lengths_array(lengths):
    return np.asarray(lengths.tolist() if isinstance(lengths, Tensor) else lengths)


def _lengths_list(lengths):
    """The lengths as a list of ints; as torch's as_tensor(lengths, dtype=int64), a tensor or
    a (nested) list of another shape than 1-D is a RuntimeError."""
    a = _lengths_array(lengths)
    if a.ndim != 1:
        raise RuntimeError(f"lengths must be a 1D tensor or list of ints, got {a.ndim}D")
    return [int(v) for v in a.tolist()]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack tensors of shape (L_i, *) into (T, B, *) (or (B, T, *)), padding to the longest.

    >>> import flowgrad as flow
    >>> pad_sequence([flow.ones(2), flow.ones(1)], batch_first=True)
    tensor([[1., 1.],
            [1., 0.]])
    """
    if batch_first.__class__ is not bool:  # (torch's argument parser)
        raise TypeError(f"pad_sequence(): argument 'batch_first' (position 2) must be bool, "
                        f"not {type(batch_first).__name__}")
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    try:
        sequences = tuple(sequences)  # (any iterable, as torch's)
    except TypeError:
        raise RuntimeError(f"pad_sequence: Expected iterable for input sequences, but got arg "
                           f"of type: {type(sequences)}") from None
    if not sequences:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    if any(s.dim() == 0 for s in sequences):
        raise RuntimeError("pad_sequence: each sequence must have at least one dimension (its "
                           "length), got a 0-d tensor")
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    longest = max(s.shape[0] for s in sequences)
    dtype = sequences[0].dtype  # as torch: the output takes the first sequence's dtype
    rows = []
    for s in sequences:
        s = s.to(dtype=dtype)
        n = longest - s.shape[0]
        if n:
            pad = full((n, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, pad] if padding_side == "right" else [pad, s], 0)
        rows.append(s)
    return stack(rows, 0 if batch_first else 1)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch (T, B, *) (or (B, T, *)) of sequences with the given lengths.

    >>> import flowgrad as flow
    >>> pack_padded_sequence(flow.arange(6.).reshape(3, 2), [3, 1]).data
    tensor([0., 1., 2., 4.])
    """
    if not enforce_sorted and _lengths_array(lengths).ndim > 1:
        # (torch sorts the lengths first and index_selects the batch in their order)
        raise IndexError(f"pack_padded_sequence: lengths must be 1-D, got shape "
                         f"{_lengths_array(lengths).shape}")
    lens = _lengths_list(lengths)
    if batch_first:
        input = input.transpose(0, 1)
    if not lens:
        raise RuntimeError("pack_padded_sequence: Cannot pack empty tensors (no sequences)")
    if len(lens) != input.shape[1]:
        raise RuntimeError(f"pack_padded_sequence: expected {input.shape[1]} lengths (the batch "
                           f"size), got {len(lens)}")
    if any(n <= 0 for n in lens):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    sorted_indices = None
    if enforce_sorted:
        if any(a < b for a, b in zip(lens, lens[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                               "to pack_padded_sequence and/or pack_sequence to sidestep this "
                               "requirement if you do not need ONNX exportability.")
    else:
        order = sorted(range(len(lens)), key=lambda i: -lens[i])
        sorted_indices = tensor(np.asarray(order, dtype=np.int64))
        input = index_select(input, 1, sorted_indices)
        lens = [lens[i] for i in order]
    if lens[0] > input.shape[0]:
        raise RuntimeError(f"pack_padded_sequence: a length {lens[0]} exceeds the padded "
                           f"length {input.shape[0]}")
    batch_sizes = [sum(1 for n in lens if n > t) for t in range(lens[0])]
    data = cat([input[t, :b] for t, b in enumerate(batch_sizes)], 0)
    return PackedSequence(data, tensor(np.asarray(batch_sizes, dtype=np.int64)),
                          sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Undo pack_padded_sequence: (padded (T, B, *) or (B, T, *), lengths as int64).

    See the module example."""
    data, sizes = sequence.data, [int(b) for b in sequence.batch_sizes.tolist()]
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {steps}")
        steps = total_length
    batch, rows, off = sizes[0], [], 0
    for t in range(steps):
        b = sizes[t] if t < len(sizes) else 0
        step = data[off:off + b]
        off += b
        if b < batch:
            pad = full((batch - b, *data.shape[1:]), padding_value, dtype=data.dtype,
                       device=data.device)
            step = cat([step, pad], 0) if b else pad
        rows.append(step)
    out = stack(rows, 0)
    lens = np.asarray([sum(1 for s in sizes if s > i) for i in range(batch)], dtype=np.int64)
    if sequence.unsorted_indices is not None:
        out = index_select(out, 1, sequence.unsorted_indices)
        lens = lens[np.asarray(sequence.unsorted_indices.tolist(), dtype=np.int64)]
    if batch_first:
        out = out.transpose(0, 1)
    return out, tensor(lens)


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of (L_i, *) tensors (longest first unless enforce_sorted=False)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences of a padded batch, each cut to its length."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    lens = _lengths_array(lengths)
    if lens.ndim == 0:  # (torch iterates over it)
        raise TypeError("unpad_sequence: lengths must be 1-D, got a 0-d tensor")
    if lens.ndim != 1:
        raise RuntimeError(f"unpad_sequence: lengths must be 1-D, got shape {lens.shape}")
    if len(lens) != padded_sequences.shape[0]:  # (torch's zip(..., strict=True))
        raise ValueError(f"unpad_sequence: {len(lens)} lengths for a batch of "
                         f"{padded_sequences.shape[0]} sequences; pass one length per sequence")
    # torch keeps the steps i < length: a float length rounds up, a negative one keeps none
    steps = np.arange(padded_sequences.shape[1])
    return [padded_sequences[i, :int(np.count_nonzero(steps < n))] for i, n in enumerate(lens)]


def unpack_sequence(packed_sequences):
    """The list of sequences of a PackedSequence, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
