"""Forward-mode (JVP) rules written for the hot op families; every other differentiable op
gets the rule derived from its reverse rule (`forward_ad.derived_jvp`). forward_ad finds
these in its `JVP_RULES` (by op name) and `JVP_KINDS` (by the shape an op declares beside its
kernel: `@op("flip", jvp="linear")`), which this module fills at import.

A rule is `rule(op, inputs, outputs, tangents, attrs, aux) -> output tangent(s)`; a tangent
is None where the input has none. Rules are written with flowgrad ops, so they are
themselves differentiable and batchable. The families:
- linear ops (shape and view ops, sums, gathers, add/sub, cat...): J t is the op applied to
  the tangents (zeros where none), the integer inputs (indices) kept;
- multilinear ops (mul, matmul, einsum): the sum over each input of the op with that input
  replaced by its tangent; linear and conv, bilinear in (x, w) plus a bias, likewise with the
  bias's tangent in the first term;
- elementwise ops (unary math, activations, binary arithmetic): the Jacobian is diagonal, so
  J t = J^T t: the reverse rule applied to the tangent broadcast to the output's shape (for
  real values; with complex ones torch's reverse rule conjugates: a holomorphic op's JVP is
  the conjugated rule, any other's is derived);
- softmax, log_softmax, logsumexp: their closed forms;
- clamp with tensor bounds: torch's forward formula, which at a tie takes the bound's
  tangent where its reverse rule passes the input's gradient;
- the samplers (normal, bernoulli, poisson): zero tangents of the sample's shape;
- atan2, div, maximum/minimum, fmax/fmin: torch's forward formulas, where they part from the
  reverse rule (the origin, a zero denominator, a nan operand, ties);
- qr, svd, eigh, logcumsumexp: torch's formulas (`jvp_linalg.py`).
"""
from __future__ import annotations

from ..autograd.forward_ad import JVP_KINDS, JVP_RULES, REAL_ONLY, call_rule, capture
from ..tensor import Tensor
from . import jvp_linalg
from .elementwise import where


def _floating(x):
    return x._data.dtype.kind in "fcV"


def _complex(x):
    return x._data.dtype.kind == "c"


def _zeros_like(x):
    return Tensor._zeros(x._data.shape, x._data.dtype)


def _linear(op, inputs, outs, tans, attrs, aux, **override):
    """J t = op(tangents): the op is linear in its floating inputs jointly."""
    args = [t if t is not None else (_zeros_like(x) if _floating(x) else x)
            for x, t in zip(inputs, tans)]
    return op(*args, **(dict(attrs, **override) if override else attrs))


def _multilinear(op, inputs, outs, tans, attrs, aux):
    """J t = sum_i op(x_0, .., t_i, .., x_n): the op is linear in each input separately."""
    total = None
    for i, t in enumerate(tans):
        if t is None or not _floating(inputs[i]):
            continue
        term = op(*(t if j == i else x for j, x in enumerate(inputs)), **attrs)
        total = term if total is None else total + term
    return total


def _linear_layer(op, inputs, outs, tans, attrs, aux):
    """linear(x, w, b) = x w^T + b (and conv(x, w, b)): bilinear in (x, w), linear in b."""
    x, w = inputs[:2]
    tx, tw = tans[:2]
    tb = tans[2] if len(tans) > 2 else None
    total = None
    if tx is not None or tb is not None:
        first = [tx if tx is not None else _zeros_like(x), w]
        if tb is not None:
            first.append(tb)
        total = op(*first, **attrs)
    if tw is not None:
        term = op(x, tw, **attrs)
        total = term if total is None else total + term
    return total


def _diagonal(op, inputs, outs, tans, attrs, aux):
    """Elementwise ops: J is diagonal, so J t = J^T t, the reverse rule applied to t."""
    out = outs[0]
    conj = _complex(out) or any(_complex(x) for x in inputs)
    if conj:
        # torch's reverse rule of a holomorphic f is g conj(f'): J t = f' t = conj(rule(conj t));
        # any other complex case (abs, angle, real inputs) derives its JVP
        if op.name not in HOLOMORPHIC or not all(_complex(x) for x in (out, *inputs)
                                                  if _floating(x)):
            return NotImplemented
        tans = [None if t is None else t.conj() for t in tans]
    needs = [t is not None and _floating(x) for x, t in zip(inputs, tans)]
    node = capture(op, inputs, outs, attrs, aux, needs)
    total = None
    for i, need in enumerate(needs):
        if not need:
            continue
        t = tans[i]
        if tuple(t.shape) != tuple(out.shape):
            t = t.expand(out.shape)
        node.needs_input_grad = tuple(j == i for j in range(len(needs)))
        g = call_rule(op, node, [t])[i]
        if g is None:
            continue
        if tuple(g.shape) != tuple(out.shape):
            return NotImplemented  # the rule un-broadcast itself: derive instead
        total = g if total is None else total + g
    return total.conj() if conj and total is not None else total


def _first(op, inputs, outs, tans, attrs, aux):
    return tans[0]


def _pad_constant(op, inputs, outs, tans, attrs, aux):
    return _linear(op, inputs, outs, tans, attrs, aux, value=0.0)


def _softmax(op, inputs, outs, tans, attrs, aux):
    y, t = outs[0], tans[0]
    return y * (t - (y * t).sum(attrs["dim"], keepdim=True))


def _log_softmax(op, inputs, outs, tans, attrs, aux):
    y, t = outs[0], tans[0]
    return t - (y.exp() * t).sum(attrs["dim"], keepdim=True)


def _logsumexp(op, inputs, outs, tans, attrs, aux):
    (x,), (t,) = inputs, tans
    axes = attrs["axes"]
    axes = tuple(range(x.ndim)) if axes is None else axes
    lse = outs[0] if attrs["keepdim"] else outs[0].reshape(
        [1 if d in {a % max(x.ndim, 1) for a in axes} else n for d, n in enumerate(x.shape)])
    return ((x - lse).exp() * t).sum(tuple(axes), keepdim=attrs["keepdim"])


def _prelu(op, inputs, outs, tans, attrs, aux):
    # torch's forward formula: x >= 0 passes the tangent (its reverse rule: x > 0 passes dy)
    (x, w), (tx, tw) = inputs, tans
    tx = _zeros_like(x) if tx is None else tx
    inner = tx * w if tw is None else tx * w + tw * x
    return where(x >= 0, tx, inner)


def _clamp_tensor(op, inputs, outs, tans, attrs, aux):
    # torch's clamp_jvp: where(lo > hi, t_hi, where(x < lo, t_lo, where(x > hi, t_hi, t_x))),
    # and with one bound where(x > lo, t_x, t_lo) (a tie takes the bound's tangent)
    x, *bounds = inputs
    tx, *tb = [0.0 if t is None else t for t in tans]
    if attrs["has_min"] and attrs["has_max"]:
        (lo, hi), (t_lo, t_hi) = bounds, tb
        inner = where(x < lo, t_lo, where(x > hi, t_hi, tx))
        return where(lo > hi, t_hi, inner)
    if attrs["has_min"]:
        return where(x > bounds[0], tx, tb[0])
    return where(x < bounds[0], tx, tb[0])


def _sample(op, inputs, outs, tans, attrs, aux):
    """A sampler's draw moves with none of its parameters (torch's zero gradients), and its
    tangent has the sample's shape, also where a parameter broadcasts."""
    if attrs.get("p") is not None:  # torch's bernoulli(input, p) has no forward formula
        raise NotImplementedError(
            "Trying to use forward AD with aten::bernoulli(input, p) that does not support it "
            "(as torch's); pass the primal (forward_ad.unpack_dual(x).primal) or use "
            "bernoulli(probabilities)")
    return [_zeros_like(o) if _floating(o) else None for o in outs]


# ---- torch's own forward formulas, where they part from the reverse rule at ties, zeros,
# nans (a tangent torch leaves undefined is its zero tensor: a product with it is 0)
def _tangents(inputs, tans):
    return [t if t is not None and _floating(x) else None for x, t in zip(inputs, tans)]


def _atan2(op, inputs, outs, tans, attrs, aux):
    # (b ta - a tb) / (a^2 + b^2): nan at the origin (0 / 0) where the reverse rule gives 0
    (a, b), (ta, tb) = inputs, _tangents(inputs, tans)
    num = None if tb is None else -a * tb
    if ta is not None:
        num = b * ta if num is None else num + b * ta
    return num / (a * a + b * b)


def _div(op, inputs, outs, tans, attrs, aux):
    # (ta - tb y) / b: at b = 0 an inf, where ta / b - tb a / b^2 is inf - inf = nan
    (_, b), (ta, tb) = inputs, _tangents(inputs, tans)
    num = ta
    if tb is not None:
        num = -(tb * outs[0]) if num is None else num - tb * outs[0]
    return num / b


def _selecting(pick):
    """maximum/minimum/fmax/fmin: tb + w (ta - tb), w the weight of the first input (torch's
    forward weights: a nan operand gives maximum's tangent to the second input, where the
    reverse rule passes dy to both; fmax's ties go to the second, its reverse rule's to the
    first)."""
    def rule(op, inputs, outs, tans, attrs, aux):
        (a, b), ts = inputs, _tangents(inputs, tans)
        ta, tb = (t if t is not None else _zeros_like(x) for x, t in zip(inputs, ts))
        return tb + pick(a, b).to(outs[0].dtype) * (ta - tb)
    return rule


# elementwise ops holomorphic on complex values (their complex JVP is the conjugated rule)
HOLOMORPHIC = frozenset(("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "div",
                         "pow", "scalar_pow", "scalar_rpow"))

# rules written for real values only: forward AD refuses a complex tangent through them
REAL_ONLY.update(jvp_linalg.RULES)

# forward_ad looks rules up in its JVP_RULES: filled here, as the rules are written in ops
JVP_KINDS.update(linear=_linear, multilinear=_multilinear, diagonal=_diagonal)
JVP_RULES.update({"linear": _linear_layer, "conv": _linear_layer, "scalar_add": _first,
                  "depend": _first, "pad_constant": _pad_constant, "softmax": _softmax,
                  "safe_softmax": _softmax, "log_softmax": _log_softmax, "logsumexp": _logsumexp,
                  "prelu": _prelu, "clamp_tensor": _clamp_tensor, "normal": _sample,
                  "bernoulli": _sample, "poisson": _sample, "atan2": _atan2, "div": _div,
                  "maximum": _selecting(lambda a, b: where(a == b, 0.5, (a > b).to(a.dtype))),
                  "minimum": _selecting(lambda a, b: where(a == b, 0.5, (a < b).to(a.dtype))),
                  "fmax": _selecting(lambda a, b: (a > b) | b.isnan()),
                  "fmin": _selecting(lambda a, b: (a <= b) | b.isnan())})
JVP_RULES.update(jvp_linalg.RULES)
