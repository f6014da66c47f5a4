"""Random programs of integer and bool tensor arithmetic (every integer dtype and bool, their
limits, zero and negative divisors, Python scalars and 0-d tensors for promotion, in-place
forms) in torch and in flowgrad must give the same values bit for bit, the same dtypes and the
same exception types: see tests/integer_fuzz.py. Below them, the fuzz's findings as fixed
cases.

NOT DRAWN by the fuzz (see integer_fuzz.py):
- the Python int -2**63 divided (//, %, fmod, div with a rounding mode) by an int64 tensor:
  torch's scalar path divides it by -1 in C and the process dies of SIGFPE.
- lcm of the int32/int64 minimum: torch's calc_lcm divides it by a gcd of -1 in C and the
  process dies of SIGFPE (flowgrad returns the wrapped value).
- fmod(number, tensor): torch has no such overload (TypeError); flowgrad computes it, kept on
  purpose with the other number operands torch refuses (tests/test_opinfo_vs_torch.py's KNOWN,
  _R_SCALAR).
- which of tied elements topk returns: torch's partial sort leaves it unspecified; the fuzz
  compares topk's values and the elements its indices pick.
"""
from __future__ import annotations

import fuzz_common
import integer_fuzz as inf
import numpy as np
import pytest

# seeds that differ, with the reason (none at present)
KNOWN = {}


@pytest.mark.parametrize("block", range(8))
def test_integer_programs_match_torch(block):
    fuzz_common.assert_seeds_agree(inf.check, range(block * 200, block * 200 + 200), KNOWN)


@pytest.mark.slow
def test_many_integer_programs_match_torch():
    fuzz_common.assert_seeds_agree(inf.check, range(1600, 9600), KNOWN)


def _same(run):
    verdict = inf.compare(run)
    assert verdict is None, verdict


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_gcd_and_lcm_wrap_at_the_dtype_minimum_as_torch(dtype):
    # torch's calc_gcd runs Euclid on C's abs (the minimum's wraps to itself) and remainder:
    # gcd(-5, min) is -1; flowgrad used NumPy's gcd, 1
    low = int(np.iinfo(dtype).min)
    a = [-5, 3, 0, low, 7, -7]
    b = [low, low, low, low, -7, 0]
    _same(lambda m: m.gcd(m.tensor(a, dtype=getattr(m, dtype)),
                          m.tensor(b, dtype=getattr(m, dtype))))


@pytest.mark.parametrize("dtype,a,b", [("int16", 32767, 2), ("int32", -2147483647, 2),
                                       ("int8", -127, 3), ("uint8", 255, 2),
                                       ("int64", 2 ** 62 + 1, 3)])
def test_lcm_overflows_as_torch_computes_it(dtype, a, b):
    # abs(a / gcd * b), in C's int for the 8- and 16-bit types (then cast back), else in the
    # dtype: int16 lcm(32767, 2) is -2 and int32 lcm(-2147483647, 2) is 2 in torch; NumPy's
    # lcm (|a| and |b| first, all in the dtype) gave 2 and -2
    _same(lambda m: m.lcm(m.tensor([a, -a if dtype != "uint8" else a],
                                    dtype=getattr(m, dtype)),
                          m.tensor([b, b], dtype=getattr(m, dtype))))


@pytest.mark.parametrize("base", [-1, 1, 0, 2, -3])
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_integer_pow_by_the_dtype_minimum_exponent(base, dtype):
    # a negative exponent tensor holding the dtype's minimum: |min| wraps, and NumPy refused
    # the power (ValueError); torch gives 1 for base 1, (-1) ** even = 1, else 0
    low = int(np.iinfo(dtype).min)
    _same(lambda m: m.tensor(base, dtype=getattr(m, dtype)) **
          m.tensor([low, low + 1, -1, 3], dtype=getattr(m, dtype)))


@pytest.mark.parametrize("method", ["__iand__", "__ior__", "__ixor__", "__ilshift__",
                                    "__irshift__", "__ifloordiv__", "__imod__", "fmod_",
                                    "__ipow__"])
@pytest.mark.parametrize("self_shape,other_shape", [((3,), (3,)), ((), (2, 1)), ((0,), (3,))])
def test_inplace_checks_shape_and_cast_before_the_kernel(method, self_shape, other_shape):
    # int32 &= float32: torch's TensorIterator refuses the shape, then the cast of the promoted
    # float into int32 (RuntimeError) before any kernel; flowgrad's bitwise kernel raised
    # NotImplementedError first
    _same(lambda m: getattr(m.zeros(self_shape, dtype=m.int32), method)(
        m.ones(other_shape)))


@pytest.mark.parametrize("fn", ["bitwise_and", "bitwise_left_shift", "bitwise_right_shift",
                                "gcd", "lcm"])
def test_binary_integer_ops_check_shapes_before_dtypes(fn):
    # shapes that do not broadcast and an unsupported dtype: torch's RuntimeError for the
    # shapes, not the dtype's NotImplementedError
    _same(lambda m: getattr(m, fn)(m.zeros(3, dtype=m.int32), m.ones(2)))


def test_shift_of_two_numbers_is_a_type_error():
    _same(lambda m: m.bitwise_left_shift(3, 2.0))


@pytest.mark.parametrize("fn", [lambda m, a, b: m.div(a, b, rounding_mode="trunc"),
                                lambda m, a, b: m.remainder(a, b),
                                lambda m, a, b: m.fmod(a, b), lambda m, a, b: a // b,
                                lambda m, a, b: a ** b])
def test_bool_division_checks_shapes_before_the_bool_refusal(fn):
    # two bool tensors that do not broadcast: torch's RuntimeError for the shapes, not the
    # NotImplementedError of the missing bool kernel
    _same(lambda m: fn(m, m.zeros((1, 3), dtype=m.bool), m.zeros(0, dtype=m.bool)))


def test_bool_inplace_pow_checks_the_output_shape_first():
    _same(lambda m: m.ones((2, 1), dtype=m.bool).__ipow__(m.ones(3, dtype=m.bool)))
