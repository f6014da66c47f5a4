"""Fused recurrent layers: one op per layer and direction runs the whole time loop of an
Elman RNN (`rnn_seq`), an LSTM (`lstm_seq`) or a GRU (`gru_seq`), and a fused op runs the
backward time loop (`*_seq_grad`).

The caller projects the inputs of every time step at once (one GEMM over the sequence,
`linear`), so each op step is one GEMM for all gates of the hidden state plus the pointwise
gates on arrays. The backward op returns the gradient of every gate pre-activation; the rule
turns it into the weight gradient with one more GEMM (`linear_wgrad` over all steps).

Layout: `gx` is 2-D, (rows, gates * hidden), the steps one after another; `batch_sizes[t]`
rows belong to step t (torch's PackedSequence layout). Rows beyond a step's batch size keep
their state unchanged, so padded (fixed length) and packed sequences run the same loop, in
both directions. States are (batch, hidden).

The loops are written once over a small namespace of array functions `m`: NumPy arrays for
the kernels, flowgrad ops for the double backward. With create_graph=True the rule reruns
the forward and the backward loops with flowgrad ops, so the gradient is itself
differentiable (torch's CPU RNN double-backwards too; its cuDNN one refuses).

>>> import flowgrad as flow
>>> from flowgrad.ops.rnn import lstm_seq
>>> gx, h0, c0, w = flow.randn(6, 8), flow.zeros(2, 2), flow.zeros(2, 2), flow.randn(8, 2)
>>> ys, h, c = lstm_seq(gx, h0, c0, w, batch_sizes=(2, 2, 2))
>>> tuple(ys.shape), tuple(h.shape)
((6, 2), (2, 2))
"""
from __future__ import annotations

from ..autograd import grad_mode
from .activation import _relu_grad, relu
from .creation import tensor
from .elementwise import sigmoid, tanh
from .halfprec import in_float32
from .linalg import _linear_wgrad
from .registry import op
from .rules import masked_product
from .shape import cat

__all__ = ["rnn_seq", "lstm_seq", "gru_seq"]


class _ArrayFns:
    """The loops' functions on arrays of module `xp` (the kernels' side)."""

    def __init__(self, xp):
        self.xp = xp

    def sigmoid(self, x):
        # through tanh: stable for any x, no overflow warning, one transcendental call
        t = self.xp.tanh(x * 0.5)
        t *= 0.5
        t += 0.5
        return t

    def tanh(self, x):
        return self.xp.tanh(x)

    def relu(self, x):
        return self.xp.maximum(x, 0)

    def relu_grad(self, y, d):
        # torch's (y <= 0 ? 0 : d): a nan state passes d, an inf or nan d stops at y <= 0
        return masked_product(self.xp, ~(y <= 0), d)

    def cat(self, xs):
        return xs[0] if len(xs) == 1 else self.xp.concatenate(xs, 0)

    def cat_last(self, xs):
        return self.xp.concatenate(xs, -1)

    def gate_consts(self, hs, like):
        return tuple(self.xp.asarray(v, like.dtype) for v in _gate_consts(hs))

    def t(self, w):
        return self.xp.ascontiguousarray(w.T)  # a contiguous right operand: faster GEMMs

    @staticmethod
    def addmm(x, h, wt):
        z = h @ wt
        z += x
        return z

    def lstm_gates(self, z, consts):
        """All four gates in one pass, in place on the fresh pre-activations z: sigmoid(x)
        is 0.5 tanh(x / 2) + 0.5, so one tanh over the row, scaled per gate."""
        s, a, b = consts
        z *= s
        self.xp.tanh(z, out=z)
        z *= a
        z += b
        return z


class _TensorFns:
    """The same functions as flowgrad ops (the double-backward side)."""

    sigmoid = staticmethod(sigmoid)
    tanh = staticmethod(tanh)
    relu = staticmethod(relu)
    relu_grad = staticmethod(_relu_grad)

    @staticmethod
    def cat(xs):
        return xs[0] if len(xs) == 1 else cat(xs, 0)

    @staticmethod
    def cat_last(xs):
        return cat(xs, -1)

    @staticmethod
    def gate_consts(hs, like):
        return tuple(tensor(v, dtype=like.dtype, device=like.device) for v in _gate_consts(hs))

    @staticmethod
    def t(w):
        return w.T

    @staticmethod
    def addmm(x, h, wt):
        return x + h @ wt

    @staticmethod
    def lstm_gates(z, consts):
        s, a, b = consts
        return tanh(z * s) * a + b


_TENSORS = _TensorFns()


def _gate_consts(hs):
    """Per-column scale, multiplier and offset taking tanh to the LSTM gates i, f, g, o."""
    half, one, zero = [0.5] * hs, [1.0] * hs, [0.0] * hs
    return half * 2 + one + half, half * 2 + one + half, half * 2 + zero + half


def _steps(batch_sizes, reverse):
    """(row offset, batch size) of each step in the order the forward loop visits them."""
    offs, o = [], 0
    for b in batch_sizes:
        offs.append((o, b))
        o += b
    return offs[::-1] if reverse else offs


def _keep(m, new, old, bs):
    """The state after a step: the first `bs` rows updated, the rest (finished) kept."""
    return new if bs == old.shape[0] else m.cat([new, old[bs:]])


def _in_order(parts, reverse):
    return parts[::-1] if reverse else parts


# ---- forward loops: (outputs..., saved for the backward...) ---------------------------------
def _rnn_forward(m, gx, h0, w_hh, batch_sizes, reverse, nonlinearity):
    act = m.relu if nonlinearity == "relu" else m.tanh
    wt, h = m.t(w_hh), h0
    ys, hprev = [], []
    for off, bs in _steps(batch_sizes, reverse):
        hp = h[:bs]
        y = act(m.addmm(gx[off:off + bs], hp, wt))
        ys.append(y)
        hprev.append(hp)
        h = _keep(m, y, h, bs)
    return m.cat(_in_order(ys, reverse)), h, m.cat(_in_order(hprev, reverse))


def _lstm_forward(m, gx, h0, c0, w_hh, batch_sizes, reverse):
    hs = h0.shape[-1]
    wt, h, c = m.t(w_hh), h0, c0
    ys, acts, tcs, hprev, cprev = [], [], [], [], []
    consts = m.gate_consts(hs, gx)
    for off, bs in _steps(batch_sizes, reverse):
        hp, cp = h[:bs], c[:bs]
        a = m.lstm_gates(m.addmm(gx[off:off + bs], hp, wt), consts)
        cn = a[:, hs:2 * hs] * cp + a[:, :hs] * a[:, 2 * hs:3 * hs]
        tc = m.tanh(cn)
        y = a[:, 3 * hs:] * tc
        ys.append(y)
        acts.append(a)
        tcs.append(tc)
        hprev.append(hp)
        cprev.append(cp)
        h, c = _keep(m, y, h, bs), _keep(m, cn, c, bs)
    return (m.cat(_in_order(ys, reverse)), h, c, m.cat(_in_order(acts, reverse)),
            m.cat(_in_order(tcs, reverse)), m.cat(_in_order(hprev, reverse)),
            m.cat(_in_order(cprev, reverse)))


def _gru_forward(m, gx, h0, w_hh, b_hh, batch_sizes, reverse):
    hs = h0.shape[-1]
    wt, h = m.t(w_hh), h0
    ys, acts, ghn, hprev = [], [], [], []
    for off, bs in _steps(batch_sizes, reverse):
        hp, x = h[:bs], gx[off:off + bs]
        gh = hp @ wt
        if b_hh is not None:
            gh = gh + b_hh
        rz = m.sigmoid(x[:, :2 * hs] + gh[:, :2 * hs])
        n = m.tanh(x[:, 2 * hs:] + rz[:, :hs] * gh[:, 2 * hs:])
        y = n + rz[:, hs:] * (hp - n)
        ys.append(y)
        acts.append(m.cat_last([rz, n]))
        ghn.append(gh[:, 2 * hs:])
        hprev.append(hp)
        h = _keep(m, y, h, bs)
    return (m.cat(_in_order(ys, reverse)), h, m.cat(_in_order(acts, reverse)),
            m.cat(_in_order(ghn, reverse)), m.cat(_in_order(hprev, reverse)))


# ---- backward loops: the gradient of every gate pre-activation and of the first state -------
def _rnn_backward(m, ys, w_hh, dys, dh, batch_sizes, reverse, nonlinearity):
    dps = []
    for off, bs in _steps(batch_sizes, reverse)[::-1]:
        y, d = ys[off:off + bs], dh[:bs] + dys[off:off + bs]
        dp = m.relu_grad(y, d) if nonlinearity == "relu" else d * (1 - y * y)
        dps.append(dp)
        dh = _keep(m, dp @ w_hh, dh, bs)
    return m.cat(_in_order(dps, not reverse)), dh


def _lstm_backward(m, acts, tcs, cprev, w_hh, dys, dh, dc, batch_sizes, reverse):
    hs = tcs.shape[-1]
    i, f, g, o = acts[:, :hs], acts[:, hs:2 * hs], acts[:, 2 * hs:3 * hs], acts[:, 3 * hs:]
    # what does not depend on the recurrence is computed for all steps at once
    k3 = m.cat_last([g * i * (1 - i), cprev * f * (1 - f), i * (1 - g * g)])
    ko, ao = tcs * o * (1 - o), o * (1 - tcs * tcs)
    dgs = []
    for off, bs in _steps(batch_sizes, reverse)[::-1]:
        rows = slice(off, off + bs)
        dha = dh[:bs] + dys[rows]
        dca = dc[:bs] + dha * ao[rows]
        dg = m.cat_last([(k3[rows].reshape(bs, 3, hs) * dca.reshape(bs, 1, hs))
                         .reshape(bs, 3 * hs), dha * ko[rows]])
        dgs.append(dg)
        dh, dc = _keep(m, dg @ w_hh, dh, bs), _keep(m, dca * f[rows], dc, bs)
    return m.cat(_in_order(dgs, not reverse)), dh, dc


def _gru_backward(m, acts, ghn, hprev, w_hh, dys, dh, batch_sizes, reverse):
    hs = ghn.shape[-1]
    r, z, n = acts[:, :hs], acts[:, hs:2 * hs], acts[:, 2 * hs:]
    pn, pr, pz = (1 - z) * (1 - n * n), ghn * r * (1 - r), (hprev - n) * z * (1 - z)
    dgx, dgh = [], []
    for off, bs in _steps(batch_sizes, reverse)[::-1]:
        rows = slice(off, off + bs)
        dha = dh[:bs] + dys[rows]
        dn = dha * pn[rows]
        dr, dz = dn * pr[rows], dha * pz[rows]
        dgx.append(m.cat_last([dr, dz, dn]))
        gh = m.cat_last([dr, dz, dn * r[rows]])
        dgh.append(gh)
        dh = _keep(m, dha * z[rows] + gh @ w_hh, dh, bs)
    return m.cat(_in_order(dgx, not reverse)), m.cat(_in_order(dgh, not reverse)), dh


# ---- the ops ---------------------------------------------------------------------------------
@op("rnn_seq", save="all", n_out=2)
@in_float32  # (half precision in float32, rounded once; bfloat16 arithmetic gave float32)
def _rnn_seq(xp, gx, h0, w_hh, *, batch_sizes, reverse=False, nonlinearity="tanh"):
    return _rnn_forward(_ArrayFns(xp), gx, h0, w_hh, batch_sizes, reverse, nonlinearity)


@_rnn_seq.grad
def rnn_seq_backward(ctx, dys, dh):
    a = (ctx.batch_sizes, ctx.reverse, ctx.nonlinearity)
    gx, h0, w_hh = ctx.inputs
    if grad_mode.is_grad_enabled():  # create_graph: the loops again, in flowgrad ops
        ys, _, hprev = _rnn_forward(_TENSORS, gx, h0, w_hh, *a)
        dp, dh0 = _rnn_backward(_TENSORS, ys, w_hh, dys, dh, *a)
    else:
        ys, hprev = ctx.outputs[0], ctx.aux[0]
        dp, dh0 = _rnn_seq_grad(ys, w_hh, dys, dh, batch_sizes=a[0], reverse=a[1],
                                nonlinearity=a[2])
    return dp, dh0, _linear_wgrad(dp, hprev) if ctx.needs_input_grad[2] else None


@op("rnn_seq_grad", n_out=2, differentiable=False)
@in_float32  # (half precision in float32, rounded once; bfloat16 arithmetic gave float32)
def _rnn_seq_grad(xp, ys, w_hh, dys, dh, *, batch_sizes, reverse, nonlinearity):
    return _rnn_backward(_ArrayFns(xp), ys, w_hh, dys, dh, batch_sizes, reverse, nonlinearity)


@op("lstm_seq", save="inputs", n_out=3)
@in_float32  # (half precision in float32, rounded once; bfloat16 arithmetic gave float32)
def _lstm_seq(xp, gx, h0, c0, w_hh, *, batch_sizes, reverse=False):
    return _lstm_forward(_ArrayFns(xp), gx, h0, c0, w_hh, batch_sizes, reverse)


@_lstm_seq.grad
def lstm_seq_backward(ctx, dys, dh, dc):
    a = (ctx.batch_sizes, ctx.reverse)
    gx, h0, c0, w_hh = ctx.inputs
    if grad_mode.is_grad_enabled():
        _, _, _, acts, tcs, hprev, cprev = _lstm_forward(_TENSORS, gx, h0, c0, w_hh, *a)
        dg, dh0, dc0 = _lstm_backward(_TENSORS, acts, tcs, cprev, w_hh, dys, dh, dc, *a)
    else:
        acts, tcs, hprev, cprev = ctx.aux
        dg, dh0, dc0 = _lstm_seq_grad(acts, tcs, cprev, w_hh, dys, dh, dc,
                                      batch_sizes=a[0], reverse=a[1])
    return dg, dh0, dc0, _linear_wgrad(dg, hprev) if ctx.needs_input_grad[3] else None


@op("lstm_seq_grad", n_out=3, differentiable=False)
@in_float32  # (half precision in float32, rounded once; bfloat16 arithmetic gave float32)
def _lstm_seq_grad(xp, acts, tcs, cprev, w_hh, dys, dh, dc, *, batch_sizes, reverse):
    return _lstm_backward(_ArrayFns(xp), acts, tcs, cprev, w_hh, dys, dh, dc, batch_sizes,
                          reverse)


@op("gru_seq", save="inputs", n_out=2)
@in_float32  # (half precision in float32, rounded once; bfloat16 arithmetic gave float32)
def _gru_seq(xp, gx, h0, w_hh, b_hh=None, *, batch_sizes, reverse=False):
    return _gru_forward(_ArrayFns(xp), gx, h0, w_hh, b_hh, batch_sizes, reverse)


@_gru_seq.grad
def gru_seq_backward(ctx, dys, dh):
    a = (ctx.batch_sizes, ctx.reverse)
    gx, h0, w_hh, b_hh = (*ctx.inputs, None)[:4]
    if grad_mode.is_grad_enabled():
        _, _, acts, ghn, hprev = _gru_forward(_TENSORS, gx, h0, w_hh, b_hh, *a)
        dgx, dgh, dh0 = _gru_backward(_TENSORS, acts, ghn, hprev, w_hh, dys, dh, *a)
    else:
        acts, ghn, hprev = ctx.aux
        dgx, dgh, dh0 = _gru_seq_grad(acts, ghn, hprev, w_hh, dys, dh, batch_sizes=a[0],
                                      reverse=a[1])
    dw = _linear_wgrad(dgh, hprev) if ctx.needs_input_grad[2] else None
    db = dgh.sum(0) if b_hh is not None and ctx.needs_input_grad[3] else None
    return (dgx, dh0, dw, db)[:len(ctx.needs_input_grad)]


@op("gru_seq_grad", n_out=3, differentiable=False)
@in_float32  # (half precision in float32, rounded once; bfloat16 arithmetic gave float32)
def _gru_seq_grad(xp, acts, ghn, hprev, w_hh, dys, dh, *, batch_sizes, reverse):
    return _gru_backward(_ArrayFns(xp), acts, ghn, hprev, w_hh, dys, dh, batch_sizes, reverse)


def _sizes(gx, h0, batch_sizes):
    if batch_sizes is None:
        n = h0.shape[0]
        if gx.shape[0] % max(n, 1):
            raise RuntimeError(f"recurrent op: input rows {gx.shape[0]} are not a multiple of "
                               f"the batch size {n}; pass batch_sizes for packed input")
        return (n,) * (gx.shape[0] // max(n, 1))
    return tuple(int(b) for b in batch_sizes)


def rnn_seq(gx, h0, w_hh, batch_sizes=None, reverse=False, nonlinearity="tanh"):
    """An Elman RNN layer's time loop over projected inputs `gx` (rows, hidden), from state
    `h0` (batch, hidden); returns (outputs (rows, hidden), last state).

    >>> import flowgrad as flow
    >>> ys, h = rnn_seq(flow.randn(6, 3), flow.zeros(2, 3), flow.randn(3, 3))
    >>> tuple(ys.shape), tuple(h.shape)
    ((6, 3), (2, 3))
    """
    return _rnn_seq(gx, h0, w_hh, batch_sizes=_sizes(gx, h0, batch_sizes), reverse=reverse,
                    nonlinearity=nonlinearity)


def lstm_seq(gx, h0, c0, w_hh, batch_sizes=None, reverse=False):
    """An LSTM layer's time loop over projected inputs `gx` (rows, 4 * hidden, both biases
    added, gates i, f, g, o); returns (outputs, last h, last c). See the module example."""
    return _lstm_seq(gx, h0, c0, w_hh, batch_sizes=_sizes(gx, h0, batch_sizes),
                     reverse=reverse)


def gru_seq(gx, h0, w_hh, b_hh=None, batch_sizes=None, reverse=False):
    """A GRU layer's time loop over projected inputs `gx` (rows, 3 * hidden, input bias
    added, gates r, z, n); `b_hh` stays apart as the n gate scales it by r.

    >>> import flowgrad as flow
    >>> ys, h = gru_seq(flow.randn(4, 6), flow.zeros(2, 2), flow.randn(6, 2))
    >>> tuple(ys.shape), tuple(h.shape)
    ((4, 2), (2, 2))
    """
    extra = () if b_hh is None else (b_hh,)
    return _gru_seq(gx, h0, w_hh, *extra, batch_sizes=_sizes(gx, h0, batch_sizes),
                    reverse=reverse)
