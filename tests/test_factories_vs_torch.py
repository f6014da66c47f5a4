"""Tensor factories and dtype inference against torch, each row run in torch and in flowgrad
(under torch's default dtype, or float64 / float16 / bfloat16 as the row says, restored
after): the same raise or no raise, dtype, shape and values (random factories: dtype and
shape only). A probe of 7,600 calls found these, fixed:
- arange with an integer dtype and float arguments: torch truncates start, end and step to
  int64 first (arange(-1, 1, 0.25, dtype=int32) is eight -1s; flowgrad gave -1..6) and counts
  int64 ranges in those integers (arange(10, 0, -2.5, dtype=int64) has 5 values, not 4);
- linspace/logspace dropped the imaginary part of complex bounds (torch: a complex result),
  spaced integer dtypes from the untruncated bounds (logspace(2.5, -3.5, 6, dtype=int64) gave
  316, 19, ... for torch's 100, 10, ...) and wrapped out-of-range ones silently;
- tensor(data, dtype=...) turned None into nan or False and 'a' into True, and a complex NumPy
  scalar or 0-d tensor in a list into its real part;
- rand/randn in an integer or bool dtype gave zeros or truncated samples (torch refuses), and in
  a complex dtype a zero imaginary part (torch draws both parts); randint wrapped bounds the
  dtype cannot hold (uint8 300 -> 44) and refused randint(high=, size=); randperm(300,
  dtype=uint8) repeated values; normal(0.0, float64 std) was float32;
- memory_format of empty / *_like was ignored (channels_last of a 2-D tensor did not raise, the
  result did not report channels_last); window functions refused a tensor length; as_tensor of
  a tensor with another dtype left the graph; asarray refused buffer-protocol objects.
"""
from __future__ import annotations

import array
import math

import numpy as np
import pytest
import torch
from vs_torch import outcome

import flowgrad as flow


def _default(name, fn):
    """`fn` run with the default dtype `name`, the previous one restored after."""
    def call(m):
        old = m.get_default_dtype()
        m.set_default_dtype(getattr(m, name))
        try:
            return fn(m)
        finally:
            m.set_default_dtype(old)
    return call


def _shared(np_dtype, make, write):
    """A NumPy array, a tensor `make(m, a)` of it, `write(a, t)`; then both as they are."""
    def call(m):
        a = np.array([1, 0, 1, 1], dtype=np_dtype)
        t = make(m, a)
        write(a, t)
        return [t, m.from_numpy(a.copy())]
    return call


def _write_array(a, t):
    a[0] = 0


def _write_tensor(a, t):
    t[1] = 1


CL = "channels_last"
ROWS = [
    # tensor / as_tensor / asarray dtype inference, under each default dtype
    ("tensor [1, 2.0]", lambda m: m.tensor([1, 2.0])),
    ("tensor 3.0", lambda m: m.tensor(3.0)),
    ("tensor [True, 2]", lambda m: m.tensor([True, 2])),
    ("tensor [True, 2.5]", lambda m: m.tensor([True, 2.5])),
    ("tensor [1, 2j]", lambda m: m.tensor([1, 2j])),
    ("tensor [[1, 2], [3.5, 4]]", lambda m: m.tensor([[1, 2], [3.5, 4]])),
    ("tensor [[], []]", lambda m: m.tensor([[], []])),
    ("tensor ragged", lambda m: m.tensor([[1, 2], [3]])),
    ("tensor [2**63]", lambda m: m.tensor([2 ** 63])),
    ("f64 tensor [1, 2.0]", _default("float64", lambda m: m.tensor([1, 2.0]))),
    ("f64 tensor 3.0", _default("float64", lambda m: m.tensor(3.0))),
    ("f64 tensor [1, 2j]", _default("float64", lambda m: m.tensor([1, 2j]))),
    ("f64 as_tensor [1.5]", _default("float64", lambda m: m.as_tensor([1.5]))),
    ("f64 asarray [1, 2.5]", _default("float64", lambda m: m.asarray([1, 2.5]))),
    ("f16 tensor [1, 2.5]", _default("float16", lambda m: m.tensor([1, 2.5]))),
    ("bf16 tensor [1, 2.5]", _default("bfloat16", lambda m: m.tensor([1, 2.5]))),
    ("f64 int tensor * 2.5", _default("float64", lambda m: m.tensor([1, 2]) * 2.5)),
    ("f64 int tensor / 2", _default("float64", lambda m: m.tensor([1, 2]) / 2)),
    ("f64 int8 tensor * 2.5", _default("float64", lambda m: m.tensor([1, 2], dtype=m.int8) * 2.5)),
    ("f64 float32 tensor * 2.5", _default("float64", lambda m: m.ones(2, dtype=m.float32) * 2.5)),
    ("f64 int tensor + 1j", _default("float64", lambda m: m.tensor([1, 2]) + 1j)),
    ("f64 0-d int * 0-d float", _default("float64", lambda m: m.tensor(3) * m.tensor(2.5))),
    ("f64 arange(3) * 0.5", _default("float64", lambda m: m.arange(3) * 0.5)),
    ("f16 int tensor * 2.5", _default("float16", lambda m: m.tensor([1, 2]) * 2.5)),
    ("numpy scalars in a list", lambda m: m.tensor([np.float64(1.5), 2])),
    ("np.int32 and float", lambda m: m.tensor([np.int32(1), 2.0])),
    ("np.int8 and np.uint8", lambda m: m.tensor([np.int8(1), np.uint8(2)])),
    ("np.float16 and np.int64", lambda m: m.tensor([np.float16(1), np.int64(2)])),
    ("np.float32 and 1j", lambda m: m.tensor([np.float32(1.5), 1j])),
    ("np.bool_ scalar", lambda m: m.tensor(np.bool_(True))),
    ("np.complex64 scalar", lambda m: m.tensor(np.complex64(1 + 2j))),
    ("0-d tensors in a list", lambda m: m.tensor([m.tensor(1.0), m.tensor(2.0)])),
    ("0-d int tensor and float", lambda m: m.tensor([m.tensor(1), 2.5])),
    ("0-d int8 tensor and int", lambda m: m.tensor([m.tensor(1, dtype=m.int8), 2])),
    ("0-d float64 tensor and int", lambda m: m.tensor([m.tensor(1.0, dtype=m.float64), 2])),
    ("1-element tensors in a list", lambda m: m.tensor([m.tensor([1.0]), m.tensor([2.0])])),
    ("2-element tensor in a list", lambda m: m.tensor([m.tensor([1.0, 2.0])])),
    ("uint8 takes -1 from a list", lambda m: m.tensor([m.tensor(1, dtype=m.uint8), -1])),
    ("None with a dtype", lambda m: m.tensor([None], dtype=m.float16)),
    ("None among ints, bool dtype", lambda m: m.tensor([1, None], dtype=m.bool)),
    ("a str with a dtype", lambda m: m.tensor(["a"], dtype=m.bool)),
    ("complex np scalar to float", lambda m: m.tensor([np.complex64(1j)], dtype=m.float32)),
    ("complex 0-d tensor to float", lambda m: m.tensor([m.tensor(1j), 1], dtype=m.float16)),
    ("complex np scalar to float16", lambda m: m.tensor(np.complex64(1j), dtype=m.float16)),
    ("python complex to float", lambda m: m.tensor([1 + 0j], dtype=m.float32)),
    ("real complex 0-d tensor to float", lambda m: m.tensor([m.tensor(1 + 0j)], dtype=m.float32)),
    ("complex to bool", lambda m: m.tensor([1j, 0j], dtype=m.bool)),
    # NumPy arrays of every dtype
    *[(f"{fn} ndarray {nd}", (lambda fn, nd: lambda m: getattr(m, fn)(
        np.array([1, 0, 3], dtype=nd)))(fn, nd))
      for nd in ("float16", "float32", "float64", "uint8", "int8", "int16", "int32", "int64",
                 "bool", "complex64", "complex128")
      for fn in ("tensor", "as_tensor", "asarray", "from_numpy")],
    ("tensor ndarray to float64", lambda m: m.tensor(np.array([1, 0, 3], np.int8),
                                                     dtype=m.float64)),
    ("0-d ndarray", lambda m: m.tensor(np.array(2, dtype=np.int16))),
    # memory sharing: a write to either side is seen by the other, as torch
    *[(f"{name} {nd} {w.__name__}", _shared(nd, make, w))
      for nd in ("float32", "int64", "bool", "complex64")
      for name, make in (("from_numpy", lambda m, a: m.from_numpy(a)),
                         ("as_tensor", lambda m, a: m.as_tensor(a)),
                         ("asarray", lambda m, a: m.asarray(a)),
                         ("tensor copies", lambda m, a: m.tensor(a)),
                         ("asarray copy=True", lambda m, a: m.asarray(a, copy=True)),
                         ("as_tensor other dtype", lambda m, a: m.as_tensor(a, dtype=m.float64)))
      for w in (_write_array, _write_tensor)],
    ("as_tensor of a tensor other dtype keeps the graph", lambda m: [
        (t := m.as_tensor(m.ones(2, requires_grad=True), dtype=m.float64)).requires_grad,
        t.grad_fn is None]),
    ("asarray array.array", lambda m: m.asarray(array.array("d", [1.0, 2.0]))),
    ("asarray memoryview uint8", lambda m: m.asarray(memoryview(bytearray(b"abc")),
                                                     dtype=m.uint8)),
    ("asarray bytes uint8", lambda m: m.asarray(b"ab", dtype=m.uint8)),
    # zeros / ones / empty / full, full's dtype from its fill
    ("zeros(2, 3)", lambda m: m.zeros(2, 3)),
    ("f64 ones((2,))", _default("float64", lambda m: m.ones((2,)))),
    ("f16 zeros(2)", _default("float16", lambda m: m.zeros(2))),
    ("bf16 empty meta", _default("bfloat16", lambda m: m.empty(2).dtype)),
    ("zeros(-1)", lambda m: m.zeros(-1)),
    ("full bool", lambda m: m.full((2,), True)),
    ("full int", lambda m: m.full((2,), 3)),
    ("full float", lambda m: m.full((2,), 2.5)),
    ("f64 full float", _default("float64", lambda m: m.full((2,), 2.5))),
    ("full complex", lambda m: m.full((2,), 1 + 2j)),
    ("f64 full complex", _default("float64", lambda m: m.full((2,), 1j))),
    ("full 0-d int tensor fill", lambda m: m.full((2,), m.tensor(3))),
    ("full 0-d float64 tensor fill", lambda m: m.full((2,), m.tensor(2.5, dtype=m.float64))),
    ("full 2**63 into bool", lambda m: m.full((2,), 2 ** 63, dtype=m.bool)),
    ("full_like 2**63 into bool", lambda m: m.full_like(m.zeros(2, dtype=m.bool), 2 ** 63)),
    ("full 300 into uint8", lambda m: m.full((2,), 300, dtype=m.uint8)),
    ("full_like int32 of 2.5", lambda m: m.full_like(m.zeros(2, dtype=m.int32), 2.5)),
    # *_like: dtype, requires_grad, memory_format
    ("zeros_like dtype", lambda m: m.zeros_like(m.zeros(2, 3), dtype=m.int32)),
    ("ones_like requires_grad", lambda m: m.ones_like(m.zeros(2), requires_grad=True)
     .requires_grad),
    ("empty_like int requires_grad", lambda m: m.empty_like(m.zeros(2), dtype=m.int32,
                                                            requires_grad=True)),
    ("zeros_like channels_last of 2-D", lambda m: m.zeros_like(m.zeros(2, 3),
                                                               memory_format=getattr(m, CL))),
    ("full_like channels_last of 2-D", lambda m: m.full_like(m.zeros(2, 3), 1,
                                                             memory_format=getattr(m, CL))),
    ("empty channels_last of 2-D", lambda m: m.empty(2, 3, memory_format=getattr(m, CL))),
    ("empty preserve_format", lambda m: m.empty(2, 3, memory_format=m.preserve_format)),
    ("empty channels_last is channels_last", lambda m: m.empty(
        2, 3, 4, 5, memory_format=getattr(m, CL)).is_contiguous(memory_format=getattr(m, CL))),
    ("ones_like channels_last", lambda m: m.ones_like(
        m.zeros(2, 3, 4, 5), memory_format=getattr(m, CL)).is_contiguous(
        memory_format=getattr(m, CL))),
    ("zeros_like preserves channels_last", lambda m: m.zeros_like(
        m.zeros(2, 3, 4, 5).contiguous(memory_format=getattr(m, CL))).is_contiguous(
        memory_format=getattr(m, CL))),
    ("rand_like contiguous_format", lambda m: m.rand_like(
        m.zeros(2, 3, 4, 5).contiguous(memory_format=getattr(m, CL)),
        memory_format=m.contiguous_format).is_contiguous(memory_format=getattr(m, CL))),
    # arange: lengths as torch counts them, integer dtypes truncate the arguments
    *[(f"arange{args} {dt}", (lambda args, dt: lambda m: m.arange(
        *args, dtype=getattr(m, dt)))(args, dt))
      for args in ((0, 1, 0.1), (1, 2.5, 0.3), (-1, 1, 0.25), (10, 0, -2.5), (2.5,), (1, 3.5),
                   (-2.5, 3, 1.5), (1.9, 7.2, 2.9), (-5, 5, 3), (0, 1e10, 1e9), (5, 0.5, -0.5))
      for dt in ("float32", "float64", "int64", "int32", "int8", "uint8")],
    ("arange 0.1 step default", lambda m: m.arange(0, 1, 0.1)),
    ("f64 arange 0.1 step", _default("float64", lambda m: m.arange(0, 1, 0.1))),
    ("f64 arange ints", _default("float64", lambda m: m.arange(5))),
    ("arange bool dtype", lambda m: m.arange(5, dtype=m.bool)),
    ("arange complex dtype", lambda m: m.arange(5, dtype=m.complex64)),
    ("arange inconsistent step", lambda m: m.arange(0, 5, -1)),
    ("arange step 0", lambda m: m.arange(0, 5, 0)),
    ("arange 1e20 int64", lambda m: m.arange(0, 1e20, 1e19, dtype=m.int64)),
    # linspace / logspace
    *[(f"{fn}{args} {dt}", (lambda fn, args, dt: lambda m: getattr(m, fn)(
        *args, dtype=getattr(m, dt)))(fn, args, dt))
      for fn in ("linspace", "logspace")
      for args in ((0, 1, 5), (0, 1, 1), (0, 1, 0), (1, 0, 5), (2.5, -3.5, 6), (-1, 1, 7),
                   (0.5, 2, 4), (2.7, 1, 1), (0, 10, 4))
      for dt in ("float32", "float64", "int64", "int32", "uint8", "float16", "complex64")],
    ("linspace complex start", lambda m: m.linspace(1j, 2, 3)),
    ("f64 linspace complex end", _default("float64", lambda m: m.linspace(0, 1 + 1j, 3))),
    ("linspace complex 0-d tensor", lambda m: m.linspace(m.tensor(1j), 2, 3)),
    ("linspace complex with float dtype", lambda m: m.linspace(1j, 2, 3, dtype=m.float32)),
    ("linspace 1-d tensor start", lambda m: m.linspace(m.tensor([1.0]), 2, 3)),
    ("linspace bool", lambda m: m.linspace(0, 1, 5, dtype=m.bool)),
    ("linspace bool one step", lambda m: m.linspace(0, 1, 1, dtype=m.bool)),
    ("linspace tensor bounds int64", lambda m: m.linspace(m.tensor(0.5), 2, 4, dtype=m.int64)),
    ("linspace -200 int8", lambda m: m.linspace(-200, 0, 3, dtype=m.int8)),
    ("linspace nan int64", lambda m: m.linspace(math.nan, 1, 3, dtype=m.int64)),
    ("linspace negative steps", lambda m: m.linspace(0, 1, -1)),
    ("linspace 1e5 float16", lambda m: m.linspace(0, 1e5, 3, dtype=m.float16)),
    ("linspace 1e39j complex64", lambda m: m.linspace(0, 1e39j, 3, dtype=m.complex64)),
    ("linspace one step converts start only", lambda m: m.linspace(0, 7e4, 1, dtype=m.float16)),
    ("logspace complex start", lambda m: m.logspace(1j, 2, 3)),
    ("logspace base 2 complex", lambda m: m.logspace(0, 1 + 1j, 3, base=2)),
    ("logspace base -2 int64", lambda m: m.logspace(2.5, -3.5, 6, base=-2, dtype=m.int64)),
    ("logspace base -2 float", lambda m: m.logspace(0, 3, 4, base=-2)),
    ("logspace base 0.5", lambda m: m.logspace(0, 4, 5, base=0.5, dtype=m.float64)),
    ("logspace base e int64", lambda m: m.logspace(0, 10, 4, base=math.e, dtype=m.int64)),
    ("f64 logspace", _default("float64", lambda m: m.logspace(-1, 1, 5))),
    # eye, tril/triu_indices, empty_strided, scalar_tensor, complex, polar
    ("eye(2, 3)", lambda m: m.eye(2, 3)),
    ("eye(3, 0) int64", lambda m: m.eye(3, 0, dtype=m.int64)),
    ("f64 eye(3)", _default("float64", lambda m: m.eye(3))),
    ("eye(-1)", lambda m: m.eye(-1)),
    ("tril_indices(4, 3, 1)", lambda m: m.tril_indices(4, 3, 1)),
    ("triu_indices(3, 4, -2)", lambda m: m.triu_indices(3, 4, -2)),
    ("triu_indices(5, 4, 3) int32", lambda m: m.triu_indices(5, 4, 3, dtype=m.int32)),
    ("empty_strided meta", lambda m: [(x := m.empty_strided((2, 3), (1, 2))).shape, x.stride(),
                                      x.dtype]),
    ("f64 empty_strided dtype", _default("float64", lambda m: m.empty_strided((2,), (1,))
                                         .dtype)),
    ("scalar_tensor(3)", lambda m: m.scalar_tensor(3)),
    ("f64 scalar_tensor(True)", _default("float64", lambda m: m.scalar_tensor(True))),
    ("scalar_tensor(1j, bool)", lambda m: m.scalar_tensor(1j, dtype=m.bool)),
    ("scalar_tensor list", lambda m: m.scalar_tensor([1])),
    ("scalar_tensor str bool", lambda m: m.scalar_tensor("a", dtype=m.bool)),
    ("bf16 scalar_tensor(2**63)", _default("bfloat16", lambda m: m.scalar_tensor(2 ** 63))),
    ("complex float64 parts", lambda m: m.complex(m.tensor([1.0], dtype=m.float64),
                                                  m.tensor([2.0], dtype=m.float64))),
    ("complex mixed parts", lambda m: m.complex(m.tensor([1.0]), m.tensor([2.0], dtype=m.float64))),
    ("polar", lambda m: m.polar(m.tensor([1.0, 2.0]), m.tensor([0.5, 3.0]))),
    # random factories: dtype and shape
    ("rand int64", lambda m: m.rand(2, dtype=m.int64)),
    ("randn bool", lambda m: m.randn(2, dtype=m.bool)),
    ("rand complex64 meta", lambda m: m.rand(2, 3, dtype=m.complex64).dtype),
    ("f64 randn meta", _default("float64", lambda m: m.randn(2).dtype)),
    ("rand_like complex meta", lambda m: m.rand_like(m.zeros(2, dtype=m.complex64)).dtype),
    ("randn_like complex meta", lambda m: m.randn_like(m.zeros(2, dtype=m.complex128)).dtype),
    ("randint keywords", lambda m: [(x := m.randint(high=5, size=(2,))).shape, x.dtype]),
    ("randint uint8 to 300", lambda m: m.randint(0, 300, (2,), dtype=m.uint8)),
    ("randint uint8 from -1", lambda m: m.randint(-1, 1, (2,), dtype=m.uint8)),
    ("randint bool to 10", lambda m: m.randint(10, (2,), dtype=m.bool)),
    ("randint bool meta", lambda m: m.randint(2, (3,), dtype=m.bool).dtype),
    ("randint complex", lambda m: m.randint(10, (2,), dtype=m.complex64)),
    ("randint_like bool to 5", lambda m: m.randint_like(m.zeros(2, dtype=m.bool), 5)),
    ("randperm 300 uint8", lambda m: m.randperm(300, dtype=m.uint8)),
    ("randperm 256 uint8 sorted", lambda m: m.randperm(256, dtype=m.uint8).sort().values),
    ("randperm bool", lambda m: m.randperm(5, dtype=m.bool)),
    ("randperm complex", lambda m: m.randperm(5, dtype=m.complex64)),
    ("randperm 2050 float16", lambda m: m.randperm(2050, dtype=m.float16)),
    ("normal float64 std meta", lambda m: m.normal(0.0, m.ones(3, dtype=m.float64)).dtype),
    ("normal mean and std meta", lambda m: m.normal(m.zeros(3, dtype=m.float64), m.ones(3))
     .dtype),
    ("normal broadcast meta", lambda m: m.normal(m.zeros(2, 1), m.ones(3)).shape),
    ("normal int mean", lambda m: m.normal(m.zeros(3, dtype=m.int64), 2.0)),
    # window functions
    *[(f"{fn}({n}, {periodic}) {dt}", (lambda fn, n, periodic, dt: lambda m: getattr(m, fn)(
        n, periodic, dtype=getattr(m, dt)))(fn, n, periodic, dt))
      for fn in ("hann_window", "hamming_window", "blackman_window", "bartlett_window",
                 "kaiser_window")
      for n in (0, 1, 2, 5, 8)
      for periodic in (True, False)
      for dt in ("float32", "float64")],
    *[(f"{fn} {what}", (lambda fn, make: lambda m: make(m, getattr(m, fn)))(fn, make))
      for fn in ("hann_window", "bartlett_window", "kaiser_window")
      for what, make in (("tensor length", lambda m, f: f(m.tensor(4))),
                         ("np.int64 length", lambda m, f: f(np.int64(4))),
                         ("bool length", lambda m, f: f(True)),
                         ("float length", lambda m, f: f(4.0)),
                         ("negative length", lambda m, f: f(-1)),
                         ("int64 dtype", lambda m, f: f(4, dtype=m.int64)),
                         ("complex 1 point", lambda m, f: f(1, dtype=m.complex64)),
                         ("complex 3 points", lambda m, f: f(3, dtype=m.complex64)),
                         ("f64 default", _default("float64", lambda m: getattr(m, fn)(5))))],
    ("hamming alpha beta", lambda m: m.hamming_window(6, False, 0.3, 0.2, dtype=m.float64)),
    ("kaiser beta 5", lambda m: m.kaiser_window(7, False, 5.0, dtype=m.float64)),
]


def _summary(value):
    if isinstance(value, (list, tuple)):
        return [_summary(v) for v in value]
    if hasattr(value, "detach") and hasattr(value, "dtype"):
        dtype = str(value.dtype).split(".")[-1]
        v = value.detach()
        v = v.float() if dtype == "bfloat16" else v
        return ("tensor", dtype, np.asarray(v.numpy()))
    if type(value).__name__ in ("dtype", "Size", "memory_format"):
        return str(value).split(".")[-1]
    return value


# a few ulps of the dtype, relative to the largest value (torch's fused multiply-adds leave
# 1e-17 where a linspace crosses 0)
_RTOL = {"float16": 2e-3, "bfloat16": 8e-3, "float32": 1e-6, "complex64": 2e-6}


def _assert_same(got, want):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            _assert_same(g, w)
    elif isinstance(want, tuple) and want[0] == "tensor":
        assert got[:2] == want[:2] and got[2].shape == want[2].shape, (got, want)
        rtol = _RTOL.get(want[1], 1e-12)
        finite = np.abs(want[2][np.isfinite(want[2])]) if want[2].dtype.kind in "fc" else []
        atol = rtol * max(1.0, float(np.max(finite))) if len(finite) else 0
        np.testing.assert_allclose(got[2], want[2], rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert got == want


@pytest.mark.parametrize("row", [r[1] for r in ROWS], ids=[r[0] for r in ROWS])
def test_factory_as_torch(row):
    want, torch_error = outcome(lambda: row(torch))
    got, error = outcome(lambda: row(flow))
    assert (torch_error is None) == (error is None), (torch_error, error)
    assert torch.get_default_dtype() is torch.float32 and flow.get_default_dtype() is flow.float32
    if torch_error is None:
        _assert_same(_summary(got), _summary(want))


def test_complex_samples_fill_both_parts_as_torch():
    """rand: each part uniform on [0, 1); randn: each part N(0, 1/2). Compared by moments."""
    for name, dtype in (("rand", "complex64"), ("randn", "complex128")):
        stats = []
        for m in (torch, flow):
            m.manual_seed(0)
            z = getattr(m, name)(20000, dtype=getattr(m, dtype))
            parts = [z.real.double(), z.imag.double()]
            stats.append([v for p in parts for v in (p.mean().item(), p.std().item())])
        np.testing.assert_allclose(stats[1], stats[0], atol=0.02)


@pytest.mark.parametrize("make", [lambda m: m.tensor([1 + 2j, 3j]),
                                  lambda m: np.array([1 + 2j, 3j]),
                                  lambda m: [np.complex64(1 + 2j), np.complex64(3j)]],
                         ids=["tensor", "ndarray", "numpy scalars"])
def test_complex_data_to_real_dtype_warns_as_torch(make):
    """torch keeps the real part with a warning (torch's own is raised once per process, so
    only flowgrad's is checked here)."""
    want, _ = outcome(lambda: torch.tensor(make(torch), dtype=torch.float32))
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        got = flow.tensor(make(flow), dtype=flow.float32)
    assert got.tolist() == want.tolist()


def test_factory_errors_name_the_call():
    with pytest.raises(RuntimeError, match=r"randint\(\): to - 1 = 299 is out of bounds for "
                                           r"uint8"):
        flow.randint(0, 300, (2,), dtype=flow.uint8)
    with pytest.raises(RuntimeError, match=r"linspace\(\): inferred dtype complex64 can't be "
                                           r"safely cast to passed dtype float32"):
        flow.linspace(1j, 2, 3, dtype=flow.float32)
    with pytest.raises(TypeError, match=r"tensor\(\): element None of type NoneType is not a "
                                        r"number"):
        flow.tensor([1, None], dtype=flow.float32)
    with pytest.raises(ValueError, match=r"arange\(\): step must be nonzero, but step=0.5 "
                                         r"truncates to 0"):
        flow.arange(0, 2, 0.5, dtype=flow.int64)


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window"])
def test_float64_window_zeros_exact_as_torch(name):
    """Where torch's float64 window is exactly 0 (blackman's ends), flowgrad's is too, not
    -1.4e-17: a negative window value breaks sqrt(window) and log(window)."""
    for n in range(2, 10):
        for periodic in (True, False):
            want = getattr(torch, name)(n, periodic, dtype=torch.float64).numpy()
            got = getattr(flow, name)(n, periodic, dtype=flow.float64).numpy()
            assert ((got == 0) == (want == 0)).all() and (got >= 0).all(), (n, periodic, got)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window"])
def test_half_precision_window_equals_torch(name, dtype):
    """torch rounds every step of a float16/bfloat16 window to the dtype; flowgrad takes the
    same steps, so the values are equal, not a rounding apart."""
    for n in (2, 3, 5, 8, 33):
        for periodic in (True, False):
            want = getattr(torch, name)(n, periodic, dtype=getattr(torch, dtype)).float()
            got = getattr(flow, name)(n, periodic, dtype=getattr(flow, dtype)).float()
            assert got.tolist() == want.tolist(), (n, periodic)


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16", "int64",
                                  "uint8", "complex64", "complex128"])
def test_linspace_bit_for_bit_as_torch(name):
    """torch's CPU kernel evaluates start + step * i (and end - step * (n - 1 - i)) as one
    fused multiply-add in float32/float64 (per component for complex, in float64 for
    integers) and rounds every operation in float16/bfloat16; flowgrad rounded twice, so most
    random calls differed from torch by an ulp somewhere (and histogram's edges with them)."""
    rng = np.random.default_rng(5)
    for _ in range(60):
        a, b = rng.standard_normal(2) * 10 ** rng.uniform(-3, 3, 2)
        if name.startswith("complex"):
            a, b = complex(a, b / 3), complex(b, a)
        elif not name.startswith(("float", "bfloat")):
            a, b = abs(a * 10) % 250, abs(b * 10) % 250
        n = int(rng.integers(2, 3000))
        want = torch.linspace(a, b, n, dtype=getattr(torch, name))
        got = flow.linspace(a, b, n, dtype=getattr(flow, name))
        if name == "bfloat16":
            want, got = want.double(), got.double()
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_float_arange_bit_for_bit_as_torch(name):
    """torch's arange writes 32-byte vectors in pairs from a per-vector base, the tail one by
    one, with fused multiply-adds in the accumulate type; flowgrad computed start + step * i
    in float64 and differed from torch by an ulp somewhere in nearly every random call.
    (bfloat16: one ulp allowed where a value cancels to near 0; 1 call in 300 measured.)"""
    rng = np.random.default_rng(11)
    for k in range(80):
        a = float(rng.uniform(-50, 50) * 10 ** rng.uniform(-3, 2))
        step = float(rng.uniform(0.01, 3) * 10 ** rng.uniform(-3, 2)) * (1 if k % 3 else -1)
        end = a + step * int(rng.integers(1, 3000))
        want = torch.arange(a, end, step, dtype=getattr(torch, name)).double().numpy()
        got = flow.arange(a, end, step, dtype=getattr(flow, name)).double().numpy()
        assert got.shape == want.shape
        if name == "bfloat16":
            np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=2 ** -7)
        else:
            np.testing.assert_array_equal(got, want)
