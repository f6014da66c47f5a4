"""Shape ops: reshape/view, transpose/permute, expand, squeeze/unsqueeze, flatten, cat,
stack, clone, and dtype casts. View ops share storage (and the version counter) with their
input, as torch's do.

>>> import flowgrad as flow
>>> flow.arange(6).reshape(2, 3).T.shape
flowgrad.Size([3, 2])
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .. import dtypes as _dt
from .._warn import warn_once
from ..autograd import engine as _engine
from ..autograd import interpreter as _interpreter
from ..device import broadcast_view
from ..errors import SparseOperandError, expect_tensor, int_args, matrix_dims
from ..meta import MetaArray
from ..tensor import Size, Tensor, _wrap_dim, tensor_method
from ..typed_tensors import contiguous_format, format_rank, preserve_format
from . import layout as _layout
from .layout import CHANNELS_LAST, copy_preserving, lies_in_order
from .out_arg import with_out
from .registry import op
from .summation import add_reduce
from .transfer import to  # noqa: F401 (x.to, the casts: ops/transfer.py)
from .view_geometry import expand_strides, reshape_view, restride

__all__ = ["reshape", "transpose", "permute", "squeeze", "unsqueeze", "flatten", "cat",
           "concat", "concatenate", "stack", "clone", "broadcast_to", "swapaxes", "swapdims",
           "t", "expand_copy", "movedim", "moveaxis", "broadcast_tensors", "broadcast_shapes",
           "meshgrid", "ravel", "positive", "resolve_conj", "resolve_neg",
           "expand", "view", "unflatten"]  # flow.expand / flow.view: OneFlow has them as functions


def _shape_arg(shape, op_name="view", arg="size"):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        shape = shape[0]
    for s in shape:
        if type(s) is not int:  # (a float is refused as torch's, not truncated)
            return int_args(shape, op_name, arg, 1)
    return tuple(shape)


def _keyword(args, value, op_name, name):
    """(value,) for a shape given as keyword `name=`; positional sizes too are an error."""
    if args:
        raise TypeError(f"{op_name}() got multiple values for argument '{name}' (sizes given "
                        f"positionally and as {name}=)")
    return (value,)


def _infer_shape(shape, numel, op_name, in_shape):
    shape = list(shape)
    if shape.count(-1) > 1:
        raise RuntimeError(f"{op_name}: only one dimension can be inferred, got shape {shape}")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"{op_name}: shape '{shape}' is invalid for input of size "
                               f"{numel} (input shape {tuple(in_shape)})")
        shape[shape.index(-1)] = numel // known
    elif known != numel:
        raise RuntimeError(f"{op_name}: shape '{shape}' is invalid for input of size {numel} "
                           f"(input shape {tuple(in_shape)})")
    return tuple(shape)


# ---- reshape / view --------------------------------------------------------------------
@op("reshape", jvp="linear", is_view=True)
def _reshape(xp, x, *, shape, squeeze=None, unsqueeze=None):
    """x in `shape`, a view with torch's strides for size-1 dims (view_geometry)."""
    return reshape_view(xp, x, shape, squeeze, unsqueeze)


@_reshape.grad
def reshape_backward(ctx, dy):
    shape = ctx.input_shapes[0]
    # a reshape that kept the shape (squeeze of a dim that is not 1): dy itself, as torch's
    # unsqueeze_to, so a gradient that flows on is no view of it
    return dy if dy.shape == shape else _reshape(dy, shape=shape)


def _missing(name, arg):
    return TypeError(f'{name}() missing 1 required positional arguments: "{arg}" (give the '
                     f'sizes, e.g. x.{name}(2, -1), or a tuple; () for a 0-d result)')


@tensor_method()
def reshape(input, *sizes, shape=None):
    """The same elements in a new shape (one dim may be -1): sizes, a tuple, or `shape=`.

    >>> import flowgrad as flow
    >>> flow.arange(6).reshape(2, -1)
    tensor([[0, 1, 2],
            [3, 4, 5]])
    >>> flow.reshape(flow.arange(6), shape=(3, 2)).shape
    flowgrad.Size([3, 2])
    """
    if shape is not None:
        sizes = _keyword(sizes, shape, "reshape", "shape")
    elif not sizes:
        raise _missing("reshape", "shape")
    shape = _infer_shape(_shape_arg(sizes, "reshape", "shape"), input._data.size, "reshape",
                         input._data.shape)
    return _reshape(input, shape=shape)


@tensor_method()
def view(input, *shape, size=None, dtype=None):
    """reshape that requires a layout where no copy is needed (like torch.view); `size=` as
    a keyword, or a dtype (positional or `dtype=`) to read the same bytes as that dtype.

    >>> import flowgrad as flow
    >>> x = flow.arange(6.0)
    >>> v = x.view(3, 2)
    >>> v[0, 0] = 100.0
    >>> x
    tensor([100.,   1.,   2.,   3.,   4.,   5.])
    >>> x.view(size=(2, 3)).shape, x.view(dtype=flow.int64).dtype
    (flowgrad.Size([2, 3]), flowgrad.int64)
    """
    if not shape and size is None and dtype is None:
        raise TypeError("view() missing its size (or dtype): give the new shape, e.g. "
                        "x.view(2, -1), or a dtype")
    if size is not None or dtype is not None:
        if size is not None and dtype is not None:
            raise TypeError("view() takes a size or a dtype, not both")
        if dtype is not None:
            if shape:
                raise TypeError("view() got sizes and dtype=: it takes a size or a dtype")
            return _view_as_dtype(input, _dt.as_dtype(dtype))
        shape = _keyword(shape, size, "view", "size")
    if len(shape) == 1 and not _is_size(shape[0]):
        return _view_as_dtype(input, _dt.as_dtype(shape[0]))
    shape = _infer_shape(_shape_arg(shape), input._data.size, "view", input._data.shape)
    y = _reshape(input, shape=shape)
    # (a meta array has no layout to keep: zero strides over one element, as torch's meta
    # tensors' views always are)
    if input._data.size and input._data.__class__ is not MetaArray and \
            not np.shares_memory(y._data, input._data):
        raise RuntimeError(
            f"view size is not compatible with input tensor's size and stride (input shape "
            f"{tuple(input.shape)}, requested {shape}); use .reshape(...) instead")
    current = _interpreter.current
    if current is not _interpreter.AutogradInterpreter and getattr(
            current, "is_input", lambda t: False)(input):  # a graph input's layout may
        # change between calls, and the plan's reshape would copy where eager's view raises
        _interpreter.require(_viewable(input, shape=shape), f"view size is not compatible "
                             f"with input tensor's size and stride (input shape "
                             f"{tuple(input.shape)}, requested {shape}); use .reshape(...) "
                             f"instead", RuntimeError)
    return y


@op("viewable", differentiable=False)
def _viewable(xp, x, *, shape):
    """Whether x (of any layout) can be viewed with `shape` without a copy."""
    return xp.asarray(x.size == 0 or bool(xp.shares_memory(x.reshape(shape), x)))


@op("view_dtype", differentiable=False, is_view=True)
def _view_dtype(xp, x, *, dtype):
    return x.view(dtype)


def _view_as_dtype(input, dtype):
    """The same bytes read as `dtype` (torch's `view(dtype)`): with another element size the
    last dim grows or shrinks, which needs it contiguous (stride 1). The result is not a view
    autograd tracks: no `_base`, and it does not require grad, as torch's."""
    data = input._data
    old, new = data.dtype.itemsize, np.dtype(dtype.np).itemsize
    if old != new:
        what = f"to view {input.dtype} as {dtype} (different element sizes)"
        if data.ndim == 0:
            raise RuntimeError(f"view(dtype): self.dim() cannot be 0 {what}")
        if data.strides[-1] != old:  # (a size-1 last dim's too, as torch's)
            raise RuntimeError(f"view(dtype): self.stride(-1) must be 1 {what}, but got "
                               f"{data.strides[-1] // old}")
        if (data.shape[-1] * old) % new:
            raise RuntimeError(f"view(dtype): self.size(-1) must be divisible by "
                               f"{max(new // old, 1)} {what}, but got {data.shape[-1]}")
        if new > old:
            for i, st in enumerate(input.stride()[:-1]):
                if st % (new // old):
                    raise RuntimeError(f"view(dtype): self.stride({i}) must be divisible by "
                                       f"{new // old} {what}, but got {st}")
        if (input.storage_offset() * old) % new:
            raise RuntimeError(f"view(dtype): self.storage_offset() must be divisible by "
                               f"{new // old} {what}, but got {input.storage_offset()}")
    # torch's view(dtype) is a view autograd does not follow: a tensor of its own (no _base,
    # no grad, a leaf) over the same storage, sharing its version counter, which detach() is
    return _view_dtype(input, dtype=dtype.np).detach()


def _is_size(arg):
    """Whether view's one positional argument is a size (an int, a NumPy integer, a shape),
    not a dtype (x.view(np.int32(6)) is a view of 6 values, not of int32 bits)."""
    return isinstance(arg, (tuple, list, Size)) or (
        not isinstance(arg, type) and hasattr(arg, "__index__"))


@tensor_method()
def view_as(input, other):
    """view(input, other.shape)."""
    return view(input, other.shape)


@tensor_method()
def reshape_as(input, other):
    """reshape(input, other.shape)."""
    return reshape(input, other.shape)


@tensor_method()
def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim into one.

    >>> import flowgrad as flow
    >>> flow.zeros(2, 3, 4).flatten(1).shape
    flowgrad.Size([2, 12])
    """
    nd = input._data.ndim
    s, e = _wrap_dim(start_dim, nd, "flatten"), _wrap_dim(end_dim, nd, "flatten")
    if nd == 0:  # (its dims checked first, as torch's: 0 and -1 name a 0-d tensor's dim)
        return reshape(input, 1)
    if s > e:
        raise RuntimeError(f"flatten() has invalid args: start_dim ({start_dim}) cannot come "
                           f"after end_dim ({end_dim})")
    if s == e:
        return input  # nothing to merge: torch returns the input itself
    shp = input._data.shape
    return reshape(input, shp[:s] + (int(np.prod(shp[s:e + 1])),) + shp[e + 1:])


@tensor_method()
def unflatten(input, dim, sizes):
    """Split dim `dim` into `sizes` (one may be -1), as torch.unflatten.

    >>> import flowgrad as flow
    >>> flow.arange(6).unflatten(0, (2, 3))
    tensor([[0, 1, 2],
            [3, 4, 5]])
    """
    d = _wrap_dim(dim, input._data.ndim, "unflatten")  # (first: torch's IndexError)
    if input._data.ndim == 0:
        raise RuntimeError("unflatten: Dimension specified as 0 but tensor has no dimensions")
    shp = input._data.shape
    sizes = _infer_shape(tuple(sizes), shp[d], "unflatten", shp)
    return reshape(input, shp[:d] + sizes + shp[d + 1:])


# ---- permutations ------------------------------------------------------------------------
@op("permute", jvp="linear", is_view=True)
def _permute(xp, x, *, dims):
    return x.transpose(dims)


@_permute.grad
def permute_backward(ctx, dy):
    dims = ctx.dims
    return _permute(dy, dims=tuple(sorted(range(len(dims)), key=dims.__getitem__)))


@tensor_method()
def permute(input, *order, dims=None):
    """Reorder the dims: given as ints, a tuple, or `dims=`.

    >>> import flowgrad as flow
    >>> flow.zeros(2, 3, 4).permute(2, 0, 1).shape
    flowgrad.Size([4, 2, 3])
    >>> flow.permute(flow.zeros(2, 3), dims=(1, 0)).shape
    flowgrad.Size([3, 2])
    """
    if dims is not None:
        order = _keyword(order, dims, "permute", "dims")
    elif not order:  # (torch's: the order is required, () for a 0-d tensor)
        raise TypeError('permute() missing 1 required positional arguments: "dims" (give the '
                        'new order of every dim, e.g. x.permute(1, 0); () for a 0-d tensor)')
    dims = _shape_arg(order, "permute", "dims")
    nd = input._data.ndim
    if len(dims) != nd:
        raise RuntimeError(f"permute: number of dims don't match: the tensor has {nd} dims "
                           f"but {len(dims)} were given ({dims})")
    dims = tuple(_wrap_dim(d, nd, "permute") for d in dims)
    if len(set(dims)) != nd:
        raise RuntimeError(f"permute: repeated dim in {dims}")
    return _permute(input, dims=dims)


@tensor_method()
def transpose(input, dim0, dim1):
    """Swap two dims.

    >>> import flowgrad as flow
    >>> flow.arange(6).reshape(2, 3).transpose(0, 1)
    tensor([[0, 3],
            [1, 4],
            [2, 5]])
    """
    nd = input._data.ndim
    a, b = _wrap_dim(dim0, nd, "transpose"), _wrap_dim(dim1, nd, "transpose")
    if nd == 0:
        return _reshape(input, shape=())
    dims = list(range(nd))
    dims[a], dims[b] = b, a
    return _permute(input, dims=tuple(dims))


def swapaxes(input, axis0, axis1):
    """transpose(input, axis0, axis1), under NumPy's name and argument names (as torch's).

    >>> import flowgrad as flow
    >>> flow.swapaxes(flow.zeros(2, 3), axis0=0, axis1=1).shape
    flowgrad.Size([3, 2])
    """
    return transpose(input, axis0, axis1)


swapdims = transpose
tensor_method("swapaxes")(swapaxes)
tensor_method("swapdims")(transpose)


@tensor_method()
def t(input):
    """Transpose a matrix (<= 2 dims)."""
    if input._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{input._data.ndim}D; use transpose(dim0, dim1) or .mT")
    # 0-d and 1-d: a view of the same shape, as torch's (not the input itself)
    return transpose(input, 0, min(1, input._data.ndim - 1) if input._data.ndim else 0)


def _reversed_dims(self):
    """x.T: the dims reversed; torch's deprecation note (once) for other than 2 dims."""
    if self._data.ndim != 2:
        warn_once("Tensor.T is deprecated on 0-D tensors. This function is the identity in "
                  "these cases." if self._data.ndim == 0 else
                  "The use of `x.T` on tensors of dimension other than 2 to reverse their shape "
                  "is deprecated and it will throw an error in a future release. Consider "
                  "`x.mT` to transpose batches of matrices or `x.permute(*torch.arange(x.ndim - "
                  "1, -1, -1))` to reverse the dimensions of a tensor.")
    return _permute(self, dims=tuple(range(self._data.ndim))[::-1])


Tensor.T = property(_reversed_dims)
# (0-d: the tensor itself, as torch's, not a view of it)
Tensor.mT = property(lambda self: self if matrix_dims(self, "mT") else transpose(self, -2, -1))


# ---- sum_to: where broadcasting is undone --------------------------------------------------
@op("sum_to", jvp="linear")
def _sum_to(xp, x, *, shape):
    lead = x.ndim - len(shape)
    if lead < 0:
        raise ValueError("target has more dims")
    axes = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and x.shape[lead + i] != 1)
    if any(s != 1 and x.shape[lead + i] != s for i, s in enumerate(shape)):
        raise ValueError("incompatible shape")
    y = add_reduce(xp, x, axes, keepdims=True) if axes else x
    return y.reshape(shape) if lead else y


@_sum_to.grad
def sum_to_backward(ctx, dy):
    return dy.expand(ctx.input_shapes[0])


def sum_to(x, shape):
    """Sum `x` over its broadcast dimensions so it has `shape` (the inverse of expand)."""
    return x if tuple(x.shape) == tuple(shape) else _sum_to(x, shape=tuple(shape))


_engine.sum_to = sum_to  # the engine un-broadcasts gradients with it


# ---- expand / squeeze ---------------------------------------------------------------------
@op("expand", jvp="linear", is_view=True)
def _expand(xp, x, *, shape):
    y = broadcast_view(x, shape)
    if 1 in shape and y.size:  # (NumPy's stride for a size-1 dim may be 0: torch's there)
        return restride(xp, y, expand_strides(x.shape, x.strides, shape, x.itemsize))
    return y


@_expand.grad
def expand_backward(ctx, dy):
    return sum_to(dy, ctx.input_shapes[0])


@tensor_method()
def expand(input, *sizes, size=None, implicit=False):
    """Broadcast size-1 dims to `sizes` (-1 keeps a dim) without copying: sizes, a tuple or
    `size=`. `implicit` (torch's internal flag for expands broadcasting made) has no effect.

    >>> import flowgrad as flow
    >>> flow.tensor([[1], [2]]).expand(2, 3)
    tensor([[1, 1, 1],
            [2, 2, 2]])
    >>> flow.tensor([[1], [2]]).expand(size=(2, 2)).shape
    flowgrad.Size([2, 2])
    """
    if size is not None:
        sizes = _keyword(sizes, size, "expand", "size")
    elif not sizes:
        raise _missing("expand", "size")
    sizes = _shape_arg(sizes, "expand")
    shp = input._data.shape
    lead = len(sizes) - len(shp)
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be "
                           f"greater or equal to the number of dimensions in the tensor "
                           f"({len(shp)})")
    out = []
    for i, s in enumerate(sizes):
        if i < lead:
            if s < 0:
                raise RuntimeError(f"expand: the expanded size of the tensor ({s}) isn't "
                                   f"allowed in a leading, non-existing dimension {i}. Target "
                                   f"sizes: {list(sizes)}. Tensor sizes: {list(shp)}")
            out.append(s)
            continue
        cur = shp[i - lead]
        if s == -1:
            s = cur
        if s < 0 or cur != 1 and s != cur:
            raise RuntimeError(
                f"expand: the expanded size of the tensor ({s}) must match the existing size "
                f"({cur}) at non-singleton dimension {i}. Target sizes: {list(sizes)}. "
                f"Tensor sizes: {list(shp)}")
        out.append(s)
    return _expand(input, shape=tuple(out))


@tensor_method()
def expand_as(input, other):
    """expand(input, other.shape): broadcast without copying."""
    return expand(input, other.shape)


def broadcast_to(input, size, *sizes):
    """expand to `size` (a torch function name).

    >>> import flowgrad as flow
    >>> flow.broadcast_to(flow.tensor([1, 2]), (2, 2))
    tensor([[1, 2],
            [1, 2]])
    """
    if sizes:  # (x.broadcast_to(2, 3): torch's int[] size as ints)
        size = (size, *sizes)
    return expand(input, tuple(size) if isinstance(size, (tuple, list)) else (size,))


tensor_method("broadcast_to")(broadcast_to)


def expand_copy(input, *sizes, size=None, implicit=False):
    """expand(input, *sizes) (or `size=`), copied into a new tensor; `implicit` has no effect.

    >>> import flowgrad as flow
    >>> flow.expand_copy(flow.tensor([1, 2]), size=(2, 2))
    tensor([[1, 2],
            [1, 2]])
    """
    return expand(input, *sizes, size=size).clone(memory_format=contiguous_format)  # (torch's)


@tensor_method()
def squeeze(input, dim=None):
    """Drop size-1 dims (all, or those in `dim`).

    >>> import flowgrad as flow
    >>> flow.zeros(2, 1, 3, 1).squeeze().shape
    flowgrad.Size([2, 3])
    >>> flow.zeros(2, 1, 3, 1).squeeze(1).shape
    flowgrad.Size([2, 3, 1])
    """
    shp = input._data.shape
    if dim is None:
        new = tuple(s for s in shp if s != 1)
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        axes = set()
        for d in dims:  # (in order, as torch's: a repeat is refused before a later bad dim)
            a = _wrap_dim(d, len(shp), "squeeze")
            if a in axes:
                raise RuntimeError(f"squeeze: dim {a} appears multiple times in the list of "
                                   f"dims {tuple(dims)}")
            axes.add(a)
        axes = axes if shp else set()
        new = tuple(s for i, s in enumerate(shp) if not (i in axes and s == 1))
    if 1 not in new:
        return _reshape(input, shape=new)
    return _reshape(input, shape=new, squeeze=tuple(  # (the rest keep their strides)
        i for i, s in enumerate(shp) if s == 1 and (dim is None or i in axes)))


@tensor_method()
def unsqueeze(input, dim):
    """Insert a size-1 dim at `dim`.

    >>> import flowgrad as flow
    >>> flow.tensor([1, 2]).unsqueeze(1)
    tensor([[1],
            [2]])
    """
    nd = input._data.ndim + 1
    d = _wrap_dim(dim, nd, "unsqueeze")
    shp = input._data.shape
    return _reshape(input, shape=shp[:d] + (1,) + shp[d:], unsqueeze=d)


# ---- copies and casts ------------------------------------------------------------------------
@op("clone", jvp="linear")
def _clone(xp, x, *, keep_layout=False, order=None):
    if keep_layout:
        out = copy_preserving(xp, x)
    elif order is not None:  # dense, its dims in this order, fastest first (channels_last's)
        out = _layout.empty_in_order(xp, x.shape, x.dtype, order)
        xp.copyto(out, x)
    else:
        out = x.copy()  # (row-major)
    return _layout.bool_bytes(xp, out)


@_clone.grad
def clone_backward(ctx, dy):
    return dy


@tensor_method()
def clone(input, *, memory_format=None):
    """A copy with its own storage; gradients flow back to the original. Laid out as torch's
    (preserve_format, the default: as the input, ops/layout.py; channels_last: NHWC).

    >>> import flowgrad as flow
    >>> x = flow.tensor([1.0, 2.0], requires_grad=True)
    >>> y = x.clone()
    >>> y
    tensor([1., 2.], grad_fn=<CloneBackward0>)
    """
    if memory_format is None:
        return _clone(input, keep_layout=True)
    rank = format_rank(memory_format, input.ndim, "clone")
    return _clone(input, keep_layout=True) if rank is None else _clone(
        input, order=CHANNELS_LAST.get(rank))


def relaid(y, order):
    """`y`, a result of a composed op, laid out densely in `order` (dims fastest first, as
    layout.suggested_order gives torch's kernels' formats) where it is not, through a copy
    autograd records (None: `y` itself)."""
    if order is None or lies_in_order(y._data, order):
        return y
    return _clone(y, order=order)


@tensor_method()
def ravel(input):
    """The elements as a 1-D tensor: a view when the layout allows, else a copy.

    >>> import flowgrad as flow
    >>> flow.arange(6).reshape(2, 3).t().ravel()
    tensor([0, 3, 1, 4, 2, 5])
    """
    # torch's contiguous().view(-1): a copy unless C-contiguous, even where a view could be
    # made (an expanded or a sliced input), so writes through it never reach the input
    return reshape(contiguous(input), -1)


def _itself(name):
    def itself(input):
        expect_tensor(name, input)
        if name == "positive" and input._data.dtype.kind == "b":
            raise RuntimeError("The `+` operator, on a bool tensor is not supported (as "
                               "torch's); use the tensor itself")
        return input
    itself.__name__ = itself.__qualname__ = name
    itself.__doc__ = f"`input` itself, as torch's {name} of a real (not complex) tensor."
    return itself


positive, resolve_conj, resolve_neg = (  # conj, real, imag: ops/complex.py
    tensor_method()(_itself(n)) for n in ("positive", "resolve_conj", "resolve_neg"))
Tensor.__pos__ = positive


@tensor_method()
def contiguous(input, memory_format=None):
    """`input` itself if contiguous in `memory_format` (C order by default; channels_last:
    NHWC), else a copy that is. preserve_format is refused for a tensor that is not
    contiguous, as torch's."""
    if memory_format is preserve_format and not input._data.flags.c_contiguous:
        raise RuntimeError(f"preserve memory format is unsupported by the contiguous operator "
                           f"(a tensor of shape {tuple(input.shape)} and stride "
                           f"{input.stride()}); use contiguous() or clone()")
    rank = format_rank(memory_format, input.ndim) if memory_format is not None else 0
    if not rank:
        return _layout.c_contiguous(input, _reshape, _clone)
    return input if _layout.format_contiguous(input._data, rank) else _clone(
        input, order=CHANNELS_LAST[rank])


# ---- joining ------------------------------------------------------------------------------
@op("cat", jvp="linear")
def _cat(xp, *xs, dim):
    shape = list(xs[0].shape)
    shape[dim] = sum(x.shape[dim] for x in xs)
    # C order whatever the inputs' layout, as torch's, unless all suggest one channels_last
    # format (torch's cat_compute_output_memory_format)
    rank = _layout.suggested_format(xs[0]) if len(shape) in CHANNELS_LAST else 0
    if rank and any(_layout.suggested_format(x) != rank for x in xs[1:]):
        rank = 0
    out = _layout.empty_in_format(xp, shape, xs[0].dtype, rank) if rank else \
        xp.empty(shape, xs[0].dtype)
    return xp.concatenate(xs, axis=dim, out=out)


@_cat.grad
def cat_backward(ctx, dy):
    sizes = [s[ctx.dim] for s in ctx.input_shapes]
    starts = itertools.accumulate(sizes, initial=0)
    return tuple(dy.narrow(ctx.dim, b, n) if need else None
                 for b, n, need in zip(starts, sizes, ctx.needs_input_grad))


def not_a_sequence(tensors, op_name):
    """torch's TypeError for a `tensors` argument that is no list or tuple."""
    if not isinstance(tensors, (list, tuple)):
        kind = type(tensors)
        what = kind.__name__ if kind.__module__ == "builtins" else \
            f"{kind.__module__}.{kind.__name__}"
        raise TypeError(f"{op_name}(): argument 'tensors' (position 1) must be tuple of "
                        f"Tensors, not {'Tensor' if isinstance(tensors, Tensor) else what}")


def _promote_all(tensors, op_name):
    not_a_sequence(tensors, op_name)  # (a tensor iterates its rows: refused, as torch)
    if not tensors:
        # (torch's cat raises ValueError here, its stack RuntimeError)
        raise (ValueError if op_name == "cat" else RuntimeError)(
            f"{op_name}(): expected a non-empty list of Tensors")
    for i, t_ in enumerate(tensors):
        if not isinstance(t_, Tensor):
            if getattr(t_, "is_sparse", False):  # (the public function takes its sparse form)
                raise SparseOperandError(
                    f"{op_name}(): element {i} is sparse: {op_name} takes all sparse COO "
                    f"tensors, or all dense ones (call .to_dense() on the sparse ones)")
            raise TypeError(f"{op_name}(): expected Tensor as element {i} in argument 0, but "
                            f"got {type(t_).__name__}")
    d = _dt.result_type(*tensors) if len({x._data.dtype for x in tensors}) > 1 else None
    return [x.to(d) for x in tensors] if d is not None else list(tensors)


def cat(tensors, dim=0, *, out=None):
    """Join tensors along an existing dim.

    >>> import flowgrad as flow
    >>> a, b = flow.tensor([[1, 2]]), flow.tensor([[3, 4]])
    >>> flow.cat([a, b])
    tensor([[1, 2],
            [3, 4]])
    >>> flow.cat([a, b], dim=1)
    tensor([[1, 2, 3, 4]])
    """
    if out is not None:
        # (torch returns before its overlap check when every tensor is a 1-D empty one, its
        # legacy skip: cat([e], out=e) runs)
        apart = not all(isinstance(x, Tensor) and x.shape == (0,) for x in tensors)
        return with_out(cat, out, (tensors,), "cat", cast_error=TypeError, no_overlap=apart,
                        dim=dim)
    tensors = _promote_all(tensors, "cat")
    if any(x._data.ndim == 0 for x in tensors):
        raise RuntimeError("cat(): zero-dimensional tensor cannot be concatenated")
    # torch's legacy rule: a 1-D empty tensor joins tensors of more dims as nothing, wherever
    # it stands; when all are 1-D they all join (a split's backward of empty pieces keeps
    # every piece's history)
    # (torch checks no dim when every tensor is such an empty one; a skipped one that requires
    # grad still joins, as an empty block, so the result requires grad as torch's does)
    ref = next((x for x in tensors if x._data.shape != (0,)), None)
    if ref is None:
        ref, d = tensors[0], 0
    else:
        d = _wrap_dim(dim, ref._data.ndim, "cat")
    if ref._data.ndim > 1:
        empty = ref._data.shape[:d] + (0,) + ref._data.shape[d + 1:]
        tensors = [x if x._data.shape != (0,) else x.reshape(empty) for x in tensors
                   if x._data.shape != (0,) or x.requires_grad]
    for i, x in enumerate(tensors):
        if x._data.ndim != ref._data.ndim or any(
                a != b for k, (a, b) in enumerate(zip(x._data.shape, ref._data.shape))
                if k != d):
            raise RuntimeError(
                f"cat(): Sizes of tensors must match except in dimension {d}. Expected shape "
                f"{tuple(ref.shape)} (up to dim {d}) but got {tuple(x.shape)} for tensor "
                f"number {i} in the list")
    if len(tensors) == 1:
        return _cat(tensors[0], dim=d)
    return _cat(*tensors, dim=d)


concat = concatenate = cat


def stack(tensors, dim=0, *, out=None):
    """Join same-shaped tensors along a new dim.

    >>> import flowgrad as flow
    >>> flow.stack([flow.tensor([1, 2]), flow.tensor([3, 4])], dim=1)
    tensor([[1, 3],
            [2, 4]])
    """
    if out is not None:
        # (torch's cat sees the tensors unsqueezed, never `out` itself: an empty one shares
        # no memory with it)
        apart = not any(x is out and not x.numel() for x in tensors)
        return with_out(stack, out, (tensors,), "stack", cast_error=TypeError,
                        no_overlap=apart, dim=dim)
    tensors = _promote_all(tensors, "stack")
    shp = tensors[0]._data.shape
    d = _wrap_dim(dim, len(shp) + 1, "stack")  # (first, as torch's: an IndexError)
    for i, x in enumerate(tensors):
        if x._data.shape != shp:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{tuple(shp)} at entry 0 and {tuple(x.shape)} at entry {i}")
    if d == len(shp):  # (torch's: C-ordered, whatever size-1 strides NumPy gives the dim)
        return cat([unsqueeze(x, d) for x in tensors], d).contiguous()
    if _layout.suggested_format(tensors[0]._data):  # (channels_last kept: torch's cat, a view)
        return cat(tensors, d).view(*shp[:d], len(tensors), *shp[d:])
    return cat([unsqueeze(x, d) for x in tensors], d)


@tensor_method()
def movedim(input, source, destination):
    """Move dims `source` to positions `destination`; the others keep their order."""
    nd = input._data.ndim
    src = tuple(source) if isinstance(source, (tuple, list)) else (source,)
    dst = tuple(destination) if isinstance(destination, (tuple, list)) else (destination,)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} "
                           f"dims) should contain the same number of dims as destination "
                           f"({list(dst)} dims)")
    src = tuple(_wrap_dim(d, nd, "movedim") for d in src)
    dst = tuple(_wrap_dim(d, nd, "movedim") for d in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in source {list(src)} or destination "
                           f"{list(dst)}")
    if nd == 0:
        return _reshape(input, shape=())
    order = [d for d in range(nd) if d not in src]
    for d_, s_ in sorted(zip(dst, src)):
        order.insert(d_, s_)
    return _permute(input, dims=tuple(order))


moveaxis = movedim
tensor_method("moveaxis")(movedim)


# the broadcasting helpers live beside (broadcasting.py); named here too, where they were
from .broadcasting import broadcast_shapes, broadcast_tensors, meshgrid  # noqa: E402,F401
