"""torch's own optimizer database (OptimizerInfo) run through flowgrad: the same optimizer
inputs, the same parameters and losses; the same parameters, learning rates and state.

`torch.testing._internal.common_optimizers.optim_db` lists torch's optimizers, each with the
constructor arguments torch tests it on (`optim_inputs_func`), the schedulers it is run with
(`scheduler_inputs`) and the arguments it must refuse (`optim_error_inputs_func`). For each
optimizer input, both frameworks train the same three parameters (a matrix, a vector and a
0-d one; complex ones too where torch's optimizer takes them) on the same loss for STEPS
steps, and after every step the parameters and each group's learning rate are compared. The
variants: one parameter group; two groups (the second with half the learning rate); each of
the optimizer's scheduler lists stepped after every step; and a resume, where flowgrad's
optimizer loads torch's state_dict after three steps (a torch checkpoint) and both go on. At
the end the state_dicts are compared (every torch key, values and dtypes). Error inputs must
raise (or warn) in flowgrad where they do in torch, with the same exception type.

Run as a script for a report: .venv/bin/python -W ignore tests/optim_db_vs_torch.py [Adam ...]
"""
from __future__ import annotations

import contextlib
import copy
import inspect
import os
import sys
import types
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import opinfo_vs_torch  # noqa: E402
from opinfo_vs_torch import Converter, compare, to_numpy, torch_test_internals  # noqa: E402

import flowgrad as flow  # noqa: E402

STEPS = 6
MATRICES_ONLY = frozenset(("Muon",))  # optimizers of 2-D parameters only
# Muon's Newton-Schulz iteration runs in bfloat16 (as torch's): a float32 sum taken in another
# order sometimes rounds to the neighbouring bfloat16 (a few elements in a hundred for a
# 30 x 20 matrix), which moves a parameter by ~lr * 2**-8 relative
COMPARED: dict[str, int] = {}  # runs compared per optimizer (those torch did not refuse)
# (rtol, atol) by optimizer, for every dtype or (a dict) for the dtypes named
LOOSER = {"Muon": (2e-5, 5e-5),  # (weight decay alone moves them 1e-4 a step)
          # LBFGS's float64 history (`al`, `ro`: ratios of differences of nearly equal
          # iterates near convergence) amplifies a rounding difference in a dot product:
          # torch's own MKL, on an AVX-512 Intel CPU, moves `al`[37] 1.5e-7 relative from what
          # it computes on AMD or under MKL_ENABLE_INSTRUCTIONS=AVX2 (flowgrad's value with
          # MKL, OpenBLAS or NumPy alike)
          "LBFGS": {"float64": (1e-6, 1e-9)}}
RESUME_AFTER = 3


def optim_db():
    """torch's OptimizerInfo list (imports torch's test internals once)."""
    with torch_test_internals():
        from torch.testing._internal.common_optimizers import optim_db as db
    return db


def name_of(info):
    return info.optim_cls.__name__


def _flow_function(fn):
    """torch's scheduler lambda with its torch names (StepLR, ...) bound to flowgrad's."""
    scope = dict(fn.__globals__, torch=flow)
    for key, value in fn.__globals__.items():
        if isinstance(value, type) and value.__module__.startswith("torch.optim"):
            scope[key] = getattr(flow.optim.lr_scheduler, key, None) or getattr(
                flow.optim, key, None)
    return types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)


def _values(complex_params, matrices_only=False):
    r = np.random.default_rng(0)
    shapes = [(4, 3), (1, 3), (2, 2)] if matrices_only else [(4, 3), (3,), ()]
    if complex_params:
        return [r.standard_normal(s) + 1j * r.standard_normal(s) for s in shapes]
    return [r.standard_normal(s) for s in shapes]


_X = np.random.default_rng(1).standard_normal((5, 4))


def _loss(m, params, x):
    """A nonconvex loss of (W, b, s) written once for both frameworks (`m` is the module)."""
    w, b, s = params
    h = x @ w + b
    if h.is_complex():
        return (h.abs() ** 2).sum() * 0.1 + ((s.abs() - 1) ** 2).sum() + (
            w.abs() ** 4).sum() * 0.01
    return (m.tanh(h) ** 2).sum() + (((s - 1) ** 2) * 3 + m.sin(s)).sum() + (
        w ** 4).sum() * 0.05


def _groups(m, params, two_groups, lr):
    if not two_groups:
        return list(params)
    return [{"params": [params[0]]}, {"params": list(params[1:]), "lr": lr * 0.5}]


def _default_lr(cls, kwargs):
    return kwargs.get("lr", inspect.signature(cls.__init__).parameters["lr"].default)


def _record(opt, params):
    """The parameters' and learning rates' values now (copies: `.numpy()` shares the memory
    the optimizer updates in place, and a trace of views would hold the last step's values
    at every step)."""
    lrs = [group["lr"] for group in opt.param_groups]
    return [_copied(to_numpy(p)) for p in params] + [
        _copied(to_numpy(lr)) if hasattr(lr, "numpy") else float(lr) for lr in lrs]


def _copied(form):
    return form[:2] + (form[2].copy(),)


def _train(m, cls, kwargs, values, x, two_groups=False, scheduler_fns=(), resume=None,
           closure_step=False, steps=STEPS):
    """`steps` steps of `cls` on the loss (a resume starts at RESUME_AFTER); returns (trace
    per step, final state_dict, optimizer, parameters)."""
    params = [m.nn.Parameter(m.tensor(v)) for v in values]
    xt = m.tensor(x if not np.iscomplexobj(values[0]) else x.astype(complex))
    opt = cls(_groups(m, params, two_groups, _default_lr(cls, kwargs)), **kwargs)
    schedulers = [make(opt) for make in scheduler_fns]
    trace, start = [], 0
    if resume is not None:  # (param values, torch state_dict): continue torch's run
        with m.no_grad():
            for p, v in zip(params, resume[0]):
                p.copy_(m.tensor(v))
        opt.load_state_dict(resume[1])
        start = RESUME_AFTER

    def closure():
        opt.zero_grad()
        loss = _loss(m, params, xt)
        loss.backward()
        return loss

    for _ in range(start, steps):
        if closure_step:
            loss = opt.step(closure)
        else:
            loss = closure()
            opt.step()
        for scheduler in schedulers:
            if type(scheduler).__name__ == "ReduceLROnPlateau":
                scheduler.step(float(loss))
            else:
                scheduler.step()
        trace.append(_record(opt, params))
    return trace, opt.state_dict(), opt, params


def _state_form(state_dict):
    """A state_dict as nested tuples for `compare`: state by parameter index and key (sorted),
    then each group's hyperparameters (sorted by key), `params` lists included."""
    state = tuple((k, tuple((key, to_numpy(v)) for key, v in sorted(s.items())))
                  for k, s in sorted(state_dict["state"].items()))
    groups = tuple(tuple((key, to_numpy(v) if not isinstance(v, list) else tuple(v))
                         for key, v in sorted(g.items())) for g in state_dict["param_groups"])
    return state, groups


def _compare_state(expected, actual):
    """Differences between torch's and flowgrad's state_dicts: every torch key must be in
    flowgrad's with the same value; flowgrad's extra group keys (its own options) are fine."""
    (e_state, e_groups), (a_state, a_groups) = _state_form(expected), _state_form(actual)
    if [k for k, _ in e_state] != [k for k, _ in a_state]:
        return f"state: parameters torch {[k for k, _ in e_state]}, flowgrad " \
               f"{[k for k, _ in a_state]}"
    for (k, e), (_, a) in zip(e_state, a_state):
        e_keys, a = [key for key, _ in e], dict(a)
        if set(e_keys) != set(a):
            return f"state[{k}]: keys torch {sorted(e_keys)}, flowgrad {sorted(a)}"
        for key, value in e:
            message = compare(value, a[key], f"state[{k}][{key!r}]")
            if message:
                return message
    if len(e_groups) != len(a_groups):
        return f"param_groups: torch {len(e_groups)}, flowgrad {len(a_groups)}"
    for i, (e, a) in enumerate(zip(e_groups, a_groups)):
        a = dict(a)
        for key, value in e:
            if key not in a:
                return f"param_groups[{i}]: no {key!r} in flowgrad's"
            message = compare(value, a[key], f"param_groups[{i}][{key!r}]")
            if message:
                return message
    return None


def _flow_state_dict(state_dict):
    """torch's optimizer state_dict with flowgrad tensors (what flow.load gives for it)."""
    convert = Converter()
    return {"state": {k: {key: convert(v) for key, v in s.items()}
                      for k, s in state_dict["state"].items()},
            "param_groups": [{key: convert(v) for key, v in g.items()}
                             for g in state_dict["param_groups"]]}


class _SameTensors(Converter):
    """A Converter that gives one flowgrad tensor per torch tensor (torch's error inputs name
    one parameter twice, and that identity is what they test)."""

    def __init__(self):
        super().__init__()
        self.seen = {}

    def tensor(self, t):
        if id(t) not in self.seen:
            self.seen[id(t)] = (t, super().tensor(t))
        return self.seen[id(t)][1]


def _outcome(fn):
    try:
        return fn(), None
    except Exception as error:  # noqa: BLE001 - compared with torch's outcome
        return None, error


@contextlib.contextmanager
def _tolerance_of(info):
    """`compare` at the optimizer's own tolerance (LOOSER) inside."""
    loose = LOOSER.get(name_of(info))
    if loose is None:
        yield
        return
    plain = opinfo_vs_torch.tolerance
    if isinstance(loose, dict):
        opinfo_vs_torch.tolerance = lambda dtype: loose.get(dtype) or plain(dtype)
    else:
        opinfo_vs_torch.tolerance = lambda dtype: loose
    try:
        yield
    finally:
        opinfo_vs_torch.tolerance = plain


def run_input(info, optim_input, complex_params=False):
    """Findings (kind, where, message) for one optimizer input, in every variant."""
    with _tolerance_of(info):
        return _run_input(info, optim_input, complex_params)


def _run_input(info, optim_input, complex_params):
    findings = []
    cls, fcls = info.optim_cls, getattr(flow.optim, name_of(info))
    kwargs = optim_input.kwargs
    try:
        fkwargs = Converter()(kwargs)
    except Exception as error:  # noqa: BLE001
        return [("skip", optim_input.desc, f"skip: {error}")]
    values = _values(complex_params, matrices_only=name_of(info) in MATRICES_ONLY)
    closure = info.step_requires_closure
    kind = "complex128" if complex_params else "float64"
    variants = [("one group", {}), ("two groups", {"two_groups": True})]
    if info.supports_param_groups is False:
        variants = variants[:1]
    for k, fns in enumerate(info.scheduler_inputs):
        variants.append((f"schedulers {k}", {"scheduler_fns": fns}))
    for label, options in variants:
        where = f"{optim_input.desc} ({label})"
        flow_options = dict(options)
        if "scheduler_fns" in options:
            flow_options["scheduler_fns"] = [_flow_function(f) for f in options["scheduler_fns"]]
        expected, t_error = _outcome(lambda: _train(torch, cls, kwargs, values, _X,
                                                    closure_step=closure, **options))
        actual, f_error = _outcome(lambda: _train(flow, fcls, fkwargs, values, _X,
                                                  closure_step=closure, **flow_options))
        if (t_error is None) != (f_error is None):
            findings.append((kind, where, f"raise: torch {t_error!r:.150}, flowgrad "
                                          f"{f_error!r:.300}"))
            continue
        if t_error is not None:
            findings.append(("skip", where, f"skip: torch raises {t_error!r:.150}"))
            continue
        COMPARED[name_of(info)] = COMPARED.get(name_of(info), 0) + 1
        message = _compare_traces(expected[0], actual[0])
        message = message or _compare_state(expected[1], actual[1])
        if message:
            findings.append((kind, where, message))
            continue
        if label == "one group":
            findings += _resume(info, cls, fcls, kwargs, fkwargs, values, kind,
                                optim_input.desc, closure)
    return findings


def _compare_traces(expected, actual):
    for step, (e, a) in enumerate(zip(expected, actual)):
        for i, (ev, av) in enumerate(zip(e, a)):
            what = f"step {step + 1}: " + (f"param {i}" if i < 3 else f"lr of group {i - 3}")
            message = compare(ev, av, what)
            if message:
                return message
    return None


def _resume(info, cls, fcls, kwargs, fkwargs, values, kind, desc, closure):
    """flowgrad's optimizer loads torch's state_dict after RESUME_AFTER steps and goes on."""
    _, state, _, params = _train(torch, cls, kwargs, values, _X, closure_step=closure,
                                 steps=RESUME_AFTER)
    middle = [p.detach().numpy().copy() for p in params]
    flow_state = _flow_state_dict(state)  # (before torch's own resume writes into `state`)
    expected, _, _, _ = _train(torch, cls, kwargs, values, _X, closure_step=closure,
                               resume=(middle, copy.deepcopy(state)))
    actual, f_error = _outcome(lambda: _train(
        flow, fcls, fkwargs, values, _X, closure_step=closure, resume=(middle, flow_state)))
    where = f"{desc} (resumed from torch's state_dict)"
    if f_error is not None:
        return [(kind, where, f"raise: flowgrad {f_error!r:.300}")]
    message = _compare_traces(expected, actual[0])
    return [(kind, where, message)] if message else []


def check_errors(info):
    """Findings for the optimizer's error inputs: the same exception type (or a warning)."""
    findings = []
    fcls = getattr(flow.optim, name_of(info))
    for error_input in info.optim_error_inputs_func(device="cpu", dtype=torch.float64):
        optim_input = error_input.optimizer_error_input
        params = optim_input.params
        if params is None:
            params = [torch.nn.Parameter(torch.randn(1, 1, dtype=torch.float64))]
        convert = _SameTensors()
        try:
            fparams, fkwargs = convert(params), convert(optim_input.kwargs)
        except Exception as error:  # noqa: BLE001
            findings.append(("error input", optim_input.desc, f"skip: {error}"))
            continue
        for t, f in convert.pairs + [(p, fp) for p, fp in _tensor_pairs(params, fparams)]:
            if t.grad is not None and f.grad is None:
                f.grad = flow.tensor(t.grad.numpy().copy())
        on_step = error_input.error_on.name == "STEP_ERROR"
        outcomes = []
        for cls, p, kw in ((info.optim_cls, params, optim_input.kwargs), (fcls, fparams, fkwargs)):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    opt = cls(p, **kw)
                    if on_step:
                        opt.step()
                    error = None
                except Exception as e:  # noqa: BLE001
                    error = type(e).__name__
            warned = any(issubclass(w.category, error_input.error_type) for w in caught) \
                if issubclass(error_input.error_type, Warning) else False
            outcomes.append((error, warned))
        if outcomes[0] != outcomes[1]:
            findings.append(("error input", optim_input.desc,
                             f"torch (error, warned) {outcomes[0]}, flowgrad {outcomes[1]}"))
    return findings


def _tensor_pairs(params, fparams):
    if isinstance(params, torch.Tensor):
        return [(params, fparams)]
    pairs = []
    if isinstance(params, (list, tuple)):
        for p, f in zip(params, fparams):
            pairs += _tensor_pairs(p, f)
    elif isinstance(params, dict):
        for key in params:
            pairs += _tensor_pairs(params[key], fparams[key])
    return pairs


def probe(info):
    """Every finding for one OptimizerInfo; [("missing", ...)] when flowgrad lacks it."""
    if getattr(flow.optim, name_of(info), None) is None:
        return [("missing", name_of(info), "missing")]
    if info.only_supports_sparse_grads:
        return [("skip", name_of(info), "skip: sparse gradients only")]
    findings = []
    for optim_input in info.optim_inputs_func(device="cpu"):
        findings += run_input(info, optim_input)
        if info.supports_complex:
            findings += run_input(info, optim_input, complex_params=True)
    return findings + check_errors(info)


def main(names):
    total = bad = 0
    for info in optim_db():
        if names and name_of(info) not in names:
            continue
        total += 1
        findings = probe(info)
        real = [f for f in findings if not f[2].startswith("skip")]
        if findings and findings[0][2] == "missing":
            print(f"MISSING {name_of(info)}")
            continue
        skips = [f for f in findings if f[2].startswith("skip")]
        for _, where, message in skips:
            print(f"SKIP {name_of(info)} {where}: {message[:200]}")
        if real:
            bad += 1
            print(f"FAIL {name_of(info)}: {len(real)} findings")
            for kind, where, message in real[:8]:
                print(f"    [{kind}] {where[:150]}\n        {message[:400]}")
    print(f"# {total} OptimizerInfos, {bad} with findings")


if __name__ == "__main__":
    main(sys.argv[1:])
