"""nn.AdaptiveLogSoftmaxWithLoss against torch with the same weights: outputs, loss, input and
parameter gradients, log_prob, predict, unbatched input, and the errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

CASES = [  # (in_features, n_classes, cutoffs, div_value, head_bias, targets)
    (8, 10, [4, 7], 4.0, False, [0, 3, 5, 8, 9, 4, 6]),
    (16, 20, [2, 5, 12], 2.0, True, [19, 1, 0, 12, 11, 4]),
    (6, 5, [3], 1.0, False, [0, 1, 2]),  # every target in the shortlist
    (6, 5, [1], 4.0, True, [4]),  # one row, in a cluster
]


def _pair(in_f, n, cutoffs, div, bias):
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(in_f, n, cutoffs, div_value=div,
                                                 head_bias=bias).double()
    ours = flow.nn.AdaptiveLogSoftmaxWithLoss(in_f, n, cutoffs, div_value=div, head_bias=bias)
    state = {k: flow.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    assert list(state) == list(ours.state_dict())
    ours.double().load_state_dict(state)
    assert repr(ours) == repr(theirs)
    return ours, theirs


@pytest.mark.parametrize("in_f,n,cutoffs,div,bias,targets", CASES)
def test_against_torch(in_f, n, cutoffs, div, bias, targets):
    ours, theirs = _pair(in_f, n, cutoffs, div, bias)
    x = np.random.default_rng(0).standard_normal((len(targets), in_f))
    fx, tx = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    fo, to = ours(fx, flow.tensor(targets)), theirs(tx, torch.tensor(targets))
    np.testing.assert_allclose(fo.output.detach().numpy(), to.output.detach().numpy(),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fo.loss.item(), to.loss.item(), rtol=1e-12)
    w = np.random.default_rng(1).standard_normal(len(targets))
    ((fo.output * flow.tensor(w)).sum() + fo.loss).backward()
    ((to.output * torch.tensor(w)).sum() + to.loss).backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for (k, tp), (_, fp) in zip(theirs.named_parameters(), ours.named_parameters()):
        want = np.zeros(tuple(tp.shape)) if tp.grad is None else tp.grad.numpy()
        got = np.zeros(tuple(fp.shape)) if fp.grad is None else fp.grad.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=k)
    probe = np.random.default_rng(2).standard_normal((9, in_f)) * 3
    np.testing.assert_allclose(ours.log_prob(flow.tensor(probe)).detach().numpy(),
                               theirs.log_prob(torch.tensor(probe)).detach().numpy(),
                               rtol=1e-12, atol=1e-12)
    assert ours.predict(flow.tensor(probe)).tolist() == \
        theirs.predict(torch.tensor(probe)).tolist()
    one = ours(flow.tensor(x[0]), flow.tensor(targets[0]))  # unbatched
    assert tuple(one.output.shape) == ()
    np.testing.assert_allclose(one.output.item(), to.output[0].item(), rtol=1e-12)


@pytest.mark.parametrize("make", [
    lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, []),
    lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [5, 3]),
    lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3, 10]),
    lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [0, 3]),
])
def test_bad_cutoffs(make):
    for m in (torch, flow):
        with pytest.raises(ValueError, match="cutoffs"):
            make(m)


@pytest.mark.parametrize("shapes", [((3, 4), [0, 1, 10]), ((3, 4), [0, -1, 2]),
                                    ((3, 4), [0, 1]), ((4,), [1]), ((3, 4), [[1]])])
def test_bad_inputs(shapes):
    shape, target = shapes
    for m in (torch, flow):
        asm = m.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3, 6])
        with pytest.raises(RuntimeError):
            asm(m.zeros(*shape), m.tensor(target))
