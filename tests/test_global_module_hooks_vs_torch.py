"""Global module hooks (torch.nn.modules.module.register_module_*) against torch's: the events
a run logs (which hooks ran, on which module, in which order, with which shapes), what a
hook's result replaces, the gradients, and removal. Each case runs with `m` = torch and
`m` = flowgrad, in float64."""
import numpy as np
import pytest
import torch

import flowgrad as flow


def _net(m):
    net = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.Tanh(), m.nn.Linear(4, 2)).double()
    with m.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(m.tensor(np.linspace(-1, 1, p.numel()).reshape(tuple(p.shape)) * (i + 1)))
    return net


def _x(m):
    return m.tensor(np.array([[0.5, -1.0, 2.0], [1.5, 0.2, -0.3]]), requires_grad=True)


def _name(module):
    return type(module).__name__


def _forward_order(m, log):
    mm = m.nn.modules.module
    handles = [
        mm.register_module_forward_pre_hook(lambda mod, a: log.append(("gpre", _name(mod)))),
        mm.register_module_forward_hook(
            lambda mod, a, out: log.append(("gpost", _name(mod), tuple(out.shape)))),
    ]
    net = _net(m)
    net[0].register_forward_pre_hook(lambda mod, a: log.append(("pre", _name(mod))))
    net[0].register_forward_hook(lambda mod, a, out: log.append(("post", _name(mod))))
    try:
        out = net(_x(m))
    finally:
        for h in handles:
            h.remove()
    net(_x(m))  # removed: nothing more logged
    return [out]


def _replacing(m, log):
    mm = m.nn.modules.module
    handles = [
        mm.register_module_forward_pre_hook(
            lambda mod, a: (a[0] * 2,) if isinstance(mod, m.nn.Linear) else None),
        mm.register_module_forward_hook(
            lambda mod, a, out: out + 1 if isinstance(mod, m.nn.Tanh) else None),
    ]
    try:
        x = _x(m)
        out = _net(m)(x)
        out.pow(2).sum().backward()
    finally:
        for h in handles:
            h.remove()
    return [out, x.grad]


def _with_kwargs(m, log):
    mm = m.nn.modules.module
    h = mm.register_module_forward_hook(
        lambda mod, a, kw, out: log.append((_name(mod), sorted(kw))), with_kwargs=True)
    try:
        attn = m.nn.MultiheadAttention(4, 2, batch_first=True).double()
        q = m.ones(1, 3, 4, dtype=m.float64)
        attn(q, q, q, need_weights=False)
    finally:
        h.remove()
    return []


def _always_call(m, log):
    mm = m.nn.modules.module

    class Boom(m.nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    h = mm.register_module_forward_hook(lambda mod, a, out: log.append((_name(mod), out)),
                                        always_call=True)
    try:
        with pytest.raises(ValueError):
            Boom()(m.ones(1))
    finally:
        h.remove()
    return []


def _backward(m, log):
    mm = m.nn.modules.module
    handles = [
        mm.register_module_full_backward_pre_hook(
            lambda mod, go: log.append(("gbpre", _name(mod), [tuple(g.shape) for g in go]))),
        mm.register_module_full_backward_hook(
            lambda mod, gi, go: log.append(("gbwd", _name(mod),
                                            [None if g is None else tuple(g.shape)
                                             for g in gi]))),
    ]
    net = _net(m)
    net[2].register_full_backward_hook(lambda mod, gi, go: log.append(("bwd", _name(mod))))
    x = _x(m)
    try:
        net(x).pow(2).sum().backward()
    finally:
        for h in handles:
            h.remove()
    return [x.grad] + [p.grad for p in net.parameters()]


def _backward_replacing(m, log):
    mm = m.nn.modules.module
    h = mm.register_module_full_backward_hook(
        lambda mod, gi, go: tuple(None if g is None else g * 3 for g in gi)
        if isinstance(mod, m.nn.Tanh) else None)
    net = _net(m)
    x = _x(m)
    try:
        net(x).sum().backward()
    finally:
        h.remove()
    return [x.grad] + [p.grad for p in net.parameters()]


def _registrations(m, log):
    mm = m.nn.modules.module
    handles = [
        mm.register_module_parameter_registration_hook(
            lambda mod, name, p: log.append(("param", _name(mod), name, tuple(p.shape)))),
        mm.register_module_buffer_registration_hook(
            lambda mod, name, b: log.append(("buffer", _name(mod), name))),
        mm.register_module_module_registration_hook(
            lambda mod, name, sub: log.append(("module", _name(mod), name, _name(sub)))),
    ]
    try:
        net = m.nn.Sequential(m.nn.Linear(2, 3), m.nn.BatchNorm1d(3))
        net.extra = m.nn.ReLU()
        net[0].scale = m.nn.Parameter(m.ones(1))
        net[1].running_mean = m.zeros(3)
    finally:
        for h in handles:
            h.remove()
    m.nn.Linear(2, 2)  # removed: nothing more logged
    return []


def _registration_replacing(m, log):
    mm = m.nn.modules.module
    made = []

    def replace(mod, name, p):
        if name == "bias":
            made.append(m.nn.Parameter(m.zeros(tuple(p.shape))))
            return made[-1]
        return None
    h = mm.register_module_parameter_registration_hook(replace)
    try:
        lin = m.nn.Linear(2, 2)  # (its reset_parameters then fills the replacement)
    finally:
        h.remove()
    log.append((lin.bias is made[0], lin.weight is not made[0]))
    return []


CASES = {
    "forward_order": _forward_order,
    "replacing": _replacing,
    "with_kwargs": _with_kwargs,
    "always_call": _always_call,
    "backward": _backward,
    "backward_replacing": _backward_replacing,
    "registrations": _registrations,
    "registration_replacing": _registration_replacing,
}


@pytest.mark.parametrize("name", list(CASES))
def test_global_module_hooks_match_torch(name):
    results = {}
    for m in (torch, flow):
        log = []
        tensors = CASES[name](m, log)
        results[m] = (log, [t.detach().numpy() for t in tensors])
    (our_log, ours), (their_log, theirs) = results[flow], results[torch]
    assert our_log == their_log
    assert their_log or name in ("replacing", "backward_replacing")
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_the_deprecated_non_full_hooks_warn_that_they_run_as_full_ones():
    """torch's register_backward_hook passes the gradients of the inputs of the module's last
    autograd node (for a Linear, its addmm's: bias, input, weight); flowgrad's nodes are not
    torch's, so the hook runs as a full one, and says so, rather than hand other numbers in
    the same places silently."""
    lin = flow.nn.Linear(2, 2)
    seen = []
    with pytest.warns(FutureWarning, match="runs the hook as register_full_backward_hook"):
        lin.register_backward_hook(lambda mod, gi, go: seen.append([tuple(g.shape) for g in gi]))
    x = flow.ones(3, 2, requires_grad=True)
    lin(x).sum().backward()
    assert seen == [[(3, 2)]]  # the module's input's gradient, as a full hook's
    with pytest.warns(FutureWarning, match="runs the hook as register_full_backward_hook"):
        flow.nn.modules.module.register_module_backward_hook(lambda mod, gi, go: None).remove()
