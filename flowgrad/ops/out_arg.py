"""torch's `out=` argument: write a function's result into a given tensor and return it.

torch's rules (at::native::resize_output and the out= autograd check): no argument may
require grad while grad mode is on (out= results are not differentiable); an `out` of another
shape is resized, with a deprecation warning unless it had no elements; the result is cast to
`out`'s dtype within its kind (the caller checks the kind it accepts); a view of the right
shape is written through, whatever its strides.

>>> import flowgrad as flow
>>> out = flow.empty(0, dtype=flow.complex64)
>>> flow.fft.fft(flow.tensor([1.0, 0.0]), out=out) is out, out
(True, tensor([1.+0.j, 1.+0.j]))
"""
from __future__ import annotations

import contextlib
import functools
import math
import warnings

from .._warn import warn
from ..argument_errors import refused_call
from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..autograd.inplace import (
    _shared_in_place,
    expand_write_error,
    memory_of,
    overlap_error,
    overlap_status,
    same_elements,
    self_overlapping,
    shares_elements,
)
from ..autograd.levels import writing_out
from ..dtypes import TORCH_SCALAR_NAMES, can_cast_array
from ..errors import (
    EVERY_CALL,
    NOT_HANDLED,
    SparseOperandError,
    reraise_typed,
    sparse_form,
    tensor_like_call,
)
from ..random import default_generator
from ..tensor import Tensor
from .lapack_outs import refuse_copy_overlap
from .no_derivative import refuse_forward, without_derivative
from .resize_storage import resize_storage


def check_out(out, inputs, name, nondiff=False):
    """Raise before anything runs where torch's out= refuses: `out` not a tensor, or a
    differentiable argument (`inputs` or `out`, unless it takes a result that is not
    differentiable: `nondiff`) while grad mode is on."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad
                                 for t in (inputs if nondiff else (*inputs, out))):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                           f"differentiation, but one of the arguments requires grad. Call it "
                           f"under flow.no_grad(), or drop out= and use the returned tensor")


def check_no_overlap(out, inputs, name):
    """torch's assert_no_overlap for out=: no input may be `out` or overlap its memory span
    where both are dense (a bounds test, as torch's). Where either is strided torch runs (its
    "too hard"), reading the input as it writes: an input sharing no element with out (the
    interleaved columns of one matrix) runs; one that shares some is refused, as torch's
    values then depend on the order of its writes, which the result computed first and
    copied into out does not reproduce."""
    for t in inputs:
        if not isinstance(t, Tensor):
            continue
        status = "full" if t is out else overlap_status(memory_of(t), memory_of(out))
        if status in ("partial", "full"):
            raise RuntimeError(f"{name}(): unsupported operation: some elements of the input "
                               f"tensor and the written-to tensor refer to a single memory "
                               f"location. Please clone() the tensor before performing the "
                               f"operation.")
        if status == "too hard" and shares_elements(memory_of(t), memory_of(out)):
            raise NotImplementedError(
                f"{name}(): the input (shape {tuple(t.shape)}) shares elements with out "
                f"(shape {tuple(out.shape)}), both strided: torch runs this, but its values "
                f"then depend on the order of its writes; pass a clone() of the input")


def refuse_order_dependent(out, inputs, name, elementwise):
    """Refuse an out= whose memory shares elements with an input where torch's overlap checks
    let it run (a strided pair): torch's elementwise loop then reads elements it already
    wrote, in its order, which the result computed first and copied into out does not
    reproduce. Shared elements at the same position are fine for an `elementwise` op (each
    is read where it is written)."""
    data = memory_of(out)
    for t in inputs:
        if not isinstance(t, Tensor) or t is out or not shares_elements(memory_of(t), data):
            continue
        other = memory_of(t)
        if same_elements(other, data) or elementwise and _shared_in_place(other, data):
            continue
        raise NotImplementedError(
            f"{name}(): the input (shape {tuple(t.shape)}) shares elements with out (shape "
            f"{tuple(out.shape)}): torch runs this, but its values then depend on the order "
            f"of its writes; pass a clone() of the input")


def check_out_partial_overlap(out, inputs, name):
    """torch's assert_no_partial_overlap for out= of its elementwise kernels: an input may be
    `out` itself (its very elements) or apart from it, not share some of its memory
    (`torch.exp(x[:3], out=x[1:])`: the result would depend on the order of the writes)."""
    for t in inputs:
        if isinstance(t, Tensor) and t is not out and \
                overlap_status(memory_of(out), memory_of(t)) == "partial":
            raise overlap_error(f"{name}()", t.shape, out.shape)


def warn_resized(had, shape, stacklevel=4):
    """torch's resize_output deprecation warning, for an out of shape `had` resized."""
    warn(f"An output with one or more elements was resized since it had shape {list(had)}, "
         f"which does not match the required output shape {list(shape)}. This behavior is "
         f"deprecated, and in a future PyTorch release outputs will not be resized unless they "
         f"have zero elements. You can explicitly reuse an out tensor t by resizing it, "
         f"inplace, to zero elements with t.resize_(0).", UserWarning, stacklevel=stacklevel)


def write_out(result, out, name, warn_resize=True, column_major=False, recheck=None,
              recorded=False):
    """Copy `result` into `out` (resized to its shape as torch's resize_output) and return
    `out`. `warn_resize=False`: resized silently, as torch's factories' `out.resize_()`;
    `column_major`: resized to a batch of column-major matrices, as torch's LAPACK-backed
    kernels do (linalg.inv, solve, qr, ...); `recorded`: the copy is recorded by autograd
    (out takes result's history)."""
    shape = tuple(result.shape)
    if tuple(out.shape) != shape:
        if out.numel() and warn_resize:
            warn_resized(out.shape, shape, stacklevel=5)
        swapped = (*shape[:-2], shape[-1], shape[-2]) if column_major and len(shape) >= 2 \
            else None
        if out._view is not None:
            # torch's resize_ of a view: contiguous (or column-major) from its storage offset,
            # written through to the tensors over that storage (refused where it would grow
            # the storage)
            with no_grad():
                out.resize_(swapped or shape)
            if swapped:
                _swap_last_dims(out)
            if recheck is not None:  # (the view now covers other memory: torch checks it)
                recheck(out)
        else:  # (in its own memory where that holds enough: its views see the result)
            resize_storage(out, swapped or shape, name)
            if swapped:
                _swap_last_dims(out)
    with (contextlib.nullcontext() if recorded else no_grad()), writing_out():
        out.copy_(result)  # (into a captured tensor too, as torch.func's)
    return out


def _swap_last_dims(t):
    """t's array seen with its last two dims swapped (the same memory)."""
    t._data = t._data.swapaxes(-1, -2)


def with_out(fn, out, inputs, name, exact_dtype=False, cast_error=RuntimeError,
             no_overlap=False, tracked="all", warn_resize=True, column_major=False,
             no_derivative=None, **kwargs):
    """`fn(*inputs, **kwargs)` written into `out`, for a function whose `out=` was given:
    torch's checks first, then the result cast into out's dtype where torch casts (same kind
    or wider: a float result does not go into an integer `out`); `exact_dtype`: only the
    result's own dtype, as torch's structured kernels (clamp). `cast_error`: the exception
    type torch raises for an `out` the result cannot be cast to (TypeError for cat).
    `no_overlap`: an `out` sharing memory with an input is refused, as torch's cat does;
    "partial": one sharing only some of it, as torch's elementwise kernels (and cumsum);
    "first": one sharing only some of the first input's (addmm's self: torch copies it into
    out first, by a copy that refuses that overlap).
    `tracked`: which arguments torch's autograd check sees: "all", "out" (floor_divide's:
    its out= form is not differentiable, yet writes a leaf `out` as an in-place op) or ""
    (a function torch never differentiates: comparisons, histc, argmax, the Bessel functions).
    `warn_resize=False`: `out` resized without torch's deprecation warning (its factories);
    `column_major`: resized to column-major matrices (torch's LAPACK-backed kernels).
    With `tracked="out"` the write into `out` is recorded where the result requires grad, as
    torch's composite out= forms (`out` takes the history: inner's gradient, floor_divide's
    refusal); `no_derivative`: torch's name of the op whose out= form records no derivative
    (diag's "diagonal_copy"), whose backward then raises.

    >>> import flowgrad as flow
    >>> out = flow.zeros(2)
    >>> flow.add(flow.ones(2), flow.ones(2), out=out) is out, out
    (True, tensor([2., 2.]))
    """
    # (cat's tensors come as one list)
    tensors = [t for a in inputs for t in (a if isinstance(a, (list, tuple)) else (a,))]
    check_out(out, tensors if tracked == "all" else (), name, nondiff=not tracked)
    if no_overlap and self_overlapping(out._data):  # (before any resize, as torch's)
        raise expand_write_error(f"{name}()", out.shape, "pass an out without an expand")
    if no_overlap == "partial":  # (clamp's min and max may be tensors)
        check_out_partial_overlap(out, (*tensors, *kwargs.values()), name)
    elif no_overlap and no_overlap != "first":  # ("first": once the result's shape is known)
        check_no_overlap(out, tensors, name)
    if no_overlap == "partial":  # (torch's elementwise loop writes out as it reads)
        refuse_order_dependent(out, (*tensors, *kwargs.values()), name, True)
    result = fn(*inputs, **kwargs)
    if isinstance(result, tuple):  # (torch's overloads: a tuple of outs or none)
        raise TypeError(f"{name}(): out= takes a tuple of {len(result)} tensors here (one per "
                        f"result), got a tensor")
    if no_overlap == "partial" and tuple(result.shape) != tuple(out.shape) and any(
            t is out for t in tensors):
        # torch's elementwise kernels read an `out` that is an input in place: it is not
        # resized to the broadcast shape
        raise RuntimeError(f"{name}(): output with shape {list(out.shape)} doesn't match the "
                           f"broadcast shape {list(result.shape)}")
    if exact_dtype and result._data.dtype != out._data.dtype:  # torch's structured kernels
        raise RuntimeError(f"{name}(): Found dtype {out.dtype} but expected {result.dtype}; "
                           f"pass an `out` of dtype {result.dtype}")
    if not can_cast_array(result._data.dtype, out._data.dtype):
        raise cast_error(f"{name}(): result type {result.dtype} can't be cast to the desired "
                         f"output type {out.dtype}; pass an `out` of a dtype the result fits "
                         f"in, or drop out=")
    recheck = None
    if no_overlap == "first":  # (torch's copy of self, expanded to the result's shape, into
        # out: an expand that repeats elements is not dense, which its check lets be)
        first = tensors[:1] if tensors[0].numel() == result.numel() else ()
        if tuple(out.shape) == tuple(result.shape):
            check_out_partial_overlap(out, first, name)
        recheck = functools.partial(check_out_partial_overlap, inputs=first, name=name)
    elif no_overlap == "partial":
        recheck = functools.partial(check_out_partial_overlap, inputs=tensors, name=name)
    elif no_overlap:
        recheck = functools.partial(check_no_overlap, inputs=tensors, name=name)
    if no_derivative:  # (a dual input refuses before out is written, as torch's)
        refuse_forward(tensors, no_derivative)
    recorded = tracked == "out" and is_grad_enabled() and result.requires_grad
    if recorded and no_derivative:
        result = without_derivative([result], tensors, no_derivative, error="RuntimeError")[0]
    return write_out(result, out, name, warn_resize, column_major, recheck, recorded)


def with_outs(fn, outs, inputs, name, no_overlap=False, castable=False, nondiff=(),
              tracked="all", column_major=(), warn_resize=True):
    """`fn(*inputs)`, a function of several results (a named tuple), written into the tensors
    of `outs`, one each, and returned as that named tuple of them. torch's rules per result as
    its structured kernels have them: each `out` of the result's own dtype (`castable`: or one
    it casts to safely, as linalg.eig's and lstsq's); `no_overlap`: no `out` may share memory
    with an input (kthvalue's), "partial": only part of one (sort's, topk's); `nondiff`:
    positions of results that are not differentiable
    (lu's permutation), whose `out` may require grad; `tracked` as `with_out`'s;
    `column_major`: positions of results whose `out` is resized to column-major matrices;
    `warn_resize=False`: the outs resized without torch's deprecation warning (a tuple: per
    out).

    >>> import flowgrad as flow
    >>> values, indices = flow.empty(0), flow.empty(0, dtype=flow.int64)
    >>> flow.max(flow.tensor([[1.0, 3.0], [4.0, 2.0]]), 1, out=(values, indices)).indices
    tensor([1, 0])
    """
    tensors = [t for a in inputs for t in (a if isinstance(a, (list, tuple)) else (a,))]
    for i, out in enumerate(outs):
        check_out(out, tensors if tracked == "all" else (), name,
                  nondiff=i in nondiff or not tracked)
        if no_overlap == "partial":
            check_out_partial_overlap(out, tensors, name)
        elif no_overlap:
            check_no_overlap(out, tensors, name)
    results = fn(*inputs)
    if not isinstance(results, tuple) or len(results) != len(outs):
        got = len(results) if isinstance(results, tuple) else 1
        raise TypeError(f"{name}(): out= takes {got} tensor{'s' * (got != 1)} here, got a "
                        f"tuple of {len(outs)}")
    for result, out in zip(results, outs):
        if result._data.dtype != out._data.dtype and not (
                castable and can_cast_array(result._data.dtype, out._data.dtype)):
            raise RuntimeError(f"{name}(): Expected out tensor to have dtype {result.dtype}, "
                               f"but got {out.dtype} instead")
    written = [write_out(result, out, name, warn_resize if isinstance(warn_resize, bool)
                         else warn_resize[i], column_major=i in column_major)
               for i, (result, out) in enumerate(zip(results, outs))]
    return type(results)(*written) if hasattr(results, "_fields") else tuple(written)


def _float_int(args):
    """Whether `args` begin with a floating tensor and an integer (or bool) tensor."""
    return len(args) > 1 and all(isinstance(a, Tensor) for a in args[:2]) and \
        args[0]._data.dtype.kind in "fV" and args[1]._data.dtype.kind in "biu"


def _dimensioned(args):
    """Whether one of `args` is a tensor with dims."""
    return any(isinstance(a, Tensor) and a.ndim for a in args)


def _keepdim_shape(args, kwargs):
    """kthvalue(input, k, dim=-1, keepdim=False)'s result shape with keepdim=True, where
    keepdim is False (else None)."""
    x = args[0] if args else kwargs.get("input")
    dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
    keepdim = args[3] if len(args) > 3 else kwargs.get("keepdim", False)
    if keepdim or not isinstance(x, Tensor) or not isinstance(dim, int) or \
            not -max(x.ndim, 1) <= dim < max(x.ndim, 1):
        return None
    shape = list(x.shape)
    if shape:
        shape[dim] = 1
    return tuple(shape)


def _computes_in_out(name, args, out):
    """Whether mean/nanmean of args compute in out's dtype: a floating or complex out, as
    torch's kernels sum into out and divide there; not mean of a real input into a half out,
    which torch sums in float32 and rounds once, as a cast of flowgrad's result does (nor of
    integers: refused)."""
    x = args[0] if args else None
    if not (isinstance(x, Tensor) and (x.is_floating_point() or x.is_complex())
            and (out.is_floating_point() or out.is_complex())):
        return False
    return not (name == "mean" and out._data.dtype.itemsize <= 2 and x.is_floating_point())


def _refuse_complex_out(name, args, kwargs, out):
    """torch's std/var kernel of a result of several elements, real only: a non-empty real
    floating input into a complex out is its NotImplementedError (a one-element result is
    another kernel's, which computes)."""
    x = args[0] if args else None
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    if not (isinstance(x, Tensor) and x.is_floating_point() and out.is_complex() and
            x._data.size) or dim is None or dim.__class__ is bool:
        return
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    dims = {int(d) % x._data.ndim for d in dims} if x._data.ndim and dims else set(
        range(x._data.ndim))
    if math.prod(n for i, n in enumerate(x._data.shape) if i not in dims) > 1:
        raise NotImplementedError(
            f'{name}(): "std_cpu" not implemented for '
            f"'{TORCH_SCALAR_NAMES[out._data.dtype.name]}' (a {x.dtype} input into an out of "
            f"dtype {out.dtype}); convert the result of a floating out")


def _refuse_nonfloat_out(name, kernel, args, out):
    """torch's real-floating-only kernel (`kernel`) run in an integer, bool or complex out's
    dtype; an empty input runs no kernel (torch fills out with the reduction's identity, in
    out's dtype: True is returned then, for the caller to compute in it)."""
    if not (args and isinstance(args[0], Tensor) and args[0].is_floating_point()) or \
            out.is_floating_point():
        return False
    if not args[0]._data.size:
        return out.is_complex()  # (nanmean's 0 / 0 is then complex nan+nanj, as torch's)
    fix = "convert the result of a floating out" if out.is_complex() else \
        f"pass dtype={out.dtype} to convert the input first, or a floating out"
    raise NotImplementedError(
        f'{name}(): "{kernel}_cpu" not implemented for '
        f"'{TORCH_SCALAR_NAMES[out._data.dtype.name]}' (a {args[0].dtype} input into an "
        f"out of dtype {out.dtype}); {fix}")


def parser_error(name, fn, args, kwargs, out):
    """The TypeError torch's argument parser raises for a call whose out= checks refused it
    before `fn` ran (torch parses first): the one `fn` raises for these arguments (a tensor
    where an int goes), or for a single out tensor where fn returns a tuple; None when fn
    takes them. fn runs without recording, its random draws undone (an error path only)."""
    state = default_generator.get_state()
    try:
        with no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fn(*args, **kwargs)
    except TypeError as error:
        return error
    except Exception:  # noqa: BLE001 (any other refusal: the out check's error stands)
        return None
    finally:
        default_generator.set_state(state)
    if isinstance(result, tuple) and isinstance(out, Tensor):
        return TypeError(f"{name}(): argument 'out' must be tuple of Tensors, not Tensor")
    return None


def accept_out(namespace, names, exact=(), compute_in_out=(), no_overlap=(), castable_outs=(),
               nondiff_first=(), untracked=(), out_tracked=(), dim_required=(),
               partial_overlap=(), silent_resize=(), exact_scalar=(), list_outs=(),
               exact_real=(), exact_float_int=(), dtype_is_out=(), exact_weight=(),
               column_major=None, float_kernel=None, silent_zero_dim=(),
               partial_overlap_first=(), out_no_derivative=None, out_rules=None,
               copies_input=None, copies_transposed=(), keepdim_outs=(), real_kernel=()):
    """Give each function `namespace[name]` torch's keyword `out=` (through `with_out`) where it
    has none yet; returns the names it wrapped. Names in `exact` take only an `out` of the
    result's own dtype (torch's structured kernels); those in `compute_in_out` compute in
    `out`'s dtype (torch's reductions: `sum(x, out=int64 tensor)`); those in `no_overlap` refuse
    an `out` sharing memory with an input, those in `partial_overlap` one sharing only some of
    an input's memory (torch's elementwise kernels), those in `partial_overlap_first` one
    sharing only some of the first input's (addmm's self). `out_no_derivative` maps names in
    `out_tracked` to torch's name of the op their out= form records without a derivative
    (`with_out`'s `no_derivative`). For functions of several results (a tuple of outs):
    `castable_outs` cast each result into its `out` where that is safe (otherwise only the
    result's dtype), `nondiff_first` have a first result that is not differentiable (its `out`
    may require grad). torch's autograd check on out= skips the arguments of the functions in
    `untracked` (never differentiated) and the inputs of those in `out_tracked` (see
    `with_out`); those in `dim_required` have no out= form reducing over all elements
    (torch.sum(x, out=o) is a TypeError); those in `silent_resize` resize an `out` of another
    shape without torch's deprecation warning (its factories, narrow_copy, addbmm); those in
    `exact_scalar` take only an `out` of the result's dtype when their other arguments are
    numbers, any it casts to when one is a tensor (clamp_min's two overloads); those in
    `exact_real` only for a real input (abs: torch computes a complex input's real result apart
    and casts it into `out`); those in `list_outs` write a list of results into a list `out` and
    return None, as torch's split_with_sizes_copy and unbind_copy; those in `dtype_is_out`
    refuse a `dtype=` other than out's dtype and compute in a floating or complex out's dtype
    (mean: torch's kernel sums into out and divides there); those in `exact_weight` only when
    their weight (third argument) is a tensor with dims (lerp: torch's structured kernel then; a
    number or a 0-d weight casts into any `out`); `column_major` maps names to the positions of
    their results whose `out`, when resized, becomes a batch of column-major matrices (torch's
    LAPACK-backed kernels: linalg.inv, solve, qr's Q and R, ...); those in `exact_float_int`
    only for a floating input and an integer tensor second argument (ldexp: torch's kernel then;
    its composite input * 2 ** other casts into any `out`). Those in `float_kernel` (a dict:
    name -> torch's kernel) compute in out's dtype with a kernel for floating dtypes only
    (nansum: a non-empty floating input into an integer or bool `out`, without dtype=, is
    torch's NotImplementedError; with dtype= torch converts the input first; nanmean: its nansum
    kernel). Those in `silent_zero_dim` resize their outs without the deprecation warning for a
    0-d input (mode: torch's copies it into outs it resizes itself). A function's `out_form`
    attribute, where it has one, is what its out= form runs (ldexp's, without the resize
    warning torch's ldexp gives when it writes into an empty_like(input)). `out_rules` maps names
    whose rules depend on the call to a function of (args, kwargs) giving `with_out`'s
    `exact_dtype` and `tracked` for it and the arguments to call with (matrix_power: torch's
    kernel for most n, a copy of A or of the identity for n = 1 or 0), and optionally a function
    applied to the written `out` (matmul of a vector by a matrix: squeezed, as torch's).
    `copies_input` maps names to a function of (args, kwargs) giving the (out position, argument
    position) pairs whose input torch's LAPACK-backed kernel copies into an out already in its
    layout (see lapack_outs; those in `copies_transposed` also into one of row-major matrices).
    Those in `keepdim_outs` (kthvalue) resize an out of the keepdim=True shape without the
    warning (torch's kernel writes it as it is, then squeezes the dim). Those in `real_kernel`
    (std, var) refuse a complex out of a real input reduced over a dim (torch's std_cpu kernel).
    The arguments are bound to the function's signature before any check of `out`, and a
    function's `parse_args` (a function of its arguments raising torch's parser's TypeError) is
    called, as torch's argument parser comes first (a wrong count or type is a TypeError, not an
    overlap's RuntimeError)."""
    import functools
    import inspect

    wrapped = []
    for name in names:
        fn = namespace.get(name)
        if fn is None:
            continue
        try:
            signature = inspect.signature(fn)
            if "out" in signature.parameters:
                continue
        except (TypeError, ValueError):  # (an op object: no signature of its own)
            signature = None

        def call(*args, out=None, _fn=fn, _name=name, _exact=name in exact,
                 _in_out=name in compute_in_out,
                 _apart=True if name in no_overlap else "partial" * (name in partial_overlap)
                 or "first" * (name in partial_overlap_first),
                 _cast=name in castable_outs, _nondiff=(0,) if name in nondiff_first else (),
                 _tracked="" if name in untracked else "out" if name in out_tracked else "all",
                 _dim=name in dim_required, _loud=name not in silent_resize,
                 _scalar=name in exact_scalar, _none=name in list_outs,
                 _real=name in exact_real, _fi=name in exact_float_int,
                 _dtype_out=name in dtype_is_out, _weight=name in exact_weight,
                 _cm=(column_major or {}).get(name, ()), _float=(float_kernel or {}).get(name),
                 _quiet0=name in silent_zero_dim,
                 _nd=(out_no_derivative or {}).get(name), _public=[],
                 _rules=(out_rules or {}).get(name),
                 _copies=(copies_input or {}).get(name), _tr=name in copies_transposed,
                 _kept=name in keepdim_outs, _real_k=name in real_kernel,
                 _signature=signature, _parse=getattr(fn, "parse_args", None),
                 _out_fn=getattr(fn, "out_form", fn), **kwargs):
            if EVERY_CALL:  # (the __torch_function__ protocol, as errors.guarded's)
                handled = EVERY_CALL[0](_public[0], args,
                                        kwargs if out is None else {**kwargs, "out": out})
                if handled is not NOT_HANDLED:
                    return handled
            if out is None:
                try:  # (the argument guard of errors.guard_tensor_arguments, in this frame)
                    return _fn(*args, **kwargs)
                except AttributeError as error:
                    handled = tensor_like_call(_public[0], args, kwargs)
                    if handled is not NOT_HANDLED:
                        return handled
                    reraise_typed(_name, _fn, args, kwargs, error)
                except (TypeError, ValueError) as error:  # (as errors.guarded's)
                    return refused_call(_fn, _name, False, args, kwargs, error)
                except SparseOperandError as error:  # a sparse operand: its sparse form
                    return sparse_form(_name, args, kwargs, error)
            ran, given = [], dict(kwargs)

            def run(*a):
                ran.append(True)
                return _out_fn(*a, **kwargs)
            try:
                if _signature is not None:  # (arguments first, as torch's parser)
                    try:
                        _signature.bind(*args, **kwargs)
                    except TypeError as error:
                        raise TypeError(f"{_name}(): {error}") from None
                    if _parse is not None:  # (their types: see parse_args)
                        _parse(*args, **kwargs)
                if _dim and len(args) < 2 and "dim" not in kwargs:
                    raise TypeError(f"{_name}(): out= needs a dim, as torch's (it has no out= form "
                                    f"of the reduction over all elements); pass dim=")
                if _real_k and isinstance(out, Tensor):
                    _refuse_complex_out(_name, args, kwargs, out)
                if (_in_out or _dtype_out) and isinstance(out, Tensor):
                    if kwargs.get("dtype") is None:
                        if _float and _refuse_nonfloat_out(_name, _float, args, out):
                            kwargs["dtype"] = out.dtype
                        if _in_out or _dtype_out and _computes_in_out(_name, args, out):
                            kwargs["dtype"] = out.dtype
                    elif kwargs["dtype"] != out.dtype:
                        raise RuntimeError(f"{_name}(): dtype {kwargs['dtype']} does not match the "
                                           f"dtype of the out parameter ({out.dtype}); pass one "
                                           f"of them")
                if _copies is not None:
                    refuse_copy_overlap(_name, _copies(args, kwargs), args,
                                        out if isinstance(out, (tuple, list)) else (out,), _tr)
                if _none:
                    if not isinstance(out, (tuple, list)):
                        raise TypeError(f"{_name}(): argument 'out' must be a list of Tensors, not "
                                        f"{type(out).__name__}")
                    with_outs(lambda *a: tuple(run(*a)), tuple(out), args, _name,
                              tracked=_tracked)
                    return None
                if isinstance(out, (tuple, list)):  # max(x, 1, out=(values, indices)), sort, ...
                    quiet = _quiet0 and args and isinstance(args[0], Tensor) and not args[0].ndim
                    kept = _kept and _keepdim_shape(args, kwargs)
                    warn = not quiet if not kept else tuple(
                        not (isinstance(o, Tensor) and tuple(o.shape) == kept) for o in out)
                    return with_outs(run, out, args, _name, _apart,
                                     _cast, _nondiff, _tracked, _cm, warn_resize=warn)
                exact = (_exact or _real and not (args and isinstance(args[0], Tensor)
                                                  and args[0].is_complex())
                         or _fi and _float_int(args)
                         or _weight and _dimensioned((*args[2:3], kwargs.get("weight")))) and not (
                    _scalar and any(isinstance(a, Tensor) for a in (*args[1:], *kwargs.values())))
                tracked = _tracked
                after = ()
                if _rules is not None:
                    exact, tracked, args, *after = _rules(args, kwargs, out)
                try:
                    written = with_out(run, out, args, _name,
                                       exact_dtype=exact, no_overlap=_apart, tracked=tracked,
                                       warn_resize=_loud, column_major=0 in _cm,
                                       no_derivative=_nd)
                    return after[0](written) if after else written
                except AttributeError as error:  # (a number where a tensor goes, as without out=)
                    reraise_typed(_name, _fn, args, kwargs, error)
            except (RuntimeError, IndexError, ValueError):
                # (an out check refused the call before the function ran: torch parses
                # the arguments first, so a TypeError of theirs comes first)
                parsed = None if ran else parser_error(_name, _fn, args, given, out)
                if parsed is None:
                    raise
                raise parsed from None
            except TypeError as error:  # (out= travels with the keywords: the public call)
                return refused_call(_public[0], _name, False, args, {**given, "out": out},
                                    error)
        namespace[name] = functools.wraps(fn)(call)
        call.__kwdefaults__["_public"].append(call)  # (the function overrides are told of)
        call._public = call.__kwdefaults__["_public"]
        namespace[name]._guarded = True
        namespace[name]._takes_out = True  # (its signature, from `fn`, does not show it)
        wrapped.append(name)
    return wrapped
