"""Optimizers against torch: the same small model, the same weights and data, 20 steps,
every loss compared (float32, relative 1e-4); state dicts in torch's format."""
import copy

import numpy as np
import pytest
import torch

import flowgrad as flow

RNG = np.random.default_rng(0)
SHAPES = [(8, 5), (8,), (3, 8), (3,)]
INIT = [(RNG.standard_normal(s) * 0.5).astype(np.float32) for s in SHAPES]
X = RNG.standard_normal((16, 5)).astype(np.float32)
Y = RNG.integers(0, 3, 16)
T = RNG.standard_normal((16, 3)).astype(np.float32)


def make_params(m):
    return [m.tensor(a.copy(), requires_grad=True) for a in INIT]


def loss_fn(m, ps, kind="ce"):
    h = m.tanh(m.matmul(m.tensor(X), ps[0].t()) + ps[1])
    out = m.matmul(h, ps[2].t()) + ps[3]
    if kind == "ce":
        return m.nn.functional.cross_entropy(out, m.tensor(Y))
    return m.nn.functional.mse_loss(m.relu(out), m.tensor(T))


def groups(ps, spec):
    """spec None: one group; else a list of per-group option dicts over halves."""
    if spec is None:
        return ps
    return [dict(params=ps[:2], **spec[0]), dict(params=ps[2:], **spec[1])]


def train(m, name, kwargs, steps=20, kind="ce", spec=None, lr_change=None):
    ps = make_params(m)
    opt = getattr(m.optim, name)(groups(ps, spec), **kwargs)
    losses = []
    for i in range(steps):
        if lr_change is not None and i == steps // 2:
            for g in opt.param_groups:
                g["lr"] = g["lr"] * lr_change
        opt.zero_grad()
        loss = loss_fn(m, ps, kind)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), [p.detach().numpy().copy() for p in ps], opt


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.8, dampening=0.3, maximize=False)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.9), eps=1e-6, decoupled_weight_decay=True,
                  weight_decay=0.1)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, amsgrad=True, weight_decay=0.5)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, centered=True, momentum=0.5, weight_decay=0.01)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1,
                     weight_decay=0.01)),
    ("Adadelta", dict(lr=1.0)),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.01)),
    ("Adamax", dict(lr=0.01)),
    ("Adamax", dict(lr=0.02, weight_decay=0.05)),
    ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01, momentum_decay=0.01, weight_decay=0.1)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
]


def _compare(a, b):
    la, pa, _ = a
    lb, pb, _ = b
    np.testing.assert_allclose(la, lb, rtol=1e-4, err_msg="losses differ from torch")
    for x, y in zip(pa, pb):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5, err_msg="params differ")


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in
                                                     enumerate(CASES)])
def test_matches_torch(name, kwargs):
    _compare(train(flow, name, kwargs), train(torch, name, kwargs))


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad", "Adadelta", "Adamax",
                                  "NAdam", "RAdam", "AdamW"])
def test_maximize_groups_mse_and_lr_change(name):
    kw = dict(lr=0.01, maximize=True) if name != "SGD" else dict(lr=0.01, maximize=True,
                                                                   momentum=0.5)
    spec = [dict(lr=0.02), dict(weight_decay=0.1)]
    for args in [dict(kind="mse", spec=spec), dict(kwargs_extra=True)]:
        if "kwargs_extra" in args:
            _compare(train(flow, name, kw, lr_change=0.1), train(torch, name, kw, lr_change=0.1))
        else:
            _compare(train(flow, name, kw, **args), train(torch, name, kw, **args))


def _np(v):
    return v.detach().numpy() if isinstance(v, torch.Tensor) else v.numpy()


@pytest.mark.parametrize("name,kwargs", [CASES[2], CASES[5], CASES[10], CASES[12], CASES[14],
                                         CASES[16], CASES[18], CASES[21]])
def test_state_dict_format_matches_torch(name, kwargs):
    _, _, ours = train(flow, name, kwargs, steps=3)
    _, _, theirs = train(torch, name, kwargs, steps=3)
    a, b = ours.state_dict(), theirs.state_dict()
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for k in b["state"]:
        assert a["state"][k].keys() == b["state"][k].keys()
        for key, v in b["state"][k].items():
            assert isinstance(a["state"][k][key], flow.Tensor)
            assert tuple(a["state"][k][key].shape) == tuple(v.shape)
            np.testing.assert_allclose(_np(a["state"][k][key]), _np(v), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name,kwargs", [CASES[2], CASES[5], CASES[10], CASES[12], CASES[14],
                                         CASES[16], CASES[18], CASES[21]])
def test_resume_from_state_dict(name, kwargs):
    """10 steps, state_dict into a fresh optimizer (from flowgrad's own dict, and from
    torch's dict), 10 more: the same losses as 20 uninterrupted steps."""
    full, _, _ = train(flow, name, kwargs, steps=20)
    for source in (flow, torch):
        first, weights, opt = train(source, name, kwargs, steps=10)
        ps = [flow.tensor(w, requires_grad=True) for w in weights]
        sd = opt.state_dict()
        if source is flow:
            sd = copy.deepcopy(sd)
        opt2 = getattr(flow.optim, name)(ps, **kwargs)
        opt2.load_state_dict(sd)
        rest = []
        for _ in range(10):
            opt2.zero_grad()
            loss = loss_fn(flow, ps)
            loss.backward()
            opt2.step()
            rest.append(loss.item())
        np.testing.assert_allclose(np.r_[first, rest], full, rtol=1e-4)


def test_identities_kept_and_version_bumped():
    w = flow.nn.Parameter(flow.ones(3))
    opt = flow.optim.Adam([w], lr=0.1)
    y = (w * w).sum()
    y.backward(retain_graph=True)
    data, grad = w._data, w.grad
    opt.step()
    assert w._data is data and w.grad is grad
    assert not np.allclose(w.detach().numpy(), 1.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


def test_zero_grad():
    w = flow.ones(2, requires_grad=True)
    opt = flow.optim.SGD([w], lr=0.1)
    (w * 3).sum().backward()
    g = w.grad
    opt.zero_grad(set_to_none=False)
    assert w.grad is g and w.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None
    opt.step()  # no grad: nothing happens
    assert w.tolist() == [1.0, 1.0]


def test_closure_and_hooks():
    w = flow.ones(2, requires_grad=True)
    opt = flow.optim.SGD([w], lr=0.5)
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    h = opt.register_step_post_hook(lambda o, a, k: calls.append("post"))

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 2.0
    assert w.tolist() == [0.0, 0.0]
    h.remove()
    opt.step(closure)
    assert calls == ["pre", "post", "pre"]


def test_add_param_group_and_defaults():
    a, b = flow.zeros(2, requires_grad=True), flow.zeros(3, requires_grad=True)
    opt = flow.optim.Adam([a], lr=0.1, betas=(0.5, 0.6))
    opt.add_param_group({"params": b, "lr": 0.01})
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01]
    assert opt.param_groups[1]["betas"] == (0.5, 0.6)
    assert opt.param_groups[1]["params"][0] is b
    named = flow.optim.SGD([("w", a), ("v", b)], lr=0.1)
    assert named.param_groups[0]["param_names"] == ["w", "v"]
    assert "Adam (" in repr(opt)


def _leaf():
    return flow.zeros(2, requires_grad=True)


ERRORS = [
    (lambda: flow.optim.SGD(_leaf(), lr=0.1), TypeError, "iterable of Tensors or dicts"),
    (lambda: flow.optim.SGD([], lr=0.1), ValueError, "empty parameter list"),
    (lambda: flow.optim.SGD([{"params": {_leaf()}}], lr=0.1), TypeError,
     "ordered collections"),
    (lambda: flow.optim.SGD([1.0], lr=0.1), TypeError, "can only optimize Tensors"),
    (lambda: flow.optim.SGD([_leaf() * 2], lr=0.1), ValueError, "non-leaf Tensor"),
    (lambda: flow.optim.SGD([("a", _leaf()), _leaf()]), ValueError, "names are missing"),
    (lambda: flow.optim.SGD([_leaf()], lr=-1), ValueError, "Invalid learning rate: -1"),
    (lambda: flow.optim.SGD([_leaf()], momentum=-1), ValueError, "Invalid momentum value"),
    (lambda: flow.optim.SGD([_leaf()], weight_decay=-1), ValueError, "Invalid weight_decay"),
    (lambda: flow.optim.SGD([_leaf()], nesterov=True), ValueError, "Nesterov momentum"),
    (lambda: flow.optim.SGD([_leaf()], fused=True, foreach=True), RuntimeError,
     "cannot be `True` together"),
    (lambda: flow.optim.Adam([_leaf()], fused=True, differentiable=True), RuntimeError,
     "does not support `differentiable`"),
    (lambda: flow.optim.Adam([_leaf()], eps=-1), ValueError, "Invalid epsilon value"),
    (lambda: flow.optim.Adam([_leaf()], betas=(1.0, 0.9)), ValueError,
     "beta parameter at index 0"),
    (lambda: flow.optim.AdamW([_leaf()], betas=(0.9, -0.1)), ValueError,
     "beta parameter at index 1"),
    (lambda: flow.optim.RMSprop([_leaf()], alpha=-1), ValueError, "Invalid alpha value"),
    (lambda: flow.optim.Adagrad([_leaf()], lr_decay=-1), ValueError, "Invalid lr_decay"),
    (lambda: flow.optim.Adagrad([_leaf()], initial_accumulator_value=-1), ValueError,
     "initial_accumulator_value"),
    (lambda: flow.optim.Adadelta([_leaf()], rho=1.5), ValueError, "Invalid rho value"),
    (lambda: flow.optim.NAdam([_leaf()], momentum_decay=-1), ValueError, "momentum_decay"),
    (lambda: flow.optim.RAdam([_leaf()], lr=-0.1), ValueError, "Invalid learning rate"),
    (lambda: flow.optim.Adamax([_leaf()], weight_decay=-1), ValueError, "weight_decay"),
]


@pytest.mark.parametrize("fn,exc,match", ERRORS)
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_add_param_group_errors():
    a = _leaf()
    opt = flow.optim.SGD([a], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(TypeError, match="param_group must be a dict"):
        opt.add_param_group([a])
    req = flow.optim.Optimizer([{"params": [_leaf()], "lr": 0.1}],
                               {"lr": flow.optim.optimizer.required})
    with pytest.raises(ValueError, match="required optimization parameter lr"):
        req.add_param_group({"params": [_leaf()]})
    assert len(opt.param_groups) == 1


def test_load_state_dict_errors_change_nothing():
    a, b = _leaf(), _leaf()
    opt = flow.optim.Adam([a, b], lr=0.1)
    before = opt.state_dict()
    other = flow.optim.Adam([{"params": [a]}, {"params": [b]}], lr=0.2)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(other.state_dict())
    single = flow.optim.Adam([_leaf()], lr=0.2)
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict(single.state_dict())
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})
    assert opt.state_dict()["param_groups"] == before["param_groups"]


def test_load_state_dict_casts_state_to_param_dtype():
    w = flow.zeros(2, dtype=flow.float64, requires_grad=True)
    opt = flow.optim.Adam([w], lr=0.1)
    sd = {"state": {0: {"step": flow.tensor(3.0), "exp_avg": flow.ones(2),
                        "exp_avg_sq": flow.ones(2)}},
          "param_groups": opt.state_dict()["param_groups"]}
    opt.load_state_dict(sd)
    st = opt.state[w]
    assert st["exp_avg"].dtype == flow.float64 and st["step"].dtype == flow.float32
    assert st["exp_avg"] is not sd["state"][0]["exp_avg"]  # loading copies


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_other_float_dtypes(dtype):
    """Updates run in the parameter's dtype (as torch's do)."""
    init = np.array([1.0, -2.0, 0.5])
    ws = {m: m.tensor(init, dtype=getattr(m, dtype), requires_grad=True) for m in (flow, torch)}
    for m, w in ws.items():
        opt = m.optim.Adam([w], lr=0.1)
        for _ in range(5):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
    a, b = ws[flow].detach().numpy(), ws[torch].detach().numpy()
    assert a.dtype == b.dtype
    # torch computes half-precision updates in float32 registers; NumPy rounds each step
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64),
                               **(dict(rtol=1e-2, atol=1e-3) if dtype == "float16"
                                  else dict(rtol=1e-12)))


def test_end_to_end_with_nn_modules_scheduler_and_clipping():
    """nn.Linear models with copied weights: AdamW + OneCycleLR + clip_grad_norm_, 20 steps,
    every loss and every clipping norm equal to torch's."""
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    fm = flow.nn.Sequential(flow.nn.Linear(5, 8), flow.nn.Tanh(), flow.nn.Linear(8, 3))
    fm.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    res = {}
    for m, model in ((flow, fm), (torch, tm)):
        opt = m.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.05)
        sched = m.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=20)
        out = []
        for _ in range(20):
            opt.zero_grad()
            loss = m.nn.functional.cross_entropy(model(m.tensor(X)), m.tensor(Y))
            loss.backward()
            norm = m.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            sched.step()
            out.append((loss.item(), norm.item(), sched.get_last_lr()[0]))
        res[m] = np.array(out)
    np.testing.assert_allclose(res[flow], res[torch], rtol=1e-4)


def _stepped(opt_cls, params, **kw):
    opt = opt_cls(params, lr=0.1, **kw)
    for p in params:
        p.grad = flow.ones(p.shape)
    opt.step()
    return opt


def _snapshot(opt):
    return ([{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups],
            {id(p): {k: (v, v.numpy().copy()) for k, v in st.items()}
             for p, st in opt.state.items()})


def _assert_unchanged(opt, snap):
    groups, state = _snapshot(opt)
    assert groups == snap[0]
    assert state.keys() == snap[1].keys()
    for pid, st in snap[1].items():
        for k, (obj, val) in st.items():
            assert state[pid][k][0] is obj  # the same tensor objects, same values
            np.testing.assert_array_equal(state[pid][k][1], val)


def test_load_state_dict_counts_mismatch_like_torch_and_names_the_numbers():
    for n_groups, sizes in (((2,), (1, 1)), ((3,), (2, 1))):
        tp = [torch.zeros(2, requires_grad=True) for _ in range(2)]
        t = torch.optim.SGD(tp, lr=0.1)
        other = torch.optim.SGD([{"params": [p]} for p in tp] if sizes == (1, 1)
                                else [torch.zeros(2, requires_grad=True)] * 1, lr=0.1)
        with pytest.raises(ValueError) as t_err:
            t.load_state_dict(other.state_dict())
        fp = [_leaf(), _leaf()]
        f = _stepped(flow.optim.SGD, fp, momentum=0.9)
        snap = _snapshot(f)
        f_other = flow.optim.SGD([{"params": [p]} for p in fp] if sizes == (1, 1)
                                 else [_leaf()], lr=0.1)
        with pytest.raises(ValueError) as f_err:
            f.load_state_dict(f_other.state_dict())
        assert str(f_err.value).startswith(str(t_err.value))  # torch's message, then details
        assert "group" in str(f_err.value) and "state dict" in str(f_err.value)
        _assert_unchanged(f, snap)


def test_load_state_dict_refuses_state_of_another_shape():
    w = flow.zeros(2, 3, requires_grad=True)
    opt = _stepped(flow.optim.SGD, [w], momentum=0.9)
    snap = _snapshot(opt)
    sd = opt.state_dict()
    sd = {"state": {0: {"momentum_buffer": flow.ones(3, 2)}}, "param_groups": sd["param_groups"]}
    with pytest.raises(ValueError, match=r"SGD.load_state_dict: state 'momentum_buffer' of "
                                         r"parameter 0 has shape \(3, 2\) but the parameter "
                                         r"has shape \(2, 3\)"):
        opt.load_state_dict(sd)
    _assert_unchanged(opt, snap)
    # torch loads it without a word (and fails later, in step)
    tw = torch.zeros(2, 3, requires_grad=True)
    t = torch.optim.SGD([tw], lr=0.1, momentum=0.9)
    t.load_state_dict({"state": {0: {"momentum_buffer": torch.ones(3, 2)}},
                       "param_groups": t.state_dict()["param_groups"]})
    assert t.state[tw]["momentum_buffer"].shape == (3, 2)
    bad_step = {"state": {0: {"step": flow.ones(2), "exp_avg": flow.zeros(2, 3),
                              "exp_avg_sq": flow.zeros(2, 3)}},
                "param_groups": flow.optim.Adam([w]).state_dict()["param_groups"]}
    adam = flow.optim.Adam([w])
    with pytest.raises(ValueError, match="state 'step' of parameter 0 must be a scalar"):
        adam.load_state_dict(bad_step)
    assert not adam.state


@pytest.mark.parametrize("saved,loader,match", [
    ("Adam", "SGD", "lacks 'dampening', 'momentum', 'nesterov', which SGD keeps"),
    ("SGD", "Adam", "lacks 'amsgrad', 'betas', 'eps', which Adam keeps"),
    ("Adam", "Adamax", "has 'exp_avg_sq', which Adamax does not keep"),
    ("RMSprop", "Adagrad", "which Adagrad keeps"),
])
def test_load_state_dict_refuses_another_optimizer_class(saved, loader, match):
    a, b = flow.zeros(2, requires_grad=True), flow.zeros(2, requires_grad=True)
    src = _stepped(getattr(flow.optim, saved), [a])
    dst = _stepped(getattr(flow.optim, loader), [b])
    snap = _snapshot(dst)
    with pytest.raises(ValueError, match=match) as err:
        dst.load_state_dict(src.state_dict())
    assert f"{loader}.load_state_dict" in str(err.value) and "another optimizer" in \
        str(err.value)
    _assert_unchanged(dst, snap)


def test_load_state_dict_accepts_torch_state_dicts_of_the_same_class():
    tw = torch.zeros(2, 3, requires_grad=True)
    t = torch.optim.AdamW([tw], lr=0.1, amsgrad=True)
    tw.grad = torch.ones(2, 3)
    t.step()
    w = flow.zeros(2, 3, requires_grad=True)
    f = flow.optim.AdamW([w], lr=0.1, amsgrad=True)
    f.load_state_dict(t.state_dict())
    np.testing.assert_array_equal(f.state[w]["exp_avg"].numpy(),
                                  t.state[tw]["exp_avg"].numpy())


FOREACH_SHAPES = [(8, 5), (8,), (300, 200), (64, 100), (3,), (2, 3)]  # packed, chunked, whole
FOREACH_CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, maximize=True)),
    ("SGD", dict(lr=0.1, momentum=0.8, dampening=0.3, weight_decay=0.1)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.01, betas=(0.3, 0.9), eps=1e-6, decoupled_weight_decay=True,
                  weight_decay=0.1)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, amsgrad=True, weight_decay=0.5, maximize=True)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs", FOREACH_CASES,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(FOREACH_CASES)])
def test_foreach_path_is_bit_identical_to_the_per_parameter_loop(name, kwargs, dtype):
    """foreach=None/True (packed small parameters, chunked large ones, scratch arrays) gives
    the same bits as foreach=False (one `_update` per parameter), params and state, over
    steps with a param without grad, two groups and an lr change."""
    rng = np.random.default_rng(1)
    init = [rng.standard_normal(s).astype(dtype) for s in FOREACH_SHAPES]
    grads = [[rng.standard_normal(s).astype(dtype) for s in FOREACH_SHAPES] for _ in range(4)]
    runs = []
    for foreach in (False, None, True):
        ps = [flow.tensor(a.copy(), requires_grad=True) for a in init]
        opt = getattr(flow.optim, name)([dict(params=ps[:4]), dict(params=ps[4:], lr=0.2)],
                                        foreach=foreach, **kwargs)
        for i, gs in enumerate(grads):
            opt.zero_grad()
            for j, (p, g) in enumerate(zip(ps, gs)):
                if (i, j) != (1, 3):
                    p.grad = flow.tensor(g)
            if i == 2:
                opt.param_groups[0]["lr"] *= 0.5
            opt.step()
        state = {k: {n: v.numpy().copy() for n, v in s.items()}
                 for k, s in opt.state_dict()["state"].items()}
        runs.append(([p.detach().numpy().copy() for p in ps], state))
    bits = np.uint32 if dtype == np.float32 else np.uint64
    (ref_p, ref_s), *fast = runs
    has_state = name != "SGD" or kwargs.get("momentum", 0) != 0
    assert len(ref_s) == (len(FOREACH_SHAPES) if has_state else 0)
    for ps, state in fast:
        for a, b, a0 in zip(ref_p, ps, init):
            assert not np.array_equal(a, a0) and a.dtype == b.dtype
            np.testing.assert_array_equal(a.view(bits), b.view(bits))
        assert state.keys() == ref_s.keys()
        for k in ref_s:
            assert state[k].keys() == ref_s[k].keys()
            for n, v in ref_s[k].items():
                np.testing.assert_array_equal(v, state[k][n])
                assert v.dtype == state[k][n].dtype


def test_foreach_falls_back_for_tensor_hyperparameters_and_other_dtypes():
    """A tensor lr (not a Python number) or a bfloat16 parameter takes the per-parameter
    path; the results match foreach=False exactly."""
    out = []
    for foreach in (False, None):
        a = flow.tensor([1.0, 2.0], requires_grad=True)
        b = flow.tensor([1.0, -2.0], dtype=flow.bfloat16, requires_grad=True)
        opt = flow.optim.Adam([dict(params=[a]), dict(params=[b], lr=flow.tensor(0.1))],
                              lr=0.1, foreach=foreach)
        for _ in range(3):
            opt.zero_grad()
            (a * a).sum().backward()
            (b * b).sum().backward()
            opt.step()
        out.append((a.detach().numpy(), b.float().detach().numpy()))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])
    assert not np.array_equal(out[0][0], [1.0, 2.0])


@pytest.mark.parametrize("name,kw", [("SGD", dict(momentum=0.9)), ("Adam", {}),
                                     ("AdamW", dict(amsgrad=True)), ("Adagrad", {})])
def test_fused_steps_as_torchs_fused(name, kw):
    """torch runs fused=True on the CPU (same numbers as unfused); so does flowgrad."""
    start = np.random.default_rng(0).standard_normal((3, 2))
    grads = np.random.default_rng(1).standard_normal((4, 3, 2))
    result = []
    for m in (flow, torch):
        p = m.nn.Parameter(m.tensor(start))
        opt = getattr(m.optim, name)([p], lr=0.1, fused=True, **kw)
        for g in grads:
            p.grad = m.tensor(g)
            opt.step()
        result.append(p.detach().numpy())
    np.testing.assert_allclose(result[0], result[1], rtol=1e-12)
    with pytest.raises(RuntimeError, match="floating point"):
        q = flow.nn.Parameter(flow.ones(2, dtype=flow.complex64))
        opt = getattr(flow.optim, name)([q], lr=0.1, fused=True)
        q.grad = flow.ones(2, dtype=flow.complex64)
        opt.step()
