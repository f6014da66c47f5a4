"""Error messages that name the op, the shapes and dtypes, and what to do."""
from __future__ import annotations

import functools
import inspect
import math
import operator
import sys
import types

import numpy as np

from .argument_errors import refused_call
from .argument_errors import type_name as _type_name
from .dtypes import TORCH_SCALAR_NAMES, finfo, from_numpy_dtype, to_real

# the index dtypes most of torch's indexing ops take (some take int64 alone)
INT_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


class LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError: a factorization that could not be completed (a singular or
    not positive-definite matrix); a RuntimeError, as torch's, so either `except` catches it."""


class SparseOperandError(NotImplementedError):
    """A dense op read a sparse tensor's data: the op has no sparse form here (the message
    names it and the remedy). add, sub and mul catch it first and run the sparse form
    (`sparse_ops.py`)."""


SPARSE_FORMS = []  # flowgrad.sparse_shape's dispatcher, once imported (an import cycle)

# overrides.dispatch (the __torch_function__ protocol), registered at import: the guards try
# it on a call that failed (a tensor-like argument), and on every call once EVERY_CALL holds
# it too (a Tensor subclass that dispatches was defined); NOT_HANDLED: no override took it
DISPATCH, EVERY_CALL = [], []
NOT_HANDLED = object()


def tensor_like_call(func, args, kwargs):
    """`func(*args, **kwargs)` through the __torch_function__ of a tensor-like argument, for
    a call that failed on it; NOT_HANDLED when there is none."""
    return DISPATCH[0](func, args, kwargs) if DISPATCH else NOT_HANDLED


def sparse_form(name, args, kwargs, error):
    """Public function `name` met a sparse operand (`error`, a SparseOperandError): its
    sparse form when one exists, else the error again."""
    if not SPARSE_FORMS:
        raise error
    return SPARSE_FORMS[0](name, args, kwargs, error)


def describe(x) -> str:
    """'Tensor(shape=(2, 3), dtype=float32)' for tensors, repr for anything else."""
    data = getattr(x, "_data", None)
    if data is not None:
        return f"Tensor(shape={tuple(data.shape)}, dtype={data.dtype})"
    return repr(x)


def saved_tensor_error(node, saved):
    """The RuntimeError for a saved tensor modified in place after it was saved for backward."""
    data = saved.tensor._data if saved.tensor is not None else saved.data
    what, by = "output" if saved.is_output else "input", getattr(node, "torch_node", node.name)
    return RuntimeError(
        f"one of the tensors needed for gradient computation has been modified by an "
        f"in-place operation: {what} Tensor(shape={tuple(data.shape)}, dtype={data.dtype}) "
        f"saved by {by} for backward was saved at version {saved.version} and is now "
        f"at version {saved.counter.value}. Use the out-of-place op (e.g. `x = x * 2` "
        f"instead of `x.mul_(2)`), or clone() the tensor before modifying it.")


def inference_saved_error(tensor):
    """The RuntimeError for an inference tensor saved for backward (autograd/inference.py)."""
    return RuntimeError(
        f"Inference tensors cannot be saved for backward (shape {tuple(tensor.shape)}). Please "
        f"do not use Tensors created in inference mode in computation tracked by autograd. "
        f"To work around this, you can make a clone to get a normal tensor and use it in "
        f"autograd, or use `flowgrad.no_grad()` instead of `flowgrad.inference_mode()`.")


def freed_graph_error(node, reading=False):
    """The RuntimeError for a second backward through a graph whose saved tensors were freed
    (`reading`: for reading one of them, as `grad_fn._saved_self`)."""
    also = " (or directly access saved tensors after they have already been freed)"
    return RuntimeError(
        f"Trying to backward through the graph a second time{also if reading else ''}: "
        f"{node.name} has already freed its saved tensors. Pass retain_graph=True to the "
        f"first backward() or autograd.grad() if you need to backward through the graph "
        f"again{' or read its saved tensors' if reading else ''}.")


def _broadcast_mismatch(shapes):
    """torch's wording for the first pair of sizes that cannot broadcast, or None."""
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    for dim in range(ndim):
        sizes = {p[dim] for p in padded} - {1}
        if len(sizes) > 1:
            a, b = sorted(sizes)[:2]
            return (f"The size of tensor a ({a}) must match the size of tensor b ({b}) at "
                    f"non-singleton dimension {dim}")
    return None


def kernel_error(op, inputs, error):
    """Re-raise an error from inside a kernel with the op's name and its inputs.

    Broadcasting failures become torch's RuntimeError; other errors keep their type. Errors
    that already name the op pass through unchanged.
    """
    message = str(error)
    if message.startswith((f"{op.name}:", f"{op.name}(")):
        return error
    described = ", ".join(describe(t) for t in inputs)
    if "could not be broadcast" in message or "cannot be broadcast" in message:  # (NumPy's
        # ufuncs' and broadcast_arrays' wordings)
        mismatch = _broadcast_mismatch([t._data.shape for t in inputs])
        if mismatch is not None:
            return RuntimeError(f"{op.name}: {mismatch}; inputs: {described}. Make the shapes "
                                f"broadcastable (reshape, unsqueeze or expand one of them)")
    text = f"{op.name}: {message}; inputs: {described}"
    try:
        return type(error)(text)
    except TypeError:  # e.g. NumPy's _UFuncNoLoopError takes more than a message
        return TypeError(text) if isinstance(error, TypeError) else RuntimeError(text)



def not_a_tensor(op_name, value, arg="input"):
    """Call from an `except AttributeError:` block (so valid calls pay nothing): raises
    torch's TypeError when `value` is not a tensor, else re-raises the AttributeError.

    >>> try:
    ...     "a"._data
    ... except AttributeError:
    ...     not_a_tensor("sum", "a")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: sum(): argument 'input' (position 1) must be Tensor, not str; ...
    """
    if hasattr(value, "_data"):
        raise  # noqa: PLE0704 - the AttributeError being handled had another cause
    raise TypeError(f"{op_name}(): argument '{arg}' (position 1) must be Tensor, not "
                    f"{type(value).__name__}; wrap data with flowgrad.tensor(...)") from None


def argument_type_error(name, fn, args, kwargs, error):
    """torch's TypeError for a public function that got a non-tensor where it needs a tensor,
    built from the AttributeError its code raised on that value (None when the value that
    lacked the attribute is no argument: the AttributeError had another cause)."""
    if getattr(error, "name", None) is None:  # (raised by hand, not a failed lookup: no obj)
        return None
    culprit = error.obj
    if hasattr(culprit, "_data"):
        return None
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    remedy = "; wrap data with flowgrad.tensor(...)"
    places = [(i, a, params[i].name if i < len(params) and params[i].kind
               in (params[i].POSITIONAL_ONLY, params[i].POSITIONAL_OR_KEYWORD) else None)
              for i, a in enumerate(args)]
    places += [(None, a, key) for key, a in kwargs.items()]
    for i, value, arg in places:
        if value is culprit:
            where = f"argument '{arg}'" if arg else "an argument"
            where += f" (position {i + 1})" if i is not None else ""
            return TypeError(f"{name}(): {where} must be Tensor, not {_type_name(value)}"
                             + remedy)
        if isinstance(value, (list, tuple)):
            for j, item in enumerate(value):
                if item is culprit:
                    return TypeError(
                        f"{name}(): expected Tensor as element {j} in argument "
                        f"{i if i is not None else repr(arg)}, but got {_type_name(item)}"
                        + remedy)
    # the AttributeError came from inside what a non-tensor `input` was handed to (an ndarray's
    # `.device` is a string): torch's `input` is always a tensor
    if places and places[0][2] in ("input", "self", "x") and not hasattr(args[0], "_data") and \
            isinstance(args[0], (int, float, complex, list, tuple, np.ndarray, np.generic)):
        return TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                         f"{_type_name(args[0])}" + remedy)
    return None


# only the tensor functions: transforms take functions, and torch's aliases of those and of
# the utilities are the same object as theirs (torch.vmap is torch.func.vmap,
# torch.from_dlpack is torch.utils.dlpack.from_dlpack)
_GUARDED = ("flowgrad.ops", "flowgrad.nn", "flowgrad.linalg", "flowgrad.special",
            "flowgrad.fft", "flowgrad.sparse", "flowgrad.signal", "flowgrad.masked",
            "flowgrad.dtypes")


def guard_tensor_arguments(namespace):
    """Wrap each public function of `namespace` (a module's dict) defined in flowgrad so that a
    non-tensor where a tensor is needed raises torch's TypeError naming the function and the
    argument instead of an AttributeError from deep inside (`flow.tanh(2.0)`). The check runs
    only once an AttributeError was raised: a valid call pays one call frame. A function with
    one of torch's strict bool arguments (`keepdim`) also refuses a non-bool there (see
    `strict_bool_params`)."""
    for name, fn in list(namespace.items()):
        if name.startswith("_") or not isinstance(fn, types.FunctionType) or \
                not (fn.__module__ == "flowgrad" or (fn.__module__ or "").startswith(_GUARDED)):
            continue
        if not getattr(fn, "_guarded", False):
            namespace[name] = guarded(fn, name)
        elif not getattr(fn, "_bools_checked", False):  # (guarded by out_arg.accept_out)
            namespace[name] = bools_checked(fn, name)


def guard_tensor_methods(cls):
    """`guard_tensor_arguments` for the methods of the Tensor class (`x.allclose(2.0)`)."""
    for name, fn in list(vars(cls).items()):
        if name.startswith("_") or not isinstance(fn, types.FunctionType) or _self_only(fn):
            continue
        if not getattr(fn, "_guarded", False) and (fn.__module__ or "").startswith(_GUARDED):
            setattr(cls, name, guarded(fn, name, method=True))
        elif not getattr(fn, "_bools_checked", False):  # (x.numpy(force=1), x.to(copy=1))
            setattr(cls, name, bools_checked(fn, name, method=True))


def _self_only(fn):
    """A method of no argument but self (`x.is_complex()`): no argument of the wrong type can
    reach it, so it needs no guard (the hot metadata reads of gradient rules keep one frame)."""
    code = fn.__code__
    return code.co_argcount == 1 and not code.co_kwonlyargcount and \
        not code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)


# the arguments that torch's argument parser takes as `bool` only (`x.sum(0, keepdim=1)`:
# "sum(): argument 'keepdim' must be bool, not int"), in the functions that have one with a
# bool default; not `inplace`, `return_indices`, `hard`, `get_infos`: torch's Python-level
# functions (F.relu, F.max_pool2d, torch.lu) test those for truth and take anything
STRICT_BOOLS = frozenset((
    "keepdim", "descending", "largest", "sorted", "stable", "unbiased", "return_inverse",
    "return_counts", "upper", "left", "unitriangular", "transpose", "some", "compute_uv",
    "full_matrices", "hermitian", "right", "out_int32", "return_complex", "onesided",
    "normalized", "center", "equal_nan", "pivot", "check_errors", "as_tuple",
    "with_replacement", "increasing", "log_target", "log_input", "full", "ceil_mode",
    "count_include_pad", "training", "wrap", "adjoint", "assume_unique", "invert", "density",
    "non_blocking", "requires_grad", "use_input_stats", "cudnn_enabled", "periodic",
    "scale_grad_by_freq", "sparse", "include_last_offset", "zero_infinity", "accumulate",
    "include_self", "sparse_grad", "replacement", "unpack_data", "unpack_pivots", "swap",
    "is_causal", "enable_gqa", "align_corners", "antialias", "pin_memory", "copy", "force"))
# strict also where flowgrad's default is None (torch's `bool?`) or there is none (a required
# argument): whether None passes (only a bool, or None, does)
_STRICT_WITHOUT_BOOL_DEFAULT = {"unbiased": False, "upper": False, "onesided": True,
                                "return_complex": True, "align_corners": True,
                                "keepdim": False}  # (None: not given, in sum, max, median...)
# where torch is lenient after all (Python-level code that tests the value for truth)
_LENIENT = frozenset((
    ("pca_lowrank", "center"), ("gaussian_nll_loss", "full"), ("stft", "center"),
    ("triplet_margin_with_distance_loss", "swap"), ("interpolate", "antialias"),
    ("multi_head_attention_forward", "training"), ("multi_head_attention_forward", "is_causal")))
# `bool?` in torch's signature: None passes too
_NONE_PASSES = frozenset((("sort", "stable"),))
_NONE_REFUSED_REQUIRES_GRAD = frozenset(("tensor", "requires_grad_", "new_tensor", "range"))


def strict_bool_params(fn, name):
    """((argument, index in the positional arguments or None), ...) of `fn`'s arguments that
    torch's `name` takes as a bool only, with whether None passes too; () when none."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    found, index = [], 0
    for p in params:
        positional = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            index = None
        elif p.name in STRICT_BOOLS and (name, p.name) not in _LENIENT:
            if p.default.__class__ is bool:
                none_passes = (name, p.name) in _NONE_PASSES or (
                    p.name == "requires_grad" and name not in _NONE_REFUSED_REQUIRES_GRAD)
                found.append((p.name, index if positional else None, none_passes))
            elif p.name in _STRICT_WITHOUT_BOOL_DEFAULT and (p.default is None or
                                                              p.default is p.empty):
                found.append((p.name, index if positional else None,
                              _STRICT_WITHOUT_BOOL_DEFAULT[p.name]))
        if positional and index is not None:
            index += 1
    return tuple(found)


def check_bool_args(name, strict, args, kwargs, method=False):
    """Raise torch's TypeError for a value that is no bool passed as one of the `strict`
    arguments (from `strict_bool_params`) of `name`; `method`: `args[0]` is self, which torch
    does not count in the positions."""
    count = len(args)
    for arg, index, none_passes in strict:
        if index is not None and index < count:
            value = args[index]
        elif arg in kwargs:
            value, index = kwargs[arg], None
        elif arg == "keepdim" and "keepdims" in kwargs:  # (NumPy's spelling, as torch takes)
            value, index = kwargs["keepdims"], None
        else:
            continue
        if value.__class__ is not bool and not (none_passes and value is None):
            kind = "Tensor" if hasattr(value, "_data") else \
                "numpy.bool" if isinstance(value, np.bool_) else _type_name(value)
            where = "" if index is None else f" (position {index + (not method)})"
            raise TypeError(f"{name}(): argument '{arg}'{where} must be bool, not {kind}")


def guarded(fn, name, method=False):
    """`fn` whose AttributeErrors from a non-tensor argument become torch's TypeError; and
    which refuses a non-bool for one of torch's strict bool arguments (`strict_bool_params`)."""
    strict = strict_bool_params(fn, name)
    if strict:
        return _bools_checking(fn, name, strict, method, guard=True)

    public = []  # the function users call (this one, or autocast's wrapper of it)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if EVERY_CALL:  # (a Tensor subclass exists: its __torch_function__ may take the call)
            handled = EVERY_CALL[0](public[0], args, kwargs)
            if handled is not NOT_HANDLED:
                return handled
        try:
            return fn(*args, **kwargs)
        except AttributeError as error:
            handled = tensor_like_call(public[0], args, kwargs)
            if handled is not NOT_HANDLED:
                return handled
            reraise_typed(name, fn, args, kwargs, error)
        except TypeError as error:
            handled = tensor_like_call(public[0], args, kwargs)
            if handled is NOT_HANDLED:
                return refused_call(fn, name, method, args, kwargs, error)
            return handled
        except ValueError as error:
            return refused_call(fn, name, method, args, kwargs, error)
        except SparseOperandError as error:
            return sparse_form(name, args, kwargs, error)
    public.append(call)
    call._public = public
    call._guarded = True
    return call


def bools_checked(fn, name, method=False):
    """`fn` refusing a non-bool for one of torch's strict bool arguments, as `guarded` does
    (for a function guarded otherwise); `fn` itself when it has none."""
    strict = strict_bool_params(fn, name)
    return _bools_checking(fn, name, strict, method, guard=False) if strict else fn


def _bools_checking(fn, name, strict, method, guard):
    """`fn` calling `check_bool_args` only when a call passes enough positional arguments to
    reach a strict one, or keywords; with one strict argument (`x.sum(0, keepdim=True)`), only
    when the value passed is no bool. `guard`: with `guarded`'s AttributeError translation."""
    single = len(strict) == 1
    arg, index, none_passes = strict[0]
    index = 1 << 30 if index is None else index
    alias = "keepdims" if arg == "keepdim" else arg
    reach = min((i for _, i, _ in strict if i is not None), default=1 << 30)

    public = []  # (as `guarded`'s)

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        if EVERY_CALL:  # (as `guarded`'s)
            handled = EVERY_CALL[0](public[0], args, kwargs)
            if handled is not NOT_HANDLED:
                return handled
        if single:
            if len(args) > index:
                value = args[index]
            elif kwargs:
                value = kwargs.get(arg, kwargs.get(alias, True))
            else:
                value = True
            if value.__class__ is not bool and not (none_passes and value is None):
                check_bool_args(name, strict, args, kwargs, method)
        elif kwargs or len(args) > reach:
            check_bool_args(name, strict, args, kwargs, method)
        try:
            return fn(*args, **kwargs)
        except AttributeError as error:
            handled = tensor_like_call(public[0], args, kwargs)
            if handled is not NOT_HANDLED:
                return handled
            if guard:
                reraise_typed(name, fn, args, kwargs, error)
            raise
        except TypeError as error:
            handled = tensor_like_call(public[0], args, kwargs)
            if handled is NOT_HANDLED:
                return refused_call(fn, name, method, args, kwargs, error)
            return handled
        except ValueError as error:
            return refused_call(fn, name, method, args, kwargs, error)
        except SparseOperandError as error:
            return sparse_form(name, args, kwargs, error)
    public.append(checked)
    checked._public = public
    checked._guarded = guard or getattr(fn, "_guarded", False)
    checked._bools_checked = True
    return checked


def reraise_typed(name, fn, args, kwargs, error):
    """Raise `argument_type_error`'s TypeError for `error`, or `error` itself when it had
    another cause (call from the `except AttributeError` block of a call to `fn`)."""
    typed = argument_type_error(name, fn, args, kwargs, error)
    if typed is None:
        raise error
    raise typed from None


def expect_tensor(op_name, value, arg="input", position=1):
    """Raise torch's TypeError unless `value` is a tensor (for functions that would otherwise
    accept anything: `positive(2.0)`, `is_conj([1])`)."""
    if not hasattr(value, "_data"):
        raise TypeError(f"{op_name}(): argument '{arg}' (position {position}) must be Tensor, "
                        f"not {_type_name(value)}; wrap data with flowgrad.tensor(...)")


def int_arg(value, op_name, arg, position, what="int"):
    """`value` as an int, or torch's TypeError where torch's argument parser refuses it: a
    float (even 2.0, which int() would take, and 1.5, which it would truncate), a bool, a
    floating tensor. An int, a NumPy integer and an integer 0-d tensor pass.

    >>> int_arg(2, "tril", "diagonal", 2)
    2
    >>> int_arg(1.5, "tril", "diagonal", 2)
    Traceback (most recent call last):
    ...
    TypeError: tril(): argument 'diagonal' (position 2) must be int, not float
    """
    if type(value) is int:
        return value
    if not isinstance(value, bool) and hasattr(type(value), "__index__"):
        try:
            return operator.index(value)
        except TypeError:
            pass
    kind = "Tensor" if hasattr(value, "_data") else _type_name(value)
    raise TypeError(f"{op_name}(): argument '{arg}' (position {position}) must be {what}, not "
                    f"{kind}")


def int_args(values, op_name, arg, position):
    """An int or a sequence of ints as a tuple of ints (torch's `int[]` arguments), each
    checked as `int_arg` does."""
    if isinstance(values, (list, tuple)):
        return tuple(int_arg(v, op_name, arg, position, "tuple of ints") for v in values)
    return (int_arg(values, op_name, arg, position, "tuple of ints"),)


def check_number(op_name, value, arg="value"):
    """Raise torch's TypeError unless `value` is a number (Python's or NumPy's): a None or a
    string would otherwise reach NumPy, which writes None as nan into a float array.

    >>> check_number("masked_fill", 2.5)
    >>> check_number("masked_fill", None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: masked_fill(): argument 'value' must be a number or a 0-dim tensor, not NoneType
    """
    if not isinstance(value, (bool, int, float, complex)) and not hasattr(value, "dtype"):
        raise TypeError(f"{op_name}(): argument '{arg}' must be a number or a 0-dim tensor, "
                        f"not {type(value).__name__}")


def fill_scalar(op_name, value, np_dtype, float_overflow=True, arg="value"):
    """`value` (a number) as an array of `np_dtype` takes it, by torch's checked conversion:
    a complex with an imaginary part into a real dtype, nan or inf into an integer one, and a
    number out of the dtype's range raise (NumPy would drop the imaginary part, write inf or
    wrap around); uint8 takes -255..-1 modulo 256, as torch's. Anything fits bool and complex
    dtypes. `float_overflow=False`: a finite number beyond a floating dtype's range becomes
    inf (torch's `x[i] = 1e40` into a half-precision tensor).

    >>> import numpy as np
    >>> fill_scalar("fill_", -1, np.dtype(np.uint8)), fill_scalar("fill_", 2.5, np.dtype(bool))
    (255, 2.5)
    >>> fill_scalar("full", 1 + 1j, np.dtype(np.float32))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: full(): value (1+1j) cannot be converted to type float32 without overflow...

    A Python int beyond 64 bits is refused for every dtype, as torch's Scalar (int64 or uint64)
    refuses it: OverflowError. `arg` names the argument in the messages.
    """
    check_int64(op_name, value, arg)
    kind = np_dtype.kind
    if kind == "b":
        return value
    if kind == "c":  # each part must fit the float dtype of the parts (inf and nan do)
        if float_overflow and isinstance(value, (int, float, complex)) and any(
                math.isfinite(p) and abs(p) > _float_max(np.dtype(np_dtype.char.lower()))
                for p in (complex(value).real, complex(value).imag)):
            raise RuntimeError(f"{op_name}(): {arg} {value!r} cannot be converted to type "
                               f"{np_dtype.name} without overflow; convert the tensor to a "
                               f"dtype that holds it first")
        return value
    if hasattr(value, "item"):  # a NumPy scalar or 0-d array
        value = value.item()
    number = value
    if isinstance(number, complex):
        number = number.real if number.imag == 0 else None
    if number is not None and kind in "iu":
        info = np.iinfo(np_dtype)
        low = -info.max if kind == "u" else info.min  # (torch lets uint8 take -255..-1)
        if number != number or number in (math.inf, -math.inf) or not low <= number <= info.max:
            number = None
        elif kind == "u" and number < 0:  # (an int wraps; a negative float overflows)
            number = int(number) % (info.max + 1) if isinstance(number, int) else None
    elif number is not None and not isinstance(number, bool) and \
            math.inf != abs(number) > _float_max(np_dtype):
        if float_overflow:
            number = None
        else:  # rounded here, unchecked as torch's (inf), so NumPy's fill does not warn
            with np.errstate(over="ignore"):
                number = float(np.asarray(number, np.float64).astype(np_dtype))
    if number is None:
        raise RuntimeError(f"{op_name}(): {arg} {value!r} cannot be converted to type "
                           f"{np_dtype.name} without overflow; convert the tensor to a dtype "
                           f"that holds it first")
    if kind not in "iu" and type(number) is int and abs(number) >= 2 ** 63:
        return float(number)  # (a uint64: ml_dtypes' bfloat16 refuses an int beyond int64)
    return number


def fill_checks_overflow(np_dtype, numel):
    """Whether torch's fill_ (full, full_like, new_full, nn.init.constant_) refuses a number
    beyond the dtype's range: not into one element of float16 or bfloat16, which its
    scalar_fill converts unchecked (inf); into more it raises."""
    return not (numel == 1 and np_dtype.itemsize == 2 and np_dtype.kind in "fV")


_NUMBERS = (bool, int, float, complex, np.number, np.bool_)


def check_int64(op_name, value, arg="value"):
    """Raise torch's OverflowError for a Python int its Scalar cannot hold (64 bits: int64 or
    uint64), where NumPy would make an object array or a float of it.

    >>> check_int64("add", 2 ** 64)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    OverflowError: add(): value=18446744073709551616 is too big to convert ...
    """
    if value.__class__ is int and not -2 ** 63 <= value < 2 ** 64:
        raise OverflowError(f"{op_name}(): {arg}={value} is too big to convert (torch takes "
                            f"64-bit integers); pass a float or a smaller value")


def checked_number(op_name, value, np_dtype, arg="value"):
    """A number argument (Python's or NumPy's) as `fill_scalar` converts it to the dtype the op
    computes in, `np_dtype` (a value out of its range raises, as torch's Scalar conversion;
    uint8 takes -255..-1 modulo 256); anything else (None, a tensor) is returned as it is.

    >>> import numpy as np
    >>> checked_number("clamp", -1, np.dtype(np.uint8), "min"), checked_number("clamp", None, 0)
    (255, None)
    >>> checked_number("where", 300, np.dtype(np.int8))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: where(): value 300 cannot be converted to type int8 without overflow...
    """
    cls = value.__class__
    if (cls is float or cls is int) and -65504.0 <= value <= 65504.0 and (
            np_dtype.kind in "fV" or cls is int and np_dtype.kind == "i" and -128 <= value < 128):
        return value  # fits every floating dtype (and every signed integer one): no lookup
    if isinstance(value, _NUMBERS):
        return fill_scalar(op_name, value, np_dtype, arg=arg)
    return value


def tensor_operand(arg="other", position=1):
    """Decorator for a function whose `input` and argument `arg` (positional index `position`)
    torch declares `Tensor` (maximum, hypot, logical_and, ...): a number there raises torch's
    TypeError, where NumPy would broadcast it.

    >>> @tensor_operand()
    ... def hypot(input, other):
    ...     return input
    >>> hypot(None, 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: hypot(): argument 'other' (position 2) must be Tensor, not int; wrap data ...
    """
    def decorate(fn):
        name = fn.__name__

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            value = args[position] if len(args) > position else kwargs.get(arg)
            if isinstance(value, _NUMBERS):
                expect_tensor(name, value, arg, position + 1)
            first = args[0] if args else kwargs.get("input")
            if isinstance(first, _NUMBERS):
                expect_tensor(name, first, "input", 1)
            return fn(*args, **kwargs)
        return checked
    return decorate


def check_alpha(op_name, arg, value, np_dtype):
    """torch's alpha_check on a scalar coefficient (add/sub's alpha, addr's alpha and beta)
    against the operands' dtype: a bool one for bool operands only, no floating one for
    integer operands (NumPy would promote the result instead)."""
    if isinstance(value, bool) and np_dtype.kind != "b":
        raise RuntimeError(f"{op_name}: Boolean {arg} only supported for Boolean results (got "
                           f"{arg}={value} for {np_dtype.name} operands); pass a number")
    if np_dtype.kind in "iub" and not isinstance(value, (int, np.integer)):
        raise RuntimeError(f"{op_name}: For integral input tensors, argument {arg} must not be a "
                           f"floating point number (got {arg}={value!r} for {np_dtype.name} "
                           f"operands); convert the tensors with .float() first")


@functools.lru_cache(maxsize=None)
def _float_max(np_dtype):
    return finfo(from_numpy_dtype(np_dtype)).max


def checked_value_tensor(op_name, value, target):
    """A 0-dim tensor `value` to be written into `target` (masked_fill, index_fill): read and
    checked as `fill_scalar` checks a number, as torch's `.item()` of it is (300 does not fit
    int8, a float64 1e300 does not fit float32; -1 into uint8 is 255)."""
    data = value._data
    # (a host array only: vmap's placeholder has no values to read, and a traced tensor's
    # array is its first call's, read here as torch's eager check would)
    if type(data) is np.ndarray and data.ndim == 0 and target._data.dtype.kind != "b":
        fill_scalar(op_name, data.item(), target._data.dtype)
    return value


def check_kernel_dtype(input, kernel, kinds="fV"):
    """Raise as torch does for a kernel it compiles for some dtypes only (`kinds`: NumPy dtype
    kinds, floating by default), naming the kernel, where NumPy would compute something else
    (gelu of an int64 tensor in integer arithmetic, a complex MSE without the modulus)."""
    data = getattr(input, "_data", None)
    if data is not None and data.dtype.kind not in kinds:  # (not a tensor: the op says so)
        name = TORCH_SCALAR_NAMES.get(data.dtype.name, data.dtype.name)
        raise NotImplementedError(
            f'"{kernel}" not implemented for \'{name}\' (input of shape {tuple(input.shape)}); '
            f"convert it with .float() first")


def check_same_dtype(op_name, reference, /, **others):
    """Raise, as torch, when a tensor that an op combines with `reference` without type
    promotion (a loss's class weights, a GEMM's bias, a scatter's source) has another dtype;
    `others` are the arguments by name (None, or a number, is let through: the op says what
    it takes)."""
    dtype = reference._data.dtype
    for arg, t in others.items():
        data = getattr(t, "_data", None)
        if data is not None and data.dtype != dtype:
            raise RuntimeError(
                f"{op_name}: expected {arg} (shape {tuple(t.shape)}) to be {reference.dtype} "
                f"as the operand of shape {tuple(reference.shape)}, but got {t.dtype}; this op "
                f"does not promote dtypes: convert one with .to()")


def check_norm_params(op_name, input, **params):
    """Raise, as torch, unless a normalization's weight, bias and running statistics all have
    the input's dtype, or are float32 beside a bfloat16 or float16 input (torch's mixed
    precision on the CPU)."""
    given = [(arg, t) for arg, t in params.items() if t is not None]
    dtype = input._data.dtype
    if all(t._data.dtype == dtype for _, t in given):
        return
    if input._data.dtype.name in ("bfloat16", "float16") and all(
            t._data.dtype.name == "float32" for _, t in given):
        return
    named = ", ".join(f"{arg} {t.dtype}" for arg, t in given)
    raise RuntimeError(
        f"{op_name}: mixed dtypes: the input is {input.dtype} (shape {tuple(input.shape)}) and "
        f"the parameters are {named}; they must share the input's dtype (or be float32 beside "
        f"a bfloat16/float16 input): convert them with .to({input.dtype})")


def check_probabilities(probs, name):
    """Raise, as torch, unless every element of the tensor `probs` lies in [0, 1]."""
    check_probability_values(probs._data, name)


def check_probability_values(data, name):
    """`check_probabilities` on an array (inside a kernel: array methods only)."""
    if data.size and not ((data >= 0) & (data <= 1)).all():  # nan fails too
        raise RuntimeError(f"{name}: expected every probability in [0, 1], got a value outside "
                           f"(or nan) in a tensor of shape {tuple(data.shape)}")


def check_std(std, name):
    """Raise, as torch, for a negative or nan standard deviation (a number or an array)."""
    if isinstance(std, (int, float)):
        if not std >= 0:
            raise RuntimeError(f"{name} expects std >= 0.0, but found std {std}")
    elif std.size and not (std >= 0).all():
        raise RuntimeError(f"{name} expects all elements of std >= 0.0 (std of shape "
                           f"{tuple(std.shape)} holds a negative or nan value)")


def check_uniform_bounds(name, dtype, a, b):
    """torch's uniform_ checks for U[a, b) written into `dtype` (a flowgrad dtype): finite
    bounds inside the dtype's range (else inf would be written), a <= b, and b - a within
    the range too.

    >>> import flowgrad as flow
    >>> check_uniform_bounds("uniform_", flow.float16, 0, 70000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: uniform_: to=70000 is out of bounds for float16 (largest finite 65504.0)...
    """
    kind = dtype.np.kind
    top = float(finfo(to_real(dtype) if kind == "c" else dtype).max) if kind in "fcV" \
        else math.inf
    for bound, value in (("from", a), ("to", b)):
        if not math.isfinite(value) or abs(value) > top:
            raise RuntimeError(f"{name}: {bound}={value} is out of bounds for {dtype.name} "
                               f"(largest finite {top}); pass finite bounds inside its range")
    if a > b:
        raise RuntimeError(f"{name} expects to return a [from, to) range, but found "
                           f"from={a} > to={b}; pass a <= b")
    if b - a > top:
        raise RuntimeError(f"{name} expects to - from <= {top} (the largest {dtype.name}), "
                           f"but found to={b} and from={a}")


def matrix_dims(tensor, attr, batches=True):
    """torch's check of `tensor.mT`/`.mH` (a matrix or a batch of them; 0-d: the identity,
    deprecated) and `.H` (a matrix): True for 0-d, else raise unless the dims qualify."""
    nd = tensor._data.ndim
    if nd == 0:
        return True
    if nd == 1 or not batches and nd != 2:
        what = "matrices or batches of matrices" if batches else "matrices (2-D tensors)"
        hint = "" if batches else " For batches of matrices, consider using tensor.mH"
        raise RuntimeError(f"tensor.{attr} is only supported on {what}. Got {nd}-D tensor."
                           f"{hint}")
    return False


def _resolves(obj, module_name, qualname):
    target = sys.modules.get(module_name)
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return target is obj


def pickle_by_name(namespace, prefix=""):
    """Name each public function of `namespace` (a module's or class's dict) where pickle
    looks it up: the wrappers (argument guard, out=, autocast) copy the wrapped function's
    module and name, under which pickle finds the unwrapped function (a PicklingError, as for
    a module holding F.relu: torch pickles its functions by name). `prefix`: a class's name."""
    home = namespace.get("__module__") if prefix else namespace.get("__name__")
    for name, fn in list(namespace.items()):
        if name.startswith("_") or not isinstance(fn, types.FunctionType) or _resolves(
                fn, fn.__module__, fn.__qualname__):
            continue
        fn.__module__, fn.__qualname__ = home, prefix + name
        RENAMED[f"{home}.{prefix}{name}"] = home


# the wrappers pickle_by_name named into a namespace: their docstrings are the wrapped
# functions', whose examples run in their own modules (the root conftest.py skips these
# copies, which doctest would run again in the namespace's globals)
RENAMED = {}  # the wrapper's dotted name -> the namespace's module
