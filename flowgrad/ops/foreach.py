"""torch._foreach_*: one op over lists of tensors (what optimizers, EMA updates and gradient
clipping written for torch call: `torch._foreach_lerp_(ema, params, 0.001)`). Each is the
flowgrad op applied tensor by tensor, so its values, dtypes and gradients are the op's;
torch's fused kernels compute the same numbers. The in-place forms (trailing `_`) return the
list they were given, as torch's, the others a tuple. The second operand is, per overload,
a number, a list of numbers, a 0-d tensor or a list of tensors; addcmul/addcdiv also take a
1-D tensor of per-tensor values.

>>> import flowgrad as flow
>>> ema, params = [flow.zeros(2), flow.zeros(1)], [flow.ones(2), flow.ones(1) * 4]
>>> flow._foreach_lerp_(ema, params, 0.5) is ema
True
>>> ema
[tensor([0.5000, 0.5000]), tensor([2.])]
>>> flow._foreach_norm(params)
(tensor(1.4142), tensor(4.))
"""
from __future__ import annotations

import numbers

from ..tensor import Tensor
from .norm import vector_norm

__all__: list[str] = []

_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1",
          "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal",
          "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc")
# name -> whether a list of tensors may carry an alpha; a 0-d tensor operand is allowed
_BINARY = {"add": True, "sub": True, "mul": False, "div": False, "pow": False,
           "clamp_min": False, "clamp_max": False, "maximum": False, "minimum": False}


def _tensors(name, tensors, what="self"):
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Tensor)
                                                         for t in tensors):
        raise TypeError(f"{name}(): argument '{what}' must be a list or tuple of Tensors, not "
                        f"{type(tensors).__name__}")
    if not tensors:
        raise RuntimeError("Tensor list must have at least one tensor.")
    return tensors


def _per_tensor(name, tensors, other, scalar_tensor_ok, what="other"):
    """`other` spread over `tensors`: one value per tensor (a list of tensors or numbers, a
    1-D tensor of values if `scalar_tensor_ok == "values"`), or the same one for all."""
    n = len(tensors)
    if isinstance(other, (list, tuple)):
        if all(isinstance(o, Tensor) for o in other):
            if len(other) != n:
                raise RuntimeError(f"Tensor lists must have the same number of tensors, got "
                                   f"{n} and {len(other)}")
        elif len(other) != n:
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        return list(other)
    if isinstance(other, Tensor):
        if scalar_tensor_ok == "values":  # addcmul/addcdiv: one value per tensor
            if other.dim() != 1 or other.numel() != n:
                raise RuntimeError(f"{name}: the tensor of scalars must be 1-D with one "
                                   f"value per tensor ({n}), got shape {tuple(other.shape)}")
            return other.tolist()
        if not scalar_tensor_ok:
            raise TypeError(f"{name}(): a single Tensor operand is not accepted; pass a "
                            f"number, a list of numbers or a list of Tensors")
        if other.dim() != 0:
            raise RuntimeError(f"scalar tensor expected to be 0 dim but it has {other.dim()} "
                               f"dimensions and {other.numel()} elements.")
    elif not isinstance(other, (numbers.Number, bool)):
        raise TypeError(f"{name}(): unsupported operand of type {type(other).__name__}")
    return [other] * n


def _check_fits(name, tensors, *operand_lists):
    """Before an in-place foreach op writes anything: each tensor operand broadcasts to its
    tensor's shape (torch writes the tensors before the one that does not fit; flowgrad
    refuses with every tensor as it was)."""
    for operands in operand_lists:
        for i, (t, o) in enumerate(zip(tensors, operands)):
            if isinstance(o, Tensor) and not _broadcasts_to(tuple(o.shape), tuple(t.shape)):
                raise RuntimeError(f"{name}: the operand of shape {tuple(o.shape)} for tensor "
                                   f"{i} (shape {tuple(t.shape)}) does not broadcast to its "
                                   f"shape; nothing was written")


def _broadcasts_to(src, dst):
    return len(src) <= len(dst) and all(a in (1, b) for a, b in zip(src[::-1], dst[::-1]))


def _unary(op):
    def out_of_place(self):
        return tuple(getattr(t, op)() for t in _tensors(f"_foreach_{op}", self))

    def in_place(self):
        for t in _tensors(f"_foreach_{op}_", self):
            getattr(t, op + "_")()
        return self
    return out_of_place, in_place


def _binary(op, takes_alpha):
    name = f"_foreach_{op}"

    def apply(t, o, alpha):
        if op in ("maximum", "minimum") and not isinstance(o, Tensor):  # a number: a clamp
            return (t.clamp_min if op == "maximum" else t.clamp_max)(o)
        if op in ("add", "sub") and alpha != 1:
            return getattr(t, op)(o, alpha=alpha)
        return getattr(t, op)(o)

    def out_of_place(self, other, *, alpha=1):
        if isinstance(self, numbers.Number) and op == "pow":  # pow(number, tensors)
            return tuple(self ** t for t in _tensors(name, other, "exponent"))
        self = _tensors(name, self)
        return tuple(apply(t, o, alpha) for t, o in
                     zip(self, _per_tensor(name, self, other, op in ("add", "sub", "mul",
                                                                     "div"))))

    def in_place(self, other, *, alpha=1):
        others = _per_tensor(name + "_", _tensors(name + "_", self), other,
                             op in ("add", "sub", "mul", "div"))
        _check_fits(name + "_", self, others)
        for t, o in zip(self, others):
            if op in ("maximum", "minimum"):  # (no Tensor.maximum_)
                t.copy_(apply(t, o, alpha))
            elif op in ("add", "sub") and alpha != 1:
                getattr(t, op + "_")(o, alpha=alpha)
            else:
                getattr(t, op + "_")(o)
        return self
    if not takes_alpha:  # torch's signatures: alpha only where it exists
        def plain(self, other):
            return out_of_place(self, other)

        def plain_(self, other):
            return in_place(self, other)
        return plain, plain_
    return out_of_place, in_place


def _pointwise(op):
    """addcmul / addcdiv: self + value * (t1 op t2)."""
    name = f"_foreach_{op}"

    def out_of_place(self, tensor1, tensor2, value=1):
        self = _tensors(name, self)
        t1, t2 = (_per_tensor(name, self, _tensors(name, t, w), False)
                  for t, w in ((tensor1, "tensor1"), (tensor2, "tensor2")))
        values = _per_tensor(name, self, value, "values")
        return tuple(getattr(t, op)(a, b, value=v)
                     for t, a, b, v in zip(self, t1, t2, values))

    def in_place(self, tensor1, tensor2, value=1):
        _tensors(name + "_", self)
        t1, t2 = (_per_tensor(name, self, _tensors(name, t, w), False)
                  for t, w in ((tensor1, "tensor1"), (tensor2, "tensor2")))
        _check_fits(name + "_", self, t1, t2)
        for t, a, b, v in zip(self, t1, t2, _per_tensor(name, self, value, "values")):
            getattr(t, op + "_")(a, b, value=v)
        return self
    return out_of_place, in_place


def _foreach_lerp(self, tensors1, weight):
    self = _tensors("_foreach_lerp", self)
    ends = _per_tensor("_foreach_lerp", self, _tensors("_foreach_lerp", tensors1, "tensors1"),
                       False)
    return tuple(t.lerp(e, w) for t, e, w in
                 zip(self, ends, _per_tensor("_foreach_lerp", self, weight, False)))


def _foreach_lerp_(self, tensors1, weight):
    ends = _per_tensor("_foreach_lerp_", _tensors("_foreach_lerp_", self),
                       _tensors("_foreach_lerp_", tensors1, "tensors1"), False)
    weights = _per_tensor("_foreach_lerp_", self, weight, False)
    _check_fits("_foreach_lerp_", self, ends, weights)
    for t, e, w in zip(self, ends, weights):
        t.lerp_(e, w)
    return self


def _foreach_norm(self, ord=2, dtype=None):
    return tuple(vector_norm(t, ord, dtype=dtype)
                 for t in _tensors("_foreach_norm", self))


def _foreach_powsum(self, ord=2, dtype=None):
    """sum(|t| ** ord) of each tensor (the norm before its root)."""
    return tuple((t.to(dtype) if dtype is not None else t).abs().pow(ord).sum()
                 for t in _tensors("_foreach_powsum", self))


def _foreach_max(self):
    out = []
    for t in _tensors("_foreach_max", self):
        if t.numel() == 0:
            raise RuntimeError("_foreach_max cannot compute the maximum of an empty tensor; "
                               "max over zero elements is undefined.")
        out.append(t.max())
    return tuple(out)


def _foreach_mm(self, mat2):
    self = _tensors("_foreach_mm", self)
    return tuple(a.mm(b) for a, b in zip(self, _per_tensor(
        "_foreach_mm", self, _tensors("_foreach_mm", mat2, "mat2"), False)))


def _foreach_clone(self, *, memory_format=None):
    return tuple(t.clone() if memory_format is None else t.clone(memory_format=memory_format)
                 for t in _tensors("_foreach_clone", self))


def _foreach_copy_(self, src, non_blocking=False):
    sources = _per_tensor("_foreach_copy_", _tensors("_foreach_copy_", self),
                          _tensors("_foreach_copy_", src, "src"), False)
    _check_fits("_foreach_copy_", self, sources)
    for t, s in zip(self, sources):
        t.copy_(s)
    return self


def _foreach_zero_(self):
    for t in _tensors("_foreach_zero_", self):
        t.zero_()
    return self


def _export(name, fn):
    fn.__name__ = fn.__qualname__ = name
    if fn.__doc__ is None:
        fn.__doc__ = f"torch.{name}: the op over a list of tensors (see flowgrad.ops.foreach)."
    globals()[name] = fn
    __all__.append(name)


for _op in _UNARY:
    for _name, _fn in zip((f"_foreach_{_op}", f"_foreach_{_op}_"), _unary(_op)):
        _export(_name, _fn)
for _op, _alpha in _BINARY.items():
    for _name, _fn in zip((f"_foreach_{_op}", f"_foreach_{_op}_"), _binary(_op, _alpha)):
        _export(_name, _fn)
for _op in ("addcmul", "addcdiv"):
    for _name, _fn in zip((f"_foreach_{_op}", f"_foreach_{_op}_"), _pointwise(_op)):
        _export(_name, _fn)
for _fn in (_foreach_lerp, _foreach_lerp_, _foreach_norm, _foreach_powsum, _foreach_max,
            _foreach_mm, _foreach_clone, _foreach_copy_, _foreach_zero_):
    _export(_fn.__name__, _fn)
