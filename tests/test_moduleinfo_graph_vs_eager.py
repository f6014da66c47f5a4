"""torch's nn-module database (ModuleInfo) through nn.Graph against eager flowgrad
(tests/moduleinfo_graph.py does the work): an eval graph on two batches, a training graph
(SGD with momentum; Adam in the slow tier) on three, and a backward-only graph (no
optimizer: the parameters' .grad as eager's; the inputs requiring grad computed from leaves,
whose .grad as eager's); outputs, gradients, parameters and buffers after each call, earlier
outputs kept, inputs unwritten, eager writes seen by the next call.

A finding fails the test unless KNOWN explains it (a pattern and the reason); an entry that
no longer matches anything fails too. The regression tests at the end are the fixes the
sweep led to, each checked against torch.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import moduleinfo_graph  # noqa: E402
import opinfo_vs_torch  # noqa: E402
import torch  # noqa: E402
from opinfo_vs_torch import assert_explained, full_name  # noqa: E402

import flowgrad as flow  # noqa: E402

pytestmark = pytest.mark.usefixtures("keep_global_random_streams")

DB = moduleinfo_graph.module_db()

# full name -> (pattern of the findings it explains, the reason)
KNOWN: dict[str, tuple[str, str]] = {}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with opinfo_vs_torch.one_thread():
        yield


def _check(info, first, stale_check=True, **options):
    findings = []
    findings += moduleinfo_graph.probe(info, first=first, **options)
    findings += moduleinfo_graph.probe(info, first=first, modes=(True,), optimizer=False,
                                       history=True, **options)
    if findings and findings[0][2] == "missing":
        pytest.skip("not in flowgrad")
    assert_explained(full_name(info), findings, KNOWN, stale_check)


@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_module_graph_matches_eager(info):
    """The first ModuleInput of each ModuleInfo, train and eval."""
    _check(info, first=1)


@pytest.mark.slow
@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_module_graph_matches_eager_every_input(info):
    """Every ModuleInput (masks, h0, padding_idx, norm_first...), and Adam on the first."""
    _check(info, first=None, stale_check=False)
    _check(info, first=1, stale_check=False, adam=True)


@pytest.mark.slow
@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_module_graph_matches_eager_float32(info):
    """The first ModuleInput in float32 (fusion and autocast paths see another dtype)."""
    _check(info, first=1, stale_check=False, dtype="float32")


def test_known_names_are_in_the_database():
    assert set(KNOWN) <= {full_name(info) for info in DB}


# ---- the fixes the sweep led to ---------------------------------------------------------------
def test_backward_only_graph_sets_parameter_grads_as_eager():
    """A graph with loss.backward() and no optimizer computed the parameters' gradients and
    dropped them: .grad stayed None (torch: each call's gradient summed into .grad)."""
    torch.manual_seed(0)
    t_mod = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                                torch.nn.Linear(4, 2)).double()
    f_mod = flow.nn.Sequential(flow.nn.Linear(3, 4), flow.nn.Tanh(),
                               flow.nn.Linear(4, 2)).double()
    f_mod.load_state_dict({k: flow.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})

    class Backward(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = f_mod

        def build(self, x):
            loss = (self.m(x) ** 2).sum()
            loss.backward()
            return loss

    graph = Backward()
    rng = np.random.default_rng(0)
    for call in range(3):
        x = rng.standard_normal((5, 3))
        (t_mod(torch.tensor(x)) ** 2).sum().backward()
        graph(flow.tensor(x))
        for name, p in t_mod.named_parameters():
            got = f_mod.get_parameter(name).grad
            assert got is not None, f"call {call}: {name}.grad is None"
            np.testing.assert_allclose(got.numpy(), p.grad.numpy(), rtol=1e-12, atol=1e-12)
    f_mod.zero_grad()  # zeroed eagerly: the next call starts a new sum
    t_mod.zero_grad()
    x = rng.standard_normal((5, 3))
    (t_mod(torch.tensor(x)) ** 2).sum().backward()
    graph(flow.tensor(x))
    np.testing.assert_allclose(f_mod[0].weight.grad.numpy(), t_mod[0].weight.grad.numpy(),
                               rtol=1e-12, atol=1e-12)


def test_eval_graph_leaves_grads_alone():
    """No backward in build: .grad untouched (None stays None, a held one unchanged)."""
    m = flow.nn.Linear(3, 2)
    m.bias.grad = flow.ones(2)
    graph = flow.nn.Graph.trace(m)
    for _ in range(2):
        graph(flow.randn(4, 3))
    assert m.weight.grad is None
    assert m.bias.grad.tolist() == [1.0, 1.0]


def _backward_graph(module):
    class Backward(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = module

        def build(self, x):
            loss = (self.m(x) ** 2).sum()
            loss.backward()
            return loss

    return Backward()


def test_graph_input_with_a_history_hands_its_gradient_on():
    """An input computed from a leaf (x = w * 2 + 1, with w requiring grad): the plan's
    gradient stopped at x, so w.grad stayed None (torch: w.grad = 2 * dloss/dx, summed over
    calls); now it goes on through x's eager history."""
    torch.manual_seed(0)
    t_mod = torch.nn.Linear(3, 2).double()
    f_mod = flow.nn.Linear(3, 2).double()
    f_mod.load_state_dict({k: flow.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})
    graph = _backward_graph(f_mod)
    rng = np.random.default_rng(1)
    w_data = rng.standard_normal((4, 3))
    t_w = torch.tensor(w_data, requires_grad=True)
    f_w = flow.tensor(w_data, requires_grad=True)
    for call in range(2):
        (t_mod(t_w * 2 + 1) ** 2).sum().backward()
        graph(f_w * 2 + 1)
        assert f_w.grad is not None, f"call {call}: w.grad is None"
        np.testing.assert_allclose(f_w.grad.numpy(), t_w.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(f_mod.weight.grad.numpy(), t_mod.weight.grad.numpy(),
                                   rtol=1e-12)


@pytest.mark.parametrize("traced, called", [(True, False), (False, True)])
def test_graph_refuses_an_input_whose_requires_grad_changed(traced, called):
    """A backward traced with the input requiring grad, called with one that does not,
    failed inside the plan's gradient hand-out (AttributeError: 'NoneType' object has no
    attribute 'acc_grad'); the other way round the input's gradient was silently missing
    (.grad None, torch's the gradient). Both now refuse, naming the input."""
    graph = _backward_graph(flow.nn.Linear(3, 2).double())
    graph(flow.randn(4, 3, dtype=flow.float64, requires_grad=traced))
    x = flow.randn(4, 3, dtype=flow.float64, requires_grad=called)
    with pytest.raises(RuntimeError, match="input 0 .*requires? grad"):
        graph(x)
    assert x.grad is None


def test_forward_graph_takes_inputs_requiring_grad_or_not():
    """No autograd pass in build: whether an input requires grad does not matter."""
    m = flow.nn.Linear(3, 2)
    graph = flow.nn.Graph.trace(m)
    x = flow.randn(4, 3)
    first = graph(x.requires_grad_()).numpy()
    np.testing.assert_array_equal(graph(x.detach()).numpy(), first)


def test_eval_graph_has_a_plan_for_each_grad_mode():
    """torch's TransformerEncoder in eval takes its fast path (padded rows of a
    src_key_padding_mask come out zero) only without grad: an eval graph traced with grad and
    called under no_grad returned the traced path's numbers (24 of 24 outputs of torch's
    ModuleInfo sample differed, e.g. -0.353 for torch's -0.334), and the other way round."""
    torch.manual_seed(0)
    t_mod = torch.nn.Transformer(d_model=4, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                 dim_feedforward=8, dropout=0.0, batch_first=True).double().eval()
    rng = np.random.default_rng(0)
    src, tgt = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    mask = np.array([[False, False, True], [False, True, True]])
    for first in (True, False):
        f_mod = flow.nn.Transformer(d_model=4, nhead=2, num_encoder_layers=1,
                                    num_decoder_layers=1, dim_feedforward=8, dropout=0.0,
                                    batch_first=True).double().eval()
        f_mod.load_state_dict({k: flow.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})

        class Eval(flow.nn.Graph):
            def __init__(self):
                super().__init__()
                self.m = f_mod

            def build(self, src, tgt, mask):
                return self.m(src, tgt, src_key_padding_mask=mask)

        graph = Eval()
        for grad in (first, not first, first):
            with torch.set_grad_enabled(grad):
                expected = t_mod(torch.tensor(src), torch.tensor(tgt),
                                 src_key_padding_mask=torch.tensor(mask))
            with flow.set_grad_enabled(grad):
                actual = graph(flow.tensor(src), flow.tensor(tgt), flow.tensor(mask))
            np.testing.assert_allclose(actual.numpy(), expected.detach().numpy(), rtol=1e-10,
                                       atol=1e-12, err_msg=f"grad enabled: {grad}")
