"""In-place ops and version counters against torch: saved tensors modified in place make
backward fail (naming the op that saved them) without touching any .grad; in-place ops on
leaves that require grad are refused unless grad mode is off; on non-leaves they are
recorded."""
from __future__ import annotations

import numpy as np
import pytest
from test_autograd_semantics import X, flags, leaf, raises, same

import flowgrad as flow


def version(t):
    return t._version  # (an int, as torch's)


# op that saves a tensor, in-place change of that tensor, name of the node in flowgrad
SAVED = [
    ("mul", lambda m, h, w: h * w, lambda h: h.mul_(2), "mul_backward"),
    ("exp_output", lambda m, h, w: h.exp(), None, "exp_backward"),
    ("sin_input", lambda m, h, w: h.sin(), lambda h: h.add_(1), "sin_backward"),
    ("div", lambda m, h, w: w / h, lambda h: h.div_(2), "div_backward"),
    ("setitem", lambda m, h, w: h.cos(), lambda h: h.__setitem__(0, 5.0), "cos_backward"),
]


@pytest.mark.parametrize("name,f,modify,node", SAVED, ids=[s[0] for s in SAVED])
def test_modified_saved_tensor_raises_and_leaves_grads(name, f, modify, node):
    def scenario(m):
        x, w = leaf(m), leaf(m, X + 3)
        x.grad = m.ones(3, dtype=m.float64)
        h = x * 1
        y = f(m, h, w)
        target = y if modify is None else h
        with m.no_grad():
            (modify or (lambda t: t.mul_(2)))(target)
        err = raises(lambda: y.sum().backward())
        return err, x.grad, w.grad, version(target)
    same(scenario)
    x, w = leaf(flow), leaf(flow, X + 3)
    h = x * 1
    y = f(flow, h, w)
    with flow.no_grad():
        (modify or (lambda t: t.mul_(2)))(y if modify is None else h)
    with pytest.raises(RuntimeError, match=r"shape=\(3,\), dtype=float64.*"
                                           fr"{node}.*version 0.*version 1"):
        y.sum().backward()


def test_version_error_names_what_to_do():
    x = leaf(flow)
    h = x * 1
    y = h.sin()
    h.add_(1)
    with pytest.raises(RuntimeError, match="clone"):
        y.sum().backward()


def test_version_counter_counts_writes_and_is_shared():
    def scenario(m):
        x = m.tensor(X)
        d = x.detach()
        v = x[0:2]
        counts = [version(x)]
        x.add_(1)
        counts.append((version(x), version(d), version(v)))
        d[0] = 3.0
        counts.append((version(x), version(d), version(v)))
        v.mul_(2)
        counts.append((version(x), version(d), version(v)))
        return tuple(counts), x
    same(scenario)


INPLACE = [
    ("add_", lambda t: t.add_(1)),
    ("mul_", lambda t: t.mul_(2)),
    ("sub_", lambda t: t.sub_(1)),
    ("div_", lambda t: t.div_(2)),
    ("iadd", lambda t: t.__iadd__(1)),
    ("setitem", lambda t: t.__setitem__(1, 0.0)),
    ("clamp_", lambda t: t.clamp_(-1, 1)),
]


@pytest.mark.parametrize("name,op", INPLACE, ids=[i[0] for i in INPLACE])
def test_inplace_on_leaf_requiring_grad_raises(name, op):
    def scenario(m):
        x = leaf(m)
        err = raises(lambda: op(x))
        return err, x, version(x), flags(x), x.grad
    same(scenario)
    with pytest.raises(RuntimeError, match=r"leaf.*no_grad"):
        op(leaf(flow))


@pytest.mark.parametrize("name,op", INPLACE, ids=[i[0] for i in INPLACE])
def test_inplace_on_leaf_allowed_under_no_grad(name, op):
    def scenario(m):
        x = leaf(m)
        with m.no_grad():
            op(x)
        (x * x).sum().backward()
        return x, flags(x), x.grad, version(x)
    same(scenario)


@pytest.mark.parametrize("name,op", INPLACE, ids=[i[0] for i in INPLACE])
def test_inplace_on_non_leaf_is_recorded(name, op):
    def scenario(m):
        a = leaf(m)
        x = a * 2
        op(x)
        (x * x).sum().backward()
        return x, flags(x), a.grad
    same(scenario)


def test_inplace_with_tensor_argument_requiring_grad():
    def scenario(m):
        a, w = leaf(m), leaf(m, X + 1)
        x = a * 2
        x.mul_(w)
        x.add_(w * w)
        x.sum().backward()
        return x, a.grad, w.grad
    same(scenario)


def test_inplace_on_constant_with_grad_argument():
    def scenario(m):
        w = leaf(m)
        z = m.zeros(3, dtype=m.float64)
        z.add_(w)
        z.mul_(w)
        z.sum().backward()
        return z, flags(z), w.grad
    same(scenario)


def test_inplace_twice_then_saved_original_intact():
    def scenario(m):
        a = leaf(m)
        x = a.exp()        # saves x
        y = x * 1          # x itself unchanged below
        y.mul_(3)
        y.add_(1)
        (x + y).sum().backward()
        return a.grad
    same(scenario)


def test_retain_grad_survives_inplace():
    def scenario(m):
        a = leaf(m)
        x = a * 2
        x.retain_grad()
        x.mul_(3)
        (x * x).sum().backward()
        return x.grad, a.grad
    same(scenario)



# a retained (or assigned) .grad belongs to the tensor, not to its history: an in-place write
# to the tensor, its view or its base starts a new history that keeps accumulating into it,
# and only the new version's gradient is the tensor's (found by tests/program_fuzz.py)
def _write(m, t, v, where):
    {"self": lambda: t.mul_(3.0), "view": lambda: v.mul_(3.0), "base": lambda: t.mul_(3.0),
     "self_copy": lambda: t.copy_(t), "view_self_copy": lambda: v.copy_(v),
     "base_no_grad": lambda: _no_grad_mul(m, t)}[where]()


def _no_grad_mul(m, t):
    with m.no_grad():
        t.mul_(3.0)


RETAINED_WRITES = [(who, where) for who in ("base", "view")
                   for where in ("self", "view", "base", "self_copy", "view_self_copy",
                                 "base_no_grad")]


@pytest.mark.parametrize("who,where", RETAINED_WRITES)
def test_retained_grad_accumulates_across_an_inplace_write(who, where):
    def scenario(m):
        a = leaf(m)
        t = a.sin()
        v = t[0:2]
        kept = t if who == "base" else v
        kept.retain_grad()
        (kept * 2).sum().backward(retain_graph=True)
        _write(m, t, v, where)
        (kept * 5 + t.sum()).sum().backward()
        return kept.grad, a.grad
    same(scenario)


# an in-place view op (t_, unsqueeze_, as_strided_, ...) changes a tensor's layout, but torch
# leaves its retains_grad hook, and the hooks dict, on the old grad_fn: `.grad` is the
# gradient of the value before the change, in its shape and order; a hook registered later
# joins the old ones, if any (found by tests/program_fuzz.py, seeds 10600388, 3003045)
LAYOUT_CHANGES = {
    "t_": lambda h: h.t_(),
    "unsqueeze_": lambda h: h.unsqueeze_(0),
    "squeeze_": lambda h: h.unsqueeze_(0).squeeze_(0),  # (two changes in a row)
    "transpose_": lambda h: h.transpose_(0, 1),
    "swapaxes_": lambda h: h.swapaxes_(1, 0),
    "as_strided_": lambda h: h.as_strided_((2, 2), (1, 3), 1),
}


@pytest.mark.parametrize("case", ["plain", "view", "twice", "retain_again", "grad_first",
                                  "of_a_view", "hook_after"])
@pytest.mark.parametrize("op", sorted(LAYOUT_CHANGES))
def test_retained_grad_is_the_value_before_an_inplace_layout_change(op, case):
    def scenario(m):
        a = m.tensor(np.arange(9.0).reshape(3, 3) / 7, dtype=m.float64, requires_grad=True)
        root = a * 2
        h = root[1:].t() if case == "of_a_view" else root
        seen = []
        if case == "hook_after":
            h.register_hook(lambda g: seen.append(tuple(g.shape)))
        h.retain_grad()
        before = h.grad if case == "grad_first" else None
        LAYOUT_CHANGES[op](h)
        if case == "retain_again":
            h.retain_grad()
        if case == "hook_after":
            h.register_hook(lambda g: seen.append(tuple(g.shape)))
        loss = (h * h.detach().cos()).sum()
        if case == "view":
            loss = loss + h.flatten()[:3].sum()
        loss.backward(retain_graph=True)
        if case == "twice":
            loss.backward()
        return h.grad, a.grad, h.retains_grad, before, seen
    same(scenario)


def test_retained_grad_after_a_layout_change_then_a_write_raises():
    def scenario(m):
        h = leaf(m) * 2
        h.retain_grad()
        h.unsqueeze_(0)
        return raises(lambda: h.mul_(2)) is RuntimeError  # (torch: an internal assert)
    assert same(scenario)


def test_retain_grad_after_the_write_sees_only_the_new_version():
    def scenario(m):
        a = leaf(m)
        t = a.sin()
        before = t * 3.0  # reads the value before the write
        t.permute(0).copy_(t.permute(0))  # a copy of itself, recorded: a new version of t
        t.retain_grad()
        (t.sum() + before.sum()).backward()
        return t.grad, a.grad
    same(scenario)


@pytest.mark.parametrize("read_between", [False, True])
def test_view_written_before_its_base_requires_grad_replays_the_write(read_between):
    # torch leaves a history-less view's version stale when its base needs no grad, so once
    # the base requires grad the write is replayed and the view's reads reach the base
    def scenario(m):
        base = m.tensor(X)
        view = base.squeeze()
        view.mul_(1.0)
        if read_between:
            view - 1.0  # reads the view while its base needs no grad
        base.requires_grad_()
        (base.sin().sum() + view.sin().sum()).backward()
        return base.grad, view.grad_fn is not None
    same(scenario)

SETITEM = [
    ("scalar index", lambda m, z, w: z.__setitem__(1, w[0])),
    ("slice", lambda m, z, w: z.__setitem__(slice(0, 2), w[:2])),
    ("bool mask", lambda m, z, w: z.__setitem__(m.tensor([True, False, True]), w[1:])),
    ("broadcast scalar", lambda m, z, w: z.__setitem__(slice(None), w.sum())),
    ("int tensor index", lambda m, z, w: z.__setitem__(m.tensor([2, 0]), w[:2] * 2)),
]


@pytest.mark.parametrize("name,assign", SETITEM, ids=[s[0] for s in SETITEM])
def test_setitem_grad_value_into_constant(name, assign):
    def scenario(m):
        w = leaf(m)
        z = m.zeros(3, dtype=m.float64)
        assign(m, z, w)
        (z * m.tensor([1.0, 2.0, 3.0], dtype=m.float64)).sum().backward()
        return z, flags(z), w.grad
    same(scenario)


def test_setitem_into_non_leaf():
    def scenario(m):
        a, w = leaf(m), leaf(m, X + 1)
        x = a * 2
        x[0] = w[2] * 3
        x[1] = 0.0
        (x * x).sum().backward()
        return x, a.grad, w.grad
    same(scenario)


def test_setitem_overwrites_saved_tensor():
    def scenario(m):
        a = leaf(m)
        x = a * 2
        y = x.sin()
        x[0] = 1.0
        return raises(lambda: y.sum().backward()), a.grad
    same(scenario)


def test_setitem_value_leaf_keeps_grad_only_for_used_part():
    def scenario(m):
        w = leaf(m)
        z = m.zeros(2, 3, dtype=m.float64)
        z[1] = w
        z[1, 0] = 9.0       # overwrites one entry: no grad flows to w[0]
        (z * 2).sum().backward()
        return z, w.grad
    same(scenario)


def test_detach_then_inplace_breaks_saved_tensor():
    def scenario(m):
        x = leaf(m)
        y = x.exp()
        y.detach().zero_()
        return raises(lambda: y.sum().backward()), y
    same(scenario)


def test_zero_on_grad_requiring_non_leaf():
    def scenario(m):
        a = leaf(m)
        x = a * 2
        x.zero_()
        (x + a).sum().backward()
        return a.grad, flags(x)
    same(scenario)


def test_error_message_mentions_versions():
    x = leaf(flow)
    h = x * 2
    y = h * h
    h.add_(1)
    h.add_(1)
    with pytest.raises(RuntimeError, match="saved at version 0 and is now at version 2"):
        y.sum().backward()
    assert x.grad is None
    np.testing.assert_allclose(h.detach().numpy(), 2 * X + 2)
