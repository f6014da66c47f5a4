"""The crashes and gaps real programs hit, each against torch (or OneFlow's formula where
torch has no such API): where with two scalars, range indices, a lazy RandomSampler,
copy_ from NumPy, OneFlow's optimizer and scheduler options, flow.expand/view, windows, and
inputs that must raise as torch raises."""
import itertools
import math

import numpy as np
import pytest
import torch

import flowgrad as flow


@pytest.mark.parametrize("a,b", [(1, 0), (1.0, 0), (2.5, -1.5), (True, False), (1, 0.5)])
def test_where_with_two_python_scalars(a, b):
    c = np.array([True, False, True])
    f, t = flow.where(flow.tensor(c), a, b), torch.where(torch.tensor(c), a, b)
    assert str(f.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    assert f.tolist() == t.tolist()


@pytest.mark.parametrize("index", [
    lambda r: r(2), lambda r: r(1, 3), lambda r: (r(2), r(2)), lambda r: (slice(None), r(0)),
    lambda r: (r(0, 3, 2), 1),
])
def test_indexing_with_range(index):
    a = np.arange(12.0).reshape(3, 4)
    f, t = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    yf, yt = f[index(range)], t[index(range)]
    np.testing.assert_array_equal(yf.detach().numpy(), yt.detach().numpy())
    yf.sum().backward()
    yt.sum().backward()
    np.testing.assert_array_equal(f.grad.numpy(), t.grad.numpy())
    f2, t2 = flow.tensor(a), torch.tensor(a)
    f2[index(range)] = -1.0
    t2[index(range)] = -1.0
    np.testing.assert_array_equal(f2.numpy(), t2.numpy())


def test_random_sampler_with_replacement_draws_lazily():
    sampler = flow.utils.data.RandomSampler(range(10), replacement=True, num_samples=10 ** 10)
    assert len(sampler) == 10 ** 10
    first = list(itertools.islice(iter(sampler), 5000))  # more than one chunk
    assert len(first) == 5000 and set(first) <= set(range(10))
    flow.manual_seed(3)
    small = list(flow.utils.data.RandomSampler(range(4), replacement=True, num_samples=7))
    assert len(small) == 7 and set(small) <= set(range(4))


def test_copy_from_ndarray():
    x = flow.zeros(2, 3)
    x.copy_(np.arange(3.0))  # broadcast and cast, as from a tensor
    assert x.tolist() == [[0.0, 1.0, 2.0]] * 2
    with pytest.raises(RuntimeError, match="not broadcastable"):
        x.copy_(np.ones(4))


def _fit(make_opt, steps=3):
    w = flow.nn.Parameter(flow.tensor([1.0, -2.0, 0.5]))
    opt = make_opt([w])
    for _ in range(steps):
        opt.zero_grad()
        ((w * w).sum() + w.sum()).backward()
        opt.step()
    return w.detach().numpy()


def test_sgd_contiguous_params_changes_nothing():
    np.testing.assert_array_equal(
        _fit(lambda p: flow.optim.SGD(p, lr=0.1, momentum=0.9, contiguous_params=True)),
        _fit(lambda p: flow.optim.SGD(p, lr=0.1, momentum=0.9)))


@pytest.mark.parametrize("opt", ["Adam", "AdamW"])
def test_adam_without_bias_correction(opt):
    lr, (b1, b2), eps, wd = 0.1, (0.9, 0.999), 1e-8, 0.01
    got = _fit(lambda p: getattr(flow.optim, opt)(p, lr=lr, weight_decay=wd,
                                                  do_bias_correction=False))
    w, m, v = np.array([1.0, -2.0, 0.5]), 0.0, 0.0  # OneFlow's update with factors of 1
    for _ in range(3):
        g = 2 * w + 1
        if opt == "Adam":
            g = g + wd * w
        else:
            w = w * (1 - lr * wd)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        w = w - lr * m / (np.sqrt(v) + eps)
    np.testing.assert_allclose(got, w, rtol=1e-6)
    np.testing.assert_array_equal(
        _fit(lambda p: getattr(flow.optim, opt)(p, lr=lr, contiguous_params=True)),
        _fit(lambda p: getattr(flow.optim, opt)(p, lr=lr)))


def _lrs(make_sched, n=12, lr=1.0):
    opt = flow.optim.SGD([flow.zeros(1, requires_grad=True)], lr=lr)
    sched = make_sched(opt)
    out = [sched.get_last_lr()[0]]
    for _ in range(n):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr()[0])
    return out


def test_cosine_decay_lr_is_oneflows_formula():
    got = _lrs(lambda o: flow.optim.lr_scheduler.CosineDecayLR(o, decay_steps=5, alpha=0.1))
    want = [((1 - 0.1) * 0.5 * (1 + math.cos(math.pi * min(t, 5) / 5)) + 0.1)
            for t in range(13)]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("method,prefix", [("linear", False), ("linear", True),
                                           ("constant", False)])
def test_warmup_lr_wrapping_cosine_decay(method, prefix):
    sched = flow.optim.lr_scheduler
    got = _lrs(lambda o: sched.WarmupLR(sched.CosineDecayLR(o, decay_steps=6, alpha=0.1),
                                        warmup_factor=0.5, warmup_iters=3,
                                        warmup_method=method, warmup_prefix=prefix))

    def cosine(t):
        return (1 - 0.1) * 0.5 * (1 + math.cos(math.pi * min(t, 6) / 6)) + 0.1

    end = 1.0 if prefix else cosine(3)
    want = [(0.5 + (end - 0.5) * t / 3 if method == "linear" else 0.5) if t < 3
            else cosine(t - 3 if prefix else t) for t in range(13)]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_warmup_lr_on_an_optimizer_and_bad_arguments():
    got = _lrs(lambda o: flow.optim.lr_scheduler.WarmupLR(o, warmup_factor=0.2,
                                                          warmup_iters=4), n=6)
    np.testing.assert_allclose(got, [0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 1.0])
    opt = flow.optim.SGD([flow.zeros(1, requires_grad=True)], lr=1.0)
    with pytest.raises(ValueError, match="'warmup_method' must be 'linear' or 'constant'"):
        flow.optim.lr_scheduler.WarmupLR(opt, warmup_method="cosine")
    with pytest.raises(ValueError, match="warmup_iters can't be equal to 0"):
        flow.optim.lr_scheduler.WarmupLR(opt, warmup_iters=0)


@pytest.mark.parametrize("cycle", [False, True])
def test_polynomial_lr_oneflow_arguments(cycle):
    got = _lrs(lambda o: flow.optim.lr_scheduler.PolynomialLR(
        o, steps=4, end_learning_rate=0.1, power=2.0, cycle=cycle))
    want = []
    for t in range(13):
        n = 4 * max(1, math.ceil(t / 4)) if cycle else 4
        s = t if cycle else min(t, 4)
        want.append((1.0 - 0.1) * (1 - s / n) ** 2 + 0.1)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # torch's own arguments keep torch's numbers
    ours = _lrs(lambda o: flow.optim.lr_scheduler.PolynomialLR(o, total_iters=4, power=2.0))
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    ts = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=2.0)
    theirs = [ts.get_last_lr()[0]]
    for _ in range(12):
        opt.step()
        ts.step()
        theirs.append(ts.get_last_lr()[0])
    assert ours == theirs


def test_cosine_annealing_warm_restarts_oneflow_arguments():
    got = _lrs(lambda o: flow.optim.lr_scheduler.CosineAnnealingWarmRestarts(
        o, T_0=2, T_mult=2, eta_min=0.01, decay_rate=0.5, restart_limit=2), n=16)
    want = []
    for t in range(17):  # OneFlow's formula: cycle k spans T_0 * T_mult^k steps
        k, start, span = 0, 0, 2
        while t >= start + span:
            start, span, k = start + span, span * 2, k + 1
        want.append(0.01 if k >= 2 else
                    0.01 + (0.5 ** k - 0.01) * 0.5 * (1 + math.cos(math.pi * (t - start) / span)))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_expand_and_view_functions():
    x = flow.arange(6.0)
    assert flow.view(x, 2, 3).tolist() == x.view(2, 3).tolist()
    assert flow.view(x, (3, 2)).shape == (3, 2)
    assert flow.expand(flow.ones(3), 2, 3).tolist() == torch.ones(3).expand(2, 3).tolist()


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window", "kaiser_window"])
@pytest.mark.parametrize("n", [0, 1, 2, 7, 16])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_torch(name, n, periodic):
    for fd, td in [(flow.float64, torch.float64), (None, None)]:
        f = getattr(flow, name)(n, periodic, dtype=fd)
        t = getattr(torch, name)(n, periodic, dtype=td)
        assert str(f.dtype).split(".")[1] == str(t.dtype).split(".")[1]
        np.testing.assert_allclose(f.numpy(), t.numpy(), atol=1e-6 if fd is None else 1e-12)


@pytest.mark.parametrize("call,exc", [
    (lambda m: m.hann_window(4, dtype=m.int64), RuntimeError),
    (lambda m: m.hann_window(-1), RuntimeError),
    (lambda m: m.tensordot(m.ones(2, 3), m.ones(4, 5), dims=1), RuntimeError),
    (lambda m: m.tensordot(m.ones(2, 3), m.ones(3, 5), dims=([1], [0, 1])), RuntimeError),
    (lambda m: m.tensordot(m.ones(2, 3), m.ones(3, 5), dims=-1), RuntimeError),
    (lambda m: m.normal(0.0, 1.0, size=(2,), dtype=m.int32), NotImplementedError),
    (lambda m: m.normal(m.zeros(2, dtype=m.int64), 1.0), NotImplementedError),
    (lambda m: m.randperm(-1), RuntimeError),
    (lambda m: m.meshgrid([], indexing="ij"), RuntimeError),
    (lambda m: m.meshgrid(indexing="ij"), RuntimeError),
])
def test_inputs_raise_as_torch(call, exc):
    with pytest.raises(exc):
        call(torch)
    with pytest.raises(exc):
        call(flow)
