"""flowgrad.func, autograd.functional and autograd.forward_ad against torch's own."""
import numpy as np
import pytest
import torch

import flowgrad as flow
from flowgrad.func import functional_call, grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4))
V = RNG.standard_normal(4)


def same(a, b, atol=1e-6):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for p, q in zip(a, b):
            same(p, q, atol)
        return
    assert tuple(a.shape) == tuple(b.shape), (tuple(a.shape), tuple(b.shape))
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=atol, rtol=1e-5)


def both(fn, *arrays):
    """fn(module, *tensors) on flowgrad and on torch, float64 inputs."""
    return (fn(flow, *[flow.tensor(a) for a in arrays]),
            fn(torch, *[torch.tensor(a) for a in arrays]))


def f1(m, x):
    return (m.tanh(x) * x.exp()).sum()


def f2(m, x):
    return m.sin(x) @ x.T + x.sum()


TRANSFORMS = [
    ("grad", lambda m, x: m.func.grad(lambda x: f1(m, x))(x)),
    ("grad_and_value", lambda m, x: m.func.grad_and_value(lambda x: f1(m, x))(x)),
    ("jacrev", lambda m, x: m.func.jacrev(lambda x: f2(m, x))(x)),
    ("jacfwd", lambda m, x: m.func.jacfwd(lambda x: f2(m, x))(x)),
    ("hessian", lambda m, x: m.func.hessian(lambda x: f1(m, x))(x)),
    ("jacrev_jacrev", lambda m, x: m.func.jacrev(m.func.jacrev(lambda x: f1(m, x)))(x)),
    ("jacfwd_jacfwd", lambda m, x: m.func.jacfwd(m.func.jacfwd(lambda x: f1(m, x)))(x)),
    ("grad_grad", lambda m, x: m.func.grad(lambda y: m.func.grad(
        lambda z: f1(m, z))(y).sum())(x)),
    ("vjp", lambda m, x: m.func.vjp(lambda x: f2(m, x), x)[1](x @ x.T)),
    ("jvp", lambda m, x: m.func.jvp(lambda x: f2(m, x), (x,), (x.cos(),))),
    ("vmap_grad", lambda m, x: m.func.vmap(m.func.grad(lambda x: f1(m, x)))(x)),
    ("vmap_hessian", lambda m, x: m.func.vmap(m.func.hessian(lambda x: f1(m, x)))(x)),
    ("vmap_jacrev", lambda m, x: m.func.vmap(m.func.jacrev(lambda x: m.sin(x) * x))(x)),
    ("vmap_nested", lambda m, x: m.func.vmap(m.func.vmap(lambda a, b: a * b + a.sum()),
                                             in_dims=(0, None))(x, x[0])),
    ("vmap_in_out_dims", lambda m, x: m.func.vmap(lambda a, b: (a @ b, a.sum()), in_dims=(1, None),
                                                  out_dims=(1, 0))(x, x)),
    ("vmap_dict", lambda m, x: m.func.vmap(lambda d: d["a"] * d["b"])({"a": x, "b": x})),
    ("grad_vmap", lambda m, x: m.func.grad(lambda w: m.func.vmap(
        lambda r: (r * w).tanh().sum())(x).sum())(x[0])),
    ("jvp_of_grad", lambda m, x: m.func.jvp(m.func.grad(lambda x: f1(m, x)), (x,), (x,))),
    # a batched 0-d index selected every example's element 0 (int() of the placeholder)
    ("vmap_0d_index", lambda m, x: m.func.vmap(lambda r, i: r[i])(x, m.tensor([2, 0, 3]))),
    ("vmap_one_hot", lambda m, x: m.func.vmap(lambda r, i: m.nn.functional.one_hot(i, 4) * r)(
        x, m.tensor([2, 0, 3]))),
    ("vmap_topk", lambda m, x: tuple(m.func.vmap(lambda r: r.topk(2))(x))),
    ("vmap_searchsorted", lambda m, x: m.func.vmap(lambda r: m.searchsorted(
        m.tensor([-0.5, 0.0, 0.5], dtype=r.dtype), r))(x)),
]


@pytest.mark.parametrize("fn", [t[1] for t in TRANSFORMS], ids=[t[0] for t in TRANSFORMS])
def test_transforms_match_torch_func(fn):
    ours, theirs = both(fn, X)
    same(ours, theirs)


def test_per_sample_grads_equal_a_loop_and_torch():
    flow.manual_seed(0)
    model = flow.nn.Sequential(flow.nn.Conv2d(1, 4, 3), flow.nn.ReLU(), flow.nn.Flatten(),
                               flow.nn.Linear(4 * 6 * 6, 5))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = flow.randn(6, 1, 8, 8), flow.tensor([0, 1, 2, 3, 4, 0])

    def loss(p, xb, yb):
        out = functional_call(model, p, (xb.unsqueeze(0),))
        return flow.nn.functional.cross_entropy(out, yb.unsqueeze(0))
    batched = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    for b in range(6):
        one = grad(loss)(params, x[b], y[b])
        for k in params:
            same(batched[k][b], one[k], atol=1e-5)
    tmodel = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                 torch.nn.Linear(4 * 6 * 6, 5))
    tparams = {k: torch.tensor(v.numpy()) for k, v in params.items()}

    def tloss(p, xb, yb):
        out = torch.func.functional_call(tmodel, p, (xb.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, yb.unsqueeze(0))
    theirs = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(
        tparams, torch.tensor(x.numpy()), torch.tensor(y.numpy()))
    for k in params:
        same(batched[k], theirs[k], atol=1e-5)


def test_vmap_randomness():
    x = flow.ones(4, 10)
    with pytest.raises(RuntimeError, match="randomness"):
        vmap(lambda r: flow.nn.functional.dropout(r, 0.5))(x)
    same_rows = vmap(lambda r: flow.nn.functional.dropout(r, 0.5), randomness="same")(x)
    assert all(np.array_equal(same_rows[0].numpy(), row.numpy()) for row in same_rows)
    diff = vmap(lambda r: flow.nn.functional.dropout(r, 0.5), randomness="different")(x)
    assert len({row.numpy().tobytes() for row in diff}) > 1
    drawn = vmap(lambda r: r + flow.randn(10), randomness="different")(x)
    assert drawn.shape == (4, 10) and len({row.numpy().tobytes() for row in drawn}) == 4


# in-place writes of a value that differs per example into a tensor that does not: torch
# refuses every one; flowgrad's random fills wrote a placeholder's zeros (no error) and fill_ /
# copy_ / setitem failed inside NumPy with its own message
BATCHED_INTO_UNBATCHED = [
    lambda m, x: x + m.empty(3).uniform_(),
    lambda m, x: x + m.empty(3).exponential_(),
    lambda m, x: x + m.empty(3).bernoulli_(0.5),
    lambda m, x: m.zeros(3).copy_(x),
    lambda m, x: m.zeros(3).fill_(x.sum()),
    lambda m, x: m.zeros(3).__setitem__(slice(None), x),
]


@pytest.mark.parametrize("case", range(len(BATCHED_INTO_UNBATCHED)))
def test_vmap_refuses_a_batched_write_into_an_unbatched_tensor(case):
    fn = BATCHED_INTO_UNBATCHED[case]
    with pytest.raises(RuntimeError):
        torch.vmap(lambda x: fn(torch, x), randomness="different")(torch.ones(2, 3))
    with pytest.raises(RuntimeError, match="batched result into a tensor that is not batched"):
        vmap(lambda x: fn(flow, x), randomness="different")(flow.ones(2, 3))


def test_vmap_in_place_fills_of_batched_tensors():
    rows = vmap(lambda x: x.clone().exponential_(), randomness="different")(flow.zeros(4, 3))
    assert len({r.numpy().tobytes() for r in rows}) == 4 and (rows.numpy() > 0).all()
    same(vmap(lambda x: x.clone().fill_(x.sum()))(flow.ones(2, 3)), flow.full((2, 3), 3.0))
    same(vmap(lambda x: x.clone().copy_(x * 2))(flow.ones(2, 3)), flow.full((2, 3), 2.0))


def test_vmap_refuses_reading_values_and_bad_in_dims():
    with pytest.raises(RuntimeError, match="item"):
        vmap(lambda r: r.sum().item())(flow.ones(2, 3))
    # these copied the placeholder storage (zeros, or one example's shape) with no error
    for fn, what in ((flow.tensor, "tensor"), (flow.scalar_tensor, "tensor"),
                     (flow.unique_consecutive, "unique_consecutive"),
                     (lambda r: flow.nn.functional.one_hot(r.long()), "one_hot")):
        with pytest.raises(RuntimeError, match=what):
            vmap(fn)(flow.arange(6.0).reshape(2, 3))
    with pytest.raises(ValueError, match="same size"):
        vmap(lambda a, b: a + b)(flow.ones(2), flow.ones(3))
    with pytest.raises(ValueError, match="out of range"):
        vmap(lambda a: a, in_dims=2)(flow.ones(2, 3))


def test_vjp_and_jvp_outputs():
    x = flow.tensor(X)
    out, fn = vjp(lambda a: a.sin(), x)
    same(fn(flow.ones(3, 4, dtype=flow.float64))[0], x.cos())
    _, t = jvp(lambda a: (a * a).sum(), (x,), (flow.ones(3, 4, dtype=flow.float64),))
    same(t, (2 * x).sum())
    assert jacfwd(lambda a: a * 2)(flow.tensor(V)).shape == (4, 4)
    assert jacrev(lambda a, b: a * b, argnums=(0, 1))(flow.tensor(V), flow.tensor(V))[1].shape \
        == (4, 4)
    same(hessian(lambda a: (a ** 3).sum())(flow.tensor(V)), flow.diag(6 * flow.tensor(V)))


def test_grads_batched_match_torch():
    ours = flow.tensor(X, requires_grad=True)
    theirs = torch.tensor(X, requires_grad=True)
    gos = RNG.standard_normal((5, 3, 4))
    a = flow.autograd.grad((ours.tanh() * ours).sum(0), ours, flow.tensor(gos[:, 0]),
                           is_grads_batched=True)
    b = torch.autograd.grad((theirs.tanh() * theirs).sum(0), theirs, torch.tensor(gos[:, 0]),
                            is_grads_batched=True)
    same(a, b)


FUNCTIONAL = [
    ("vjp", lambda m, x, v: m.autograd.functional.vjp(lambda a: m.sin(a) @ a.T, x, x @ x.T)),
    ("jvp", lambda m, x, v: m.autograd.functional.jvp(lambda a: m.sin(a) * a, x, x)),
    ("jacobian", lambda m, x, v: m.autograd.functional.jacobian(lambda a: m.sin(a) @ a.T, x)),
    ("jacobian_vectorize", lambda m, x, v: m.autograd.functional.jacobian(
        lambda a: m.sin(a) @ a.T, x, vectorize=True)),
    ("jacobian_forward", lambda m, x, v: m.autograd.functional.jacobian(
        lambda a: m.sin(a) @ a.T, x, vectorize=True, strategy="forward-mode")),
    ("jacobian_tuple", lambda m, x, v: m.autograd.functional.jacobian(
        lambda a, b: (a * b.sum(), b.exp()), (x, v))),
    ("hessian", lambda m, x, v: m.autograd.functional.hessian(lambda a: (a.exp() * a).sum(), x)),
    ("hessian_vectorize", lambda m, x, v: m.autograd.functional.hessian(
        lambda a: (a.exp() * a).sum(), x, vectorize=True)),
    ("hvp", lambda m, x, v: m.autograd.functional.hvp(lambda a: (a.exp() * a).sum(), x, x)),
    ("vhp", lambda m, x, v: m.autograd.functional.vhp(lambda a: (a.exp() * a).sum(), x, x)),
]


@pytest.mark.parametrize("fn", [t[1] for t in FUNCTIONAL], ids=[t[0] for t in FUNCTIONAL])
def test_autograd_functional_matches_torch(fn):
    ours, theirs = both(fn, X, X[:, 0])
    same(ours, theirs)


def test_functional_create_graph_and_strict():
    x = flow.tensor(V, requires_grad=True)
    _, h = flow.autograd.functional.hvp(lambda a: (a ** 3).sum(), x, flow.ones(4),
                                         create_graph=True)
    h.sum().backward()
    same(x.grad, flow.full((4,), 6.0, dtype=flow.float64))
    with pytest.raises(RuntimeError, match="independent of input 1"):
        flow.autograd.functional.vjp(lambda a, b: a * 2, (x, x), flow.ones(4), strict=True)


def test_forward_ad_api():
    import flowgrad.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        d = fwAD.make_dual(flow.tensor(V), flow.ones(4, dtype=flow.float64))
        p, t = fwAD.unpack_dual(flow.nn.functional.softmax(d, 0) * d)
        assert fwAD.unpack_dual(p).tangent is None
        with pytest.raises(RuntimeError, match="different size"):
            fwAD.make_dual(flow.tensor(V), flow.ones(3, dtype=flow.float64))
    with torch.autograd.forward_ad.dual_level():
        dt = torch.autograd.forward_ad.make_dual(torch.tensor(V),
                                                 torch.ones(4, dtype=torch.float64))
        pt, tt = torch.autograd.forward_ad.unpack_dual(torch.softmax(dt, 0) * dt)
    same(p, pt)
    same(t, tt)
    with pytest.raises(RuntimeError, match="no forward-AD level"):
        fwAD.make_dual(flow.tensor(V), flow.tensor(V))


def test_custom_function_jvp_and_vmap():
    class Cube(flow.autograd.Function):  # (setup_context style: torch's transforms refuse
        @staticmethod  # the other, as flowgrad's do)
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.x = inputs[0]

        @staticmethod
        def backward(ctx, dy):
            return dy * 3 * ctx.x ** 2

        @staticmethod
        def jvp(ctx, t):
            return t * 30  # deliberately not 3x^2: proves the staticmethod is used

        @staticmethod
        def vmap(info, in_dims, x):
            return x ** 3 + info.batch_size, 0

    x = flow.tensor([1.0, 2.0])
    assert jvp(Cube.apply, (x,), (flow.ones(2),))[1].tolist() == [30.0, 30.0]
    assert vmap(Cube.apply)(x).tolist() == [3.0, 10.0]

    class Square(flow.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, dy):
            raise AssertionError("not called")

    assert vmap(Square.apply)(x).tolist() == [1.0, 4.0]

    class Plain(Square):
        generate_vmap_rule = False
    with pytest.raises(RuntimeError, match="generate_vmap_rule"):
        vmap(Plain.apply)(x)

    class OldStyle(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    with pytest.raises(RuntimeError, match="setup_context"):
        vmap(OldStyle.apply)(x)


def test_every_differentiable_op_has_a_forward_rule():
    """A written JVP rule, or a reverse rule to derive one from; and no stale rows."""
    from flowgrad.ops import REGISTRY
    from flowgrad.ops.jvp_rules import JVP_RULES

    missing = [n for n, op in REGISTRY.items()
               if op.differentiable and n not in JVP_RULES and op.backward is None]
    assert not missing, f"ops with neither a JVP rule nor a reverse rule: {missing}"
    stale = [n for n in JVP_RULES if n not in REGISTRY or not REGISTRY[n].differentiable]
    assert not stale, f"JVP rules for ops that are gone or not differentiable: {stale}"
