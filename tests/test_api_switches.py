"""torch.isin, torch.unflatten, torch.vmap and torch's determinism and matmul-precision
switches, against torch: values and dtypes, the switches' states after each call, and the
same errors and warnings for bad arguments."""
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow

F64 = np.array([[1.5, np.nan, -2.0], [3.0, 0.0, -0.0]])
CASES = [  # (elements, test_elements, keywords): arrays become tensors of both frameworks
    (np.array([1, 2, 3, 4]), np.array([2, 4]), {}),
    (np.array([[1, 2], [3, 4]]), np.array([4, 1, 9]), {"invert": True}),
    (np.array([1, 2, 3]), np.array([2.0, 3.5]), {}),  # int against float: compared as floats
    (F64, np.array([np.nan, 0.0, 3.0]), {}),  # nan is in nothing; -0.0 == 0.0
    (np.array([1.0, 2.0]), 2, {}),
    (3, np.array([3, 4]), {}),
    (np.array([5, 6, 7], dtype=np.int8), np.array([7, 300]), {"assume_unique": True}),
    (np.array([7, 8], dtype=np.uint8), np.array([8.0]), {}),
    (np.array([0.5, 2.0], dtype=np.float16), np.array([2.0]), {}),
]


def _as(m, v):
    return m.tensor(v) if isinstance(v, np.ndarray) else v


@pytest.mark.parametrize("elements, test_elements, kw", CASES)
def test_isin_matches_torch(elements, test_elements, kw):
    got = flow.isin(_as(flow, elements), _as(flow, test_elements), **kw)
    want = torch.isin(_as(torch, elements), _as(torch, test_elements), **kw)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1] == "bool"
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_isin_takes_torchs_keyword_spellings():
    for m in (flow, torch):
        t = m.tensor([1, 2, 3])
        assert m.isin(element=2, test_elements=t).item()
        assert m.isin(elements=t, test_element=3).tolist() == [False, False, True]


def test_isin_of_two_numbers_raises_as_torch():
    with pytest.raises(TypeError):
        torch.isin(1, 2)
    with pytest.raises(TypeError, match="isin"):
        flow.isin(1, 2)


@pytest.mark.parametrize("elements, test_elements", [
    (np.array([True, False]), np.array([1])), (np.array([1, 2]), np.array([True])),
    (np.array([1 + 1j]), np.array([1 + 1j]))])
def test_isin_refuses_bool_and_complex_as_torch(elements, test_elements):
    for m in (flow, torch):
        with pytest.raises(RuntimeError, match="Unsupported input type"):
            m.isin(m.tensor(elements), m.tensor(test_elements))


def test_isin_records_no_gradient():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    out = flow.isin(x, flow.tensor([2.0]))
    assert not out.requires_grad and out.grad_fn is None


@pytest.mark.parametrize("dim, sizes", [(0, (2, 3)), (-1, (2, -1)), (1, (1, 4))])
def test_unflatten_function_matches_torch(dim, sizes):
    x = np.arange(24.0).reshape(6, 4)
    a, b = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = flow.unflatten(a, dim, sizes), torch.unflatten(b, dim, sizes)
    assert tuple(ya.shape) == tuple(yb.shape)
    np.testing.assert_array_equal(ya.detach().numpy(), yb.detach().numpy())
    g = np.random.default_rng(0).standard_normal(tuple(yb.shape))
    ya.backward(flow.tensor(g))
    yb.backward(torch.tensor(g))
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_vmap_is_func_vmap_as_in_torch():
    assert (flow.vmap is flow.func.vmap) and (torch.vmap is torch.func.vmap)
    x = np.random.default_rng(1).standard_normal((3, 4))
    got = flow.vmap(lambda r: (r * r).sum())(flow.tensor(x))
    want = torch.vmap(lambda r: (r * r).sum())(torch.tensor(x))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


@pytest.fixture
def restore_switches():
    """Both frameworks' switches as they were after the test."""
    saved = [(m, m.get_deterministic_debug_mode(), m.get_float32_matmul_precision())
             for m in (flow, torch)]
    yield
    for m, mode, precision in saved:
        m.set_deterministic_debug_mode(mode)
        m.set_float32_matmul_precision(precision)


def _switches(m):
    return (m.are_deterministic_algorithms_enabled(),
            m.is_deterministic_algorithms_warn_only_enabled(), m.get_deterministic_debug_mode(),
            m.get_float32_matmul_precision())


CALLS = [
    lambda m: m.use_deterministic_algorithms(True),
    lambda m: m.use_deterministic_algorithms(True, warn_only=True),
    lambda m: m.use_deterministic_algorithms(False),
    lambda m: m.set_deterministic_debug_mode("warn"),
    lambda m: m.set_deterministic_debug_mode("error"),
    lambda m: m.set_deterministic_debug_mode(0),
    lambda m: m.set_deterministic_debug_mode(1),
    lambda m: m.set_float32_matmul_precision("medium"),
    lambda m: m.set_float32_matmul_precision("high"),
    lambda m: m.set_float32_matmul_precision("highest"),
]


def test_switches_follow_torchs_states(restore_switches):
    assert _switches(flow) == _switches(torch)
    for call in CALLS:
        call(flow)
        call(torch)
        assert _switches(flow) == _switches(torch)


@pytest.mark.parametrize("call, exc", [
    (lambda m: m.set_deterministic_debug_mode("x"), RuntimeError),
    (lambda m: m.set_deterministic_debug_mode(3), RuntimeError),
    (lambda m: m.set_deterministic_debug_mode(1.5), TypeError),
    (lambda m: m.use_deterministic_algorithms("yes"), TypeError),
])
def test_bad_switch_arguments_raise_as_torch(call, exc, restore_switches):
    for m in (flow, torch):
        with pytest.raises(exc):
            call(m)
    assert _switches(flow) == _switches(torch)


def test_unknown_matmul_precision_warns_and_changes_nothing(restore_switches):
    for m in (flow, torch):
        m.set_float32_matmul_precision("medium")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m.set_float32_matmul_precision("low")
        assert any("low is not one of" in str(w.message) for w in caught)
        assert m.get_float32_matmul_precision() == "medium"


_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
           "float64", "complex64", "complex128"]


def test_can_cast_matches_torch_for_every_pair():
    for a in _DTYPES:
        for b in _DTYPES:
            assert flow.can_cast(getattr(flow, a), getattr(flow, b)) == \
                torch.can_cast(getattr(torch, a), getattr(torch, b)), (a, b)
    for m in (flow, torch):
        with pytest.raises(TypeError, match="can_cast"):
            m.can_cast(1, m.float32)


def test_get_device_is_minus_one_on_the_cpu_as_torch():
    for m in (flow, torch):
        t = m.ones(2)
        assert t.get_device() == m.get_device(t) == -1


def test_multinomial_method_is_the_function():
    probs = [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]  # deterministic draws: both frameworks agree
    for m in (flow, torch):
        m.manual_seed(0)
        p = m.tensor(probs)
        assert p.multinomial(2, replacement=True).tolist() == [[1, 1], [2, 2]]
        assert m.multinomial(p, 1).tolist() == [[1], [2]]
