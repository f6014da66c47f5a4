"""Optimizer hooks, each case run in torch and in flowgrad with the same result: step
pre/post hooks (the optimizer is args[0], a pre hook may replace the arguments), the global
step hooks, hooks around a subclass's own step, and the state-dict hooks (a post hook may
replace the dict, a load pre hook what is loaded)."""
import importlib

import pytest
import torch

import flowgrad as flow


def _sgd(m, **kw):
    p = m.nn.Parameter(m.ones(2))
    p.grad = m.ones(2)
    return p, m.optim.SGD([p], lr=0.1, **kw)


def step_hooks_see_the_optimizer_first(m):
    p, opt = _sgd(m)
    calls = []
    opt.register_step_pre_hook(lambda o, args, kw: calls.append(
        ("pre", args[0] is o, len(args), sorted(kw))))
    opt.register_step_post_hook(lambda o, args, kw: calls.append(("post", len(args))))
    opt.step()
    return calls, p.tolist()


def pre_hook_replaces_the_closure(m):
    p, opt = _sgd(m)
    opt.register_step_pre_hook(lambda o, args, kw: (args, {"closure": lambda: m.tensor(7.0)}))
    return float(opt.step()), p.tolist()


def pre_hook_bad_return(m):
    p, opt = _sgd(m)
    opt.register_step_pre_hook(lambda o, args, kw: 5)
    return opt.step()


def global_step_hooks(m):
    hooks = importlib.import_module(m.__name__ + ".optim.optimizer")
    p, opt = _sgd(m)
    calls = []
    pre = hooks.register_optimizer_step_pre_hook(lambda o, a, k: calls.append("global pre"))
    post = hooks.register_optimizer_step_post_hook(lambda o, a, k: calls.append("global post"))
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    opt.step()
    pre.remove()
    post.remove()
    opt.step()
    return calls


def subclass_step_runs_hooks(m):
    class Halve(m.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {})

        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    p.data.mul_(0.5)

    p = m.nn.Parameter(m.ones(2))
    opt, calls = Halve([p]), []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    opt.step()
    return calls, p.tolist()


def state_dict_hooks(m):
    p, opt = _sgd(m, momentum=0.9)
    opt.step()
    calls = []
    opt.register_state_dict_pre_hook(lambda o: calls.append("pre"))
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    opt.register_state_dict_post_hook(lambda o, sd: calls.append(sorted(sd)), prepend=True)
    return calls, sorted(opt.state_dict())


def load_state_dict_hooks(m):
    p, opt = _sgd(m, momentum=0.9)
    opt.step()
    saved, calls = opt.state_dict(), []

    def change_lr(o, sd):
        calls.append("pre")
        return {**sd, "param_groups": [dict(g, lr=0.5) for g in sd["param_groups"]]}
    opt.register_load_state_dict_pre_hook(change_lr)
    opt.register_load_state_dict_post_hook(lambda o: calls.append("post"))
    opt.load_state_dict(saved)
    return calls, opt.param_groups[0]["lr"], saved["param_groups"][0]["lr"]


CASES = [step_hooks_see_the_optimizer_first, pre_hook_replaces_the_closure,
         pre_hook_bad_return, global_step_hooks, subclass_step_runs_hooks, state_dict_hooks,
         load_state_dict_hooks]


def _outcome(m, case):
    try:
        return repr(case(m))
    except Exception as e:  # noqa: BLE001 - the exception's class is the outcome
        return type(e).__name__


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_optimizer_hooks_as_torch(case):
    assert _outcome(flow, case) == _outcome(torch, case)
