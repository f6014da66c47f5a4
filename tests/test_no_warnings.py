"""NumPy RuntimeWarnings (log(0), 0 / 0, inf - inf, 'Mean of empty slice', 'Degrees of
freedom <= 0') must not reach users from flowgrad's kernels: torch is silent and returns
inf/nan. flowgrad ignores the RuntimeWarnings NumPy's C code raises from a flowgrad frame
(a filter on modules `flowgrad.`); the ones raised inside NumPy's own Python code
(x.mean(), x.sum(), x.var() run through numpy/_core/_methods.py) are out of that filter's
reach, so the kernels must not cause them. Each case runs forward and backward, records
warnings, and also compares values and gradients with torch in float64."""
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow

INF, NAN = float("inf"), float("nan")


def _leaf(m, data):
    return m.tensor(data, dtype=m.float64, requires_grad=True)


def _empty(m, *shape):
    return m.zeros(shape, dtype=m.float64, requires_grad=True)


def _zeros(m, *shape):
    return m.zeros(shape, dtype=m.float64)


def C(name, fn):
    return pytest.param(fn, id=name)


def F(m):
    return m.nn.functional


CASES = [
    # NumPy's Python code (numpy/_core/_methods.py): out of reach of the module filter
    C("mean_empty", lambda m: [x := _empty(m, 0), x.mean()]),
    C("mean_empty_dim", lambda m: [x := _empty(m, 0, 3), x.mean(0)]),
    C("sum_inf_minus_inf", lambda m: [x := _leaf(m, [INF, -INF]), x.sum()]),
    C("mean_inf_minus_inf", lambda m: [x := _leaf(m, [[INF, -INF, 1.0]]), x.mean(1)]),
    C("prod_inf_times_0", lambda m: [x := _leaf(m, [INF, 0.0]), x.prod()]),
    C("prod_grad_inf_and_0", lambda m: [x := _leaf(m, [INF, 0.0, 2.0]), x.prod()]),
    C("cumsum_inf_minus_inf", lambda m: [x := _leaf(m, [INF, -INF, 1.0]), m.cumsum(x, 0)]),
    C("var_one_element", lambda m: [x := _leaf(m, [1.0]), m.var(x)]),
    C("std_one_element", lambda m: [x := _leaf(m, [1.0, 2.0]), m.std(x[:1])]),
    C("std_mean_one_element", lambda m: [x := _leaf(m, [1.0]), m.std_mean(x)[0]]),
    C("var_empty", lambda m: [x := _empty(m, 0), m.var(x)]),
    C("mse_empty", lambda m: [x := _empty(m, 0), F(m).mse_loss(x, _zeros(m, 0))]),
    C("l1_empty", lambda m: [x := _empty(m, 0), F(m).l1_loss(x, _zeros(m, 0))]),
    C("huber_empty", lambda m: [x := _empty(m, 0), F(m).huber_loss(x, _zeros(m, 0))]),
    C("bce_with_logits_empty", lambda m: [
        x := _empty(m, 0), F(m).binary_cross_entropy_with_logits(x, _zeros(m, 0))]),
    C("cross_entropy_empty", lambda m: [
        x := _empty(m, 0, 3), F(m).cross_entropy(x, m.zeros(0, dtype=m.int64))]),
    C("cross_entropy_all_ignored", lambda m: [
        x := _empty(m, 2, 3), F(m).cross_entropy(x, m.full((2,), -100, dtype=m.int64))]),
    C("cross_entropy_smoothing_all_ignored", lambda m: [
        x := _empty(m, 2, 3), F(m).cross_entropy(x, m.full((2,), -100, dtype=m.int64),
                                                 label_smoothing=0.1)]),
    C("triplet_empty", lambda m: [
        x := _empty(m, 0, 3), F(m).triplet_margin_loss(x, x * 2.0, x * 3.0)]),
    C("avg_pool_inf", lambda m: [x := _leaf(m, [[[INF, -INF, 1.0, 2.0]]]),
                                 F(m).avg_pool1d(x, 2)]),
    C("adaptive_avg_pool_inf", lambda m: [x := _leaf(m, [[[[INF, -INF], [1.0, 2.0]]]]),
                                          F(m).adaptive_avg_pool2d(x, 1)]),
    C("batch_norm_inf", lambda m: [x := _leaf(m, [[INF, 1.0], [-INF, 2.0]]),
                                   F(m).batch_norm(x, None, None, training=True)]),
    C("layer_norm_inf", lambda m: [x := _leaf(m, [[INF, 1.0, -INF]]),
                                   F(m).layer_norm(x, (3,))]),
    C("group_norm_inf", lambda m: [x := _leaf(m, [[[INF, 1.0], [-INF, 2.0]]]),
                                   F(m).group_norm(x, 1)]),
    C("instance_norm_inf", lambda m: [x := _leaf(m, [[[INF, 1.0, -INF]]]),
                                      F(m).instance_norm(x)]),
    C("group_norm_empty_batch", lambda m: [x := _empty(m, 0, 4, 2), F(m).group_norm(
        x, 2, m.ones(4, dtype=m.float64), m.zeros(4, dtype=m.float64))]),
    # NumPy's C code from a flowgrad frame: the module filter's part
    C("log_0", lambda m: [x := _leaf(m, [0.0, -1.0, 2.0]), m.log(x)]),
    C("sqrt_negative", lambda m: [x := _leaf(m, [-1.0, 0.0, 4.0]), m.sqrt(x)]),
    C("exp_overflow", lambda m: [x := _leaf(m, [1000.0]), m.exp(x)]),
    C("div_0", lambda m: [x := _leaf(m, [1.0, 0.0]), x / m.zeros(2, dtype=m.float64)]),
    C("atanh_1", lambda m: [x := _leaf(m, [1.0, 2.0]), m.atanh(x)]),
    C("softmax_all_neg_inf", lambda m: [x := _leaf(m, [[-INF, -INF]]), F(m).softmax(x, 1)]),
    C("logsumexp_inf", lambda m: [x := _leaf(m, [INF, -INF]), m.logsumexp(x, 0)]),
]


def _run(m, fn):
    x, y = fn(m)
    y.sum().backward()
    return y.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("fn", CASES)
def test_no_runtime_warning_and_torch_values(fn):
    expected = _run(torch, fn)
    with warnings.catch_warnings(record=True) as log:
        # flowgrad's own filter (installed at import; emulated here because pytest drops
        # filters added while it imports test modules)
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"flowgrad\.")
        got = _run(flow, fn)
    leaked = [f"{w.filename}:{w.lineno}: {w.message}" for w in log
              if issubclass(w.category, RuntimeWarning)]
    assert not leaked
    for e, g in zip(expected, got):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=0, equal_nan=True)


def test_import_installs_the_filter_for_user_scripts():
    """In a plain script (no pytest filters), flowgrad's kernels stay silent while the
    user's own NumPy code still warns."""
    import subprocess
    import sys

    script = ("import numpy as np, flowgrad as flow\n"
              "x = flow.tensor([0.0, -1.0], requires_grad=True)\n"
              "(flow.log(x) + flow.sqrt(x)).sum().backward()\n"
              "np.log(np.zeros(1))\n")
    done = subprocess.run([sys.executable, "-W", "default", "-c", script],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "flowgrad" not in done.stderr, done.stderr
    assert done.stderr.count("RuntimeWarning") == 1, done.stderr  # the user's np.log(0)


def test_compiled_plans_stay_silent_as_eager_kernels():
    """nn.Graph's generated plan and fused chains run NumPy from code of their own: they carry
    a flowgrad module name, so the same filter silences their RuntimeWarnings (sqrt of a
    negative warned from '<nn.Graph plan>'), and the fused relu passes maximum's output by
    keyword (NumPy 2.4 deprecates it by position: a DeprecationWarning on every call)."""
    def step(x):
        return ((x * 2.0).sqrt() + 1.0).relu() * 3.0 + x.log()

    graph = flow.nn.Graph.trace(step)
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"flowgrad\.")
        for _ in range(3):
            got = graph(flow.tensor([-1.0, 0.0, 4.0]))
    assert not [f"{w.filename}:{w.lineno}: {w.message}" for w in log]
    np.testing.assert_allclose(got.numpy(), step(flow.tensor([-1.0, 0.0, 4.0])).numpy(),
                               equal_nan=True)
