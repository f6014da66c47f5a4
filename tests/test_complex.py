"""Complex tensors against torch: dtypes and promotion, printing, views, errors, and a table of
complex-capable ops checked forward and backward against torch and by complex finite
differences of a real loss (tests/complex_helpers.py)."""
import numpy as np
import pytest
import torch
from complex_helpers import Real, ccheck, ccheck_jvp, complex_table_tests
from helpers import Positive

import flowgrad as flow

I64 = np.array([[1, 2, 0]])

CASES = [
    ("add", lambda m, a, b: a + b, (2, 3), (3,)),
    ("sub", lambda m, a, b: a - b * 2, (2, 3), (2, 3)),
    ("mul", lambda m, a, b: a * b, (2, 3), (3,)),
    ("div", lambda m, a, b: a / b, (2, 3), (2, 3)),
    ("pow", lambda m, a, b: a ** b, (4,), (4,)),
    ("mul_real", lambda m, a, x: a * x, (2, 3), Real((2, 3))),
    ("div_real", lambda m, x, a: x / a, Real((3,)), (3,)),
    ("add_int", lambda m, a, i: a + i, (1, 3), I64),
    ("scalar_complex", lambda m, a: a * (2 - 1j) + 1j, (3,)),
    ("scalar_complex_real_tensor", lambda m, x: (x + 2j) * x, Real((3,))),
    ("scalar_real", lambda m, a: (a * 3 - 1) / 2, (3,)),
    ("rdiv", lambda m, a: 2 / a, (3,)),
    ("rpow", lambda m, a: 2 ** a, (3,)),
    ("reciprocal", lambda m, a: m.reciprocal(a), (3,)),
    ("square", lambda m, a: m.square(a), (3,)),
    ("pow_scalar", lambda m, a: a ** 3, (3,)),
    ("neg", lambda m, a: -a, (3,)),
    ("abs", lambda m, a: m.abs(a), (2, 3)),
    ("exp", lambda m, a: m.exp(a), (3,)),
    ("log", lambda m, a: m.log(a), (3,)),
    ("sqrt", lambda m, a: m.sqrt(a), (3,)),
    ("rsqrt", lambda m, a: m.rsqrt(a), (3,)),
    ("sin", lambda m, a: m.sin(a), (3,)),
    ("cos", lambda m, a: m.cos(a), (3,)),
    ("tanh", lambda m, a: m.tanh(a), (3,)),
    ("sigmoid", lambda m, a: m.sigmoid(a), (3,)),
    ("where", lambda m, a, b: m.where(a.real > 0, a, b), (2, 3), (2, 3)),
    ("sum", lambda m, a: a.sum(1), (2, 3)),
    ("mean", lambda m, a: a.mean(), (2, 3)),
    ("prod", lambda m, a: a.prod(1), (2, 3)),
    ("cumsum", lambda m, a: a.cumsum(1), (2, 3)),
    ("cumprod", lambda m, a: a.cumprod(1), (2, 3)),
    ("matmul", lambda m, a, b: a @ b, (2, 3), (3, 4)),
    ("matmul_batched", lambda m, a, b: a @ b, (2, 2, 3), (3, 2)),
    ("matmul_vec", lambda m, a, b: a @ b, (3,), (3, 2)),
    ("matmul_real", lambda m, a, x: a @ x.to(a.dtype), (2, 3), Real((3, 2))),
    ("linear", lambda m, x, w, b: m.nn.functional.linear(x, w, b), (2, 3), (4, 3), (4,)),
    ("einsum", lambda m, a, b: m.einsum("ij,jk->ik", a, b), (2, 3), (3, 2)),
    ("shape_ops", lambda m, a: a.reshape(3, 2).t().unsqueeze(0).expand(2, 2, 3).flip(1),
     (2, 3)),
    ("cat_stack", lambda m, a, b: m.stack([m.cat([a, b]), b.repeat(2, 1)]), (2, 3), (2, 3)),
    ("index", lambda m, a: a[:, [2, 0]] * a[1, 1:], (2, 3)),
    ("roll_tril", lambda m, a: m.tril(a.roll(1, 0)) + m.triu(a).diagonal().sum(), (3, 3)),
    ("real", lambda m, a: m.real(a) * a.real, (2, 3)),
    ("imag", lambda m, a: m.imag(a) + a.imag * 2, (2, 3)),
    ("conj", lambda m, a: m.conj(a) * a, (3,)),
    ("conj_physical", lambda m, a: m.conj_physical(a), (3,)),
    ("angle", lambda m, a: m.angle(a), (3,)),
    ("sgn", lambda m, a: m.sgn(a), (3,)),
    ("view_as_real", lambda m, a: m.view_as_real(a) * 2, (2, 3)),
    ("view_as_complex", lambda m, x: m.view_as_complex(x) * 1j, Real((3, 2))),
    ("complex", lambda m, x, y: m.complex(x, y), Real((2, 3)), Real((3,))),
    ("polar", lambda m, r, t: m.polar(r, t), Positive((3,)), Real((3,))),
    ("abs_real_loss", lambda m, a: (a * a.conj()).real.sqrt(), (3,)),
]

test_against_torch, test_finite_differences = complex_table_tests(CASES)


@pytest.mark.parametrize("case", [pytest.param(c, id=c[0]) for c in CASES])
def test_jvp_against_torch(case):
    """The forward-mode column: func.jvp with complex tangents against torch.func.jvp."""
    ccheck_jvp(case[1], *case[2:])


def test_dtypes_and_promotion():
    f32, f64, c64, c128 = flow.float32, flow.float64, flow.complex64, flow.complex128
    assert flow.cfloat is c64 and flow.cdouble is c128
    assert flow.promote_types(f64, c64) is c128 and flow.promote_types(flow.int64, c64) is c64
    cases = [(flow.ones(2), flow.tensor(1j, dtype=c128)), (flow.ones(2, dtype=f64), 1j),
             (flow.ones(2, dtype=flow.int32), 1j), (flow.tensor(1.0, dtype=f64), flow.ones(2) + 0j),
             (flow.ones(2, dtype=f64), flow.tensor(1j)), (flow.ones(2) + 0j, 2.5)]
    for a, b in cases:
        ta = torch.tensor(a.numpy()) if isinstance(a, flow.Tensor) else a
        tb = torch.tensor(b.numpy()) if isinstance(b, flow.Tensor) else b
        assert (a + b).dtype.name == str((ta + tb).dtype).replace("torch.", "")
    assert flow.tensor([1 + 2j]).dtype is c64 and flow.tensor([1, 2j]).is_complex()
    assert flow.zeros(2, dtype=flow.cdouble).dtype is c128 and flow.ones(2).cdouble().is_complex()
    assert not flow.ones(2).is_complex() and not flow.ones(2).is_conj()
    assert flow.finfo(c64).eps == flow.finfo(f32).eps and c64.is_complex


def test_printing_matches_torch():
    for data in ([1 + 2j, 3.5 - 1j, 0j], [[1.5 + 2.25j, -3 - 1e-3j], [float("nan") + 1j, 0j]],
                 [1e-5 + 2j, 100 + 1j], 2.5j):
        for dt in (flow.complex64, flow.complex128):
            ours = repr(flow.tensor(data, dtype=dt))
            theirs = repr(torch.tensor(data, dtype=getattr(torch, dt.name)))
            assert ours == theirs.replace("torch.", "flowgrad."), (ours, theirs)


def test_real_and_imag_are_views():
    z = flow.tensor([1 + 2j, 3 - 4j])
    z.real.mul_(10)
    z.imag[0] = 7.0
    assert z.tolist() == [10 + 7j, 30 - 4j]
    r = flow.view_as_real(z)
    r[1, 1] = 0.5
    assert z[1].item() == 30 + 0.5j and flow.view_as_complex(r)._data.base is not None
    assert flow.real(flow.ones(2)) is not None and flow.ones(2).real.dtype is flow.float32


def test_inplace_write_through_real_view_keeps_gradients():
    for m in (flow, torch):
        z = m.tensor([1 + 2j, 3 - 4j], requires_grad=True)
        w = z * 1
        w.real.mul_(3)
        (w * w.conj()).real.sum().backward()
        if m is flow:
            ours = z.grad.numpy()
        else:
            np.testing.assert_allclose(ours, z.grad.numpy(), rtol=1e-6)


def test_real_and_imag_setters_write_through_as_torch():
    """`z.real = v` / `z.imag = v` copy v (broadcast, cast, recorded by autograd) into the
    views, as torch's setters; flowgrad's properties had no setter (AttributeError)."""
    def run(m):
        z = m.tensor([[1 + 2j, 3 - 4j], [0.5j, 2.0]], dtype=m.complex64)
        z.real = 5.0
        z[1].imag = m.tensor([7.0, -1.0])
        x = m.ones(2)
        x.real = m.tensor([3, 4])  # a real tensor's real part is itself
        y = m.tensor([1 + 1j, 2 - 1j], dtype=m.complex128, requires_grad=True)
        w = y * (1 + 2j)
        r = m.tensor([3.0, 4.0], dtype=m.float64, requires_grad=True)
        w.imag = r * r
        w.abs().sum().backward()
        return [z.tolist(), str(z.dtype)[-9:], x.tolist(), r.grad.tolist(), y.grad.tolist()]
    ours, theirs = run(flow), run(torch)
    assert ours[:3] == theirs[:3]
    np.testing.assert_allclose(np.asarray(ours[3] + ours[4]), np.asarray(theirs[3] + theirs[4]),
                               rtol=1e-12)
    for m in (flow, torch):
        with pytest.raises(RuntimeError):
            m.ones(2).imag = m.ones(2)  # a real tensor has no imaginary view
        with pytest.raises(RuntimeError):
            m.ones(2, dtype=m.complex64).real = m.ones(3)  # no broadcast to (2,)


def test_unsupported_ops_raise():
    z = flow.tensor([1 + 1j, 2j])
    for fn in (flow.relu, lambda t: t.max(), lambda t: t < t, lambda t: flow.clamp(t, 0),
               lambda t: flow.maximum(t, t), flow.sign, flow.floor):
        with pytest.raises(RuntimeError, match="not supported for complex"):
            fn(z)
    with pytest.raises(RuntimeError, match="real scalar outputs"):
        flow.tensor(1j, requires_grad=True).mul(2).backward()
    with pytest.raises(RuntimeError, match="non-complex"):
        flow.imag(flow.ones(2))
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        flow.view_as_complex(flow.ones(3))
    with pytest.raises(RuntimeError, match="stride 1"):
        flow.view_as_complex(flow.ones(2, 2).t())
    with pytest.raises(RuntimeError, match="same dtype"):
        flow.complex(flow.ones(2), flow.ones(2, dtype=flow.float64))


def test_complex_grad_is_conjugate_wirtinger():
    z = flow.tensor([1 + 1j], requires_grad=True)
    (z * z.conj()).real.sum().backward()  # |z|^2: torch's grad is 2 z
    assert z.grad.tolist() == [2 + 2j]
    x = flow.tensor([2.0], requires_grad=True)
    (x * flow.tensor([1 + 3j])).imag.sum().backward()  # a real input gets the real part
    assert x.grad.dtype is flow.float32 and x.grad.tolist() == [3.0]


def test_ccheck_catches_a_wrong_rule():
    with pytest.raises(AssertionError):  # the helper is not vacuous: conj(z) is not z
        ccheck(lambda m, a: m.conj(a) if m is flow else a, (3,))


def test_isreal_complex_scalar_and_inplace_forms():
    data = [1 + 0j, 3 - 4j, 0j]
    assert flow.isreal(flow.tensor(data)).tolist() == torch.isreal(torch.tensor(data)).tolist()
    assert flow.ones(2).isreal().tolist() == [True, True] and not flow.ones(1).is_neg()
    assert complex(flow.tensor(2 - 1j)) == complex(torch.tensor(2 - 1j))
    ccheck(lambda m, a: (a * 1).sgn_() * (a * 2).conj_physical_(), (3,))


@pytest.mark.parametrize("name", ["cdist", "cosine_similarity"])  # (torch refuses them too;
# pairwise_distance takes complex, as torch: tests/test_nn_dtypes_vs_torch.py)
def test_ops_without_complex_support_refuse_instead_of_dropping_the_imaginary_part(name):
    z, w = flow.tensor([[1 + 1j, 2 - 1j]]), flow.tensor([[0.5j, 1 + 0j]])
    fn = getattr(flow, name, None) or getattr(flow.nn.functional, name)
    with pytest.raises(RuntimeError, match=f"{name}: complex input"):
        fn(z, w)


@pytest.mark.parametrize("name", ["vdot", "vecdot", "inner", "dot"])
def test_dot_products_conjugate_as_torch(name):
    """vdot and linalg.vecdot conjugate their first argument; dot and inner do not."""
    a = np.array([1 + 1j, 2 - 1j, -0.5j])
    b = np.array([0.3 + 0.2j, -1 + 0j, 2 + 2j])
    fn = {"vecdot": lambda m, x, y: m.linalg.vecdot(x, y)}.get(
        name, lambda m, x, y: getattr(m, name)(x, y))
    ours = fn(flow, flow.tensor(a), flow.tensor(b)).numpy()
    theirs = fn(torch, torch.tensor(a), torch.tensor(b)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


@pytest.mark.parametrize("name", ["norm", "vector_norm", "vector_norm_ord1", "vector_norm_inf",
                                  "dist"])
def test_vector_norms_of_complex_tensors_match_torch(name):
    z = np.array([[1 + 1j, 2 - 1j, -0.5j], [0.3 + 0.2j, -1 + 0j, 2 + 2j]])
    fns = {"norm": lambda m, t: m.norm(t), "vector_norm": lambda m, t: m.linalg.vector_norm(t),
           "vector_norm_ord1": lambda m, t: m.linalg.vector_norm(t, 1, dim=1),
           "vector_norm_inf": lambda m, t: m.linalg.vector_norm(t, float("inf")),
           "dist": lambda m, t: m.dist(t, t * 0.5)}
    x, xt = flow.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
    y, yt = fns[name](flow, x), fns[name](torch, xt)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    y.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


def test_det_of_complex_matches_numpy():
    z = np.array([[1 + 1j, 2j], [1, 0.5j]])
    np.testing.assert_allclose(flow.linalg.det(flow.tensor(z)).numpy(), np.linalg.det(z))


def test_pow_of_a_zero_complex_base_is_torchs():
    # torch's complex pow is exp(b * log(a)): at a == 0, nan for a 0 exponent, inf+nanj for a
    # negative real part, -0j for a positive one; NumPy's power gave 1, nan and 0 there
    # (out_arg_fuzz 10757795: a bool base to complex exponents)
    b = np.array([-0.5 + 1j, -2 + 0j, 0.5 + 1j, 0j, 1j, 2 + 0j])
    want = torch.pow(torch.zeros(6, dtype=torch.complex128), torch.tensor(b))
    got = flow.pow(flow.zeros(6, dtype=flow.complex128), flow.tensor(b))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert np.signbit(got.numpy().imag).tolist() == np.signbit(want.numpy().imag).tolist()
    want = torch.tensor([False, True]) ** torch.tensor([-0.5 + 1j])
    got = flow.tensor([False, True]) ** flow.tensor([-0.5 + 1j])
    np.testing.assert_array_equal(got.numpy(), want.numpy())
