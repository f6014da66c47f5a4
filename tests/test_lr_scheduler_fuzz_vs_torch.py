"""Random lr-scheduler programs (every torch scheduler class with random, sometimes invalid,
hyperparameters; random sequences of optimizer and scheduler steps, deprecated step(epoch)
forms, direct get_lr() calls, lrs edited by hand, add_param_group and state_dict reloads)
behave as torch's after every call: see tests/lr_scheduler_fuzz.py.

KNOWN differences (where a program stops being compared; the fuzzer counts them):
- flowgrad refuses a scheduler state_dict that does not fit the scheduler (another class, or
  per-group lists of another length after add_param_group; or a ChainedScheduler nested in a
  SequentialLR whose milestone step had failed in both with NotImplementedError, leaving a
  last_epoch in its state); torch loads anything.
- after add_param_group, a step that must fail fails in both, but torch's strict zip has
  already set the lrs of the first groups; flowgrad sets none (all or nothing).
- an optimizer step that fails in both (AdamW with beta1 = 1 from a momentum cycle divides by
  1 - beta1^t = 0): torch has applied the weight decay first, flowgrad changed nothing.
- state_dict keys of OneFlow's options (PolynomialLR's cycle / end_learning_rate,
  CosineAnnealingWarmRestarts' decay_rate / restart_limit) that torch lacks.
"""
from __future__ import annotations

import warnings

import fuzz_common
import lr_scheduler_fuzz as lf
import pytest
import torch

import flowgrad as flow


@pytest.mark.parametrize("seed", range(200))
def test_scheduler_program_matches_torch(seed):
    verdict = lf.check(seed)
    assert verdict is None, f"{lf.Program(seed).describe()}\n{verdict}"


@pytest.mark.slow
def test_many_scheduler_programs_match_torch():
    fuzz_common.assert_seeds_agree(lf.check, range(200, 20000))


def _outcome(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type is compared with torch's
        return type(e)
    return None


@pytest.mark.parametrize("kw", [dict(mode=None), dict(threshold_mode=None),
                                dict(mode=["min"]), dict(mode=None, threshold_mode="x"),
                                dict(mode="x", threshold_mode=None)])
def test_plateau_refuses_modes_that_are_not_strings_as_torch(kw):
    # a mode that is not a string: torch's TypeError (flowgrad raised ValueError), and the
    # mode checked before the threshold mode
    got = []
    for m in (torch, flow):
        opt = m.optim.SGD([m.zeros(1, requires_grad=True)], lr=0.1)
        got.append(_outcome(lambda: m.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)))
    assert got[0] is not None and got[1] is got[0]


def _direct_get_lr(m, name):
    opt = m.optim.SGD([m.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
    ls = m.optim.lr_scheduler
    sched = {"StepLR": lambda: ls.StepLR(opt, 2),
             "LambdaLR": lambda: ls.LambdaLR(opt, lambda e: 0.9 ** e),
             "CosineAnnealingLR": lambda: ls.CosineAnnealingLR(opt, 4),
             "CosineAnnealingWarmRestarts": lambda: ls.CosineAnnealingWarmRestarts(opt, 3),
             "CyclicLR": lambda: ls.CyclicLR(opt, 0.01, 0.1, step_size_up=2),
             "OneCycleLR": lambda: ls.OneCycleLR(opt, 0.1, total_steps=5)}[name]()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
        sched.step()
        in_step = len(caught)
        lrs = sched.get_lr()
    return in_step, [str(w.message) for w in caught[in_step:]], lrs, sorted(sched.state_dict())


@pytest.mark.parametrize("name", ["StepLR", "LambdaLR", "CosineAnnealingLR",
                                  "CosineAnnealingWarmRestarts", "CyclicLR", "OneCycleLR"])
def test_direct_get_lr_warns_as_torch(name):
    # torch warns that get_last_lr() reads the lrs when get_lr() is called outside step()
    # (flowgrad did not), and keeps the flag in its state_dict
    t_in, t_warn, t_lrs, t_keys = _direct_get_lr(torch, name)
    f_in, f_warn, f_lrs, f_keys = _direct_get_lr(flow, name)
    assert (f_in, f_lrs) == (t_in, t_lrs) and len(t_warn) == 1
    assert f_warn == t_warn and "get_last_lr()" in f_warn[0]
    assert [k for k in f_keys if k in t_keys] == t_keys


@pytest.mark.parametrize("make", [
    lambda ls, o: ls.MultiplicativeLR(o, lambda e: 0.9),
    lambda ls, o: ls.CyclicLR(o, 0.01, 0.1, step_size_up=2),
    lambda ls, o: ls.CosineAnnealingLR(o, 1),
], ids=["MultiplicativeLR", "CyclicLR", "CosineAnnealingLR"])
def test_direct_get_lr_after_add_param_group_raises_as_torch(make):
    # torch's strict zips refuse a group added after the scheduler was built (flowgrad's
    # get_lr returned fewer lrs than groups)
    got = []
    for m in (torch, flow):
        opt = m.optim.SGD([m.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
        sched = make(m.optim.lr_scheduler, opt)
        for _ in range(2):  # (CosineAnnealingLR(T_max=1) at its restart step: epoch 2)
            opt.step()
            sched.step()
        opt.add_param_group({"params": [m.zeros(1, requires_grad=True)]})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got.append(_outcome(sched.get_lr))
    assert got == [ValueError, ValueError]


def test_lambda_lr_resumed_without_initial_lr_raises_key_error_first():
    # torch checks initial_lr before it ever calls the lambdas: KeyError, not TypeError
    got = []
    for m in (torch, flow):
        opt = m.optim.SGD([m.zeros(1, requires_grad=True)], lr=0.1)
        got.append(_outcome(lambda: m.optim.lr_scheduler.LambdaLR(opt, 0.5, last_epoch=2)))
    assert got == [KeyError, KeyError]


@pytest.mark.parametrize("name", ["CyclicLR", "OneCycleLR"])
def test_tensor_hyperparameters_are_cloned_per_group_as_torch(name):
    # flowgrad kept the caller's tensor as every group's value: CyclicLR then filled it in
    # place with the group's lr (the caller's base_lr 0.01 became 0.1), and all groups
    # shared one tensor; torch clones one per group
    got = []
    for m in (torch, flow):
        groups = [{"params": [m.zeros(1, requires_grad=True)]},
                  {"params": [m.zeros(1, requires_grad=True)], "lr": 0.2}]
        opt = m.optim.SGD(groups, lr=0.5, momentum=0.9)
        given = m.tensor(0.01 if name == "CyclicLR" else 0.3, dtype=m.float64)
        ls = m.optim.lr_scheduler
        sched = (ls.CyclicLR(opt, base_lr=given, max_lr=0.1, step_size_up=2)
                 if name == "CyclicLR" else ls.OneCycleLR(opt, max_lr=given, total_steps=10))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(3):
                opt.step()
                sched.step()
        key = "lr" if name == "CyclicLR" else "max_lr"
        got.append((float(given), [float(g["lr"]) for g in opt.param_groups],
                    opt.param_groups[0][key] is opt.param_groups[1][key]))
    assert got[1] == got[0]


def test_lambda_lr_checks_the_lambda_count_before_initial_lr_as_torch():
    # resumed (last_epoch=2) without initial_lr and with a lambda per group too many: torch
    # counts the lambdas first (ValueError); flowgrad checked initial_lr first (KeyError)
    raised = []
    for m in (torch, flow):
        opt = m.optim.SGD([m.nn.Parameter(m.ones(1))], lr=0.1)
        with pytest.raises(Exception) as info:
            m.optim.lr_scheduler.LambdaLR(opt, [lambda e: 1.0] * 2, last_epoch=2)
        raised.append(info.type)
    assert raised == [ValueError, ValueError]
