"""Forward-mode AD of every OpInfo with supports_forward_ad against torch's (opinfo_forward_ad.py
does the work): dual tensors, func.jvp, and reverse over forward where torch says it
supports it. A finding fails unless KNOWN explains it (a stale entry fails too); the default
tier runs the first float64 sample of each OpInfo through dual tensors and func.jvp, the
slow tier all samples and reverse over forward too.
"""
from __future__ import annotations

import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import numpy as np  # noqa: E402
import opinfo_forward_ad  # noqa: E402
import torch  # noqa: E402
from opinfo_vs_torch import assert_explained, full_name, op_db  # noqa: E402

import flowgrad as flow  # noqa: E402

_FD = ("reverse over forward: torch's gradient of the tangent w.r.t. the primal is wrong (its "
       "jvp formula reads saved values -- LU factors, the mean and rstd -- as constants); "
       "flowgrad's agrees with central finite differences of the tangent (1e-8), torch's not")
_ZEROS = ("the tangent of an output that does not depend on the input's tangent (0x0 det, a "
          "real angle, a random draw): torch a zero tensor, flowgrad None")
KNOWN: dict[str, tuple[str, str]] = {
    "linalg.solve": (r"fwbw grad\[0\]: values differ", _FD),
    "linalg.solve_ex": (r"fwbw grad\[0\]: values differ", _FD),
    "linalg.tensorsolve": (r"fwbw grad\[0\]: values differ", _FD),
    "linalg.householder_product": (r"fwbw grad\[0\]: values differ", _FD),
    "linalg.eigh": (r"fwbw grad\[0\]: values differ", "reverse over forward: torch nan, "
                    "flowgrad's agrees with finite differences"),
    "nn.functional.layer_norm": (r"fwbw grad\[\d\]: values differ", _FD),
    "native_batch_norm": (r"fwbw grad\[\d\]: values differ", _FD),
    "nn.functional.batch_norm": (r"fwbw grad\[\d\]: values differ|expected 2D or more input",
                                 _FD + "; a 1-D empty input: flowgrad asks for (N, C, ...) "
                                 "(as in test_opinfo_vs_torch.py)"),
    "nn.functional.instance_norm": (r"fwbw grad\[\d\]: values differ", _FD),
    "as_strided_scatter": (r"fwbw grad\[2\]: values differ",
                           "torch 2.13's input gradient is the complement of the right one "
                           "(as in test_opinfo_vs_torch.py)"),
    "linalg.norm.subgradients_at_zero": (
        r"fwbw grad\[0\]: values differ|tangent: torch a tensor, flowgrad None",
        "the second derivative of a norm at 0: torch nan, flowgrad 0; ord=0 (a count): "
        + _ZEROS),
    **{name: (r"tangent: torch a tensor, flowgrad None", "ord=0 (a count): " + _ZEROS)
       for name in ("linalg.vector_norm", "linalg.norm", "norm", "masked.norm")},
    "linalg.eig": (r"fwbw raise: torch RuntimeError\('linalg_eig_backward",
                   "torch refuses a loss that depends on the eigenvectors' phase; flowgrad "
                   "differentiates the phase it chose"),
    "nn.functional.glu": (r"derivative for aten::glu_jvp is not implemented",
                          "torch has no reverse rule for its glu jvp; flowgrad's works"),
    "tensor_split": (r"Cannot access data pointer of Tensor that doesn't have storage",
                     "torch's func.jvp reads a tensor of split points through a data pointer "
                     "(a torch bug); flowgrad takes it"),
    "nn.functional.multi_head_attention_forward": (r"values differ", "dropout_p=0.5, "
                                                   "training=True: random draws"),
    "max_pool2d_with_indices_backward": (r"has no attribute 'aten'", "not in flowgrad "
                                         "(test_opinfo_vs_torch.py's MISSING)"),
    "angle": (r"tangent: torch a tensor, flowgrad None", _ZEROS),
    "linalg.slogdet": (r"tangent: torch a tensor, flowgrad None", _ZEROS),
    "linalg.det": (r"fwbw grad\[0\]: values differ|tangent: torch a tensor, flowgrad None",
                   _FD + "; " + _ZEROS),
    "logdet": (r"fwbw grad\[0\]: values differ|tangent: torch a tensor, flowgrad None",
               "reverse over forward: torch's gradient is 0, flowgrad's agrees with finite "
               "differences; " + _ZEROS),
    "nn.functional.max_unpool2d": (r"tangent: values differ|jvp\[1\]: values differ",
                                   "samples with repeated indices: which tangent lands there "
                                   "is the scatter's order (torch's OpInfo skips its gradient "
                                   "tests for the same reason)"),
    "logcumsumexp": (r"dual tangent: values differ", "inputs up to 1e4: torch's tangent is off "
                     "by 6e-6, flowgrad's within 1e-12 of a long-double reference"),
    "svd_lowrank": (r"primal: values differ", "a random projection: flowgrad's generator is "
                    "not torch's stream"),
    "cumprod": (r"fwbw grad\[0\]: values differ", "reverse over forward: torch nan at some "
                "positions, flowgrad's agrees with finite differences"),
}

# KNOWN entries whose findings come and go from run to run (no stale check)
_MAY_AGREE = frozenset(("nn.functional.max_unpool2d",))

DB = [info for info in op_db() if info.supports_forward_ad]


def _check(info, all_samples, stale_check, modes=opinfo_forward_ad.MODES):
    name = full_name(info)
    findings = opinfo_forward_ad.probe(info, all_samples, modes)
    if findings and findings[0][2] == "missing":
        pytest.skip("not in flowgrad")
    assert_explained(name, findings, KNOWN, stale_check and name not in _MAY_AGREE)


@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_forward_ad_vs_torch(info):
    _check(info, False, stale_check=False, modes=("dual", "jvp"))  # (CI time: fwbw is slow)


@pytest.mark.slow
@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_forward_ad_all_samples_vs_torch(info):
    _check(info, True, stale_check=True)


# ---- sub-gradient conventions of forward mode at non-smooth points -------------------------
def _prelu_case(m, x, w, tx, tw):
    fwad = m.autograd.forward_ad
    x, w = m.tensor(x).requires_grad_(), m.tensor(w).requires_grad_()
    tx, tw = m.tensor(tx).requires_grad_(), m.tensor(tw).requires_grad_()
    with fwad.dual_level():
        y = m.nn.functional.prelu(fwad.make_dual(x, tx), fwad.make_dual(w, tw))
        tangent = fwad.unpack_dual(y).tangent
        grads = m.autograd.grad((tangent * tangent.detach().cos()).sum(), (x, w, tx, tw),
                                allow_unused=True)
    reverse = m.autograd.grad(m.nn.functional.prelu(x, w).sum(), (x, w))
    return [t.detach().numpy() for t in (tangent, *grads, *reverse)]


def test_prelu_forward_convention_at_zero():
    """torch's prelu forward formula passes the tangent where x >= 0 (at x == 0: the tangent,
    not w * tangent), its reverse one dy where x > 0 (at 0: w * dy). Before, flowgrad's
    forward mode gave w * t at 0: [1, 2, -1, 0.5] tangents gave 0.5 where torch gives 2."""
    x = np.array([[[1.5, 0.0], [-2.0, 0.0]], [[0.0, -1.0], [3.0, 0.0]]])
    w = np.array([0.25, -0.5])
    tx = np.array([[[1.0, 2.0], [-1.0, 0.5]], [[-3.0, 1.0], [2.0, 1.5]]])
    tw = np.array([0.7, -1.1])
    expected = _prelu_case(torch, x, w, tx, tw)
    actual = _prelu_case(flow, x, w, tx, tw)
    for e, a in zip(expected, actual):
        np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)


def _norm_tangents(m, x, t):
    fwad = m.autograd.forward_ad
    found = []
    x, t = m.tensor(x, dtype=m.float64), m.tensor(t, dtype=m.float64)
    for p in (0.5, -0.5, -1.0, -2.0, 1.5, 3.0):
        for norm in (m.linalg.vector_norm, m.norm):
            with fwad.dual_level():
                y = norm(fwad.make_dual(x, t), p)
                found.append(fwad.unpack_dual(y).tangent.item())
    return found


@pytest.mark.parametrize("x", [[0.0, 0.0, 0.0], [0.0, -2.0, 3.0], [1.0, -2.0, 3.0]])
def test_vector_norm_forward_at_zeros(x):
    """p < 1 norms at a zero element: torch's tangent is the gradient's (zero elements masked
    out). Before, flowgrad's derived jvp multiplied where's zero by |0| ** (p - 1) = inf: nan
    for p = 0.5 at [0, -2, 3] (torch 1.53) and for every p < 1 at the zero vector (torch 0)."""
    t = [1.0, -2.0, 0.5]
    np.testing.assert_allclose(_norm_tangents(flow, x, t), _norm_tangents(torch, x, t),
                               rtol=1e-12, atol=1e-12)


def _distance_tangents(m, p):
    fwad = m.autograd.forward_ad
    F = m.nn.functional
    x = m.tensor([[0.0, 0.0], [0.0, 2.0], [0.0, -1.5]], dtype=m.float64)
    t = m.tensor([[-1.0, -0.5], [0.0, 0.5], [1.0, 1.5]], dtype=m.float64)
    zeros = m.zeros(3, 2, dtype=m.float64)
    found = []
    for fn in (lambda a: F.normalize(a, p=p), lambda a: F.pairwise_distance(a, zeros, p, eps=0.0)):
        with fwad.dual_level():
            found.append(fwad.unpack_dual(fn(fwad.make_dual(x, t))).tangent.numpy())
    return found


@pytest.mark.parametrize("p", [0.5, -1.0, 3.0])
def test_distance_norm_forward_at_zeros(p):
    """dist_norm (normalize, pairwise_distance, cdist): as vector_norm, p < 1 at a zero
    element. Before, normalize(x, p=0.5)'s tangent of the row [0, 2] was [nan, nan] (torch
    [0, 5.6e-17]) and pairwise_distance's [nan, nan, nan] (torch [0, 0.5, 0])."""
    for a, e in zip(_distance_tangents(flow, p), _distance_tangents(torch, p)):
        np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("p", [-1.0, -0.5, 0.5])
def test_pairwise_distance_grad_at_a_zero_norm(p):
    """p < 0: one zero element makes the norm 0, and torch's gradient there is 0 for every
    element. Before, flowgrad's reverse rule masked only the zero elements: the row [0, 2]
    got [0, 0.5] for p=-1 where torch gives [0, 0]."""
    x0 = np.array([[0.0, 0.0], [0.0, 2.0], [0.0, -1.5], [1.0, 2.0]])
    found = []
    for m in (torch, flow):
        x = m.tensor(x0, dtype=m.float64).requires_grad_()
        y = m.nn.functional.pairwise_distance(x, m.zeros(4, 2, dtype=m.float64), p, eps=0.0)
        (g,) = m.autograd.grad((y * m.tensor([1.0, 2.0, 3.0, 4.0], dtype=m.float64)).sum(), x)
        found.append(g.numpy())
    np.testing.assert_allclose(found[1], found[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 4), (0, 0)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_forward_of_an_empty_matrix(shape, full):
    """Before, forward mode through svd(full_matrices=True) of a (0, 3) matrix raised
    (expand of an empty tangent to (3, 3)); torch gives zero tangents (Vh is an identity)."""
    found = []
    for m in (torch, flow):
        fwad = m.autograd.forward_ad
        with fwad.dual_level():
            a = fwad.make_dual(m.zeros(shape, dtype=m.float64), m.zeros(shape, dtype=m.float64))
            outs = m.linalg.svd(a, full_matrices=full)
            found.append([(o.shape, fwad.unpack_dual(o).tangent.numpy()) for o in outs])
    for (es, e), (as_, a) in zip(*found):
        assert tuple(as_) == tuple(es)
        np.testing.assert_array_equal(a, e)


# ---- the OpInfos torch refuses forward AD for -----------------------------------------------
KNOWN_REFUSALS: dict[str, tuple[str, str]] = {
    **{name: (r"\[0\]\[0\]: values differ",
              "the primal: torch's float32-accurate approximation (errors to 8e-7), flowgrad's "
              "Cephes agrees with mpmath (as in test_opinfo_vs_torch.py)")
       for name in ("special.bessel_j0", "special.bessel_j1", "special.bessel_y1")},
    "chalf": (r"has no attribute 'chalf'", "no complex32 (chalf) dtype in flowgrad "
              "(test_opinfo_vs_torch.py's MISSING)"),
}
REFUSALS = [info for info in op_db() if not info.supports_forward_ad]


@pytest.mark.parametrize("info", REFUSALS, ids=[full_name(info) for info in REFUSALS])
def test_opinfo_forward_refusals_vs_torch(info):
    """A dual call (a tangent on every floating input) of the first float64 sample of each
    OpInfo torch says has no forward AD: the same raise and exception type; where torch only
    lacks the formula, flowgrad's derived tangent is torch's reverse-mode J t. Before, the
    ops without a derivative gave a zero tangent (floor_divide) or none (unique,
    unique_consecutive, histogram, histogramdd, geqrf, ldl_factor, ldl_solve,
    nonzero_static), heaviside and ctc_loss a RuntimeError, and resize_ resized a dual."""
    findings = opinfo_forward_ad.probe_refusals(info)
    if findings and findings[0][2] == "missing":
        pytest.skip("not in flowgrad")
    assert_explained(full_name(info), findings, KNOWN_REFUSALS)


def _refusal(m, call, mode):
    """The exception type `call(dual x, weights)` raises in module m (None: none)."""
    x0 = m.tensor([[3.0, -4.0], [0.0, 2.5]], dtype=m.float64)
    t0 = m.tensor([[1.0, -2.0], [0.5, 1.0]], dtype=m.float64)
    try:
        if mode == "dual":
            fwad = m.autograd.forward_ad
            with fwad.dual_level():
                call(m, fwad.make_dual(x0, t0))
        elif mode == "jvp":
            m.func.jvp(lambda x: call(m, x), (x0,), (t0,))
        else:
            m.func.jacfwd(lambda x: call(m, x))(x0)
    except Exception as error:  # noqa: BLE001 - the type is compared
        return type(error)
    return None


_NO_DERIVATIVE = {
    "floor_divide": lambda m, x: x // 2,
    "floor_divide_tensors": lambda m, x: m.floor_divide(x, x + 10),
    "unique": lambda m, x: m.unique(x),
    "unique_consecutive": lambda m, x: m.unique_consecutive(x),
    "histogram": lambda m, x: m.histogram(x.reshape(-1), 3).hist,
    "histogramdd": lambda m, x: m.histogramdd(x, 2).hist,
    "bincount_weights": lambda m, x: m.bincount(m.tensor([0, 2, 2, 1]), x.reshape(-1)),
    "heaviside": lambda m, x: m.heaviside(x, x),
    "geqrf": lambda m, x: m.geqrf(x)[0],
    "ldl_factor": lambda m, x: m.linalg.ldl_factor(x + x.mT)[0],
    "ldl_solve": lambda m, x: m.linalg.ldl_solve(
        *m.linalg.ldl_factor(m.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=m.float64)), x),
    "nonzero_static": lambda m, x: m.nonzero_static(x, size=2),
    "diag_out": lambda m, x: m.diag(x, out=m.zeros(2, dtype=m.float64)),
    "resize_": lambda m, x: x.resize_(4),
    "sign": lambda m, x: x.sign(),  # (a zero tangent, no raise: it has a derivative)
}


@pytest.mark.parametrize("mode", ["dual", "jvp", "jacfwd"])
@pytest.mark.parametrize("name", sorted(_NO_DERIVATIVE))
def test_no_derivative_forward_refusals(name, mode):
    """Forward mode through an op without a derivative raises what torch's does
    (NotImplementedError), through dual tensors, func.jvp and func.jacfwd alike. Before,
    flowgrad gave floor_divide a zero tangent, unique none, and heaviside raised its reverse
    rule's RuntimeError."""
    call = _NO_DERIVATIVE[name]
    assert _refusal(flow, call, mode) is _refusal(torch, call, mode)


@pytest.mark.parametrize("name", ["geqrf", "ldl_solve"])
def test_no_derivative_reverse_records_a_refusal(name):
    """torch records geqrf and ldl_solve with a node that refuses: the outputs require grad
    and a backward raises (geqrf NotImplementedError, ldl_solve RuntimeError). Before,
    flowgrad's outputs did not require grad (a loss through them silently skipped them)."""
    found = []
    for m in (torch, flow):
        x = m.tensor([[3.0, -4.0], [0.0, 2.5]], dtype=m.float64, requires_grad=True)
        out = _NO_DERIVATIVE[name](m, x)
        try:
            out.sum().backward()
            error = None
        except Exception as e:  # noqa: BLE001 - the type is compared
            error = type(e)
        found.append((out.requires_grad, error))
    assert found[1] == found[0]
