"""torch's optimizer database (OptimizerInfo) through flowgrad's nn.Graph: each optimizer input
stepped by a training graph (`add_optimizer(opt, lr_sch=...)`, build runs the loss and its
backward, the optimizer pass adds the update) against the same steps run eagerly in flowgrad
(tests/optim_db_vs_torch.py checks eager flowgrad against torch).

Every call gets a different batch `x` (the loss depends on it), and after every call the
parameters and each group's learning rate are compared; at the end, the optimizer's
state_dict (every key, values and dtypes). The variants, for each optimizer input:
- "one group" (an update node per parameter), "fused" (`allow_fuse_model_update_ops`: one
  node per group), "two groups" (the second at half the rate), each of torch's scheduler
  lists (one scheduler is the graph's lr_sch, several a ChainedScheduler; ReduceLROnPlateau,
  which a graph refuses as lr_sch, is stepped by the user on the loss the graph returns);
- "shared state": an eager optimizer step, then a write into a parameter, between graph
  calls (the next graph call must see both);
- "saved": graph.state_dict() through flow.save / flow.load into a second graph of new
  objects (compiled already) after three calls: it must go on as the first would;
- "torch checkpoint": the compiled graph's optimizer loads torch's state_dict after torch's
  three steps (the parameters set to torch's): the graph's steps go on as torch's do;
- "clipped" (clip_grad_max_norm=0.5, clip_grad_norm_type=1.5 in the groups) against eager
  clip_grad_norm_; "accumulated" (set_gradient_accumulation_steps(2): one update from two
  micro-batches) against eager accumulation of each micro-batch's loss / 2.
An optimizer the graph refuses (LBFGS: its step needs a closure the graph cannot give) must
raise at the first call, before anything is updated.

With `options`, the inputs are those with torch's global options instead (differentiable and
fused where torch's test internals add them, foreach=False and True on every input), run in
the variants OPTION_VARIANTS names; where eager refuses an input (differentiable=True), the
graph must refuse it too.

Run as a script for a report:
.venv/bin/python -W ignore tests/optim_db_graph.py [--options] [Adam ...]
"""
from __future__ import annotations

import copy
import inspect
import io
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import optim_db_vs_torch as eager_db  # noqa: E402
from opinfo_vs_torch import Converter, compare, torch_test_internals  # noqa: E402
from optim_db_vs_torch import (  # noqa: E402
    _compare_state,
    _compare_traces,
    _default_lr,
    _flow_function,
    _flow_state_dict,
    _groups,
    _loss,
    _record,
    _values,
    name_of,
    optim_db,
)

import flowgrad as flow  # noqa: E402

STEPS = 6
RESUME_AFTER = 3
CLIP = {"clip_grad_max_norm": 0.5, "clip_grad_norm_type": 1.5}
ACCUMULATE = 2
COMPARED: dict[str, int] = {}  # variants compared per optimizer
# the variants run on the inputs with the global options (foreach, fused, differentiable):
# those whose update path the options change
OPTION_VARIANTS = frozenset(("one group", "fused", "two groups", "shared state", "clipped"))


def batches(complex_params=False, steps=STEPS, rows=5):
    """One batch per call, each different (the loss depends on it)."""
    r = np.random.default_rng(7)
    xs = [r.standard_normal((rows, 4)) for _ in range(steps)]
    return [x.astype(complex) for x in xs] if complex_params else xs


class Holder(flow.nn.Module):
    """The three parameters, as a module (a graph holds its tensors through modules)."""

    def __init__(self, values):
        super().__init__()
        self.w, self.b, self.s = (flow.nn.Parameter(flow.tensor(v)) for v in values)

    def params(self):
        return [self.w, self.b, self.s]


def _setup(cls, kwargs, values, two_groups=False, scheduler_fns=(), clip=False,
           unused=False):
    holder = Holder(values)
    params = holder.params()
    if unused:  # a parameter of the optimizer the loss does not use (it gets no gradient)
        holder.unused = flow.nn.Parameter(flow.ones_like(params[0]))
        params = params + [holder.unused]
    groups = _groups(flow, params, two_groups, _default_lr(cls, kwargs))
    if clip:
        groups = [dict(g, **CLIP) for g in (groups if two_groups else [{"params": groups}])]
    opt = cls(groups, **kwargs)
    schedulers = [make(opt) for make in scheduler_fns]
    return holder, params, opt, schedulers


def _is_plateau(scheduler):
    return type(scheduler).__name__ == "ReduceLROnPlateau"


def _step_plateaus(schedulers, loss):
    for scheduler in schedulers:
        if _is_plateau(scheduler):
            scheduler.step(float(loss.sum()))


def make_graph(holder, opt, schedulers=(), fuse=False, accumulation=1):
    """The training graph of `holder`'s loss on a batch: the schedulers other than
    ReduceLROnPlateau are its lr_sch (several: one ChainedScheduler)."""
    stepped = [s for s in schedulers if not _is_plateau(s)]
    lr_sch = stepped[0] if len(stepped) == 1 else \
        flow.optim.lr_scheduler.ChainedScheduler(stepped, optimizer=opt) if stepped else None

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.holder = holder
            self.add_optimizer(opt, lr_sch=lr_sch)
            if fuse:
                self.config.allow_fuse_model_update_ops(True)
            if accumulation != 1:
                self.config.set_gradient_accumulation_steps(accumulation)

        def build(self, x):
            loss = _loss(flow, self.holder.params(), x)
            loss.backward()
            return loss

    return Train()


def eager_step(params, opt, schedulers, x, clip=False, accumulation=1):
    """One eager training step (what the graph's call does), returning the loss."""
    opt.zero_grad()
    if accumulation == 1:
        loss = _loss(flow, params[:3], x)
        loss.backward()
    else:
        losses = []
        for part in flow.chunk(x, accumulation):
            losses.append(_loss(flow, params[:3], part))
            (losses[-1] / accumulation).backward()
        loss = flow.stack(losses)
    if clip:
        for group in opt.param_groups:
            flow.nn.utils.clip_grad_norm_(group["params"], group["clip_grad_max_norm"],
                                          group["clip_grad_norm_type"])
    _sparse_grads(opt)
    opt.step()
    for scheduler in schedulers:
        if _is_plateau(scheduler):
            scheduler.step(float(loss.sum()))
        else:
            scheduler.step()
    return loss


def _sparse_grads(opt):
    """SparseAdam takes sparse gradients only: eagerly, the gradients as sparse ones whose
    entries are the rows with a non-zero value (what a graph's update reads its dense ones
    as)."""
    if name_of_optimizer(opt) != "SparseAdam":
        return
    for group in opt.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                p.grad = p.grad.to_sparse(1) if p.dim() > 1 else p.grad.to_sparse()


def name_of_optimizer(opt):
    return type(opt).__name__


def train(cls, kwargs, values, xs, graph, two_groups=False, scheduler_fns=(), fuse=False,
          clip=False, accumulation=1, between=None, unused=False):
    """Steps on each batch of `xs`, in a graph or eagerly; `between(i, params, opt)` runs
    after call i. Returns (trace per call, the final state_dict, losses)."""
    holder, params, opt, schedulers = _setup(cls, kwargs, values, two_groups, scheduler_fns,
                                             clip, unused)
    train_graph = make_graph(holder, opt, schedulers, fuse, accumulation) if graph else None
    trace, losses = [], []
    for i, x in enumerate(xs):
        xt = flow.tensor(x)
        if graph:
            loss = train_graph(xt)
            _step_plateaus(schedulers, loss)
        else:
            loss = eager_step(params, opt, schedulers, xt, clip, accumulation)
        losses.append(loss.detach().numpy().copy())
        trace.append(_record(opt, params))
        if between is not None:
            between(i, params, opt)
    return trace, opt.state_dict(), losses


def _between_eager_step_and_write(i, params, opt):
    """After call 2: one eager step on another batch; after call 3: a write into W."""
    if i == 1:
        opt.zero_grad()
        x = np.random.default_rng(11).standard_normal((5, 4))
        if params[0].is_complex():
            x = x.astype(complex)
        _loss(flow, params[:3], flow.tensor(x)).backward()
        _sparse_grads(opt)
        opt.step()
        opt.zero_grad()
    elif i == 2:
        with flow.no_grad():
            params[0].mul_(0.5)


def _between_options_changed(i, params, opt):
    """After call 3: the user changes options of every group (the rate, weight decay, the
    direction): the next calls step with the new ones, eagerly and in the graph."""
    if i != 2:
        return
    for group in opt.param_groups:
        if isinstance(group["lr"], flow.Tensor):
            group["lr"].mul_(0.5)
        else:
            group["lr"] *= 0.5
        if group.get("weight_decay") is not None:
            group["weight_decay"] = group["weight_decay"] + 0.05
        if "maximize" in group:
            group["maximize"] = not group["maximize"]


def _compare_runs(expected, actual):
    """A difference between the eager run and the graph's, labelled so."""
    message = _compare_traces(expected[0], actual[0])
    message = message or _compare_state(expected[1], actual[1])
    if message is None:
        for i, (e, a) in enumerate(zip(expected[2], actual[2])):
            message = compare(("tensor", str(e.dtype), e), ("tensor", str(a.dtype), a),
                              f"loss of call {i + 1}")
            if message:
                break
    return message and message.replace("torch", "eager").replace("flowgrad", "graph")


def _outcome(fn):
    try:
        return fn(), None
    except Exception as error:  # noqa: BLE001 - compared with eager's outcome
        return None, error


def _saved_and_loaded(cls, kwargs, values, xs, scheduler_fns, graph=True):
    """RESUME_AFTER calls of a graph, its state_dict through flow.save/flow.load into a second
    graph of new objects (compiled on a batch of its own first), which goes on; `graph=False`:
    the same eagerly, the module's and the optimizer's state_dicts saved and loaded."""
    holder, params, opt, schedulers = _setup(cls, kwargs, values, scheduler_fns=scheduler_fns)
    first = make_graph(holder, opt, schedulers)
    for x in xs[:RESUME_AFTER]:
        if graph:
            _step_plateaus(schedulers, first(flow.tensor(x)))
        else:
            eager_step(params, opt, schedulers, flow.tensor(x))
    buffer = io.BytesIO()
    flow.save(first.state_dict() if graph else {
        "holder": holder.state_dict(), "opt": opt.state_dict(),
        "schedulers": [s.state_dict() for s in schedulers]}, buffer)
    buffer.seek(0)
    state = flow.load(buffer)
    holder2, params2, opt2, schedulers2 = _setup(cls, Converter()(kwargs_of(kwargs)), values,
                                                 scheduler_fns=scheduler_fns)
    second = make_graph(holder2, opt2, schedulers2)
    if graph:
        _step_plateaus(schedulers2, second(flow.tensor(xs[-1] * 0.3)))  # (compiled first)
        second.load_state_dict(state)
    else:
        holder2.load_state_dict(state["holder"])
        opt2.load_state_dict(state["opt"])
        for s2, saved in zip(schedulers2, state["schedulers"]):
            s2.load_state_dict(saved)
    if graph:  # (the graph's state holds its lr_sch's: ReduceLROnPlateau's is the user's)
        for s, s2 in zip(schedulers, schedulers2):
            if _is_plateau(s):
                s2.load_state_dict(s.state_dict())
    trace, losses = [], []
    for x in xs[RESUME_AFTER:]:
        if graph:
            loss = second(flow.tensor(x))
            _step_plateaus(schedulers2, loss)
        else:
            loss = eager_step(params2, opt2, schedulers2, flow.tensor(x))
        losses.append(loss.detach().numpy().copy())
        trace.append(_record(opt2, params2))
    return trace, opt2.state_dict(), losses


def kwargs_of(kwargs):
    """flowgrad kwargs back in torch's form (Converter takes torch's): tensors as torch's."""
    return {k: torch.tensor(v.numpy()) if isinstance(v, flow.Tensor) else v
            for k, v in kwargs.items()}


def _after_torch_checkpoint(info, kwargs, fkwargs, values, xs):
    """torch's RESUME_AFTER steps, its state_dict loaded by the compiled graph's optimizer
    (parameters set to torch's): (torch's trace after, the graph's)."""
    cls, fcls = info.optim_cls, getattr(flow.optim, name_of(info))
    tparams = [torch.nn.Parameter(torch.tensor(v)) for v in values]
    topt = cls(tparams, **kwargs)
    trace = []
    try:
        _torch_steps(info, tparams, topt, xs, trace)
    except Exception as error:  # noqa: BLE001 - (differentiable=True outside no_grad...)
        return f"torch raises {error!r:.150}"
    middle, flow_state = trace.pop(0)
    holder, params, opt, _ = _setup(fcls, fkwargs, values)
    graph = make_graph(holder, opt)
    graph(flow.tensor(xs[-1] * 0.3))  # compiled, on a batch of its own
    with flow.no_grad():
        for p, v in zip(params, middle):
            p.copy_(flow.tensor(v))
    opt.load_state_dict(flow_state)
    actual = []
    for x in xs[RESUME_AFTER:]:
        graph(flow.tensor(x))
        actual.append(_record(opt, params))
    return trace, actual


def _torch_steps(info, tparams, topt, xs, trace):
    """torch's steps on `xs`: `trace` gets (parameters, state_dict) at RESUME_AFTER, then the
    record of each step after."""
    for i, x in enumerate(xs):
        if i == RESUME_AFTER:
            trace.append(([p.detach().numpy().copy() for p in tparams],
                          _flow_state_dict(copy.deepcopy(topt.state_dict()))))
        topt.zero_grad()
        _loss(torch, tparams, torch.tensor(x)).backward()
        if name_of(info) == "SparseAdam":
            for p in tparams:
                p.grad = p.grad.to_sparse(1) if p.dim() > 1 else p.grad.to_sparse()
        topt.step()
        if i >= RESUME_AFTER:
            trace.append(_record(topt, tparams))


def variants(info):
    """(label, keyword arguments of `train`) for each variant run on every input."""
    found = [("one group", {}), ("fused", {"fuse": True})]
    if info.supports_param_groups is not False:
        found.append(("two groups", {"two_groups": True}))
    for k, fns in enumerate(info.scheduler_inputs):
        found.append((f"schedulers {k}", {"scheduler_fns": [_flow_function(f) for f in fns]}))
    found += [("shared state", {"between": _between_eager_step_and_write}),
              ("clipped", {"clip": True, "two_groups": info.supports_param_groups is not False}),
              ("accumulated", {"accumulation": ACCUMULATE}),
              ("accumulated and clipped", {"accumulation": ACCUMULATE, "clip": True}),
              ("options changed", {"between": _between_options_changed}),
              ("unused parameter", {"unused": True})]
    return found


def run_input(info, optim_input, complex_params=False, only=None):
    """Findings (kind, where, message) for one optimizer input, in every variant (or those
    whose label is in `only`)."""
    with eager_db._tolerance_of(info):
        return _run_input(info, optim_input, complex_params, only)


def _run_input(info, optim_input, complex_params, only):
    findings = []
    fcls = getattr(flow.optim, name_of(info))
    kwargs = optim_input.kwargs
    try:
        fkwargs = Converter()(kwargs)
    except Exception as error:  # noqa: BLE001
        return [("skip", optim_input.desc, f"skip: {error}")]
    kind = "complex128" if complex_params else "float64"
    values = _values(complex_params, matrices_only=name_of(info) in eager_db.MATRICES_ONLY)
    xs = batches(complex_params)
    for label, options in variants(info):
        if only is not None and label not in only:
            continue
        where = f"{optim_input.desc} ({label})"
        run_xs = [np.concatenate([x, x[::-1] * 0.5]) for x in xs] \
            if options.get("accumulation") else xs
        # (each run converts the kwargs anew: a scheduler writes into a tensor lr)
        expected, e_error = _outcome(lambda: train(fcls, Converter()(kwargs), values, run_xs,
                                                   False, **options))
        actual, g_error = _outcome(lambda: train(fcls, Converter()(kwargs), values, run_xs,
                                                 True, **options))
        if e_error is not None and g_error is None:
            findings.append((kind, where, f"graph trains where eager raises {e_error!r:.200}"))
            continue
        if e_error is not None:
            if type(e_error) is not type(g_error):
                findings.append((kind, where, f"raise: eager {e_error!r:.150}, graph "
                                              f"{g_error!r:.150}"))
            else:
                findings.append(("skip", where, f"skip: eager raises {e_error!r:.150}"))
            continue
        if g_error is not None:
            findings.append((kind, where, f"raise: graph {g_error!r:.300}"))
            continue
        COMPARED[name_of(info)] = COMPARED.get(name_of(info), 0) + 1
        message = _compare_runs(expected, actual)
        if message:
            findings.append((kind, where, message))
    for k, fns in enumerate(info.scheduler_inputs if only is None or "saved" in only else ()):
        fns = [_flow_function(f) for f in fns]
        expected, e_error = _outcome(lambda: _saved_and_loaded(
            fcls, Converter()(kwargs), values, xs, fns, graph=False))
        actual, g_error = _outcome(lambda: _saved_and_loaded(fcls, Converter()(kwargs), values,
                                                             xs, fns))
        where = f"{optim_input.desc} (saved and loaded, schedulers {k})"
        if e_error is None and g_error is not None:
            findings.append((kind, where, f"raise: graph {g_error!r:.300}"))
        elif e_error is None:
            message = _compare_runs(expected, actual)
            if message:
                findings.append((kind, where, message))
    if (only is None or "torch checkpoint" in only) and not complex_params:
        result, error = _outcome(lambda: _after_torch_checkpoint(info, kwargs, fkwargs, values,
                                                                 xs))
        where = f"{optim_input.desc} (torch checkpoint)"
        if error is not None:
            findings.append((kind, where, f"raise: {error!r:.300}"))
        elif isinstance(result, str):
            findings.append(("skip", where, f"skip: {result}"))
        else:
            message = _compare_traces(*result)
            if message:
                findings.append((kind, where, message.replace("flowgrad", "graph")))
    return findings


def refused(info):
    """None where the graph refuses `info`'s optimizer (at add_optimizer or its first call)
    without changing a parameter, else what it did (for those whose step needs a closure)."""
    values = _values(False)
    holder, params, opt, _ = _setup(getattr(flow.optim, name_of(info)), {}, values)
    try:
        make_graph(holder, opt)(flow.tensor(batches()[0]))
    except Exception as error:  # noqa: BLE001
        changed = [i for i, (p, v) in enumerate(zip(params, values))
                   if not np.array_equal(p.detach().numpy(), v)]
        if changed:
            return f"raised {error!r:.200} after updating parameters {changed}"
        if "nn.Graph" not in str(error) or "closure" not in str(error):
            return f"raised an unclear error: {error!r:.300}"
        return None
    return "trained without raising"


def optim_inputs(info, options=False):
    """The optimizer's inputs; `options`: also torch's global "cliquey" ones (differentiable,
    fused) and foreach=True and False on each input, for optimizers that take them."""
    inputs = info.optim_inputs_func(device="cpu")
    if not options:
        return inputs
    with torch_test_internals():
        from torch.testing._internal.common_optimizers import (
            _get_optim_inputs_including_global_cliquey_kwargs as cliquey,
        )
    found, seen = [], set()
    for optim_input in cliquey("cpu", torch.float64, info):
        key = repr(sorted(optim_input.kwargs.items()))
        if optim_input.kwargs.get("differentiable") or optim_input.kwargs.get("fused"):
            seen.add(key)
            found.append(optim_input)
    if "foreach" in inspect.signature(info.optim_cls.__init__).parameters:
        for optim_input in inputs:
            for foreach in (False, True):
                copied = copy.copy(optim_input)
                copied.kwargs = dict(optim_input.kwargs, foreach=foreach)
                copied.desc = f"{optim_input.desc} & foreach={foreach}"
                found.append(copied)
    return found


def probe(info, first_only=False, only=None, options=False):
    """Every finding for one OptimizerInfo (`first_only`: its first input only; `options`:
    the inputs with the global options instead, see optim_inputs)."""
    if getattr(flow.optim, name_of(info), None) is None:
        return [("missing", name_of(info), "missing")]
    if info.step_requires_closure:
        message = refused(info)
        return [("refusal", name_of(info), message)] if message else []
    inputs = optim_inputs(info, options)
    if options and only is None:
        only = OPTION_VARIANTS
    findings = []
    for optim_input in inputs[:1] if first_only else inputs:
        findings += run_input(info, optim_input, only=only)
        if info.supports_complex:
            findings += run_input(info, optim_input, complex_params=True, only=only)
    return findings


def main(names):
    options = "--options" in names
    names = [n for n in names if n != "--options"]
    total = bad = 0
    for info in optim_db():
        if names and name_of(info) not in names:
            continue
        total += 1
        findings = probe(info, options=options)
        real = [f for f in findings if not f[2].startswith("skip")]
        for _, where, message in findings:
            if message.startswith("skip"):
                print(f"SKIP {name_of(info)} {where}: {message[:200]}")
        if real:
            bad += 1
            print(f"FAIL {name_of(info)}: {len(real)} findings")
            for kind, where, message in real[:12]:
                print(f"    [{kind}] {where[:150]}\n        {message[:400]}")
    print(f"# {total} OptimizerInfos, {bad} with findings")


if __name__ == "__main__":
    main(sys.argv[1:])
