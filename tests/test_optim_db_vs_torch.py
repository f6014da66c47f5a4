"""torch's optimizer database (OptimizerInfo) through flowgrad: every optimizer input of every
optimizer (one and two parameter groups, with torch's scheduler lists, resumed from torch's
state_dict), real and complex parameters, and the error inputs (tests/optim_db_vs_torch.py
runs them; its script form prints a report). KNOWN lists what still differs, with the reason;
an entry that no longer differs fails, so the list only shrinks. The regression tests after it
are the fixes the probe led to."""
import re

import numpy as np
import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import optim_db_vs_torch as harness  # noqa: E402
import torch  # noqa: E402

import flowgrad as flow  # noqa: E402

DB = harness.optim_db()
KNOWN: dict[str, tuple[str, str]] = {}  # name: (pattern of its findings, reason)


@pytest.mark.parametrize("info", DB, ids=[harness.name_of(info) for info in DB])
def test_optimizer_matches_torch(info):
    findings = harness.probe(info)
    assert not (findings and findings[0][2] == "missing"), f"flowgrad has no {info}"
    real = [f for f in findings if not f[2].startswith("skip")]
    pattern = KNOWN.get(harness.name_of(info), (None,))[0]
    unexplained = [f for f in real if pattern is None or not re.search(pattern, f[2])]
    assert not unexplained, "\n".join(f"[{k}] {where}\n    {m}" for k, where, m in unexplained[:6])
    assert pattern is None or real, "no finding matches KNOWN any more: remove it"
    assert harness.COMPARED.get(harness.name_of(info)) or info.only_supports_sparse_grads, \
        "every optimizer input raised in torch: the probe compared nothing"


def test_param_groups_all_named_or_none():
    a, b = flow.nn.Parameter(flow.ones(2)), flow.nn.Parameter(flow.ones(2))
    with pytest.raises(ValueError, match="with/without names"):
        flow.optim.SGD([{"params": [a]}, {"params": [("b", b)]}], lr=0.1)
    opt = flow.optim.SGD([{"params": [("a", a)]}], lr=0.1)
    with pytest.raises(ValueError, match="with/without names"):
        opt.add_param_group({"params": [b]})
    assert len(opt.param_groups) == 1


@pytest.mark.parametrize("name", ["Adafactor", "LBFGS", "SparseAdam", "Muon"])
def test_tensor_lr_of_two_elements_is_a_value_error(name):
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        getattr(flow.optim, name)([flow.nn.Parameter(flow.ones(2, 2))], lr=flow.ones(2))


def test_lbfgs_state_dict_holds_tensors_as_torch():
    sd = {}
    for m in (torch, flow):
        w = m.nn.Parameter(m.tensor([1.0, 2.0, 3.0], dtype=m.float64))
        opt = m.optim.LBFGS([w], history_size=4)

        def closure():
            opt.zero_grad()
            loss = ((w - 1) ** 4).sum()
            loss.backward()
            return loss
        opt.step(closure)
        sd[m] = opt.state_dict()["state"][0]
    assert sorted(sd[flow]) == sorted(sd[torch])  # ('al' included)
    for key, value in sd[torch].items():
        mine = sd[flow][key]
        if isinstance(value, list):
            assert len(mine) == len(value), key
            pairs = [(v, u) for v, u in zip(value, mine) if v is not None or u is not None]
        else:
            pairs = [(value, mine)]
        for v, u in pairs:
            assert isinstance(u, flow.Tensor) == isinstance(v, torch.Tensor), key
            if isinstance(v, torch.Tensor):
                np.testing.assert_allclose(u.numpy(), v.numpy(), rtol=1e-9, atol=1e-12,
                                           err_msg=key)


def test_muon_trains_as_torch_in_float32():
    r = np.random.default_rng(0)
    w0 = r.standard_normal((16, 8)).astype(np.float32)
    x0 = r.standard_normal((32, 16)).astype(np.float32)
    out = []
    for m in (torch, flow):
        w = m.nn.Parameter(m.tensor(w0))
        opt, x = m.optim.Muon([w], lr=0.02, nesterov=False, adjust_lr_fn="match_rms_adamw"), \
            m.tensor(x0)
        for _ in range(10):
            opt.zero_grad()
            (m.tanh(x @ w) ** 2).mean().backward()
            opt.step()
        out.append(w.detach().numpy())
    np.testing.assert_allclose(out[1], out[0], atol=1e-5)
    with pytest.raises(ValueError, match="only supports 2D"):
        flow.optim.Muon([flow.nn.Parameter(flow.ones(3))])


def test_recorded_trace_holds_each_steps_values():
    """A step's record copies the parameters: `.numpy()` shares the memory the optimizer
    updates in place, and a trace of views held the last step's values at every step (the
    sweep compared only the final parameters)."""
    w = flow.nn.Parameter(flow.ones(3, dtype=flow.float64))
    opt = flow.optim.SGD([w], lr=0.5)
    before = harness._record(opt, [w])
    w.grad = flow.ones(3, dtype=flow.float64)
    opt.step()
    after = harness._record(opt, [w])
    assert before[0][2].tolist() == [1.0] * 3 and after[0][2].tolist() == [0.5] * 3


@pytest.mark.parametrize("in_graph", [False, True])
def test_sparse_adam_steps_a_0d_parameter_as_torch(in_graph):
    """SparseAdam on a 0-d parameter: eagerly with its sparse gradient (no index array: it
    raised ValueError 'setting an array element with a sequence', where torch steps it), and
    in an nn.Graph (its first call steps with the gradient as sparse, the plan's update nodes
    read the dense one)."""
    def run(m, graph=False):
        s = m.nn.Parameter(m.tensor(1.5, dtype=m.float64))
        w = m.nn.Parameter(m.tensor([1.0, 0.0, -2.0], dtype=m.float64))
        opt = m.optim.SparseAdam([s, w], lr=0.1)

        def loss(x):
            return ((s - x) ** 2 * 3).sum() + (w * w * x).sum()

        if graph:
            holder = m.nn.ParameterList([s, w])

            class Train(m.nn.Graph):
                def __init__(self):
                    super().__init__()
                    self.holder = holder
                    self.add_optimizer(opt)

                def build(self, x):
                    value = loss(x)
                    value.backward()
                    return value

            step = Train()
        for x in (1.0, 2.0, 0.5, 1.5):
            xt = m.tensor(x, dtype=m.float64)
            if graph:
                step(xt)
                continue
            opt.zero_grad()
            loss(xt).backward()
            s.grad, w.grad = s.grad.to_sparse(), w.grad.to_sparse()
            opt.step()
        return [s.detach().numpy().copy(), w.detach().numpy().copy()]

    for got, want in zip(run(flow, in_graph), run(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
