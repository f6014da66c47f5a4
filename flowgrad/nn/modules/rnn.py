"""Recurrent layers: RNN, LSTM, GRU (multi-layer, bidirectional, batch_first) and their
single-step cells. Parameter names follow torch (`weight_ih_l0`, `bias_hh_l1_reverse`).

The input projection of a layer runs as one matmul over all time steps; the recurrence is
one fused op per layer and direction (flowgrad/ops/rnn.py: rnn_seq, lstm_seq, gru_seq) with
its own fused backward. The cells run the same ops for one step. LSTM with proj_size keeps
the step composed from ops. A PackedSequence input runs each step on its own rows (padded
input is laid out the same way: `batch_sizes` = (N,) * T).

>>> import flowgrad as flow
>>> lstm = flow.nn.LSTM(3, 4, num_layers=2, batch_first=True)
>>> out, (h, c) = lstm(flow.randn(2, 5, 3))
>>> tuple(out.shape), tuple(h.shape)
((2, 5, 4), (2, 2, 4))
"""
from __future__ import annotations

import math

from ..._warn import warn
from ...amp.autocast_mode import is_autocast_enabled
from ...ops.creation import zeros
from ...ops.elementwise import sigmoid, tanh
from ...ops.rnn import _steps, gru_seq, lstm_seq, rnn_seq
from ...ops.shape import cat, stack
from .. import functional as F
from .. import init
from ..module import Module
from ..utils.rnn import PackedSequence
from ._utils import new_param

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _affine(x, w, b):
    y = x.matmul(w.t())
    return y if b is None else y + b


def _lstm_step(gx, h, c, w_hh, b_hh, w_hr):
    gates = gx + _affine(h, w_hh, b_hh)
    hs = c.shape[-1]
    i = sigmoid(gates[..., :hs])
    f = sigmoid(gates[..., hs:2 * hs])
    g = tanh(gates[..., 2 * hs:3 * hs])
    o = sigmoid(gates[..., 3 * hs:])
    c = f * c + i * g
    h = o * tanh(c)
    if w_hr is not None:
        h = h.matmul(w_hr.t())
    return h, c


class RNNBase(Module):
    """What RNN, LSTM and GRU share: parameters, validation and the layer/direction loop."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or \
                not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warn("dropout option adds dropout after all but last recurrent layer, so "
                 f"non-zero dropout expects num_layers greater than 1, but got "
                 f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        for name, value, kind in (("bias", bias, bool), ("batch_first", batch_first, bool),
                                  ("input_size", input_size, int),
                                  ("hidden_size", hidden_size, int)):
            if not isinstance(value, kind):
                raise TypeError(f"{name} should be of type {kind.__name__}, got: "
                                f"{type(value).__name__}")
            if kind is int and value <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if not isinstance(num_layers, int):  # (torch's range(num_layers) raises)
            raise TypeError(f"num_layers should be of type int, got: "
                            f"{type(num_layers).__name__}")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        num_dirs = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            for direction in range(num_dirs):
                layer_in = input_size if layer == 0 else real_hidden * num_dirs
                sfx = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                names = [f"weight_ih{sfx}", f"weight_hh{sfx}"]
                setattr(self, names[0], new_param(gate_size, layer_in, dtype=dtype, device=device))
                setattr(self, names[1], new_param(gate_size, real_hidden, dtype=dtype,
                                                  device=device))
                if bias:
                    names += [f"bias_ih{sfx}", f"bias_hh{sfx}"]
                    setattr(self, names[2], new_param(gate_size, dtype=dtype, device=device))
                    setattr(self, names[3], new_param(gate_size, dtype=dtype, device=device))
                if proj_size > 0:
                    names.append(f"weight_hr{sfx}")
                    setattr(self, names[-1], new_param(proj_size, hidden_size, dtype=dtype,
                                                       device=device))
                self._flat_weights_names.extend(names)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        """A no-op kept for torch compatibility (there is no cuDNN weight buffer)."""

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[p for p in self._layer_params(sfx) if p is not None]
                for sfx in self._suffixes()]

    def _suffixes(self):
        return [f"_l{layer}" + ("_reverse" if d else "") for layer in range(self.num_layers)
                for d in range(2 if self.bidirectional else 1)]

    def _layer_params(self, sfx):
        get = self.__dict__["_parameters"].get
        params = [get(f"weight_ih{sfx}"), get(f"weight_hh{sfx}"), get(f"bias_ih{sfx}"),
                  get(f"bias_hh{sfx}"), get(f"weight_hr{sfx}")]
        for i, p in enumerate(params):
            if p is None:  # parametrized (a property) or weight_norm'd (an attribute) weights
                name = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")[i] + sfx
                if name in self.__dict__:
                    params[i] = self.__dict__[name]
                elif isinstance(getattr(type(self), name, None), property):
                    params[i] = getattr(self, name)
        return tuple(params)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def _check_hidden(self, hx, expected, what="hidden"):
        if tuple(hx.shape) != tuple(expected):
            raise RuntimeError(f"Expected {what} size {tuple(expected)}, got "
                               f"{list(hx.shape)}")

    def _check_dtype(self, hx, x):
        if hx.dtype != x.dtype:  # torch's kernels refuse mixed dtypes (no promotion)
            raise RuntimeError(f"{type(self).__name__}: initial state dtype {hx.dtype} does not "
                               f"match input dtype {x.dtype}; convert it with .to({x.dtype})")

    def _prepare(self, input):
        """(input as (T, N, C) or packed rows, batched flag, batch_sizes or None, batch
        size), with torch's checks."""
        name = type(self).__name__
        packed = isinstance(input, PackedSequence)
        data = input.data if packed else input
        weight = self._flat_weights[0] if self._flat_weights else None
        if weight is not None and data.dtype != weight.dtype and \
                not is_autocast_enabled("cpu"):
            # (torch's LSTM skips this check for a packed input: its GEMM's RuntimeError)
            error = RuntimeError if packed and self.mode == "LSTM" else ValueError
            raise error(f"RNN input dtype ({data.dtype}) does not match weight dtype "
                        f"({weight.dtype}). Convert input: input.to({weight.dtype}), or "
                        f"convert model: model.to({data.dtype})")
        if packed:
            sizes = tuple(int(b) for b in input.batch_sizes.tolist())
            if data.dim() != 2 or data.shape[-1] != self.input_size:
                raise RuntimeError(f"{name}: packed data must be (rows, {self.input_size}), "
                                   f"got {list(data.shape)}")
            if any(a < b for a, b in zip(sizes, sizes[1:])) or sum(sizes) > data.shape[0]:
                # (torch's kernels fail on these; the loops would read past the rows)
                raise RuntimeError(f"{name}: a PackedSequence's batch_sizes must not increase "
                                   f"and must count at most its {data.shape[0]} rows, got "
                                   f"{list(sizes)}; build it with pack_padded_sequence or "
                                   f"pack_sequence")
            return data, True, sizes, sizes[0]
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                             f"tensor instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        if input.shape[0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        return input, batched, None, input.shape[1]

    def _run(self, input, states, batch_sizes=None):
        """Run every layer and direction. `input` is (T, N, C), or the packed rows (L, C)
        with `batch_sizes`; `states` holds one list per state kind (h, or h and c), each
        indexed by layer*num_dirs + direction. Returns the output in the input's layout and
        the final states in the layout of `states`."""
        shape = input.shape
        if batch_sizes is None:  # (explicit: an empty batch has no rows to count steps by)
            batch_sizes = (shape[1],) * shape[0]
            layer_input = input.reshape(-1, shape[-1])
        else:
            shape, layer_input = None, input
        if self.proj_size > 0:
            out, finals = self._run_composed(layer_input, states, batch_sizes)
        else:
            out, finals = self._run_fused(layer_input, states, batch_sizes)
        if shape is not None:
            out = out.reshape(shape[0], shape[1], out.shape[-1])
        return out, finals

    def _run_fused(self, layer_input, states, batch_sizes):
        num_dirs = 2 if self.bidirectional else 1
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for d in range(num_dirs):
                idx = layer * num_dirs + d
                w_ih, w_hh, b_ih, b_hh = self._layer_params(
                    f"_l{layer}" + ("_reverse" if d else ""))[:4]
                # one GEMM projects every time step; the op runs the recurrence
                if self.mode == "GRU":
                    gx = F.linear(layer_input, w_ih, b_ih)
                    y, h = gru_seq(gx, states[0][idx], w_hh, b_hh, batch_sizes, d == 1)
                    state = (h,)
                else:
                    gx = F.linear(layer_input, w_ih, None if b_ih is None else b_ih + b_hh)
                    if self.mode == "LSTM":
                        y, *state = lstm_seq(gx, states[0][idx], states[1][idx], w_hh,
                                             batch_sizes, d == 1)
                    else:
                        y, h = rnn_seq(gx, states[0][idx], w_hh, batch_sizes, d == 1,
                                       "relu" if self.mode == "RNN_RELU" else "tanh")
                        state = (h,)
                outs.append(y)
                for f, s in zip(finals, state):
                    f.append(s)
            layer_input = outs[0] if num_dirs == 1 else cat(outs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        return layer_input, [stack(f, 0) for f in finals]

    def _run_composed(self, layer_input, states, batch_sizes):
        """LSTM with projections: the step composed from ops, a Python loop over the steps
        of the rows (the layout of the fused ops: `batch_sizes[t]` rows per step)."""
        num_dirs = 2 if self.bidirectional else 1
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for d in range(num_dirs):
                idx = layer * num_dirs + d
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_params(
                    f"_l{layer}" + ("_reverse" if d else ""))
                gx = _affine(layer_input, w_ih, b_ih)
                h, c = (s[idx] for s in states)
                ys = []
                for off, bs in _steps(batch_sizes, d == 1):
                    hn, cn = _lstm_step(gx[off:off + bs], h[:bs], c[:bs], w_hh, b_hh, w_hr)
                    ys.append(hn)
                    # rows past this step's batch size (finished sequences) keep their state
                    h = hn if bs == h.shape[0] else cat([hn, h[bs:]], 0)
                    c = cn if bs == c.shape[0] else cat([cn, c[bs:]], 0)
                outs.append(cat(ys[::-1] if d else ys, 0))
                finals[0].append(h)
                finals[1].append(c)
            layer_input = outs[0] if num_dirs == 1 else cat(outs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        return layer_input, [stack(f, 0) for f in finals]

    def _sorted(self, hx, input):
        """A caller's state in the packed batch's (sorted) order."""
        if isinstance(input, PackedSequence) and input.sorted_indices is not None:
            return hx.index_select(1, input.sorted_indices)
        return hx

    def _finish(self, output, finals, batched, input):
        if isinstance(input, PackedSequence):
            if input.unsorted_indices is not None:
                finals = [f.index_select(1, input.unsorted_indices) for f in finals]
            return PackedSequence(output, input.batch_sizes, input.sorted_indices,
                                  input.unsorted_indices), finals
        if not batched:
            return output.squeeze(1), [f.squeeze(1) for f in finals]
        if self.batch_first:
            output = output.transpose(0, 1)
        return output, finals

    def _zeros_state(self, batch, size, like):
        n = self.num_layers * (2 if self.bidirectional else 1)
        return zeros(n, batch, size, dtype=like.dtype, device=like.device)


def _no_proj_size(kwargs):
    """torch's RNN and GRU take **kwargs: proj_size (any value) is a ValueError there, any
    other unknown keyword the TypeError of an unexpected argument."""
    if "proj_size" in kwargs:
        raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
    if kwargs:
        raise TypeError(f"RNNBase.__init__() got an unexpected keyword argument "
                        f"'{next(iter(kwargs))}'")


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None,
                 dtype=None, **kwargs):
        _no_proj_size(kwargs)
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             f"'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, batched, sizes, n = self._prepare(input)
        exp = (self.num_layers * (2 if self.bidirectional else 1), n, self.hidden_size)
        if hx is None:
            hx = self._zeros_state(n, self.hidden_size, x)
        else:
            if not batched:
                hx = hx.unsqueeze(1)
            self._check_hidden(hx, exp)
            self._check_dtype(hx, x)
            hx = self._sorted(hx, input)
        out, (h,) = self._run(x, [hx], sizes)
        out, (h,) = self._finish(out, [h], batched, input)
        return out, h


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n in torch's order).

    >>> import flowgrad as flow
    >>> from flowgrad import nn
    >>> out, h = nn.GRU(4, 8)(flow.zeros(5, 3, 4))
    >>> out.shape, h.shape
    (flowgrad.Size([5, 3, 8]), flowgrad.Size([1, 3, 8]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None, **kwargs):
        _no_proj_size(kwargs)
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)

    forward = RNN.forward


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o in torch's order); returns
    output, (h_n, c_n).

    >>> import flowgrad as flow
    >>> from flowgrad import nn
    >>> g = flow.manual_seed(0)
    >>> lstm = nn.LSTM(input_size=4, hidden_size=8, num_layers=2, batch_first=True)
    >>> out, (h, c) = lstm(flow.randn(3, 5, 4))
    >>> out.shape, h.shape, c.shape
    (flowgrad.Size([3, 5, 8]), flowgrad.Size([2, 3, 8]), flowgrad.Size([2, 3, 8]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)

    def forward(self, input, hx=None):
        x, batched, sizes, n = self._prepare(input)
        layers = self.num_layers * (2 if self.bidirectional else 1)
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        if hx is None:
            h0 = self._zeros_state(n, real_hidden, x)
            c0 = self._zeros_state(n, self.hidden_size, x)
        else:
            h0, c0 = _lstm_states(hx, "LSTM")
            packed = isinstance(input, PackedSequence)
            dims = 2 if not batched else None if packed else 3
            if dims and (h0.dim() != dims or c0.dim() != dims):
                raise RuntimeError(f"For {'un' if dims == 2 else ''}batched {dims}-D input, "
                                   f"hx and cx should also be {dims}-D but got ({h0.dim()}-D, "
                                   f"{c0.dim()}-D) tensors")
            if not batched:
                h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
            self._check_hidden(h0, (layers, n, real_hidden))
            self._check_hidden(c0, (layers, n, self.hidden_size), "cell")
            self._check_dtype(h0, x)
            self._check_dtype(c0, x)
            if batched and not (packed and input.sorted_indices is not None):
                _two_states(hx, "LSTM")  # (torch's reorder of a packed batch takes two)
            h0, c0 = self._sorted(h0, input), self._sorted(c0, input)
        out, finals = self._run(x, [h0, c0], sizes)
        out, (h, c) = self._finish(out, finals, batched, input)
        return out, (h, c)


def _lstm_states(hx, name):
    """hx[0] and hx[1], as torch's LSTM reads them, but a state of fewer than two entries
    says what it wants (torch's IndexError, from indexing)."""
    pair = isinstance(hx, (tuple, list))
    if (len(hx) if pair else hx.shape[0] if hx.dim() else 0) < 2:
        got = f"a {type(hx).__name__} of {len(hx)}" if pair else \
            f"a tensor of shape {list(hx.shape)}"
        raise IndexError(f"{name}: hx must be a tuple (h_0, c_0), got {got}")
    return hx[0], hx[1]


def _two_states(hx, name):
    """torch's check of an LSTM's state: a tuple or list (h_0, c_0)."""
    if not isinstance(hx, (tuple, list)):
        raise TypeError(f"{name}: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
    if len(hx) != 2:
        raise RuntimeError(f"{name} expects two hidden states (h_0, c_0), got {len(hx)}")


class RNNCellBase(Module):
    """torch's base of RNNCell, GRUCell and LSTMCell: weight_ih (num_chunks * hidden_size,
    input_size), weight_hh (num_chunks * hidden_size, hidden_size) and, with bias, bias_ih
    and bias_hh, initialised U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        g = num_chunks * hidden_size
        self.weight_ih = new_param(g, input_size, dtype=dtype, device=device)
        self.weight_hh = new_param(g, hidden_size, dtype=dtype, device=device)
        if bias:
            self.bias_ih = new_param(g, dtype=dtype, device=device)
            self.bias_hh = new_param(g, dtype=dtype, device=device)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def _bias_sum(self):
        return None if self.bias_ih is None else self.bias_ih + self.bias_hh

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        if nl != "tanh":
            s += f", nonlinearity={nl}"
        return s

    def _check_input_dim(self, input):
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.dim()}D instead")

    def _prep(self, input, hx):
        self._check_input_dim(input)
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} "
                               f"expected {self.input_size}")
        if hx is None:
            hx = zeros(input.shape[0], self.hidden_size, dtype=input.dtype, device=input.device)
        else:
            hx = self._hidden(input, hx, batched, 0)
            if hx.dtype != input.dtype:  # torch's GEMM refuses mixed dtypes, as linear does
                raise RuntimeError(f"{type(self).__name__}: hidden state dtype {hx.dtype} "
                                   f"does not match input dtype {input.dtype}; convert it "
                                   f"with .to({input.dtype})")
        return input, hx, batched

    def _hidden(self, input, hx, batched, k):
        """State `k` (h: 0, c: 1) as (batch, hidden), with torch's checks of its shape."""
        if hx.dim() not in (1, 2):
            what = "hidden" if isinstance(self, (RNNCell, GRUCell)) else f"hx[{k}]"
            raise ValueError(f"{type(self).__name__}: Expected {what} to be 1D or 2D, got "
                             f"{hx.dim()}D instead")
        if not batched:
            if hx.dim() != 1:
                raise RuntimeError(f"{type(self).__name__}: a 1-D input takes a 1-D hidden{k} "
                                   f"(hidden_size,), got shape {list(hx.shape)}")
            hx = hx.unsqueeze(0)
        if hx.shape[0] != input.shape[0]:
            raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{k} "
                               f"batch size {hx.shape[0]}")
        if hx.dim() != 2 or hx.shape[1] != self.hidden_size:
            raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {hx.shape[-1]}, "
                               f"expected {self.hidden_size}")
        return hx


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        self.nonlinearity = nonlinearity  # (checked by forward, as torch's)
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, h, batched = self._prep(input, hx)
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"RNNCell: Unknown nonlinearity: {self.nonlinearity}; use "
                               f"'tanh' or 'relu'")
        _, h = rnn_seq(F.linear(x, self.weight_ih, self._bias_sum()), h, self.weight_hh,
                       (x.shape[0],), nonlinearity=self.nonlinearity)
        return h if batched else h.squeeze(0)


class GRUCell(RNNCellBase):
    """One step of a GRU (gates r, z, n in torch's order); hx defaults to zeros."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, h, batched = self._prep(input, hx)
        _, h = gru_seq(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh,
                       self.bias_hh, (x.shape[0],))  # (explicit: an empty batch has no rows)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One step of an LSTM (gates i, f, g, o): (h, c) -> (h', c'); hx defaults to zeros."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        if hx is None:
            x, h, batched = self._prep(input, None)
            c = h
        else:
            self._check_input_dim(input)
            # torch's first check of hx: each entry's dims, iterating whatever hx is (a
            # tensor's rows; a 0-d tensor's TypeError), before it asks for a pair
            for k, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{k}] to be 1D or 2D, got "
                                     f"{value.dim()}D instead")
            if input.dim() == 2:  # (torch's makes a pair of an unbatched step's states)
                _two_states(hx, "LSTMCell")
            h, c = _lstm_states(hx, "LSTMCell")
            x, h, batched = self._prep(input, h)
            c = self._hidden(x, c, batched, 1)
        _, h, c = lstm_seq(F.linear(x, self.weight_ih, self._bias_sum()), h, c,
                           self.weight_hh, (x.shape[0],))
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))
