"""In-place writes under nested forward AD (jvp of jvp), against torch.

An inner level's tangent is itself dual at the outer level: `jvp(lambda a: jvp(f, (a,),
(cos(3 a),))[1], ...)`. A write in f changes the inner tangent (a constant written makes it
0 there), and the outer level must see that change. flowgrad wrote the inner tangent with a
raw array write, so the outer tangent of the inner tangent kept its old values: jvp of jvp
came out wrong with no error for most programs that write in place (636 of vmap_fuzz's first
1000 jvp_of_jvp seeds). Now `inplace.write_into` writes by a recorded copy_ whenever an
interpreter is current, and an expand's tangent is written at each memory location by the
element that changed (`forward_ad._last_written`), so the outer level follows.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow


def _setitem_under_no_grad(m, x):
    with m.no_grad():
        x[-1] = 0.75
    return x.sin() * 1.0


def _scaled_under_no_grad(m, x):
    with m.no_grad():
        x.mul_(2)
    return x.sin() * 1.0


def _constant_into_an_expand(m, x):  # vmap_fuzz jvp_of_jvp 203
    e = x[-1].expand(2)
    e[[1, 0]] = -0.5
    return x.sin() * 1.0


def _index_put_into_an_expand(m, x):
    x.expand(3, 2).index_put_((m.tensor([1]),), m.tensor(0.75, dtype=m.float64))
    return x.sin() * 1.0


def _masked_fill_of_an_expand(m, x):
    x.expand(3, 2).masked_fill_(m.tensor([False, True]), 0.25)
    return x.sin() * 1.0


def _row_of_an_expand_filled(m, x):
    x.expand(2, 2)[0].fill_(0.5)
    return x.sin() * 1.0


def _dual_value_written(m, x):
    x[0] = x[1] * 2
    return x.sin() * 1.0


def _written_through_a_view(m, x):
    x[0:1].mul_(3)
    return x.sin() * x


def _copied_into(m, x):
    x.copy_(x.flip(0) * 3)
    return x.cos() * 1.0


def _written_through_data(m, x):
    x.data[-1] = 0.75
    return x.sin() * 1.0


def _alias_of_an_expand_written(m, x):  # (the inner level strips .data; the outer keeps it)
    d = x.expand(3, 2).data
    with m.no_grad():
        d[[2]] = 0.75
    return x.sin() * 1.0


BODIES = [_setitem_under_no_grad, _scaled_under_no_grad, _constant_into_an_expand,
          _index_put_into_an_expand, _masked_fill_of_an_expand, _row_of_an_expand_filled,
          _dual_value_written, _written_through_a_view, _copied_into, _written_through_data,
          _alias_of_an_expand_written]
TRANSFORMS = ["jvp_of_jvp", "jvp_of_jvp_constant_inner", "vmap_jvp_of_jvp"]


def _run(m, body, transform):
    """The primal, the inner tangent and the outer tangent of the inner tangent of
    body(x), or RuntimeError where the program is refused."""
    F = m.func

    def inner(x):
        tangent = m.cos(3 * x) if transform != "jvp_of_jvp_constant_inner" else \
            m.tensor([0.3, 0.9], dtype=m.float64)
        return F.jvp(lambda a: body(m, a), (x,), (tangent,))

    def nested(x):  # (a tangent batched under vmap, as the input: torch's vmap refuses an
        return F.jvp(inner, (x,), (m.sin(2 * x) + 0.5,))  # unbatched one written in place)

    x = m.tensor([0.46, -0.3], dtype=m.float64)
    with np.errstate(all="ignore"):
        try:
            if transform == "vmap_jvp_of_jvp":
                xs = m.stack([x, m.tensor([-0.8, 1.1], dtype=m.float64)])
                (out, tangent), (_, tangent2) = F.vmap(nested)(xs)
            else:
                (out, tangent), (_, tangent2) = nested(x)
        except RuntimeError:
            return RuntimeError
    return [t.detach().numpy() for t in (out, tangent, tangent2)]


@pytest.mark.filterwarnings("ignore:Use of")
@pytest.mark.parametrize("body,transform", [
    pytest.param(b, t, id=f"{b.__name__[1:]}-{t}") for t in TRANSFORMS for b in BODIES])
def test_a_write_under_nested_jvp_matches_torch(body, transform):
    ours, theirs = _run(flow, body, transform), _run(torch, body, transform)
    if ours is RuntimeError or theirs is RuntimeError:
        assert ours is theirs, (ours, theirs)
        return
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore:Use of")
def test_the_table_computes():
    """A guard on the table: torch computes most rows (their tangents are compared)."""
    outcomes = [_run(torch, b, t) is RuntimeError for t in TRANSFORMS for b in BODIES]
    assert sum(outcomes) < len(outcomes) // 4


# x.data of jvp's input (make_dual's view of the primal) is that view at the levels below
# the jvp: where the primal is a leaf that requires grad there (a func.grad input, or a
# leaf autograd differentiates), a write into it is refused, as torch's. flowgrad took the
# write (vmap_fuzz grad_of_jvp 83, 143, 309, 363, 446, 812).
DATA_WRITES = {
    "setitem": lambda x: x.data.__setitem__(0, 0.75),
    "setitem through a view": lambda x: x.data[0:2].__setitem__(0, 0.75),
    "mul_": lambda x: x.data.mul_(2),
    "none": lambda x: None,
}


def _data_of_jvp_input_written(m, write, transform):
    F = m.func

    def f(x):
        DATA_WRITES[write](x)
        return x.sin()

    x = m.tensor([0.46, -0.3, 0.8], dtype=m.float64)
    try:
        if transform == "grad_of_jvp":
            out = F.grad(lambda a: F.jvp(f, (a,), (m.cos(3 * a),))[1].sin().sum())(x)
        elif transform == "backward_of_jvp":
            leaf = x.clone().requires_grad_()
            tangent = F.jvp(f, (leaf,), (m.cos(3 * leaf),))[1]
            out = m.autograd.grad(tangent.sin().sum(), leaf)[0]
        else:
            out = F.jvp(f, (x,), (m.cos(3 * x),))[1]
    except RuntimeError as error:
        assert "leaf" in str(error)
        return RuntimeError
    return out.detach().numpy()


@pytest.mark.parametrize("transform", ["grad_of_jvp", "backward_of_jvp", "jvp"])
@pytest.mark.parametrize("write", sorted(DATA_WRITES))
def test_a_write_into_data_of_a_jvp_input_as_torch(write, transform):
    ours = _data_of_jvp_input_written(flow, write, transform)
    theirs = _data_of_jvp_input_written(torch, write, transform)
    if ours is RuntimeError or theirs is RuntimeError:
        assert ours is theirs, (ours, theirs)
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
