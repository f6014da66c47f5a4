"""Small compositions of existing ops under torch's names: dist, renorm, addr, aminmax,
the functional scatters (diagonal/select/slice_scatter), block_diag,
split_with_sizes, sum_to_size, unravel_index, bincount, fill_diagonal_, the in-place
spellings of existing ops (addmm_, cumsum_, ...) and of views (t_, squeeze_, ...).

Each is built from registered ops, so its gradient (to every order), vmap and nn.Graph
tracing come from theirs; only bincount has a kernel of its own (it has no gradient).

>>> import flowgrad as flow
>>> flow.dist(flow.tensor([0.0, 0.0]), flow.tensor([3.0, 4.0]))
tensor(5.)
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from .. import return_types
from .._warn import warn
from ..autograd import interpreter as _interpreter
from ..autograd.forward_ad import active_levels
from ..autograd.grad_mode import is_grad_enabled
from ..autograd.inplace import bump_version, change_layout, check_capture
from ..device import STORAGES, array_module, memory_owner, new_array
from ..errors import tensor_operand
from ..func.batched import every_example
from ..storage import UntypedStorage
from ..tensor import Tensor, _wrap_dim, tensor_method
from ..typed_tensors import contiguous_format, format_rank
from .creation import multinomial, tensor, zeros
from .elementwise import _inplace_binary, where
from .gather import _index_dim, _put_flat, _written_into
from .kept import kept
from .layout import dim_order, format_contiguous, format_strides
from .linalg import _addmm_method, _baddbmm_method, _coefficient, _scaled_add, addbmm, addmv, outer
from .no_derivative import without_derivative
from .norm import vector_norm
from .pad import pad
from .reduce import amax, amin
from .registry import op
from .resize_storage import over_storage, resize_storage
from .scan import cumprod, cumsum
from .shape import cat
from .split import split

__all__ = ["dist", "renorm", "addr", "aminmax", "diagonal_scatter",
           "select_scatter", "slice_scatter", "block_diag", "split_with_sizes",
           "unravel_index", "bincount", "detach", "typename", "is_inference", "get_device",
           "narrow_copy", "resize_as_", "zero_"]


tensor_method()(multinomial)  # torch's method spelling: probs.multinomial(n)


@tensor_method()
def get_device(input) -> int:
    """The index of the device holding `input`: -1 on the CPU, as torch's.

    >>> import flowgrad as flow
    >>> flow.ones(2).get_device()
    -1
    """
    dev = input.device
    return -1 if dev.type == "cpu" else (dev.index or 0)


@tensor_method()
def narrow_copy(input, dim, start, length):
    """`input.narrow(dim, start, length)` as a new tensor (not a view).

    >>> import flowgrad as flow
    >>> flow.arange(6).reshape(2, 3).narrow_copy(1, 1, 2)
    tensor([[1, 2],
            [4, 5]])
    """
    # torch reads its start and length as ints: a one-element integer tensor of any rank is
    # one (narrow itself takes only a 0-d one)
    start, length = (_read_int(v, f"narrow_copy's {arg}") if isinstance(v, Tensor) and
                     v._data.size == 1 and v._data.dtype.kind in "iu" else v
                     for v, arg in ((start, "start"), (length, "length")))
    # torch's own check of a dim past the last (a negative one out of range is narrow's
    # IndexError)
    if isinstance(dim, int) and dim >= max(input._data.ndim, 1):
        raise RuntimeError(f"narrow_copy(): Expected dim < {input._data.ndim} (the input's "
                           f"shape is {tuple(input.shape)}), got dim {dim}")
    return input.narrow(dim, start, length).clone(memory_format=contiguous_format)  # (as torch)


def _read_int(value, what):
    """A one-element integer tensor's value as an int: refused inside nn.Graph's build, whose
    plan would keep the trace's."""
    _interpreter.check_read(value, what)
    return int(value._data.reshape(()))


def _dim_order(self, *, ambiguity_check=False):
    """The dims from outermost to innermost in memory, as torch's Tensor.dim_order() (see
    layout.dim_order).

    >>> import flowgrad as flow
    >>> flow.ones(2, 3, 4).permute(2, 0, 1).dim_order()
    (1, 2, 0)
    """
    return dim_order(tuple(self.shape), self.stride(), self._data.flags.c_contiguous)


Tensor.dim_order = _dim_order


@tensor_method()
@tensor_operand()
def dist(input, other, p=2):
    """The p-norm of input - other (broadcast), over all elements.

    >>> import flowgrad as flow
    >>> flow.dist(flow.tensor([1.0, 1.0]), flow.tensor([2.0, 3.0]), p=1)
    tensor(3.)
    """
    return kept(vector_norm(input - other, p), input, other, node="DistBackward0", result=True)


@tensor_method()
def renorm(input, p, dim, maxnorm):
    """Each slice along `dim` whose p-norm exceeds maxnorm, scaled down to norm maxnorm.

    >>> import flowgrad as flow
    >>> flow.renorm(flow.tensor([[3.0, 4.0], [0.3, 0.4]]), 2, 0, 1.0)
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    """
    if p <= 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported, got p={p}")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    nd = input.dim()
    if nd < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {nd} dimensions")
    d = _wrap_dim(dim, nd, "renorm")
    others = tuple(k for k in range(nd) if k != d)
    half = input.dtype in (_dt.float16, _dt.bfloat16)
    # (half precision: the norm and factor in float32, the factor rounded once, as torch's)
    x = input.float() if half else input
    over = vector_norm(x.detach(), p, dim=others, keepdim=True) > maxnorm
    # the norm of the slices it scales only: a slice left as it is passes its gradient
    # through, as torch's, where the norm's own gradient (at a nan, or a norm that
    # underflows to 0) would make it nan
    norm = vector_norm(where(over, x, 0.0), p, dim=others, keepdim=True)
    # torch's factor: the same 1e-7 keeps a zero slice finite
    factor = where(over, maxnorm / (norm + 1e-7), 1.0)
    if half:  # the factor's value rounded, not its gradient (sum(dy x) overflowed float16)
        factor = factor + (factor.to(input.dtype).float() - factor).detach()
        return (x * factor).to(input.dtype).contiguous()
    return (input * factor).contiguous()  # (C order, as torch's, whatever input's layout)


@tensor_method()
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2).

    >>> import flowgrad as flow
    >>> flow.addr(flow.zeros(2, 2), flow.tensor([1.0, 2.0]), flow.tensor([1.0, 3.0]))
    tensor([[1., 3.],
            [2., 6.]])
    """
    prod = outer(vec1, vec2)
    if prod.dtype == _dt.bool and getattr(input, "dtype", None) == _dt.bool:
        # torch's boolean addr: (beta and input) or (alpha and outer), beta/alpha as truth values
        for arg, value in (("beta", beta), ("alpha", alpha)):  # (refuses float ones)
            _coefficient("addr", arg, value, np.dtype(np.bool_), True)
        shape = np.broadcast_shapes(tuple(input.shape), tuple(prod.shape))
        out = (prod if alpha else prod & False).expand(shape)
        return out | input if beta else out
    return _scaled_add(input, prod, beta, alpha, "addr", refuse_float=True, input_first=True)


_aminmax_type = return_types.aminmax


@tensor_method()
def aminmax(input, *, dim=None, keepdim=False):
    """(amin, amax) over `dim` (all elements when None).

    >>> import flowgrad as flow
    >>> flow.aminmax(flow.tensor([[1.0, 5.0], [3.0, 2.0]]), dim=1)
    aminmax(min=tensor([1., 2.]), max=tensor([5., 3.]))
    """
    dims = () if dim is None else dim
    if dim is None and input._data.size == 0:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    if dim is None and keepdim:
        dims = tuple(range(input.dim()))
    return _aminmax_type(amin(input, dims, keepdim), amax(input, dims, keepdim))


# ---- functional scatters: a copy of input with a region replaced -------------------------
# Each is one index_copy (out of place, differentiable in both, batchable by vmap), with the
# region's positions computed from the shape alone.
def _check_src(src, region_shape, name, input):
    """src checked against the region's shape, cast to input's dtype (torch copies src into
    a clone of input: a float64 or int src goes into a float32 input)."""
    if tuple(src.shape) != tuple(region_shape):
        raise RuntimeError(f"{name}(): expected src to have a size equal to the slice of "
                           f"self; src size = {list(src.shape)}, slice size = "
                           f"{list(region_shape)}")
    return src if src.dtype == input.dtype else src.to(input.dtype)


def _positions(values):
    return Tensor._wrap(np.asarray(values, dtype=np.int64).reshape(-1))


@tensor_method()
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """input with its diagonal (as `diagonal(offset, dim1, dim2)`) replaced by src;
    differentiable in both.

    >>> import flowgrad as flow
    >>> flow.diagonal_scatter(flow.zeros(2, 2), flow.tensor([1.0, 2.0]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    nd = input.dim()
    d1, d2 = _wrap_dim(dim1, nd, "diagonal_scatter"), _wrap_dim(dim2, nd, "diagonal_scatter")
    if d1 == d2:
        raise RuntimeError(f"diagonal(): dimensions cannot be identical {dim1}, {dim2}")
    rows, cols = input.shape[d1], input.shape[d2]
    r0, c0 = max(-offset, 0), max(offset, 0)
    n = max(min(rows - r0, cols - c0), 0)
    rest = [k for k in range(nd) if k not in (d1, d2)]
    src = _check_src(src, [input.shape[k] for k in rest] + [n], "diagonal_scatter", input)
    # the diagonal's flat positions in input (in src's shape), written as index_put writes
    xp = array_module(input._data)
    flat = Tensor._wrap(xp.arange(input.numel(), dtype=xp.int64).reshape(
        tuple(input.shape)).diagonal(offset, d1, d2).copy())
    return _written_into(input, flat, _put_flat(src, flat, shape=tuple(input.shape),
                                                accumulate=False))


@tensor_method()
def select_scatter(input, src, dim, index):
    """input with `input.select(dim, index)` replaced by src.

    >>> import flowgrad as flow
    >>> flow.select_scatter(flow.zeros(2, 2), flow.ones(2), 0, 1)
    tensor([[0., 0.],
            [1., 1.]])
    """
    d = _wrap_dim(dim, input.dim(), "select_scatter")
    n = input.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select_scatter(): index {index} out of range for tensor of size "
                         f"{list(input.shape)} at dimension {d}")
    src = _check_src(src, input.shape[:d] + input.shape[d + 1:], "select_scatter", input)
    return _copied_at(input, d, [index % n], src.unsqueeze(d))


@tensor_method()
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """input with the slice start:end:step along dim replaced by src.

    >>> import flowgrad as flow
    >>> flow.slice_scatter(flow.zeros(4), flow.ones(2), start=1, step=2)
    tensor([0., 1., 0., 1.])
    """
    d = _wrap_dim(dim, input.dim(), "slice_scatter")
    picked = range(input.shape[d])[slice(start, end, step)]
    src = _check_src(src, input.shape[:d] + (len(picked),) + input.shape[d + 1:],
                     "slice_scatter", input)
    return _copied_at(input, d, list(picked), src)


def _copied_at(input, d, positions, src):
    """input.index_copy(d, positions, src), laid out as torch's (input's layout kept)."""
    flat = _index_dim(input, d, _positions(positions), "index_copy", src)
    return _written_into(input, flat, _put_flat(src, flat, shape=tuple(input.shape),
                                                accumulate=False))


def block_diag(*tensors):
    """The block-diagonal matrix of the given (0-, 1- or 2-D) tensors.

    >>> import flowgrad as flow
    >>> flow.block_diag(flow.tensor([[1, 2]]), flow.tensor(3))
    tensor([[1, 2, 0],
            [0, 0, 3]])
    """
    blocks = []
    for i, t in enumerate(tensors):
        if t.dim() > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.dim()} dimensions")
        blocks.append(t.reshape(1, -1) if t.dim() < 2 else t)
    if not blocks:
        return zeros(1, 0)
    dtype = _dt.result_type(*tensors)  # (torch's: a 0-d block promotes as a 0-d tensor)
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        rows.append(pad(b.to(dtype), (left, width - left - b.shape[1])))
        left += b.shape[1]
    return cat(rows, 0)


@tensor_method()
def split_with_sizes(input, split_sizes, dim=0):
    """Pieces of the given sizes along dim (split with a list).

    >>> import flowgrad as flow
    >>> flow.split_with_sizes(flow.arange(5), [2, 3])
    (tensor([0, 1]), tensor([2, 3, 4]))
    """
    return split(input, list(split_sizes), dim)


def sum_to_size(self, *sizes, size=None):
    """self summed down to `size` (which must expand to self's shape).

    >>> import flowgrad as flow
    >>> flow.ones(2, 3).sum_to_size(1, 3)
    tensor([[2., 2., 2.]])
    """
    if size is None:
        if not sizes:  # (as torch: no size is a mistake, not a sum of everything)
            raise TypeError('sum_to_size() missing 1 required positional arguments: "size"')
        size = sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    size = tuple(size)
    try:
        if np.broadcast_shapes(size, tuple(self.shape)) != tuple(self.shape):
            raise ValueError
    except ValueError:
        raise RuntimeError(f"sum_to_size: size {list(size)} is not expandable to size of "
                           f"tensor {list(self.shape)}") from None
    if size == tuple(self.shape) and size:
        return self
    # a sum as torch's: bool and integer tensors come out int64 (size [] is a full sum,
    # even of a 0-d tensor)
    if not (self.is_floating_point() or self.is_complex()):
        self = self.to(_dt.int64)
    lead = self.ndim - len(size)  # (a sum with keepdim, C-ordered as torch's reduction)
    out = self.sum(tuple(range(lead)) + tuple(lead + i for i, n in enumerate(size) if n == 1 and
                                              self.shape[lead + i] != 1), keepdim=True)
    return out.reshape(size) if lead else out


Tensor.sum_to_size = sum_to_size


def unravel_index(indices, shape):
    """The coordinates (one tensor per dim of `shape`) of flat `indices`.

    >>> import flowgrad as flow
    >>> flow.unravel_index(flow.tensor([4, 5]), (2, 3))
    (tensor([1, 1]), tensor([1, 2]))
    """
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if not isinstance(indices, Tensor):
        indices = tensor(indices)
    if indices.is_floating_point() or indices.is_complex() or indices.dtype.name == "bool":
        raise TypeError(f"unravel_index: expected 'indices' to be an integer tensor, but got "
                        f"{indices.dtype.name}")
    if any(s < 0 for s in shape):
        raise ValueError("unravel_index: 'shape' cannot have negative values, but got "
                         f"{shape}")
    # as torch's: the coordinates are views of one (..., len(shape)) tensor, laid out as the
    # indices with the coordinates innermost (one elementwise op of indices[..., None] and
    # the 1-d strides); torch checks no range: an index outside wraps modulo the shape, and a
    # 0-size dim is an integer division by zero; int64 divisors, so the result is int64
    flat = indices
    strides = flat.new_tensor([math.prod(shape[k + 1:]) for k in range(len(shape))],
                              dtype=_dt.int64)
    sizes = flat.new_tensor(list(shape), dtype=_dt.int64)
    return tuple((flat.unsqueeze(-1) // strides % sizes).unbind(-1))


@op("bincount", differentiable=False)
def _bincount(xp, x, *weights, minlength):
    w = weights[0] if weights else None
    if w is None:
        return xp.bincount(x, minlength=minlength).astype(xp.int64)
    out = xp.bincount(x, weights=w.astype(xp.float64), minlength=minlength)
    # float32 weights sum to float32; any other dtype (bool, int, bfloat16) to float64, as torch
    return out.astype(xp.float32) if w.dtype == xp.float32 else out


@tensor_method()
def bincount(input, weights=None, minlength=0):
    """How often each value 0..max(input) occurs in a 1-D non-negative integer tensor
    (the summed weights instead when given). No gradient, as torch's.

    >>> import flowgrad as flow
    >>> flow.bincount(flow.tensor([0, 1, 1, 3]))
    tensor([1, 2, 0, 1])
    """
    if input.dtype == _dt.bool:
        raise NotImplementedError("\"bincount_cpu\" not implemented for 'Bool'; convert the "
                                  "input with .long() first")
    if input.is_floating_point() or input.is_complex():  # torch's dtype check comes first
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{input.dtype.name}'; "
                                  f"bincount counts integers")
    if input.dim() != 1:
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs, got "
                           f"shape {tuple(input.shape)} of dtype {input.dtype.name}")
    if minlength < 0:
        raise RuntimeError(f"bincount: minlength should be >= 0, got {minlength}")
    if not every_example(input >= 0):  # (a read: the result's length is the input's max)
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs; the "
                           "input has negative values")
    if weights is not None:
        if tuple(weights.shape) != tuple(input.shape):
            raise RuntimeError(f"bincount: weights should be 1-d and have the same length as "
                               f"input, got {tuple(weights.shape)} for {tuple(input.shape)}")
        if not input.numel():  # (torch's: counts, not weights, when there is nothing)
            return zeros(int(minlength), dtype=_dt.int64)
        # (torch records a node that refuses: a loss through the weights raises)
        return without_derivative([_bincount(input, weights, minlength=int(minlength))],
                                  [weights], "bincount", "RuntimeError")[0]
    return _bincount(input, minlength=int(minlength))


def _fill_diagonal_(self, fill_value, wrap=False):
    nd = self.dim()
    if nd < 2:
        raise RuntimeError(f"fill_diagonal_: dimensions must larger than 1, got shape "
                           f"{tuple(self.shape)}")
    shape = tuple(self.shape)
    if nd > 2 and len(set(shape)) != 1:
        raise RuntimeError(f"fill_diagonal_: all dimensions of input must be of equal length, "
                           f"got shape {shape}")
    numel = math.prod(shape)
    step = sum(math.prod(shape[k + 1:]) for k in range(nd))
    end = numel if (wrap and nd == 2) else min(shape) * step
    mask = np.zeros(numel, bool)
    mask[0:end:step] = True
    # the mask depends on the shape only: a constant, so the fill is one masked_fill_
    return self.masked_fill_(Tensor._wrap(new_array(self._data, mask.reshape(shape))), fill_value)


Tensor.fill_diagonal_ = _fill_diagonal_


def detach(input):
    """torch.detach: the tensor cut from the graph (shares storage).

    >>> import flowgrad as flow
    >>> flow.detach(flow.ones(2, requires_grad=True)).requires_grad
    False
    """
    return input.detach()


def typename(obj):
    """The type name of a tensor (`x.type()`) or, for anything else, its class's qualified
    name.

    >>> import flowgrad as flow
    >>> flow.typename(flow.ones(2)), flow.typename(3)
    ('flowgrad.FloatTensor', 'int')
    """
    if isinstance(obj, Tensor):
        return obj.type()
    cls = obj if isinstance(obj, type) else type(obj)
    module = cls.__module__
    prefix = "" if module in ("builtins", "__builtin__", None) else module + "."
    return prefix + cls.__qualname__


def is_inference(input):
    """torch.is_inference: whether input was made in inference mode.

    >>> import flowgrad as flow
    >>> flow.is_inference(flow.ones(1))
    False
    """
    return input.is_inference()


def _scan_in_place(scan):
    """torch's cumsum_/cumprod_: the scan in self's dtype (cumsum_out(self, self)), so an
    integer scan is not widened to int64 first and a bool one refuses only once it runs."""
    def run(input, dim, *, dtype=None):
        if dtype is not None and dtype != input.dtype:
            raise RuntimeError(f"{scan.__name__}_: Bad in-place call: input tensor dtype "
                               f"{input.dtype} and output tensor dtype {dtype} should match; "
                               f"drop dtype= or use the out-of-place {scan.__name__}")
        return scan(input, dim, dtype=input.dtype)
    return run


for _name, _fn in (("addmm_", _addmm_method), ("addmv_", addmv), ("addbmm_", addbmm),
                   ("baddbmm_", _baddbmm_method), ("addr_", addr), ("renorm_", renorm),
                   ("cumsum_", _scan_in_place(cumsum)), ("cumprod_", _scan_in_place(cumprod))):
    setattr(Tensor, _name, _inplace_binary(_name, _fn))


def _contains(self, element):
    if not isinstance(element, (Tensor, int, float, complex, bool)):
        raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you "
                           f"passed in a {type(element).__name__}")
    return bool((self == element).any().item())


def _reversed(self):
    return self if self.dim() == 0 else self.flip(0)


Tensor.__contains__ = _contains
Tensor.__reversed__ = _reversed
Tensor.__ipow__ = Tensor.pow_
Tensor.__ilshift__ = Tensor.bitwise_left_shift_
Tensor.__irshift__ = Tensor.bitwise_right_shift_


def _metadata_inplace(name, view_of):
    """Tensor.<name>(*args): the tensor itself becomes `view_of(tensor, *args)` (t_,
    transpose_, squeeze_, ...), its storage shared and its version bumped, as torch's
    (`inplace.change_layout`)."""
    def inplace(self, *args, **kwargs):
        check_capture(name, self)
        return change_layout(name, self, lambda t: view_of(t, *args, **kwargs))
    inplace.__name__ = name
    return inplace


for _name in ("t_", "transpose_", "swapdims_", "swapaxes_", "squeeze_", "unsqueeze_"):
    setattr(Tensor, _name, _metadata_inplace(_name, getattr(Tensor, _name[:-1])))


# ---- resize_ / resize_as_ / zero_ ----------------------------------------------------------
def _resize_(self, *sizes, size=None, memory_format=None):
    """Give the tensor shape `sizes`, in place, as torch's resize_: its elements in memory order
    fill the new shape (the same storage when it holds enough; a larger one keeps them first,
    the rest zeros here, uninitialised in torch). Refused for a tensor that requires grad or
    is dual (forward mode), as torch, and for a view whose shape would change (flowgrad keeps
    a view's layout).

    >>> import flowgrad as flow
    >>> flow.arange(6.0).resize_(2, 2)
    tensor([[0., 1.],
            [2., 3.]])
    """
    if size is not None:
        if sizes:
            raise TypeError("resize_() got 'size' both positionally and as a keyword")
        sizes = (size,)
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    shape = tuple(int(s) for s in sizes)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"resize_: Trying to create tensor with negative dimension "
                           f"{min(shape)}: {list(shape)}")
    check_capture("resize_", self)
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if any(level.tangent(self) is not None for level in active_levels()):
        raise RuntimeError(f"cannot resize variables that has a forward grad (as torch's: "
                           f"resize_ to {list(shape)} of a dual tensor of shape "
                           f"{list(self.shape)}); resize a copy of its primal instead")
    if shape != tuple(self.shape) and getattr(self, "_phys", None) is not None:
        # (under vmap: each example takes the shape; `_data` is a placeholder there)
        if math.prod(shape) != self.numel():
            raise RuntimeError(f"resize_: under vmap the number of elements cannot change "
                               f"(per-example shape {tuple(self.shape)} to {shape})")
        return change_layout("resize_", self, lambda t: t.reshape(shape))
    if shape != tuple(self.shape) and _tracing():
        # (nn.Graph: the new layout through recorded ops, so the plan computes it from each
        # call's values instead of keeping the array resized while tracing)
        if not self.is_contiguous():
            raise NotImplementedError(
                f"nn.Graph: resize_ of a non-contiguous tensor (shape {tuple(self.shape)}) "
                f"inside build() is not supported; resize a .contiguous() copy")
        return change_layout("resize_", self, lambda t: _resized(t, shape))
    if shape != tuple(self.shape):
        resize_storage(self, shape, "resize_")
    rank = format_rank(memory_format, self.ndim, "resize_")
    if rank and not format_contiguous(self._data, rank):  # torch's empty_tensor_restride
        new = over_storage(memory_owner(self._data), self._data.dtype, self.storage_offset(),
                            shape, format_strides(shape, rank), "resize_")
        bump_version(self)
        self._data = new
    return self


def _tracing():
    return getattr(_interpreter.current, "relayout", None) is not None


def _resized(t, shape):
    """resize_'s result as ops: t's elements in order, cut or padded with zeros to `shape`."""
    flat, n = t.reshape(-1), math.prod(shape)
    if n > flat.numel():
        flat = cat([flat, zeros(n - flat.numel(), dtype=t.dtype)])
    return flat[:n].reshape(shape)


def resize_as_(input, the_template, *, memory_format=None):
    """`input` resized in place to the shape of `the_template` (see Tensor.resize_).

    >>> import flowgrad as flow
    >>> flow.resize_as_(flow.zeros(4), flow.ones(2, 2)).shape
    flowgrad.Size([2, 2])
    """
    return _resize_(input, tuple(the_template.shape), memory_format=memory_format)


def zero_(input):
    """`input` filled with zeros, in place (torch.zero_, the function of Tensor.zero_).

    >>> import flowgrad as flow
    >>> flow.zero_(flow.ones(2))
    tensor([0., 0.])
    """
    return input.zero_()


def _resize_as(self, tensor):
    """The legacy out-of-place resize_as (deprecated in torch): `self` reshaped to
    `tensor`'s shape, which must have as many elements; a differentiable reshape."""
    warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    shape = tuple(tensor.shape)
    if math.prod(shape) != self.numel():
        raise RuntimeError(
            f"requested resize to {'x'.join(map(str, shape))} ({math.prod(shape)} elements in "
            f"total), but the given tensor has a size of {'x'.join(map(str, self.shape))} "
            f"({self.numel()} elements). autograd's resize can only change the shape of a "
            f"given tensor, while preserving the number of elements. ")
    return self.reshape(shape)


_resize_.__name__ = _resize_.__qualname__ = "resize_"
Tensor.resize_, Tensor.resize_as_, Tensor.resize_as = _resize_, resize_as_, _resize_as


# ---- set_ ----------------------------------------------------------------------------------
def _set_(self, source=None, storage_offset=None, size=None, stride=None):
    """Make this tensor look at `source`'s elements, in place, as torch's set_: another
    tensor's (its storage, offset, size and stride; or a storage offset, size and stride of
    its own in that tensor's storage), a storage's (`untyped_storage()`), or none (`set_()`:
    an empty tensor). Writes through either then reach the other. Refused for a leaf that
    requires grad while grad mode is on, as torch; and, where torch lets no_grad code do it
    and autograd then follows its internals, for a tensor with a grad_fn and a view of a
    tensor that requires grad. A leaf that requires grad may take a new shape under no_grad,
    as torch's (a graph built before hands it a gradient of the old shape, as torch's
    engine does); it keeps its place in those graphs (torch's does not: autograd.grad calls
    it unused there).

    >>> import flowgrad as flow
    >>> a = flow.arange(6.0)
    >>> t = flow.zeros(2).set_(a, 1, (2,), (2,))
    >>> a[1] = 10.0
    >>> t
    tensor([10.,  3.])
    """
    if source is None:
        if storage_offset is not None or size is not None or stride is not None:
            raise TypeError("set_(): a storage offset, size or stride needs a source tensor or "
                            "storage to set the tensor to")
        new = array_module(self._data).empty((0,), self._data.dtype)
    elif isinstance(source, (Tensor, UntypedStorage)):
        if isinstance(source, Tensor) and source.dtype != self.dtype and size is None:
            # (with an offset and a size torch reads the source's storage as this dtype)
            raise RuntimeError(f"set_: could not set a tensor of dtype {self.dtype} to one of "
                               f"dtype {source.dtype}; convert it first "
                               f"(source.to({self.dtype}))")
        if (storage_offset is None) != (size is None) or stride is not None and size is None:
            raise TypeError("set_(): with a source, give a storage offset and a size together "
                            "(and optionally a stride), or none of them")
        if size is not None and isinstance(source, Tensor) and \
                not source._data.flags.c_contiguous:
            raise RuntimeError("set_: passed in tensor to be used as storage must be "
                               "contiguous")
        root = source._root if isinstance(source, UntypedStorage) else None
        if root is None and size is None:
            new = source._data
            root = memory_owner(new)
        else:
            root = memory_owner(source._data) if root is None else root
            if type(root) is not np.ndarray:
                raise NotImplementedError(f"set_: a storage offset, size or stride on "
                                          f"{source.device}")
            if stride is not None and not len(stride):
                stride = None  # (torch reads an empty stride as none given)
            if stride is None and tuple(int(n) for n in size) == tuple(self.shape):
                stride = self.stride()  # (torch's: the same sizes keep this tensor's strides)
            if isinstance(source, Tensor):  # (torch's offset counts from the source's own)
                storage_offset = int(storage_offset) + source.storage_offset()  # (as a count)
            new = over_storage(root, self._data.dtype, storage_offset, size, stride, "set_")
        if type(root) is np.ndarray:
            STORAGES[id(root)] = root  # (its tensors report torch's storage offsets)
    else:
        raise TypeError(f"set_(): argument 'source' must be a Tensor or a storage, not "
                        f"{type(source).__name__}")
    if self._grad_fn is not None:
        # (torch lets no_grad code do it; the gradient then follows torch's internals: a
        # view's is replayed at its new place in its base's storage)
        raise RuntimeError(
            f"set_: the tensor has autograd history (grad_fn={self._grad_fn.name}), which "
            f"would no longer describe its elements; set_ a leaf or a detached tensor "
            f"(x.detach().set_(...))")
    if self._view is not None and self._view.base.requires_grad:
        raise RuntimeError(
            f"set_: the tensor is a view of a tensor that requires grad (shape "
            f"{tuple(self._view.base.shape)}); torch replays the view's history at its new "
            f"place, flowgrad does not: set_ a detached tensor (x.detach().set_(...))")
    if self.requires_grad:
        if is_grad_enabled():
            raise RuntimeError("a leaf Variable that requires grad is being used in an "
                               "in-place operation.")
    check_capture("set_", self)
    bump_version(self)
    self._data = new
    self._view = None  # (its elements are no longer its base's)
    return self


_set_.__name__ = _set_.__qualname__ = "set_"
Tensor.set_ = _set_
