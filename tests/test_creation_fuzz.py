"""Random data through random tensor factories and conversions, in torch and in flowgrad: the
same raise or no raise (and exception type), dtype, shape, values, requires_grad, memory
shared with the source exactly where torch shares it, and warnings: see tests/creation_fuzz.py.

The fuzz found, fixed:
- tensor(floats, dtype=<integer>) wrapped what torch refuses: -1.0 or -0.5 into uint8 gave 255,
  nan gave NumPy's ValueError and 3.5e38 into int32 the "Python int beyond int64" ValueError
  (torch: RuntimeError, value cannot be converted without overflow);
- casts (x.int(), x.to(float16), tensor(a, dtype=...)) leaked NumPy's RuntimeWarning for inf,
  nan and out-of-range values and its ComplexWarning for complex -> real (torch: silent, and
  its own UserWarning, once);
- float()/int() of a complex tensor raised Python's TypeError even for 1.5+0j (torch: the real
  part; a RuntimeError when the imaginary part is not 0);
- full(4, x) / x.new_full(4, v) took an int size (torch: TypeError, a tuple of ints), and
  full(size, 2**63, dtype=bfloat16) raised TypeError (torch: 9.2234e+18);
- int() of a complex tensor beyond int64 (-inf+0j, 1e30+0j) gave Python's OverflowError or a
  huge int (torch: RuntimeError);
- tensor([0-d tensors], dtype=<integer>) wrapped what torch refuses ([tensor(-2**63)] into
  int8 gave 0): each 0-d tensor's value is range-checked as torch's item() conversion is;
- x.new_tensor(a tensor) gave no warning (torch: "To copy construct from a tensor, it is
  recommended to use sourceTensor.detach().clone() ...", as tensor(a tensor) gives);
- tensor(complex, dtype=bool) dropped the imaginary part first (tensor(0.001j) -> False; torch:
  True, nonzero), and a nest with a NumPy complex in it was made floats before the range
  check (300 -> 44 in uint8);
- float()/int()/item() of a tensor requiring grad and asarray(such a tensor) without
  requires_grad= gave none of torch's (once a process) warnings;
- arange with a complex bound raised TypeError (torch: RuntimeError; a 0 imaginary part is
  taken); asarray(NumPy scalar, copy=False) raised ValueError (torch: RuntimeError).
"""
from __future__ import annotations

import math
import re
import subprocess
import sys
import warnings

import creation_fuzz as cf
import fuzz_common
import numpy as np
import pytest
import torch
from vs_torch import outcome

import flowgrad as flow
from flowgrad import _warn

# (what the verdict says, why the difference stays): torch behaviour we deliberately do not
# copy, where both refuse or torch's refusal is an accident of its implementation
KNOWN = [
    (r"value: nan/inf differ: flowgrad array\(\[inf\+0\.j\]",
     "logspace to a huge exponent in complex: torch's inf+nanj (complex pow overflow), flowgrad "
     "inf+0j"),
    (r"torch raised ValueError: can't alias tensor with dtype '\w+' into dtype '\w+'\.; "
     r"flowgrad (ran|RuntimeError: only tensors of floating point)",
     "torch.asarray(a NumPy scalar, dtype=<another>, copy=True) raises 'can't alias' although "
     "copy=True asks for a copy (a torch bug); flowgrad copies (and refuses requires_grad "
     "of an integer copy, as torch does once past its bug: seed 10102155)"),
    (r"^shares memory with the source: flowgrad True, torch False",
     "torch.asarray(a 0-d NumPy array, copy=False) copies it (breaking copy=False's promise); "
     "flowgrad shares it as copy=False asks (only 0-d arrays: others share in both)"),
    (r"torch raised NotImplementedError: \"arange_cpu\" not implemented for '(ComplexDouble|"
     r"ComplexFloat|Bool)'; flowgrad (RuntimeError|TypeError)",
     "arange in a complex or bool dtype from a bad range: torch's NotImplementedError for the "
     "dtype, flowgrad's error for the range; both refuse"),
]


def _known(verdict):
    return next((why for pattern, why in KNOWN if re.search(pattern, verdict)), None)


def _check(seed):
    """The seed's verdict unless KNOWN explains it."""
    verdict = cf.check(seed)
    return None if verdict is None or _known(verdict) else verdict


@pytest.mark.parametrize("seed", range(300))
def test_creation_case_matches_torch(seed):
    verdict = _check(seed)
    assert verdict is None, f"{cf.generate(seed)}\n{verdict}"


@pytest.mark.slow
def test_many_creation_cases_match_torch():
    fuzz_common.assert_seeds_agree(_check, range(300, 4000))


def _same_outcome(make, numpy=True):
    """Assert flowgrad raises torch's exception type where torch raises; else (flowgrad's
    result, torch's), as arrays when `numpy`."""
    (want, t_err), (got, f_err) = (outcome(lambda m=m: make(m)) for m in (torch, flow))
    assert (f_err is None) == (t_err is None), (t_err, f_err)
    if t_err is not None:
        assert isinstance(f_err, type(t_err)), (t_err, f_err)
        return None
    return (got.numpy(), want.numpy()) if numpy else (got, want)


@pytest.mark.parametrize("value, dtype", [
    ([-1.0], "uint8"), ([-0.5], "uint8"), ([255.5], "uint8"), ([float("nan")], "int32"),
    ([float("inf")], "int64"), ([3.5e38, 1], "int32"), ([1e20], "int64"),
    ([[-129.0]], "int8"), ([-1, 2.5], "uint8"), ([-0.0, 255.0], "uint8"), ((127.0,), "int8")])
def test_tensor_checks_floats_going_into_an_integer_dtype(value, dtype):
    # -1.0 into uint8 gave 255 and nan NumPy's ValueError; torch checks every float
    got = _same_outcome(lambda m: m.tensor(value, dtype=getattr(m, dtype)))
    if got is not None:
        np.testing.assert_array_equal(*got)


def _warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [w.category for w in caught]


@pytest.mark.parametrize("make", [
    lambda m: m.tensor([float("inf"), float("nan")]).int(),
    lambda m: m.tensor([1e300], dtype=m.float64).to(m.float16),
    lambda m: m.tensor([1e300], dtype=m.float64).float(),
    lambda m: m.tensor([[3.5e38, 0.5]], dtype=m.float32),
    lambda m: m.tensor([1.0]).new_tensor([7, 3.5e38]),
    lambda m: m.tensor(np.array([np.inf, np.nan]), dtype=m.int64),
    lambda m: m.tensor([1 + 1j, 2j]).type(m.float64),
    lambda m: m.tensor([1 + 1j]).bool()])
def test_casts_give_no_numpy_warnings(make):
    # NumPy's RuntimeWarning (overflow/invalid in cast) and ComplexWarning leaked out of casts
    want, _ = _warnings(lambda: make(torch))
    got, categories = _warnings(lambda: make(flow))
    assert all(c is UserWarning for c in categories), categories
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


@pytest.mark.parametrize("value", [1.5 + 0j, -0j, 2.5 - 0j, 1 + 1j, 1j, complex("nan+1j"),
                                   complex("-inf"), 1e30 + 0j, complex("nan")])
@pytest.mark.parametrize("convert", [float, int, complex, bool])
def test_python_numbers_of_a_complex_tensor(value, convert):
    # float(tensor(1.5+0j)) raised Python's TypeError; torch gives 1.5 (RuntimeError for 1+1j)
    got = _same_outcome(lambda m: convert(m.tensor(value)), numpy=False)
    if got is not None:
        assert repr(got[0]) == repr(got[1])


@pytest.mark.parametrize("make", [lambda m: m.full(4, 1.0), lambda m: m.full(0, 2),
                                  lambda m: m.ones(2).new_full(3, 0.5),
                                  lambda m: m.full(m.Size([2]), 1.0),
                                  lambda m: m.full([2, 1], True),
                                  lambda m: m.full([2, 1], 2 ** 63, dtype=m.bfloat16).float(),
                                  lambda m: m.full([2], 2 ** 64 - 1, dtype=m.complex64)])
def test_full_wants_a_sequence_size(make):
    # full(4, x) and new_full(4, x) made a 4-vector where torch raises TypeError
    got = _same_outcome(make)
    if got is not None:
        np.testing.assert_array_equal(*got)


@pytest.mark.parametrize("make", [
    lambda m: m.as_tensor([m.tensor(1), m.tensor(-2 ** 63)], dtype=m.int8),
    lambda m: m.tensor([m.tensor(300)], dtype=m.uint8),
    lambda m: m.tensor([m.tensor(-1), m.tensor(3)], dtype=m.uint8),
    lambda m: m.tensor([m.tensor(2 ** 40), m.tensor(7)], dtype=m.int32),
    lambda m: m.tensor([[m.tensor(5)], [m.tensor(-128)]], dtype=m.int8),
    # a 0-d tensor that overflows before a NumPy complex: torch's first refusal is the
    # overflow (RuntimeError; flowgrad's walk in torch's order skipped tensors: seed 10903410)
    lambda m: m.tensor([m.tensor(2 ** 31 - 1, dtype=m.int32), np.complex128(1 - 2j)],
                       dtype=m.int8)])
def test_a_list_of_0d_tensors_is_range_checked(make):
    # the 0-d tensors' values were cast by NumPy, wrapping -2**63 into int8's 0
    got = _same_outcome(make)
    if got is not None:
        np.testing.assert_array_equal(*got)


@pytest.mark.parametrize("make", [
    lambda m: m.arange(1j), lambda m: m.arange(0, 2 - 1j), lambda m: m.arange(0, 5, 1j),
    lambda m: m.arange(3 + 0j), lambda m: m.arange(0, 5, 2 + 0j),
    lambda m: m.arange(m.tensor(2 + 0j)), lambda m: m.arange(m.tensor(1j)),
    lambda m: m.asarray(np.int64(1), copy=False), lambda m: m.asarray(np.float32(1), copy=False),
    lambda m: m.asarray([1, 2], copy=False)])
def test_complex_ranges_and_aliasing_scalars_raise_torchs_type(make):
    # arange(1j) raised TypeError and asarray(np scalar, copy=False) ValueError
    got = _same_outcome(make)
    if got is not None:
        np.testing.assert_array_equal(*got)


@pytest.mark.parametrize("value, dtype", [
    (np.float64("inf"), "int64"), (np.float64("nan"), "int32"), (np.float64(-1.0), "uint8"),
    (np.float64(300.0), "int8"), (np.int64(300), "int8"), (np.float64(2.5), "int64"),
    (np.int64(-1), "uint8")])
@pytest.mark.parametrize("make", ["tensor", "as_tensor", "new_tensor", "asarray"])
def test_a_numpy_scalar_into_an_integer_dtype_is_range_checked(make, value, dtype):
    # creation_fuzz seed 5004902: tensor(np.float64(inf), dtype=int64) was -2**63 and
    # np.float64(-1.0) into uint8 255 where torch raises (a nest's numbers were checked, a
    # bare NumPy scalar not); torch's asarray casts it as an array, wrapping
    def call(m):
        if make == "new_tensor":
            return m.zeros(1).new_tensor(value, dtype=getattr(m, dtype))
        return getattr(m, make)(value, dtype=getattr(m, dtype))
    got = _same_outcome(call)
    if got is not None:
        np.testing.assert_array_equal(*got)


@pytest.mark.parametrize("make", [
    lambda m: m.arange(float("nan"), dtype=m.bool), lambda m: m.arange(0, 5, 0, dtype=m.bool),
    lambda m: m.arange(5, 0, dtype=m.complex64), lambda m: m.arange(1 + 2j, dtype=m.bool),
    lambda m: m.arange(False, True, True), lambda m: m.arange(float("inf"), dtype=m.int32)])
def test_arange_refuses_its_dtype_before_its_range(make):
    # creation_fuzz seed 5001546: arange(nan, dtype=bool) raised the range's RuntimeError,
    # torch's NotImplementedError for the dtype; arange(False, True, True) refused (int64)
    got = _same_outcome(make)
    if got is not None:
        np.testing.assert_array_equal(*got)
        assert got[0].dtype == got[1].dtype


@pytest.mark.parametrize("data", [lambda m: m.ones(2), lambda m: m.tensor(3),
                                  lambda m: m.zeros(2, requires_grad=True)])
def test_new_tensor_of_a_tensor_warns_as_torch(data):
    # torch recommends detach().clone() for new_tensor(tensor) as for tensor(tensor)
    (want, t_cats), (got, f_cats) = (_warnings(lambda m=m: m.ones(1).new_tensor(data(m)))
                                     for m in (torch, flow))
    assert f_cats == t_cats == [UserWarning]
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    assert got.requires_grad is want.requires_grad is False


@pytest.mark.parametrize("call", [
    lambda m, x: x.new(2, 3).shape, lambda m, x: x.new(m.Size([2, 1])).shape,
    lambda m, x: x.new().shape, lambda m, x: x.new([1, 2]), lambda m, x: x.new((2, 3)),
    lambda m, x: x.new(np.array([1, 2])), lambda m, x: x.long().new([1.7]),
    lambda m, x: x.new(m.ones(2, dtype=m.float64)), lambda m, x: x.new(m.ones(2)),
    lambda m, x: x.new(2.5), lambda m, x: x.new([1], [2])])
def test_legacy_new_as_torch(call):
    # x.new(...), torch's legacy constructor of older code, raised AttributeError
    got = []
    for m in (torch, flow):
        try:
            r = call(m, m.tensor([1.5, 2.0], dtype=m.float64))
        except TypeError:
            r = TypeError
        got.append(r if r is TypeError or isinstance(r, tuple) else
                   (str(r.dtype).split(".")[1], r.numpy().tolist()))
    assert got[1] == got[0]


def _first_warnings(m, call):
    """The warnings of `call(m)`, flowgrad's once-a-process ones forgotten first (torch's are
    given once a process too: this compares what flowgrad gives the first time)."""
    if m is flow:
        _warn._WARNED_ONCE.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(m)
    return [str(w.message)[:40] for w in caught]


@pytest.mark.parametrize("call", [lambda m: float(m.ones(1, requires_grad=True)),
                                  lambda m: int(m.ones(1, requires_grad=True))])
def test_a_scalar_of_a_tensor_requiring_grad_warns_once(call):
    # torch warns (once a process) that the number leaves the graph; flowgrad said nothing
    got = _first_warnings(flow, call)
    assert got == ["Converting a tensor with requires_grad=T"]
    assert _first_warnings(flow, lambda m: m.ones(1).item()) == []


def test_item_of_a_tensor_requiring_grad_does_not_warn():
    # torch's item() does not warn (loss.item() in every training loop); in a fresh process,
    # as torch's warning is once a process
    code = ("import warnings, sys\nwarnings.simplefilter('always')\n"
            "import {m} as m\nwith warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    (m.ones(2, requires_grad=True) * 2).sum().item()\nprint(len(w))")
    for name in ("torch", "flowgrad"):
        out = subprocess.run([sys.executable, "-c", code.format(m=name)], capture_output=True,
                             text=True, check=True).stdout.split()
        assert out[-1] == "0", (name, out)


@pytest.mark.parametrize("requires_grad, warns", [(None, True), (False, False), (True, False)])
def test_asarray_of_a_tensor_requiring_grad_warns_of_the_default(requires_grad, warns):
    kw = {} if requires_grad is None else {"requires_grad": requires_grad}
    got = _first_warnings(flow, lambda m: m.asarray(m.ones(2, requires_grad=True), **kw))
    assert got == (["asarray: unspecified requires_grad now d"] if warns else [])
    t = torch.asarray(torch.ones(2, requires_grad=True), **kw)
    assert flow.asarray(flow.ones(2, requires_grad=True), **kw).requires_grad == t.requires_grad


@pytest.mark.parametrize("make", [
    lambda m: m.tensor(m.tensor(0.001j), dtype=m.bool),
    lambda m: m.tensor(np.array([0.001j, 0, 2 + 0j]), dtype=m.bool),
    lambda m: m.as_tensor(m.tensor([0.5j, 0j]), dtype=m.bool),
    lambda m: m.asarray(np.array([1j], np.complex64), dtype=m.bool)])
def test_complex_into_bool_is_nonzero(make):
    # the imaginary part was dropped before the cast: tensor(tensor(0.001j), dtype=bool) False
    got = _same_outcome(make)
    if got is not None:
        np.testing.assert_array_equal(*got)


@pytest.mark.parametrize("data", [
    [300, np.complex128(2)], [[-2 ** 63 - 1, 1], [1e308, np.complex128(1)]],
    [[1e308, -2 ** 63 - 1], [1, np.complex128(1)]],
    [np.int64(300)], [-1, 2.5, -255], [2 ** 63 - 1, 5.0]])
def test_a_nest_with_complex_numbers_is_range_checked_in_order(data):
    # a NumPy complex among the numbers turned the whole nest into floats first: 300 -> 44
    # in uint8, and an int beyond int64 went through; torch names the first that does not fit
    dtype = "int64" if 2 ** 63 - 1 in data else "uint8"
    got = _same_outcome(lambda m: m.tensor(data, dtype=getattr(m, dtype)))
    if got is not None:
        np.testing.assert_array_equal(*got)


@pytest.mark.parametrize("kw", [{"dtype": "int8"}, {"dtype": "int64", "copy": True},
                                {"dtype": "bool"}, {"dtype": "float64"},
                                {"dtype": "int32", "requires_grad": False}])
def test_asarray_of_a_tensor_requiring_grad_into_another_dtype(kw):
    # torch 2.13's asarray gives the result the tensor's requires_grad unless told: into an
    # integer or bool dtype that is a RuntimeError; flowgrad dropped requires_grad and ran
    # (creation_fuzz seed 7000440)
    def make(m):
        x = m.tensor([[-1.5, 2.0], [3.25, 0.0]]).requires_grad_()
        r = m.asarray(x, **{k: getattr(m, v) if k == "dtype" else v for k, v in kw.items()})
        return r.detach().numpy(), r.requires_grad, r.is_leaf
    (want, t_err), (got, f_err) = (outcome(lambda m=m: make(m)) for m in (torch, flow))
    assert (f_err is None) == (t_err is None), (t_err, f_err)
    if t_err is not None:
        assert isinstance(f_err, type(t_err)), (t_err, f_err)
        return
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1:] == want[1:]


@pytest.mark.parametrize("make", [
    lambda m: m.full_like(m.tensor([1.0]), 2 ** 63, dtype=m.bfloat16),
    lambda m: m.ones(2, dtype=m.bfloat16).fill_(2 ** 63),
    lambda m: m.ones(2, dtype=m.bfloat16).new_full((2,), 2 ** 64 - 1),
    lambda m: m.ones(2, dtype=m.bfloat16).masked_fill(m.tensor([True, False]), 2 ** 63),
    lambda m: m.tensor([[2 ** 63, 1.5]], dtype=m.bfloat16),
    lambda m: m.tensor([2 ** 64 - 1, -3], dtype=m.bfloat16)])
def test_a_uint64_int_fills_bfloat16_as_torch(make):
    # creation_fuzz seed 9414379: ml_dtypes' bfloat16 refuses a Python int beyond int64
    # (TypeError 'expected number, got int'); full() converted it, full_like, fill_ and
    # tensor() not
    got, want = _same_outcome(make, numpy=False)
    assert got.dtype == flow.bfloat16 and got.float().tolist() == want.float().tolist()


# a ragged nest: torch takes the shape from the first elements and stores the values in
# order, refusing the first that does not fit with its own class (a number where a list
# belongs: TypeError, a list of another length: ValueError, a list where a number belongs:
# TypeError, a Python complex into a real dtype: TypeError, a complex 0-d tensor:
# RuntimeError, an int8 value out of range: RuntimeError); a shape with no elements is an
# empty tensor whatever follows. flowgrad raised NumPy's ValueError for every ragged nest (a
# shape of no elements too), and checked complex values before the structure and before the
# range (creation_fuzz's KNOWN entries, now taken out)
RAGGED = [
    ([[1, 2], 3], None), ([1, [2, 3]], None), ([[1, 2], [3, [4]]], "int64"),
    ([[1, 2], [3]], None), ([[], [1.5], 2], None), (((), [1], True), None), ([[], [[]]], None),
    ([[1], [[]]], None), ([[1, 2], [3], 4j], "float32"), ([4j, [1, 2], [3]], "float32"),
    ([[300, 2], [3], 4j], "int8"), ([[1, 2], [300], 4j], "int8"),
    ([[1, 2], (3, 4, 5)], "bool"), ([np.float16(1.0), []], "float16"),
    ([1j, "tensor"], "float32"), (["tensor", 1j], "float32"),
    ([np.complex128(1.5), "tensor"], "float32"),  # (NumPy's complex: its real part; 10113143)
]


@pytest.mark.parametrize("data, dtype", RAGGED, ids=str)
def test_ragged_nest_refused_or_read_as_torch(data, dtype):
    def make(m):
        nest = [m.tensor(1 + 1j) if x == "tensor" else x for x in data] \
            if "tensor" in data else data
        out = m.tensor(nest, dtype=None if dtype is None else getattr(m, dtype))
        return out, str(out.dtype).split(".")[-1]
    seen = _same_outcome(make, numpy=False)
    if seen is not None:
        (got, got_dtype), (want, want_dtype) = seen
        assert (tuple(got.shape), got_dtype) == (tuple(want.shape), want_dtype)


def test_one_half_precision_element_beyond_range_is_inf_without_warning():
    # torch fills ONE float16/bfloat16 element unchecked (inf), linspace's one step too;
    # flowgrad's NumPy cast warned 'overflow encountered in cast' (creation_fuzz 10100868),
    # and linspace raised
    for m in (torch, flow):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            values = [m.full((), 3.5e38, dtype=m.bfloat16).item(),
                      m.full_like(m.zeros(1), -1e5, dtype=m.float16).item(),
                      m.linspace(1e5, 0, 1, dtype=m.float16).item(),
                      m.full((1,), 65519.0, dtype=m.float16).item()]
        assert values == [math.inf, -math.inf, math.inf, 65504.0], (m.__name__, values)


# torch reads numbers into an integer or bool dtype through __index__: NumPy's float16/32
# and complex scalars, a NumPy bool into an integer dtype and a 0-d float tensor in a list
# are refused (TypeError; NumPy's float64, a Python float, is read by value); flowgrad
# converted them (creation_fuzz's KNOWN entry, now taken out)
LEAVES = {"f16": lambda m: np.float16(1.0), "f32": lambda m: np.float32(2.0),
          "f64": lambda m: np.float64(1.0), "c64": lambda m: np.complex64(1.0),
          "c128": lambda m: np.complex128(1.0), "bool": lambda m: np.bool_(True),
          "i32": lambda m: np.int32(3), "t_f": lambda m: m.tensor(1.0),
          "t_i": lambda m: m.tensor(2), "t_b": lambda m: m.tensor(True)}


@pytest.mark.parametrize("leaf", sorted(LEAVES))
@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool"])
@pytest.mark.parametrize("bare", [False, True])
def test_numpy_scalars_and_0d_tensors_into_integer_dtypes_as_torch(leaf, dtype, bare):
    if bare and leaf.startswith("t_"):
        return  # (a bare tensor is copied, not read as a number)
    def make(m):
        x = LEAVES[leaf](m)
        return m.tensor(x if bare else [[x, 1]], dtype=getattr(m, dtype))
    seen = _same_outcome(make)
    if seen is not None:
        np.testing.assert_array_equal(*seen)


@pytest.mark.parametrize("args, dtype", [((0, 2 ** 70), None), ((0, 2 ** 70), "complex64"),
                                         ((2 ** 64,), "float32"), ((0, 10, 2 ** 65), None),
                                         ((-2 ** 63 - 1, 0), "bool")])
def test_arange_of_an_int_beyond_64_bits_is_overflow_error_first(args, dtype):
    # torch's Scalar refuses it while parsing the arguments (OverflowError), before the dtype
    # or the range is looked at; flowgrad raised NotImplementedError for the dtype or
    # RuntimeError for the range
    _same_outcome(lambda m: m.arange(*args, dtype=None if dtype is None else
                                     getattr(m, dtype)))


def test_casts_into_a_narrower_dtype_are_silent_as_torch():
    # tensor() of a nest holding an int beyond int64 goes to bfloat16 through float64, a cast
    # NumPy warned of ('overflow encountered in cast', creation_fuzz 11035842); copy_ and
    # fill_ with a tensor cast by NumPy's astype too (RuntimeWarning for inf/nan/out of
    # range, ComplexWarning for complex) where torch writes without a word
    got = []
    for m in (torch, flow):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            big = m.tensor([1e300, float("nan")], dtype=m.float64)
            got.append([m.tensor([1e300, -2 ** 63 - 1], dtype=m.bfloat16).tolist(),
                        m.zeros(2, dtype=m.float16).copy_(big).tolist(),
                        m.zeros(2, dtype=m.bfloat16).fill_(big[0]).tolist(),
                        m.zeros(2, dtype=m.int32).copy_(big).dtype == m.int32])
    assert str(got[1]) == str(got[0])
