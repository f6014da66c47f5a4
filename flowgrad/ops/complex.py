"""Complex tensors: real/imag (views, as torch's), conj, angle, sgn, view_as_real,
view_as_complex, complex, polar, and the audit list of ops that accept complex inputs.

Gradients follow torch's convention (conjugate Wirtinger): for a real loss L of z = x + iy,
z.grad is dL/dx + i dL/dy. A holomorphic op f passes back dy * conj(f'(z)), so the rules of
mul, exp, matmul... conjugate the factor they multiply by; `conj(t)` below is the identity
on real tensors, so those rules cost nothing more for real ones.

>>> import flowgrad as flow
>>> z = flow.tensor([3 + 4j], requires_grad=True)
>>> z.abs().sum().backward(); z.grad
tensor([0.6000+0.8000j])
"""
from __future__ import annotations

import builtins

from .. import dtypes as _dt
from ..autograd.grad_mode import is_grad_enabled
from ..autograd.inplace import run_inplace
from ..errors import check_same_dtype, expect_tensor, matrix_dims
from ..tensor import Tensor, tensor_method
from .creation import zeros_like
from .registry import REGISTRY, op

__all__ = ["real", "imag", "conj", "conj_physical", "is_complex", "is_conj", "angle", "sgn",
           "view_as_real", "view_as_complex", "complex", "polar", "adjoint", "isreal",
           "is_neg"]


def is_complex(input) -> bool:
    """True for complex64/complex128 tensors.

    >>> import flowgrad as flow
    >>> flow.is_complex(flow.tensor([1j])), flow.is_complex(flow.ones(1))
    (True, False)
    """
    return input._data.dtype.kind == "c"


def is_conj(input) -> bool:
    """Always False: conj() materialises the conjugate here (torch may return a lazy view)."""
    expect_tensor("is_conj", input)
    return False


def is_neg(input) -> bool:
    """Always False: there are no lazy negative views here."""
    expect_tensor("is_neg", input)
    return False


def isreal(input):
    """True where an element's imaginary part is 0 (everywhere for real tensors).

    >>> import flowgrad as flow
    >>> flow.isreal(flow.tensor([1 + 0j, 1j]))
    tensor([ True, False])
    """
    if input._data.dtype.kind != "c":
        return input.new_ones(input.shape, dtype=_dt.bool)
    return imag(input) == 0


# ---- conj ------------------------------------------------------------------------------------
@op("conj_physical", complex=True)
def _conj_physical(xp, x):
    return xp.conj(x)


@_conj_physical.grad
def conj_physical_backward(ctx, dy):
    return conj(dy)


def conj(input):
    """The complex conjugate; a real tensor itself (as torch). Unlike torch's lazy conj view,
    the result is a new tensor (`is_conj()` is always False), so writes to it do not reach
    `input`.

    >>> import flowgrad as flow
    >>> flow.conj(flow.tensor([1 + 2j]))
    tensor([1.-2.j])
    """
    return _conj_physical(input) if input._data.dtype.kind == "c" else input


def conj_physical(input):
    """The complex conjugate as a new tensor; a real tensor itself, as torch's.

    >>> import flowgrad as flow
    >>> flow.conj_physical(flow.tensor([1 - 1j]))
    tensor([1.+1.j])
    """
    return _conj_physical(input) if input._data.dtype.kind == "c" else input


def adjoint(input):
    """The conjugate transpose of the last two dims (`x.mH`).

    >>> import flowgrad as flow
    >>> flow.adjoint(flow.tensor([[1j, 2.0]]))
    tensor([[0.-1.j],
            [2.-0.j]])
    """
    return conj(input).mT


# ---- real and imaginary parts: views of the complex storage ----------------------------------
@op("real", is_view=True, complex=True)
def _real(xp, x):
    return x.real


@_real.grad
def real_backward(ctx, dy):
    return dy.to(_dt.to_complex(dy.dtype))


@op("imag", is_view=True, complex=True)
def _imag(xp, x):
    return x.imag


@_imag.grad
def imag_backward(ctx, dy):
    return _complex(dy.new_zeros(()), dy)


def real(input):
    """The real part, a view of a complex tensor's storage (writes reach it); a real tensor
    itself.

    >>> import flowgrad as flow
    >>> flow.real(flow.tensor([1 + 2j, 3 - 4j]))
    tensor([1., 3.])
    """
    return _real(input) if input._data.dtype.kind == "c" else input


def imag(input):
    """The imaginary part, a view of a complex tensor's storage (writes reach it).

    >>> import flowgrad as flow
    >>> flow.imag(flow.tensor([1 + 2j, 3 - 4j]))
    tensor([ 2., -4.])
    """
    if input._data.dtype.kind != "c":
        raise RuntimeError(f"imag is not implemented for tensors with non-complex dtypes (got "
                           f"{input.dtype}); use a complex tensor, or zeros_like for a real one")
    return _imag(input)


# ---- complex from parts ------------------------------------------------------------------------
@op("complex", complex=True, layout="elementwise")
def _complex(xp, re, im):
    out = xp.empty(xp.broadcast_shapes(re.shape, im.shape),
                   xp.complex128 if re.dtype == xp.float64 else xp.complex64)
    out.real, out.imag = re, im
    return out


@_complex.grad
def complex_backward(ctx, dy):
    return real(dy), imag(dy)


def complex(real, imag):
    """real + i imag, from two float tensors of one dtype (broadcasting).

    >>> import flowgrad as flow
    >>> flow.complex(flow.tensor([1.0, 2.0]), flow.tensor([0.5, -1.0]))
    tensor([1.+0.5000j, 2.-1.0000j])
    """
    for name, t in (("real", real), ("imag", imag)):
        if not isinstance(t, Tensor) or t._data.dtype.kind != "f" or t._data.itemsize < 4:
            raise RuntimeError(f"complex: expected {name} to be a float32 or float64 tensor, "
                               f"got {getattr(t, 'dtype', type(t).__name__)}")
    if real._data.dtype != imag._data.dtype:
        raise RuntimeError(f"complex: expected real and imag to have the same dtype, but got "
                           f"{real.dtype} and {imag.dtype}; cast one with .to()")
    _dt.complex_in_use()
    return _complex(real, imag)


def polar(abs, angle):
    """abs * (cos(angle) + i sin(angle)).

    >>> import flowgrad as flow
    >>> flow.polar(flow.tensor([2.0]), flow.tensor([0.0]))
    tensor([2.+0.j])
    """
    check_same_dtype("polar", abs, angle=angle)
    if abs._data.dtype.kind != "f" or abs._data.itemsize < 4:  # as torch (cos would promote)
        raise RuntimeError(f"polar: expected abs and angle to be float32 or float64 tensors, "
                           f"but got {abs.dtype} and {angle.dtype}; convert them with .float()")
    return complex(abs * angle.cos(), abs * angle.sin())


# ---- view_as_real / view_as_complex ----------------------------------------------------------
@op("view_as_real", is_view=True, complex=True)
def _view_as_real(xp, x):
    return x[..., None].view(x.real.dtype)


@_view_as_real.grad
def view_as_real_backward(ctx, dy):
    return view_as_complex(dy.contiguous())


@op("view_as_complex", is_view=True)
def _view_as_complex(xp, x):
    return x.view(xp.complex128 if x.dtype == xp.float64 else xp.complex64)[..., 0]


@_view_as_complex.grad
def view_as_complex_backward(ctx, dy):
    return view_as_real(dy)


def view_as_real(input):
    """A complex tensor as a real one with a last dim of 2 (real, imag): a view.

    >>> import flowgrad as flow
    >>> flow.view_as_real(flow.tensor([1 + 2j]))
    tensor([[1., 2.]])
    """
    if input._data.dtype.kind != "c":
        raise RuntimeError(f"view_as_real is only supported for complex tensors, got "
                           f"{input.dtype}")
    return _view_as_real(input)


def view_as_complex(input):
    """A float tensor whose last dim is 2 (real, imag) as a complex one: a view.

    >>> import flowgrad as flow
    >>> flow.view_as_complex(flow.tensor([[1.0, 2.0]]))
    tensor([1.+2.j])
    """
    a = input._data
    if a.dtype.kind != "f" or a.itemsize < 4:
        raise RuntimeError(f"view_as_complex is only supported for float32 and float64 "
                           f"tensors, but got a tensor of type {input.dtype}")
    if a.ndim == 0 or a.shape[-1] != 2:
        raise RuntimeError(f"view_as_complex: Tensor must have a last dimension of size 2, "
                           f"got shape {tuple(a.shape)}")
    phys = input
    while getattr(phys, "_phys", None) is not None:  # (under vmap: the examples' own strides)
        phys = phys._phys
    strides = phys._data.strides[phys._data.ndim - a.ndim:]
    if strides[-1] != a.itemsize or any(s % (2 * a.itemsize) for s in strides[:-1]):
        raise RuntimeError(f"view_as_complex: Tensor must have a last dimension with stride 1 "
                           f"and other strides divisible by 2 (strides "
                           f"{tuple(s // a.itemsize for s in strides)}); call .contiguous() "
                           f"first")
    _dt.complex_in_use()
    return _view_as_complex(input)


# ---- angle and sgn -------------------------------------------------------------------------------
@op("angle", save="inputs", complex=True)
def _angle(xp, x):
    if x.dtype.kind == "c":  # (C-ordered, as torch's complex kernel; a real x keeps its order)
        return xp.ascontiguousarray(xp.angle(x))
    # torch: 0 for x >= 0 (+inf too), pi for x < 0, nan kept
    r = xp.where(x < 0, xp.asarray(xp.pi, x.dtype), xp.zeros((), x.dtype))
    return xp.where(xp.isnan(x), x, r)


@_angle.grad
def angle_backward(ctx, dy):
    (z,) = ctx.inputs
    if not z.is_complex():
        return zeros_like(dy)  # torch's zeros (dy * 0.0 would keep dy's nan and inf)
    # d angle: dy * i z / |z|^2, 0 at z == 0 (torch's angle_backward)
    a2 = real(z * conj(z))
    return (dy * z / a2.masked_fill(a2 == 0, 1.0) * 1j).masked_fill(z == 0, 0.0)


def angle(input):
    """The argument (phase) of each element, in radians; for real tensors 0 or pi.

    >>> import flowgrad as flow
    >>> flow.angle(flow.tensor([1j, -1.0]))
    tensor([1.5708, 3.1416])
    """
    if input._data.dtype.kind not in "fVc":  # ints and bools: in the default float dtype
        input = input.to(_dt.get_default_dtype())
    return _angle(input)


def real_sign(xp, x):
    """The sign of a real array with torch's sign(nan) = 0 (NumPy's is nan), so abs's and l1's
    gradients at a nan are 0, as torch's."""
    if x.dtype.kind == "V":  # bfloat16: NumPy's nan_to_num passes it through; torch's formula
        return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)
    out = xp.sign(x)
    if out.dtype.kind == "f":  # (a 0-d input gives a NumPy scalar: no in-place there)
        out = xp.nan_to_num(out, copy=not isinstance(out, xp.ndarray), nan=0.0)
    return out


@op("sgn", save="inputs outputs", complex=True)
def _sgn(xp, x):
    if x.dtype.kind != "c":
        return real_sign(xp, x)
    a = xp.abs(x)
    return xp.where(a == 0, xp.zeros((), x.dtype), x / xp.where(a == 0, 1, a))


@_sgn.grad
def sgn_backward(ctx, dy):
    (z,), s = ctx.inputs, ctx.out
    if not z.is_complex():  # (torch's: a zero tensor, without history, nan inputs too)
        return zeros_like(dy)
    a = z.abs()
    # (dy - s Re(conj(s) dy)) / |z|: only the tangential part of dy moves z / |z|
    g = (dy - s * real(conj(s) * dy)) / a.masked_fill(a == 0, 1.0)
    return g.masked_fill(a == 0, 0.0)


def sgn(input):
    """z / |z| for complex tensors (0 at 0); sign() for real ones.

    >>> import flowgrad as flow
    >>> flow.sgn(flow.tensor([3 + 4j, 0j]))
    tensor([0.6000+0.8000j, 0.0000+0.0000j])
    """
    if input._data.dtype.kind != "c" and not (input.requires_grad and is_grad_enabled()):
        return input.sign()  # (a Tensor method: elementwise.py builds on this module)
    # (a real input that records: torch's SgnBackward0 saves it, so a write to it after the
    # op fails the backward, where sign's node saves nothing; its gradient is 0 in both)
    return _sgn(input)


# ---- Tensor methods ---------------------------------------------------------------------------
for _fn in (conj, conj_physical, is_complex, is_conj, is_neg, isreal, angle, sgn, adjoint):
    tensor_method(_fn.__name__)(_fn)
Tensor.__complex__ = lambda self: builtins.complex(self._one_value("complex()"))
Tensor.conj_physical_ = lambda self: run_inplace("conj_physical_", conj_physical, self)
Tensor.sgn_ = lambda self: run_inplace("sgn_", sgn, self)
# `x.real = v` writes v into the view, broadcast and recorded as copy_ is (torch's setters)
Tensor.real = property(real, lambda self, value: real(self).copy_(value),
                       doc="The real part (a view for complex tensors); settable.")
Tensor.imag = property(imag, lambda self, value: imag(self).copy_(value),
                       doc="The imaginary part, a view (complex tensors only); settable.")
Tensor.mH = property(lambda self: conj(self) if matrix_dims(self, "mH") else adjoint(self),
                     doc="The conjugate transpose of the last two dims.")
Tensor.H = property(lambda self: conj(self) if matrix_dims(self, "H", batches=False) else
                    conj(self).T, doc="The conjugate transpose of a matrix.")
Tensor.cfloat = lambda self, memory_format=None: self.to(_dt.complex64,
                                                         memory_format=memory_format)
Tensor.cdouble = lambda self, memory_format=None: self.to(_dt.complex128,
                                                          memory_format=memory_format)

# Ops of other families audited for complex inputs: their rules are linear in dy with real
# coefficients (moving, selecting, summing, casting), so torch's convention needs no conj.
_LINEAR_IN_DY = (
    "reshape", "view_dtype", "permute", "expand", "clone", "cast", "cat", "view_scatter",
    "split", "getitem", "getitem_backward", "index", "index_backward", "setitem", "take_flat",
    "gather_flat",
    "put_flat", "dim_flat", "flat_mask", "flat_nonzero", "flat_count", "flip", "roll",
    "repeat", "tril", "triu", "diagonal", "diag_embed", "fill", "pad_constant", "sum_to", "sum",
    "mean", "cumsum", "eq", "ne", "isnan", "isinf", "isfinite", "logical_not", "nonzero",
    "logical_and", "logical_or", "logical_xor", "all", "any", "count_nonzero",  # (nonzero: True)
)


def mark_complex_ops():
    """Called by flowgrad.ops once every family is registered."""
    for name in _LINEAR_IN_DY:
        REGISTRY[name].complex = True


def complex_power(xp, a, b):
    """a ** b of complex arrays as torch's kernel computes it where a is 0: exp(b * log(a)),
    C99's cexp of the plain product with log(0) = -inf (0 ** 0j is nan, 0 ** (-2 + 0j)
    inf+nanj, 0 ** (2 + 0j) 0-0j); NumPy's power gives 1, nan and 0 there. Elsewhere NumPy's
    power (exact for integer exponents)."""
    r = a ** b
    zero = a == 0
    if zero.any():
        with xp.errstate(all="ignore"):
            r = xp.where(zero, xp.exp(b * xp.log(a)), r)
    return r
