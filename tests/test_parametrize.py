"""weight_norm / spectral_norm (hook and parametrization APIs), nn.utils.parametrize and
parametrizations.orthogonal against torch: state-dict keys, weights, outputs, gradients."""
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated in favor of:FutureWarning")


def _pair(make):
    """The same module in both frameworks (float64, torch's initial weights)."""
    tm, fm = make(torch).double(), make(flow).double()
    fm.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, fm


def _same_model(tm, fm, x, steps=1):
    """Outputs, parameter grads and state dicts agree, over a few training forwards."""
    for _ in range(steps):
        to, fo = tm(torch.tensor(x)), fm(flow.tensor(x))
        np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), rtol=1e-9,
                                   atol=1e-12)
        (to ** 2).sum().backward()
        (fo ** 2).sum().backward()
    tn, fn = dict(tm.named_parameters()), dict(fm.named_parameters())
    assert sorted(tn) == sorted(fn)
    for name in tn:
        np.testing.assert_allclose(fn[name].grad.numpy(), tn[name].grad.numpy(), rtol=1e-8,
                                   atol=1e-10, err_msg=name)
    ts, fs = tm.state_dict(), fm.state_dict()
    assert list(ts) == list(fs)
    for k in ts:
        np.testing.assert_allclose(fs[k].numpy(), ts[k].numpy(), rtol=1e-9, atol=1e-12)


X_CONV = np.random.default_rng(0).standard_normal((2, 3, 6, 6))
X_LIN = np.random.default_rng(0).standard_normal((4, 5))

CASES = [
    ("weight_norm_hook_conv", lambda m: m.nn.utils.weight_norm(m.nn.Conv2d(3, 4, 3)), X_CONV),
    ("weight_norm_hook_dim_none",
     lambda m: m.nn.utils.weight_norm(m.nn.Linear(5, 3), dim=None), X_LIN),
    ("weight_norm_param_conv",
     lambda m: m.nn.utils.parametrizations.weight_norm(m.nn.Conv2d(3, 4, 3)), X_CONV),
    ("weight_norm_param_dim1",
     lambda m: m.nn.utils.parametrizations.weight_norm(m.nn.Linear(5, 3), dim=1), X_LIN),
    ("spectral_norm_hook", lambda m: m.nn.utils.spectral_norm(m.nn.Linear(5, 3)), X_LIN),
    ("spectral_norm_hook_conv",
     lambda m: m.nn.utils.spectral_norm(m.nn.Conv2d(3, 4, 3), n_power_iterations=2), X_CONV),
    ("spectral_norm_param", lambda m: m.nn.utils.parametrizations.spectral_norm(
        m.nn.Linear(5, 3)), X_LIN),
    ("spectral_norm_param_conv", lambda m: m.nn.utils.parametrizations.spectral_norm(
        m.nn.Conv2d(3, 4, 3)), X_CONV),
    ("orthogonal_cayley", lambda m: m.nn.utils.parametrizations.orthogonal(
        m.nn.Linear(5, 5), orthogonal_map="cayley"), X_LIN),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(case):
    _, make, x = case
    tm, fm = _pair(make)  # spectral norm's random u, v come over with the state dict
    _same_model(tm, fm, x, steps=2)


def test_orthogonal_maps_give_orthogonal_weights():
    for orth_map, shape in [("matrix_exp", (4, 4)), ("householder", (5, 3)),
                            ("cayley", (3, 5))]:
        if orth_map != "cayley" and not hasattr(flow.linalg, orth_map):
            continue  # needs flowgrad.linalg.matrix_exp / householder_product
        m = flow.nn.utils.parametrizations.orthogonal(flow.nn.Linear(shape[1], shape[0]),
                                                      orthogonal_map=orth_map)
        w = m.weight.detach().numpy()
        small = min(shape)
        gram = w.T @ w if shape[0] >= shape[1] else w @ w.T
        np.testing.assert_allclose(gram, np.eye(small), atol=1e-5, err_msg=orth_map)
        m.weight.sum().backward()
        assert m.parametrizations.weight.original.grad is not None


def test_register_parametrization_chain_assign_and_remove():
    class Double(flow.nn.Module):
        def forward(self, x):
            return 2 * x

        def right_inverse(self, x):
            return x / 2

    P = flow.nn.utils.parametrize
    m = flow.nn.Linear(3, 3)
    w0 = m.weight.detach().clone()
    P.register_parametrization(m, "weight", Double())
    P.register_parametrization(m, "weight", Double())
    assert P.is_parametrized(m, "weight") and not P.is_parametrized(m, "bias")
    assert type(m).__name__ == "ParametrizedLinear"
    assert P.type_before_parametrizations(m) is flow.nn.Linear
    np.testing.assert_allclose(m.weight.detach().numpy(), 2 * w0.numpy(), rtol=1e-6)  # as torch
    m.weight = flow.ones(3, 3)  # assignment goes through right_inverse
    np.testing.assert_allclose(m.parametrizations.weight.original.detach().numpy(), 0.25)
    with P.cached():
        assert m.weight is m.weight
    P.remove_parametrizations(m, "weight")
    assert type(m) is flow.nn.Linear and isinstance(m.weight, flow.nn.Parameter)
    np.testing.assert_allclose(m.weight.detach().numpy(), 1.0)


def test_removing_weight_and_spectral_norm_matches_torch():
    tm, fm = _pair(lambda m: m.nn.utils.weight_norm(m.nn.Linear(5, 3)))
    torch.nn.utils.remove_weight_norm(tm)
    flow.nn.utils.remove_weight_norm(fm)
    _same_model(tm, fm, X_LIN)
    tm, fm = _pair(lambda m: m.nn.utils.spectral_norm(m.nn.Linear(5, 3)))
    tm.eval(), fm.eval()
    torch.nn.utils.remove_spectral_norm(tm)
    flow.nn.utils.remove_spectral_norm(fm)
    _same_model(tm, fm, X_LIN)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="does not have a parameter"):
        flow.nn.utils.parametrize.register_parametrization(flow.nn.Linear(2, 2), "w",
                                                           flow.nn.Identity())
    with pytest.raises(ValueError, match="matrix or batch of matrices"):
        flow.nn.utils.parametrizations.orthogonal(flow.nn.Linear(2, 2), "bias")
    with pytest.raises(RuntimeError, match="two weight_norm hooks"):
        flow.nn.utils.weight_norm(flow.nn.utils.weight_norm(flow.nn.Linear(2, 2)))


@pytest.mark.parametrize("how", ["weight_norm_old", "weight_norm", "scale"])
@pytest.mark.parametrize("cls", ["GRU", "LSTM", "RNN"])
def test_parametrized_rnn_weights_as_torch(how, cls):
    """An RNN reads a parametrized or weight_norm'd weight through its attribute (it read the
    raw parameter table and failed)."""
    def run(m):
        m.manual_seed(0)
        rnn = getattr(m.nn, cls)(3, 4, num_layers=2, bidirectional=True)
        rng = np.random.default_rng(0)
        with m.no_grad():
            for p in rnn.parameters():
                p.copy_(m.tensor(rng.standard_normal(tuple(p.shape)) * 0.3))
        if how == "weight_norm_old":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m.nn.utils.weight_norm(rnn, name="weight_hh_l0")
        elif how == "weight_norm":
            m.nn.utils.parametrizations.weight_norm(rnn, name="weight_ih_l1_reverse")
        else:
            scale = type("Scale", (m.nn.Module,), {"forward": lambda self, w: w * 2})
            m.nn.utils.parametrize.register_parametrization(rnn, "bias_hh_l1", scale())
        x = m.tensor(rng.standard_normal((5, 2, 3)), requires_grad=True)
        out = rnn(x.float())
        y = out[0]
        y.sum().backward()
        return y.detach().numpy(), x.grad.numpy()
    for a, b in zip(run(flow), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
