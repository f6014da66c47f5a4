"""The arguments func.grad, jacrev and jacfwd do not differentiate, against torch.func.

torch wraps every tensor of the positional arguments at the transform's level, not only
the differentiated ones: inside the function the others are the level's own. In-place
writes to them are allowed (and the caller's tensor takes them), `.data` and detach_()
strip that level alone. flowgrad passed them through as captures: the writes were refused,
and `x.data` of one inside grad(grad(f)) stripped the outer level, so the outer gradient
through it came out 0, with no error.
"""
import pytest
import torch

import flowgrad as flow

W = [0.3, -1.2, 2.0]
X = [1.5, -0.5, 0.7]


def _t(m, values):
    return m.tensor(values, dtype=m.float64)


# ---- bodies f(m, w, x): w differentiated, x not ----------------------------------------
def mul_(m, w, x):
    x.mul_(2)
    return (w * x).sin().sum()


def setitem(m, w, x):
    x[0] = 5.0
    return (w * x).sin().sum()


def view_write(m, w, x):
    x[1:].add_(1.0)
    return (w * x * x).sum()


def data_read(m, w, x):
    d = x.data
    return (w * d * d).sum()


def data_write(m, w, x):
    x.data.mul_(3)
    return (w * x).sum()


def detach_(m, w, x):
    x.detach_()
    return (w * x * x).sum()


def copy_from_input(m, w, x):  # x becomes a function of w at the level
    x.copy_(w * 2)
    return (w * x).sum()


def no_grad_write(m, w, x):
    with m.no_grad():
        x.sub_(0.25)
    return (w.exp() * x).sum()


BODIES = [mul_, setitem, view_write, data_read, data_write, detach_, copy_from_input,
          no_grad_write]


# ---- transforms: (m, body, w, x) -> tensors ---------------------------------------------
def t_grad(m, body, w, x):
    return [m.func.grad(lambda w, x: body(m, w, x))(w, x)]


def t_grad_argnums(m, body, w, x):  # x first, w differentiated by argnums
    return [m.func.grad(lambda x, w: body(m, w, x), argnums=1)(x, w)]


def t_jacrev(m, body, w, x):
    return [m.func.jacrev(lambda w, x: body(m, w, x))(w, x)]


def t_jacfwd(m, body, w, x):
    return [m.func.jacfwd(lambda w, x: body(m, w, x))(w, x)]


def t_hessian(m, body, w, x):
    return [m.func.hessian(lambda w, x: body(m, w, x))(w, x)]


def t_vmap_grad(m, body, w, x):
    ws = w.expand(2, 3) * _t(m, [[1.0], [0.5]])
    return [m.func.vmap(m.func.grad(lambda w, x: body(m, w, x)), in_dims=(0, None))(ws, x)]


def t_grad_of_grad(m, body, w, x):  # x: the outer grad's input, the inner's other argument
    inner = m.func.grad(lambda w, x: body(m, w, x))
    return list(m.func.grad(lambda w, x: inner(w, x).sum(), argnums=(0, 1))(w, x))


def t_jvp_of_grad(m, body, w, x):
    inner = m.func.grad(lambda w, x: body(m, w, x))
    return list(m.func.jvp(lambda x: inner(w, x), (x,), (m.ones_like(x),)))


def t_requires_grad_outside(m, body, w, x):  # x has a history outside: writes rebase it
    x.requires_grad = True
    y = x * 1
    g = m.func.grad(lambda w, y: body(m, w, y))(w, y)
    return [g, *m.autograd.grad((g.sum() + y.sum()), x, allow_unused=True)]


def t_view_requiring_grad(m, body, w, x):  # x a view with a history outside
    x.requires_grad = True
    y = (x * 1)[:]
    g = m.func.grad(lambda w, y: body(m, w, y))(w, y)
    return [g, *m.autograd.grad((g.sum() + y.sum()), x, allow_unused=True)]


TRANSFORMS = [t_grad, t_grad_argnums, t_jacrev, t_jacfwd, t_hessian, t_vmap_grad,
              t_grad_of_grad, t_jvp_of_grad, t_requires_grad_outside, t_view_requiring_grad]


def _run(m, transform, body):
    w, x = _t(m, W), _t(m, X)
    try:
        out = transform(m, body, w, x)
    except Exception as e:  # noqa: BLE001 (the exception is the observation)
        return "raise", type(e).__name__, str(e)
    return "ok", [o for o in out if o is not None], x


def _same(a, b):
    assert a.requires_grad == b.requires_grad, (a, b)
    assert tuple(a.shape) == tuple(b.shape), (a, b)
    assert torch.allclose(torch.from_numpy(a.detach().numpy().copy()), b.detach(),
                          rtol=1e-10, atol=1e-12), (a, b)


@pytest.mark.parametrize("transform", TRANSFORMS, ids=lambda t: t.__name__)
@pytest.mark.parametrize("body", BODIES, ids=lambda b: b.__name__)
def test_nondifferentiated_arguments_as_torch(body, transform):
    ours, theirs = _run(flow, transform, body), _run(torch, transform, body)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "raise":
        return
    assert len(ours[1]) == len(theirs[1])
    for a, b in zip(ours[1], theirs[1]):
        _same(a, b)
    _same(ours[2].detach(), theirs[2].detach())  # the caller's x, after the writes
