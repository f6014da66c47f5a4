"""LR schedulers against torch's: the lr (and momentum) of every group after each of many
steps, on a flowgrad and a torch optimizer built alike."""
import math
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow

S = "lr_scheduler"


def _opt(m, name="SGD", **kw):
    ps = [m.zeros(2, requires_grad=True), m.zeros(3, requires_grad=True)]
    groups = [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.05}]
    return getattr(m.optim, name)(groups, lr=0.1, **kw)


def _sched(m, opt, name, *args, **kw):
    return getattr(getattr(m.optim, S), name)(opt, *args, **kw)


def _seq(m, opt):
    ls = getattr(m.optim, S)
    return ls.SequentialLR(opt, [ls.LinearLR(opt, 0.1, total_iters=5),
                                 ls.ExponentialLR(opt, 0.9),
                                 ls.StepLR(opt, 3, 0.5)], milestones=[5, 12])


def _chain(m, opt):
    ls = getattr(m.optim, S)
    return ls.ChainedScheduler([ls.ConstantLR(opt, 0.5, total_iters=4),
                                ls.ExponentialLR(opt, 0.95),
                                ls.MultiStepLR(opt, [7, 20], 0.3)])


class Warmup:
    """A callable object (its __dict__ goes into the state dict)."""

    def __init__(self, n):
        self.n = n

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.n)


CASES = [
    ("StepLR", lambda m, o: _sched(m, o, "StepLR", 7, gamma=0.5)),
    ("MultiStepLR", lambda m, o: _sched(m, o, "MultiStepLR", [5, 10, 10, 30], gamma=0.3)),
    ("ExponentialLR", lambda m, o: _sched(m, o, "ExponentialLR", 0.93)),
    ("CosineAnnealingLR", lambda m, o: _sched(m, o, "CosineAnnealingLR", 10, eta_min=0.001)),
    ("CosineWarmRestarts", lambda m, o: _sched(m, o, "CosineAnnealingWarmRestarts", 5, 2,
                                               eta_min=0.01)),
    ("CosineWarmRestarts1", lambda m, o: _sched(m, o, "CosineAnnealingWarmRestarts", 7)),
    ("LambdaLR", lambda m, o: _sched(m, o, "LambdaLR", [lambda e: 0.95 ** e, Warmup(10)])),
    ("MultiplicativeLR", lambda m, o: _sched(m, o, "MultiplicativeLR", lambda e: 0.97)),
    ("LinearLR", lambda m, o: _sched(m, o, "LinearLR", 0.25, 0.9, total_iters=13)),
    ("ConstantLR", lambda m, o: _sched(m, o, "ConstantLR", 0.4, total_iters=6)),
    ("PolynomialLR", lambda m, o: _sched(m, o, "PolynomialLR", 30, 2.0)),
    ("OneCycleCos", lambda m, o: _sched(m, o, "OneCycleLR", [1.0, 0.5], total_steps=61)),
    ("OneCycleLin3", lambda m, o: _sched(m, o, "OneCycleLR", 1.0, epochs=6, steps_per_epoch=11,
                                         anneal_strategy="linear", three_phase=True,
                                         pct_start=0.25)),
    ("OneCycleNoMom", lambda m, o: _sched(m, o, "OneCycleLR", 0.3, total_steps=70,
                                          cycle_momentum=False, div_factor=10.0)),
    ("CyclicTri2", lambda m, o: _sched(m, o, "CyclicLR", 0.01, [0.1, 0.2], step_size_up=4,
                                       step_size_down=7, mode="triangular2")),
    ("CyclicExp", lambda m, o: _sched(m, o, "CyclicLR", 0.01, 0.1, step_size_up=5,
                                      mode="exp_range", gamma=0.97)),
    ("SequentialLR", _seq),
    ("ChainedScheduler", _chain),
]
MOMENTUM = {"OneCycleCos", "OneCycleLin3", "CyclicTri2", "CyclicExp"}


def _trace(m, factory, name, steps=60, opt_name="SGD"):
    kw = {"momentum": 0.9} if opt_name == "SGD" else {}
    opt = _opt(m, opt_name, **kw)
    sched = factory(m, opt)
    out = [list(sched.get_last_lr())]
    moms = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(steps):
            opt.step()
            sched.step()
            out.append(list(sched.get_last_lr()))
            key = "betas" if opt_name == "Adam" else "momentum"
            moms.append([g[key] for g in opt.param_groups])
    assert out[-1] == [g["lr"] for g in opt.param_groups]
    return np.array(out), moms


@pytest.mark.parametrize("name,factory", CASES, ids=[c[0] for c in CASES])
def test_lrs_match_torch(name, factory):
    ours, m1 = _trace(flow, factory, name)
    theirs, m2 = _trace(torch, factory, name)
    np.testing.assert_allclose(ours, theirs, rtol=1e-13, atol=1e-15)
    if name in MOMENTUM:
        np.testing.assert_allclose(np.array(m1), np.array(m2), rtol=1e-13)


@pytest.mark.parametrize("name", ["OneCycleCos", "CyclicTri2"])
def test_beta1_cycles_with_adam(name):
    factory = dict(CASES)[name]
    (a, ma), (b, mb) = (_trace(m, factory, name, 30, "Adam") for m in (flow, torch))
    np.testing.assert_allclose(a, b, rtol=1e-13)
    assert ma == [[tuple(x) for x in row] for row in mb]


@pytest.mark.parametrize("name,factory", [c for c in CASES if c[0] not in (
    "SequentialLR", "ChainedScheduler")][:12], ids=[c[0] for c in CASES][:12])
def test_closed_form_epoch_matches_torch(name, factory):
    """step(epoch) uses the closed form where torch has one."""
    res = []
    for m in (flow, torch):
        opt = _opt(m)
        sched = factory(m, opt)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for e in [3, 8, 2, 15]:
                opt.step()
                sched.step(e)
                res.append(list(sched.get_last_lr()))
    half = len(res) // 2
    np.testing.assert_allclose(res[:half], res[half:], rtol=1e-13)


def test_reduce_lr_on_plateau_matches_torch():
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.8, 0.81, 0.81, 0.81, 0.81, 0.81, 0.81, 0.5,
               0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]
    for kw in [dict(patience=2, factor=0.5, cooldown=1, min_lr=[0.01, 0.02]),
               dict(mode="max", patience=1, threshold=0.1, threshold_mode="abs"),
               dict(patience=0, factor=0.1, min_lr=0.004, eps=1e-3)]:
        res = []
        for m in (flow, torch):
            opt = _opt(m)
            sched = getattr(m.optim, S).ReduceLROnPlateau(opt, **kw)
            lrs = []
            for v in metrics:
                sched.step(v)
                lrs.append(list(sched.get_last_lr()))
            res.append(lrs)
        assert res[0] == res[1]


@pytest.mark.parametrize("name,factory", CASES, ids=[c[0] for c in CASES])
def test_state_dict_resume(name, factory):
    """Stop after 13 steps, rebuild optimizer and scheduler from state dicts, finish: the
    same lrs as an uninterrupted run."""
    full, _ = _trace(flow, factory, name, steps=30)
    opt = _opt(flow, momentum=0.9)
    sched = factory(flow, opt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(13):
            opt.step()
            sched.step()
        osd, ssd = opt.state_dict(), sched.state_dict()
        opt2 = _opt(flow, momentum=0.9)
        sched2 = factory(flow, opt2)
        opt2.load_state_dict(osd)
        sched2.load_state_dict(ssd)
        rest = []
        for _ in range(17):
            opt2.step()
            sched2.step()
            rest.append(list(sched2.get_last_lr()))
    np.testing.assert_allclose(rest, full[14:], rtol=1e-13)


def test_lambda_state_dict_keeps_callable_object_state():
    opt = _opt(flow)
    w = Warmup(10)
    sched = flow.optim.lr_scheduler.LambdaLR(opt, [lambda e: 1.0, w])
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [None, {"n": 10}]
    w.n = 3
    sched.load_state_dict(sd)
    assert w.n == 10


def test_warns_when_scheduler_steps_first():
    opt = _opt(flow)
    sched = flow.optim.lr_scheduler.StepLR(opt, 2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()


ERRORS = [
    (lambda o: flow.optim.lr_scheduler.StepLR(object(), 2), TypeError, "is not an Optimizer"),
    (lambda o: flow.optim.lr_scheduler.StepLR(o, 2, last_epoch=3), KeyError, "initial_lr"),
    (lambda o: flow.optim.lr_scheduler.LambdaLR(o, [lambda e: 1]), ValueError,
     "Expected 2 lr_lambdas"),
    (lambda o: flow.optim.lr_scheduler.MultiplicativeLR(o, 0.5), TypeError,
     "lr_lambda should be a function"),
    (lambda o: flow.optim.lr_scheduler.ConstantLR(o, factor=2), ValueError, "between 0 and 1"),
    (lambda o: flow.optim.lr_scheduler.LinearLR(o, start_factor=0), ValueError,
     "Starting multiplicative factor"),
    (lambda o: flow.optim.lr_scheduler.LinearLR(o, end_factor=2), ValueError,
     "Ending multiplicative factor"),
    (lambda o: flow.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, 0), ValueError,
     "positive integer T_0"),
    (lambda o: flow.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, 2, T_mult=0),
     ValueError, "T_mult >= 1"),
    (lambda o: flow.optim.lr_scheduler.OneCycleLR(o, 1.0), ValueError,
     "either total_steps OR"),
    (lambda o: flow.optim.lr_scheduler.OneCycleLR(o, 1.0, total_steps=0), ValueError,
     "positive integer total_steps"),
    (lambda o: flow.optim.lr_scheduler.OneCycleLR(o, [1.0], total_steps=5), ValueError,
     "max_lr must have the same length"),
    (lambda o: flow.optim.lr_scheduler.OneCycleLR(o, 1.0, total_steps=5, pct_start=2.0),
     ValueError, "pct_start"),
    (lambda o: flow.optim.lr_scheduler.OneCycleLR(o, 1.0, total_steps=5,
                                                  anneal_strategy="x"), ValueError,
     "anneal_strategy"),
    (lambda o: flow.optim.lr_scheduler.ReduceLROnPlateau(o, factor=1.0), ValueError,
     "Factor should be < 1.0"),
    (lambda o: flow.optim.lr_scheduler.ReduceLROnPlateau(o, mode="up"), ValueError,
     "mode up is unknown"),
    (lambda o: flow.optim.lr_scheduler.ReduceLROnPlateau(o, min_lr=[0.1]), ValueError,
     "expected 2 min_lrs"),
    (lambda o: flow.optim.lr_scheduler.SequentialLR(o, [], []), ValueError,
     "at least one scheduler"),
    (lambda o: flow.optim.lr_scheduler.SequentialLR(
        o, [flow.optim.lr_scheduler.StepLR(o, 2)], [3]), ValueError, "one more"),
    (lambda o: flow.optim.lr_scheduler.ChainedScheduler(
        [flow.optim.lr_scheduler.ReduceLROnPlateau(o)]), ValueError,
     "does not support `ReduceLROnPlateau`"),
    (lambda o: flow.optim.lr_scheduler.ChainedScheduler(
        [flow.optim.lr_scheduler.StepLR(_opt(flow), 2)], o), ValueError,
     "same optimizer"),
    (lambda o: flow.optim.lr_scheduler.CyclicLR(flow.optim.Adagrad([flow.zeros(1)]), 0.1, 1),
     ValueError, "support momentum"),
    (lambda o: flow.optim.lr_scheduler.CyclicLR(o, 0.1, 1.0, mode="x"), ValueError,
     "mode is invalid"),
]


@pytest.mark.parametrize("fn,exc,match", ERRORS)
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn(_opt(flow))


def test_onecycle_overstep_raises():
    opt = _opt(flow)
    sched = flow.optim.lr_scheduler.OneCycleLR(opt, 1.0, total_steps=3)
    for _ in range(2):
        opt.step()
        sched.step()
    opt.step()
    sched.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        sched.step()
    assert math.isfinite(sched.get_last_lr()[0])


def _two_group_opt():
    a, b = flow.zeros(2, requires_grad=True), flow.zeros(2, requires_grad=True)
    return flow.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.9)


def test_scheduler_load_state_dict_refuses_another_class_and_changes_nothing():
    opt = _two_group_opt()
    cos = flow.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    opt.step()
    cos.step()
    before = cos.state_dict()
    step = flow.optim.lr_scheduler.StepLR(_two_group_opt(), step_size=3)
    with pytest.raises(ValueError, match=r"CosineAnnealingLR.load_state_dict: .* lacks "
                                         r"'T_max', 'eta_min' and has 'gamma', 'step_size'"):
        cos.load_state_dict(step.state_dict())
    assert cos.state_dict() == before
    # torch takes it silently, mixing the two schedulers' attributes
    t_opt = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1)
    t_cos = torch.optim.lr_scheduler.CosineAnnealingLR(t_opt, T_max=10)
    t_cos.load_state_dict(torch.optim.lr_scheduler.StepLR(t_opt, step_size=3).state_dict())
    assert t_cos.step_size == 3


def test_scheduler_load_state_dict_refuses_other_group_counts_and_types():
    opt = _two_group_opt()
    lam = flow.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.9 ** e)
    before = lam.state_dict()
    one = flow.optim.SGD([flow.zeros(2, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="'base_lrs' has 2 entries here .* but 1 entries"):
        lam.load_state_dict(flow.optim.lr_scheduler.LambdaLR(one, lambda e: 1.0).state_dict())
    bad = dict(before, last_epoch="3")
    with pytest.raises(ValueError, match="'last_epoch' must be a number, got str"):
        lam.load_state_dict(bad)
    with pytest.raises(TypeError, match="expected the dict LambdaLR.state_dict"):
        lam.load_state_dict([1, 2])
    assert lam.state_dict() == before
    plateau = flow.optim.lr_scheduler.ReduceLROnPlateau(opt, min_lr=[0.0, 0.1])
    with pytest.raises(ValueError, match="'min_lrs' has 2 entries"):
        plateau.load_state_dict(dict(plateau.state_dict(), min_lrs=[0.0]))


def test_composite_scheduler_checks_its_children_before_loading():
    def build():
        opt = _two_group_opt()
        s1 = flow.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
        s2 = flow.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
        return flow.optim.lr_scheduler.SequentialLR(opt, [s1, s2], milestones=[2])

    seq = build()
    for _ in range(3):
        seq.optimizer.step()
        seq.step()
    good = seq.state_dict()
    fresh = build()
    before = fresh.state_dict()
    bad = dict(good, _schedulers=[good["_schedulers"][1], good["_schedulers"][0]])
    with pytest.raises(ValueError, match="LinearLR.load_state_dict: .* lacks"):
        fresh.load_state_dict(bad)
    assert fresh.state_dict() == before and fresh._schedulers[0].last_epoch == 0
    with pytest.raises(ValueError, match="holds 1 scheduler states for 2 schedulers"):
        fresh.load_state_dict(dict(good, _schedulers=good["_schedulers"][:1]))
    fresh.load_state_dict(good)
    assert fresh.state_dict() == good
