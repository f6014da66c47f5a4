"""Matrix products, einsum and flowgrad.linalg against torch (forward and backward) and by
float64 finite differences to second order. One line per case."""
import numpy as np
import pytest
import torch
from helpers import check, gradcheck

import flowgrad as flow


def spd(m, a):
    """A symmetric positive-definite matrix built from a (so gradients stay symmetric)."""
    return a @ a.mT + 3 * m.eye(a.shape[-1], dtype=a.dtype)


def sym(a):
    return (a + a.mT) / 2


def sign_free_svd(m, a):
    U, S, Vh = m.linalg.svd(a, full_matrices=False)
    # singular vectors are defined up to sign: compare products that do not see it
    return S, U * U, Vh * Vh, U[..., :, :1] * Vh[..., :1, :]


def sign_free_eigh(m, a):
    w, V = m.linalg.eigh(sym(a))
    return w, V * V, V[..., :, :1] * V[..., :, :1].mT


def sign_free_qr(m, a):
    Q, R = m.linalg.qr(a)
    d = m.sign(m.linalg.diagonal(R)) if m is flow else m.sign(R.diagonal(dim1=-2, dim2=-1))
    return Q * d.unsqueeze(-2), R * d.unsqueeze(-1)


CASES = [
    ("matmul_2d", lambda m, a, b: a @ b, (3, 4), (4, 2)),
    ("matmul_nt", lambda m, a, b: a @ b.T, (3, 4), (2, 4)),
    ("matmul_3d_2d", lambda m, a, b: m.matmul(a, b), (2, 3, 4), (4, 2)),
    ("matmul_1d_3d", lambda m, a, b: m.matmul(a, b), (4,), (2, 4, 3)),
    ("matmul_bcast", lambda m, a, b: a @ b, (2, 1, 3, 4), (3, 4, 2)),
    ("mm", lambda m, a, b: m.mm(a, b), (3, 4), (4, 2)),
    ("bmm", lambda m, a, b: a.bmm(b), (2, 3, 4), (2, 4, 2)),
    ("mv", lambda m, a, b: m.mv(a, b), (3, 4), (4,)),
    ("dot", lambda m, a, b: m.dot(a, b), (5,), (5,)),
    ("outer", lambda m, a, b: m.outer(a, b), (3,), (4,)),
    ("inner", lambda m, a, b: m.inner(a, b), (2, 3), (4, 3)),
    ("einsum_mm", lambda m, a, b: m.einsum("ij,jk->ik", a, b), (3, 4), (4, 2)),
    ("einsum_batch", lambda m, a, b: m.einsum("bij,bjk->bik", a, b), (2, 3, 4), (2, 4, 2)),
    ("einsum_trace", lambda m, a: m.einsum("ii", a), (3, 3)),
    ("einsum_diag", lambda m, a: m.einsum("ii->i", a), (3, 3)),
    ("einsum_diag_mul", lambda m, a, b: m.einsum("iij,j->ij", a, b), (3, 3, 2), (2,)),
    ("einsum_sum_only", lambda m, a, b: m.einsum("ij,k->k", a, b), (2, 3), (4,)),
    ("einsum_implicit", lambda m, a, b: m.einsum("ba,ca", a, b), (2, 3), (4, 3)),
    ("einsum_ellipsis", lambda m, a, b: m.einsum("...ij,...jk->...ik", a, b), (2, 3, 4),
     (1, 4, 2)),
    ("einsum_ell_sum", lambda m, a: m.einsum("...ij->ij", a), (2, 3, 4)),
    ("einsum_bcast_label", lambda m, a, b: m.einsum("bi,bi->b", a, b), (1, 3), (4, 3)),
    ("einsum_three", lambda m, a, b, c: m.einsum("ij,jk,kl->il", a, b, c), (2, 3), (3, 4),
     (4, 2)),
    ("einsum_list", lambda m, a, b: m.einsum("i,j->ij", [a, b]), (3,), (2,)),
    ("einsum_self", lambda m, a: m.einsum("ij,ij->", a, a), (3, 2)),
    ("tensordot_int", lambda m, a, b: m.tensordot(a, b, 2), (2, 3, 4), (3, 4, 2)),
    ("tensordot_lists", lambda m, a, b: m.tensordot(a, b, ([0, 2], [1, 0])), (2, 3, 4),
     (4, 2, 3)),
    ("addmm", lambda m, c, a, b: m.addmm(c, a, b, beta=0.5, alpha=2.0), (3, 2), (3, 4),
     (4, 2)),
    ("addmm_bcast", lambda m, c, a, b: c.addmm(a, b), (2,), (3, 4), (4, 2)),
    ("addmv", lambda m, c, a, b: m.addmv(c, a, b, alpha=-1.0), (3,), (3, 4), (4,)),
    ("baddbmm", lambda m, c, a, b: m.baddbmm(c, a, b, beta=2.0), (2, 3, 2), (2, 3, 4),
     (2, 4, 2)),
    ("addbmm", lambda m, c, a, b: m.addbmm(c, a, b), (3, 2), (2, 3, 4), (2, 4, 2)),
    ("linear", lambda m, x, w, b: m.nn.functional.linear(x, w, b), (4, 3), (2, 3), (2,)),
    ("linear_nobias", lambda m, x, w: m.nn.functional.linear(x, w), (4, 3), (2, 3)),
    ("linear_1d", lambda m, x, w, b: m.nn.functional.linear(x, w, b), (3,), (2, 3), (2,)),
    ("linear_1d_nobias", lambda m, x, w: m.nn.functional.linear(x, w), (3,), (2, 3)),
    ("linear_3d", lambda m, x, w, b: m.nn.functional.linear(x, w, b), (2, 4, 3), (2, 3),
     (2,)),
    ("linear_3d_nobias", lambda m, x, w: m.nn.functional.linear(x, w), (2, 4, 3), (2, 3)),
    ("linear_4d", lambda m, x, w, b: m.nn.functional.linear(x, w, b), (2, 1, 2, 3), (4, 3),
     (4,)),
    ("linear_w1d", lambda m, x, w: m.nn.functional.linear(x, w), (4, 3), (3,)),
    ("linear_w1d_3d_nobias", lambda m, x, w: m.nn.functional.linear(x, w), (2, 4, 3), (3,)),
    ("linear_1d_w1d", lambda m, x, w: m.nn.functional.linear(x, w), (3,), (3,)),
    ("linear_bias_bcast", lambda m, x, w, b: m.nn.functional.linear(x, w, b), (4, 3), (2, 3),
     (1,)),
    ("bilinear", lambda m, x, y, w, b: m.nn.functional.bilinear(x, y, w, b), (2, 3), (2, 2),
     (2, 3, 2), (2,)),
    ("det", lambda m, a: m.linalg.det(a), (3, 3)),
    ("det_batch", lambda m, a: a.det(), (2, 2, 2)),
    ("slogdet", lambda m, a: m.linalg.slogdet(a)[1], (3, 3)),
    ("logdet_spd", lambda m, a: m.logdet(spd(m, a)), (3, 3)),
    ("inv", lambda m, a: m.linalg.inv(spd(m, a)), (3, 3)),
    ("inverse_batch", lambda m, a: m.inverse(spd(m, a)), (2, 2, 2)),
    ("solve", lambda m, a, b: m.linalg.solve(spd(m, a), b), (3, 3), (3, 2)),
    ("solve_vec", lambda m, a, b: m.linalg.solve(spd(m, a), b), (3, 3), (3,)),
    ("solve_right", lambda m, a, b: m.linalg.solve(spd(m, a), b, left=False), (3, 3),
     (2, 3)),
    ("cholesky", lambda m, a: m.linalg.cholesky(spd(m, a)), (3, 3)),
    ("cholesky_upper", lambda m, a: m.linalg.cholesky(spd(m, a), upper=True), (2, 3, 3)),
    ("qr", sign_free_qr, (4, 3)),
    ("qr_square", sign_free_qr, (3, 3)),
    ("svdvals", lambda m, a: m.linalg.svdvals(a), (4, 3)),
    ("svdvals_wide", lambda m, a: m.linalg.svdvals(a), (2, 4)),
    ("svd", sign_free_svd, (4, 3)),
    ("svd_wide", sign_free_svd, (2, 3)),
    ("eigvalsh", lambda m, a: m.linalg.eigvalsh(sym(a)), (3, 3)),
    ("eigh", sign_free_eigh, (3, 3)),
    ("vector_norm", lambda m, a: m.linalg.vector_norm(a, 3, dim=1), (3, 4)),
    ("vector_norm_inf", lambda m, a: m.linalg.vector_norm(a, float("inf")), (3, 4)),
    ("matrix_norm_fro", lambda m, a: m.linalg.matrix_norm(a), (2, 3, 4)),
    ("matrix_norm_nuc", lambda m, a: m.linalg.matrix_norm(a, "nuc"), (3, 4)),
    ("matrix_norm_2", lambda m, a: m.linalg.matrix_norm(a, 2), (3, 4)),
    ("matrix_norm_1", lambda m, a: m.linalg.matrix_norm(a, 1, keepdim=True), (2, 3, 4)),
    ("matrix_norm_inf", lambda m, a: m.linalg.matrix_norm(a, float("inf"), dim=(0, 2)),
     (3, 2, 4)),
    ("linalg_norm_vec", lambda m, a: m.linalg.norm(a, 1, dim=0), (3, 4)),
    ("linalg_norm_mat", lambda m, a: m.linalg.norm(a, "fro"), (3, 4)),
    ("linalg_norm_default", lambda m, a: m.linalg.norm(a), (2, 3, 4)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_against_torch(case):
    name, fn, *specs = case
    check(fn, *specs, atol=1e-4, rtol=1e-4)


# torch only: finite differences would perturb the detached operands too
TORCH_ONLY = [
    ("linear_x_only", lambda m, x, w, b: m.nn.functional.linear(x, w.detach(), b.detach()),
     (2, 4, 3), (2, 3), (2,)),
    ("linear_w_only", lambda m, x, w, b: m.nn.functional.linear(x.detach(), w, b), (2, 4, 3),
     (2, 3), (2,)),
    ("linear_b_only", lambda m, x, w, b: m.nn.functional.linear(x.detach(), w.detach(), b),
     (4, 3), (2, 3), (2,)),
]


@pytest.mark.parametrize("case", TORCH_ONLY, ids=[c[0] for c in TORCH_ONLY])
def test_against_torch_partial_grads(case):
    name, fn, *specs = case
    check(fn, *specs, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_finite_differences(case):
    name, fn, *specs = case
    gradcheck(fn, *specs)


def test_matmul_2d_rule_hands_views_to_blas():
    # the 2-D rule multiplies by transposed views: no contiguous copy of either operand
    a = flow.randn(64, 32, requires_grad=True)
    b = flow.randn(32, 16, requires_grad=True)
    w = flow.randn(64, 16)
    seen = []
    orig = np.matmul

    class Spy:
        def __getattr__(self, name):
            if name == "matmul":
                def matmul(x, y):
                    seen.append((x.flags["C_CONTIGUOUS"] or x.flags["F_CONTIGUOUS"],
                                 y.flags["C_CONTIGUOUS"] or y.flags["F_CONTIGUOUS"],
                                 x.base is not None or y.base is not None))
                    return orig(x, y)
                return matmul
            return getattr(np, name)

    from flowgrad.ops import linalg

    kernel = linalg._matmul.kernel
    linalg._matmul.kernel = lambda xp, x, y: kernel(Spy(), x, y)
    try:
        ((a @ b) * w).sum().backward()
    finally:
        linalg._matmul.kernel = kernel
    assert len(seen) == 3 and all(c1 and c2 for c1, c2, _ in seen)
    assert any(views for *_, views in seen[1:])  # the backward products read .mT views
    np.testing.assert_allclose(a.grad.numpy(), w.numpy() @ b.detach().numpy().T, rtol=1e-5)


class _OpRecorder:
    """An interpreter that notes the name of every op run through it, then runs it eagerly."""

    def __init__(self):
        self.names = []

    def apply(self, op, inputs, attrs):
        from flowgrad.autograd.interpreter import AutogradInterpreter

        self.names.append(op.name)
        return AutogradInterpreter.apply(op, inputs, attrs)


def _ops_run_by(fn):
    from flowgrad.autograd.interpreter import using_interpreter

    rec = _OpRecorder()
    with using_interpreter(rec):
        fn()
    return rec.names


@pytest.mark.parametrize("shape", [(5, 3), (2, 5, 3)], ids=["2d", "3d"])
def test_linear_backward_is_two_gemms_and_one_reduction(shape):
    # no transpose/permute/clone: dx = dy @ w, dw = dy^T @ x (rows folded), db = sum(dy), and
    # each leaf's .grad takes the fresh array
    x = flow.randn(*shape, requires_grad=True)
    w = flow.randn(4, 3, requires_grad=True)
    b = flow.randn(4, requires_grad=True)
    y = flow.nn.functional.linear(x, w, b)
    dy = flow.randn(*y.shape)
    assert _ops_run_by(lambda: y.backward(dy)) == ["matmul", "linear_wgrad", "sum"]
    x2, dy2 = x.detach().numpy().reshape(-1, 3), dy.numpy().reshape(-1, 4)
    np.testing.assert_allclose(w.grad.numpy(), dy2.T @ x2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), dy2.sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy().reshape(-1, 3), dy2 @ w.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    assert w.grad.is_contiguous() and w.grad.shape == w.shape


def _inplace_after_linear(m, which):
    """Write to one operand in place between forward and backward; return the grads."""
    x0 = m.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    w = m.tensor(np.ones((4, 3)), requires_grad=which != "x_frozen_w")
    b = m.tensor(np.ones(4), requires_grad=True)
    x = x0 * 1
    y = m.nn.functional.linear(x, w, b)
    if which == "bias":
        with m.no_grad():
            b.add_(1)
    else:
        x.mul_(2)
    y.sum().backward()
    return x0.grad.numpy(), b.grad.numpy()


@pytest.mark.parametrize("which", ["bias", "x_frozen_w", "x"])
def test_linear_saves_what_torch_saves(which):
    # torch's addmm keeps x only for the weight's grad and never the bias: writing to those
    # in place before backward is legal, and writing to a saved x raises, in both
    if which == "x":
        with pytest.raises(RuntimeError, match="modified by an in-?place operation"):
            _inplace_after_linear(torch, which)
        with pytest.raises(RuntimeError, match="modified by an in-?place operation"):
            _inplace_after_linear(flow, which)
        return
    for ours, theirs in zip(_inplace_after_linear(flow, which),
                            _inplace_after_linear(torch, which)):
        np.testing.assert_array_equal(ours, theirs)


# ---- a leaf's .grad takes a fresh gradient's storage, and never shares one ----------------
def _arrays_seen_elsewhere(grad):
    """Every array a live tensor or saved tensor other than `grad` holds."""
    import gc

    from flowgrad.autograd.node import SavedTensor

    gc.collect()
    out = []
    for o in gc.get_objects():
        if issubclass(type(o), flow.Tensor) and o is not grad:
            out.append(o._data)
        elif type(o) is SavedTensor and o.is_output:
            out.append(o.data)
    return out


def assert_grads_own_storage(*leaves):
    for i, p in enumerate(leaves):
        assert p.grad is not None, f"leaf {i} got no grad"
        shared = [a.shape for a in _arrays_seen_elsewhere(p.grad)
                  if np.may_share_memory(p.grad._data, a)]
        assert not shared, f"leaf {i}'s .grad shares storage with arrays of shapes {shared}"


def _mlp_step_leaves():
    x = flow.randn(8, 6)
    target = flow.tensor(np.arange(8) % 3)
    l1, l2 = flow.nn.Linear(6, 5), flow.nn.Linear(5, 3)
    loss = flow.nn.functional.cross_entropy(l2(flow.relu(l1(x))), target)
    return loss, [l1.weight, l1.bias, l2.weight, l2.bias]


def test_training_step_grads_take_storage_without_copies():
    loss, params = _mlp_step_leaves()
    names = _ops_run_by(loss.backward)
    assert "clone" not in names and "transpose" not in names and "permute" not in names
    assert_grads_own_storage(*params)
    grads = [p.grad for p in params]
    loss2, _ = _mlp_step_leaves()  # a second step accumulates into the same .grad objects
    assert all(p.grad is g for p, g in zip(params, grads))


def test_broadcast_grad_reduced_by_the_engine_is_taken():
    # sum_to's result is a reshape of its own reduction: private, so taken, not copied
    x = flow.randn(4, 3, requires_grad=True)
    b = flow.randn(3, requires_grad=True)
    names = _ops_run_by(lambda: (x * 2 + b).sum().backward())
    assert names.count("clone") == 0
    assert_grads_own_storage(x, b)
    np.testing.assert_array_equal(b.grad.numpy(), np.full(3, 4.0, np.float32))


def test_same_grad_flowing_to_two_leaves_is_copied_once():
    a = flow.randn(3, 2, requires_grad=True)
    b = flow.randn(3, 2, requires_grad=True)
    c = flow.full((3, 2), 2.0)
    names = _ops_run_by(lambda: ((a + b) * c).sum().backward())  # add passes dy on twice
    assert names.count("clone") == 1
    assert_grads_own_storage(a, b)
    a.grad.add_(1)
    np.testing.assert_array_equal(b.grad.numpy(), np.full((3, 2), 2.0, np.float32))


def test_users_gradient_is_copied():
    # backward(gradient=g): g stays the caller's, so the leaf's .grad must not take it
    a = flow.randn(3, 2, requires_grad=True)
    g = flow.ones(3, 2)
    a.backward(g)
    assert_grads_own_storage(a)
    (a * 1).backward(g)
    np.testing.assert_array_equal(g.numpy(), np.ones((3, 2), np.float32))


def test_grad_that_is_a_view_of_another_grad_is_copied():
    # add hands the same dy to a and to reshape's rule, whose result views dy's storage
    a = flow.randn(6, requires_grad=True)
    b = flow.randn(2, 3, requires_grad=True)
    (a + b.reshape(6)).backward(flow.arange(6.0))
    assert_grads_own_storage(a, b)
    a.grad.zero_()
    np.testing.assert_array_equal(b.grad.numpy(), np.arange(6.0).reshape(2, 3))


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph")
def test_create_graph_grads_share_nothing():
    x = flow.randn(4, 3, requires_grad=True)
    w = flow.randn(2, 3, requires_grad=True)
    b = flow.randn(2, requires_grad=True)
    y = flow.nn.functional.linear(x, w, b)
    (y * y).sum().backward(create_graph=True)
    assert w.grad.grad_fn is not None
    assert_grads_own_storage(x, w, b)
    tw = torch.tensor(w.detach().numpy(), requires_grad=True)
    tx = torch.tensor(x.detach().numpy())
    ty = torch.nn.functional.linear(tx, tw, torch.tensor(b.detach().numpy()))
    (ty * ty).sum().backward(create_graph=True)
    w.grad.sum().backward()  # the second derivative reads the saved tensors unharmed
    tw.grad.sum().backward()
    np.testing.assert_allclose(w.grad.detach().numpy(), tw.grad.detach().numpy(), rtol=1e-5)


def test_hooks_returning_their_input():
    w = flow.randn(2, 3, requires_grad=True)
    w.register_hook(lambda g: g)
    x = flow.randn(4, 3, requires_grad=True)
    stash = []
    x.register_hook(lambda g: stash.append(g) or g)  # someone else keeps it: must copy
    h = flow.nn.functional.linear(x, w)
    h.retain_grad()
    h.register_hook(lambda g: g)
    c = flow.randn(4, 2)
    names = _ops_run_by(lambda: (h * c).sum().backward())
    assert names.count("clone") == 2  # h (retain_grad: the gradient flows on) and x
    assert_grads_own_storage(w, x, h)
    assert not np.may_share_memory(x.grad._data, stash[0]._data)


def test_autograd_grad_result_does_not_alias_retained_grad():
    x = flow.randn(3, requires_grad=True)
    y = x * 2
    y.retain_grad()
    g, = flow.autograd.grad((y * 3).sum(), [y])
    assert y.grad is not None and not np.may_share_memory(g._data, y.grad._data)
    g.zero_()
    np.testing.assert_array_equal(y.grad.numpy(), np.full(3, 3.0, np.float32))


def test_einsum_path_is_cached():
    from flowgrad.ops import einsum as E

    a, b, c = flow.randn(3, 4), flow.randn(4, 5), flow.randn(5, 2)
    flow.einsum("ij,jk,kl->il", a, b, c)
    n = len(E._PATHS)
    flow.einsum("ij,jk,kl->il", a, b, c)
    assert len(E._PATHS) == n and n >= 1


ERRORS = [
    ("matmul_shape", lambda: flow.randn(2, 3) @ flow.randn(4, 2), RuntimeError,
     r"matmul: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x2\)"),
    ("matmul_0d", lambda: flow.matmul(flow.tensor(1.0), flow.randn(2)), RuntimeError,
     r"matmul.*at least 1D"),
    ("mm_ndim", lambda: flow.mm(flow.randn(2, 3, 4), flow.randn(4, 2)), RuntimeError,
     r"mm: self must be a 2D tensor, got shape \(2, 3, 4\)"),
    ("bmm_batch", lambda: flow.bmm(flow.randn(2, 3, 4), flow.randn(3, 4, 2)), RuntimeError,
     r"bmm: batch sizes differ"),
    ("einsum_shape", lambda: flow.einsum("ij,jk", flow.ones(2, 3), flow.ones(4, 3)),
     RuntimeError, r"einsum\(\): subscript j has size 4 for operand 1"),
    ("einsum_ndim", lambda: flow.einsum("ijk,jk", flow.ones(2, 3), flow.ones(3, 3)),
     RuntimeError, r"einsum\(\): the number of subscripts .* \(3\) .* dimensions \(2\)"),
    ("einsum_operands", lambda: flow.einsum("ij,jk", flow.ones(2, 3)), RuntimeError,
     r"einsum\(\): fewer operands"),
    ("einsum_output", lambda: flow.einsum("ij->k", flow.ones(2, 3)), RuntimeError,
     r"einsum\(\): output subscript k does not appear"),
    ("einsum_chars", lambda: flow.einsum("i1->i", flow.ones(2, 3)), RuntimeError,
     r"einsum\(\): invalid subscript"),
    ("tensordot_dims", lambda: flow.tensordot(flow.ones(2, 3), flow.ones(2, 3), ([1], [1, 0])),
     RuntimeError, r"tensordot: both dim lists"),
    ("tensordot_size", lambda: flow.tensordot(flow.ones(2, 3), flow.ones(2, 3), ([1], [0])),
     RuntimeError, r"tensordot: contracted dimensions need to match"),
    ("tensordot_range", lambda: flow.tensordot(flow.ones(2, 3), flow.ones(2, 3), ([2], [0])),
     IndexError, r"tensordot.*out of range"),
    ("linear_shape", lambda: flow.nn.functional.linear(flow.ones(2, 3), flow.ones(4, 5)),
     RuntimeError, r"linear: mat1 and mat2 shapes cannot be multiplied \(2x3 and 5x4\)"),
    ("bilinear_shape", lambda: flow.nn.functional.bilinear(flow.ones(2, 3), flow.ones(2, 2),
                                                          flow.ones(4, 3, 3)),
     RuntimeError, r"bilinear: expected"),
    ("addmm_bcast", lambda: flow.addmm(flow.ones(3, 3), flow.ones(2, 3), flow.ones(3, 2)),
     RuntimeError, r"addmm: input of shape \(3, 3\) does not broadcast"),
    ("det_square", lambda: flow.linalg.det(flow.ones(2, 3)), RuntimeError,
     r"linalg.det: A must be batches of square matrices, but they are 2 by 3 matrices"),
    ("inv_square", lambda: flow.linalg.inv(flow.ones(3, 2)), RuntimeError,
     r"linalg.inv: A must be batches of square"),
    ("det_int", lambda: flow.linalg.det(flow.ones(3, 3, dtype=flow.int64)), RuntimeError,
     r"linalg.det: Expected a floating point or complex tensor as input. Got int64"),
    ("det_1d", lambda: flow.linalg.det(flow.ones(3)), RuntimeError,
     r"linalg.det: The input tensor A must have at least 2 dimensions"),
    ("inv_singular", lambda: flow.linalg.inv(flow.zeros(2, 2)), RuntimeError,
     r"linalg.inv: .*singular"),
    ("cholesky_not_pd", lambda: flow.linalg.cholesky(-flow.eye(2)), RuntimeError,
     r"linalg.cholesky: .*not positive-definite"),
    ("solve_shape", lambda: flow.linalg.solve(flow.eye(3), flow.ones(2, 2)), RuntimeError,
     r"linalg.solve: Incompatible shapes of A and B .*\(3x3 and 2x2\)"),
    ("solve_dtype", lambda: flow.linalg.solve(flow.eye(2), flow.ones(2, dtype=flow.float64)),
     RuntimeError, r"linalg.solve: Expected A and B to have the same dtype"),
    ("qr_mode", lambda: flow.linalg.qr(flow.ones(2, 2), mode="x"), RuntimeError,
     r"linalg.qr: qr received unrecognized mode 'x'"),
    ("eigh_uplo", lambda: flow.linalg.eigh(flow.eye(2), UPLO="X"), RuntimeError,
     r"linalg.eigh: UPLO must be"),
    ("matrix_norm_ord", lambda: flow.linalg.matrix_norm(flow.ones(2, 2), 3), RuntimeError,
     r"linalg.matrix_norm: Order 3 not supported"),
    ("matrix_norm_dim", lambda: flow.linalg.matrix_norm(flow.ones(2, 2), dim=(0, 0)),
     RuntimeError, r"linalg.matrix_norm: dim must be a 2-tuple"),
    ("vector_norm_dim", lambda: flow.linalg.vector_norm(flow.ones(2, 2), dim=2), IndexError,
     r"vector_norm.*out of range"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_arguments(case):
    name, fn, exc, match = case
    with pytest.raises(exc, match=match):
        fn()


def test_full_svd_forward_reconstructs():
    a = np.random.default_rng(0).standard_normal((2, 4, 3))
    U, S, Vh = flow.linalg.svd(flow.tensor(a))
    tU, tS, tVh = torch.linalg.svd(torch.tensor(a))
    assert U.shape == tuple(tU.shape) and Vh.shape == tuple(tVh.shape)
    np.testing.assert_allclose(S.numpy(), tS.numpy(), rtol=1e-10)
    rec = U[..., :3] @ (S.unsqueeze(-1) * Vh)
    np.testing.assert_allclose(rec.numpy(), a, atol=1e-10)


@pytest.mark.parametrize("call", [
    lambda m, i: m.addmm(i, m.ones(2, 2), m.ones(2, 2), beta=0),
    lambda m, i: m.addmv(i[0], m.ones(2, 2), m.ones(2), beta=0),
    lambda m, i: m.baddbmm(i, m.ones(1, 2, 2), m.ones(1, 2, 2), beta=0),
    lambda m, i: m.addr(i, m.ones(2), m.ones(2), beta=0),
])
def test_beta_zero_input_gets_zero_gradient_as_torch(call):
    """beta=0 ignores input's values (a nan in it stays out) but keeps it in the graph: torch
    gives it a zeros gradient (flowgrad gave None: an optimizer then skipped it)."""
    got = []
    for m in (torch, flow):
        i = m.tensor(np.full((2, 2), np.nan, np.float32), requires_grad=True)
        y = call(m, i)
        y.sum().backward()
        got.append((y.detach().numpy(), i.grad.numpy()))
    np.testing.assert_array_equal(got[1][0], got[0][0])
    np.testing.assert_array_equal(got[1][1], got[0][1])
