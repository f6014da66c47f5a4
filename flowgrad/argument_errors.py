"""Argument errors told as torch's argument parser tells them: naming the function the user
called and the types of what it was given, not the inner function or conversion that refused.

`errors.guarded` (the wrapper of every public function and Tensor method) hands its failed
calls' TypeErrors and ValueErrors to `retold`: a call that did not bind (`x.eq_(y, 0, 2)`,
which reached an inner `compare(input, other)`) or a tensor of several elements where a
number belongs (`x.uniform_(y)`, `x.cumsum_(y)`) then names `eq_` / `uniform_` and the
argument types; any other error passes unchanged. Before that, `deprecated_form` tries the
signatures torch's parser still takes but no longer documents, as torch does when the current
one does not bind: the positional scale factors of old optimizers' code
(`p.data.add_(-lr, grad)`, `exp_avg_sq.addcmul_(1 - beta2, grad, grad)`,
`torch.addmm(beta, input, mat1, mat2)`).
"""
from __future__ import annotations

import numbers
import re
import warnings

# Python's own messages for a call that does not bind to the function's parameters
_UNBOUND = re.compile(r"([\w.<>]+)\(\) (takes |missing \d+ required|got an unexpected keyword"
                      r"|got multiple values|got some positional-only)")
# Tensor.__index__ / __float__ of a tensor with several elements (torch's texts)
_NOT_A_NUMBER = ("only integer tensors of a single element can be converted to an index",
                 "only one element tensors can be converted to Python scalars")
_INVALID = "() received an invalid combination of arguments - got ("


def type_name(value) -> str:
    """The name torch's messages give a value's type: 'int', 'Tensor', 'numpy.ndarray'."""
    cls = type(value)
    if hasattr(value, "_data"):
        return cls.__name__
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"


def retold(name, method, args, kwargs, error):
    """`error` (a TypeError or ValueError that public function `name` raised on `args`,
    `kwargs`; `method`: args[0] is self) as the TypeError torch's parser raises, when it came
    from binding the arguments to an inner function or from a tensor where a number belongs;
    None when it had another cause (or already names `name`), or when an argument is a
    callable (the refusal may be the user's function's own).

    >>> retold("eq_", True, (0, 1, 2, 3), {}, TypeError("compare() takes 2 positional "
    ...        "arguments but 4 were given"))
    TypeError('eq_() received an invalid combination of arguments - got (int, int, int): \
compare() takes 2 positional arguments but 4 were given')
    """
    told = getattr(error, "_untold", None)  # (an inner public function's retelling)
    text = told if told is not None else str(error)
    found = _UNBOUND.match(text)
    if found:
        if found.group(1).rsplit(".", 1)[-1] == name:
            return None
    elif not text.startswith(_NOT_A_NUMBER):
        return None
    values = args[1:] if method else args
    if any(callable(v) and not hasattr(v, "_data") and not isinstance(v, type)
           for v in (*values, *kwargs.values())):
        return None
    if found and "<" in found.group(1):  # (an anonymous inner function: say whose it is)
        text = name + text[len(found.group(1)):]
    got = [type_name(v) for v in values] + [f"{k}={type_name(v)}" for k, v in kwargs.items()]
    new = TypeError(f"{name}{_INVALID}{', '.join(got)}): {text}")
    new._untold = text
    return new


def refused_call(fn, name, method, args, kwargs, error):
    """What a call of public function `name` (`fn`, the function it wraps) that raised `error`,
    a TypeError or ValueError, comes to: `fn` in the current signature for a call in one of
    torch's deprecated ones (`deprecated_form`), else the refusal as torch's parser tells it
    (`retold`), else `error` itself."""
    if isinstance(error, TypeError):
        moved = deprecated_form(name, method, args, kwargs)
        if moved is not None:
            return fn(*moved[0], **moved[1])
    told = retold(name, method, args, kwargs, error)
    if told is None:
        raise error
    raise told from None


def float_arg(value, op_name, arg, position):
    """`value` as a float, or torch's TypeError where its parser refuses it for a `float`
    argument: None, a string, a complex, a tensor of other than one element in zero dims.

    >>> float_arg(2, "exponential_", "lambd", 1)
    2.0
    >>> float_arg(None, "exponential_", "lambd", 1)
    Traceback (most recent call last):
    ...
    TypeError: exponential_(): argument 'lambd' (position 1) must be float, not NoneType
    """
    if value.__class__ is float:
        return value
    data = getattr(value, "_data", None)
    if isinstance(value, numbers.Real) if data is None else \
            data.ndim == 0 and data.dtype.kind in "biufV":
        return float(value)
    raise TypeError(f"{op_name}(): argument '{arg}' (position {position}) must be float, not "
                    f"{type_name(value)}")


def number_arg(value, op_name, arg, position):
    """`value` for one of torch's `Number` (Scalar) arguments: a 0-d tensor as its Python
    number, a number as it is; a tensor with dims (or a None, a string) is torch's TypeError.

    >>> number_arg(0.5, "threshold", "value", 3)
    0.5
    """
    data = getattr(value, "_data", None)
    if data is None:
        if isinstance(value, numbers.Number):
            return value
    elif data.ndim == 0:
        return value.item()
    raise TypeError(f"{op_name}(): argument '{arg}' (position {position}) must be Number, not "
                    f"{type_name(value)}")


def _number(value):
    """A scale factor torch's `Number` arguments take: a Python or NumPy number, or a tensor
    of one element in zero dims."""
    data = getattr(value, "_data", None)
    return isinstance(value, numbers.Number) if data is None else \
        data.ndim == 0 and not value.requires_grad


def _tensor(value):
    return getattr(value, "_data", None) is not None


_FIRST = {"add": "alpha", "sub": "alpha", "subtract": "alpha", "addcmul": "value",
          "addcdiv": "value"}
_PRODUCTS = {"addmm": 2, "addmv": 2, "addr": 2, "baddbmm": 2, "addbmm": 2}
_WARNED = set()


def deprecated_form(name, method, args, kwargs):
    """(args, kwargs) in the current signature of public function `name` for a call in one of
    torch's deprecated (or positional-scale) signatures, else None: `add(alpha, other)` and
    sub's (also of two numbers); `subtract(other, alpha)` of two numbers (its Scalar
    overload); `addcmul(value, tensor1, tensor2)` and
    addcdiv's; `addmm(beta, [alpha,] mat1, mat2)` of the methods and `addmm(beta, input,
    [alpha,] mat1, mat2)` of the functions, and so for addmv, addr, baddbmm and addbmm.

    >>> deprecated_form("sub_", True, ("self", 2, 3), {})
    (('self', 3), {'alpha': 2})
    """
    base = name[:-1] if name.endswith("_") else name
    if base in _FIRST:
        key, rest = _FIRST[base], args[1:]
        if key in kwargs or len(rest) != (3 if key == "value" else 2):
            return None
        if base == "subtract":  # (no deprecated overload: the Scalar one, alpha second)
            return ((args[0], rest[0]), {**kwargs, key: rest[1]}) if _number(rest[0]) and \
                _number(rest[1]) else None
        if _number(rest[0]) and all(_tensor(r) for r in rest[1:]):
            _warn(base, f"{base}(Number {key}, {', '.join(['Tensor'] * (len(rest) - 1))})")
            return (args[0], *rest[1:]), {**kwargs, key: rest[0]}
        if key == "alpha" and _number(rest[0]) and _number(rest[1]):  # (a number other)
            return (args[0], rest[1]), {**kwargs, key: rest[0]}
        return None
    if base not in _PRODUCTS or "beta" in kwargs or "alpha" in kwargs:
        return None
    if not method:  # torch.addmm(beta, input, [alpha,] mat1, mat2)
        if len(args) < 4 or not _number(args[0]):
            return None
        args = (args[1], args[0], *args[2:])
    rest = args[1:]
    scales = len(rest) - _PRODUCTS[base]
    if scales not in (1, 2) or not all(_number(r) for r in rest[:scales]) or \
            not all(_tensor(r) for r in rest[scales:]):
        return None
    _warn(base, f"{base}(Number beta, {'Number alpha, ' * (scales - 1)}Tensor, Tensor)")
    moved = dict(kwargs, beta=rest[0])
    if scales == 2:
        moved["alpha"] = rest[1]
    return (args[0], *rest[scales:]), moved


def _warn(base, signature):
    if base not in _WARNED:  # (once, as torch's TORCH_WARN_ONCE)
        _WARNED.add(base)
        keywords = {"add": "alpha=", "sub": "alpha=", "addcmul": "value=",
                    "addcdiv": "value="}.get(base, "beta=, alpha=")
        warnings.warn(f"This overload of {base} is deprecated:\n\t{signature}\nConsider "
                      f"passing the scale factors as keywords ({keywords}) instead",
                      UserWarning, stacklevel=4)
