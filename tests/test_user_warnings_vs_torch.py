"""torch's warnings of likely mistakes, warned by flowgrad where torch warns and not elsewhere:
reading `.grad` of a non-leaf (it stays None: the classic silent bug), softmax without a dim,
`tensor(a_tensor)`, `x.T` on other than 2 dims, meshgrid without `indexing`, stft without a
window, a uint8 index, var/std with no degree of freedom left (nan), and the deprecated
names (F.upsample, nn.utils.weight_norm, torch.lu, chain_matmul). torch warns some of them
once per process (TORCH_WARN_ONCE), so those are compared with torch's text alone;
flowgrad's record of them is reset per case."""
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow
from flowgrad import _warn

NON_LEAF = "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"


def _non_leaf(m):
    return m.ones(2, requires_grad=True) * 2


def _backward_then_read(m):
    x = m.ones(2, requires_grad=True)
    y = x * 3
    y.sum().backward()
    return y.grad


def _retained(m):
    y = _non_leaf(m)
    y.retain_grad()
    y.sum().backward()
    return y.grad


def _view_of_leaf(m):
    return m.ones(3, requires_grad=True)[:2].grad


def _under_no_grad(m):
    x = m.ones(2, requires_grad=True)
    with m.no_grad():
        y = x * 2
    return y.grad


# (name, code, the phrase torch's warning holds or None for no warning)
EVERY_CALL = [
    ("leaf_grad", lambda m: m.ones(2, requires_grad=True).grad, None),
    ("non_leaf_grad", lambda m: _non_leaf(m).grad, NON_LEAF),
    ("non_leaf_grad_after_backward", _backward_then_read, NON_LEAF),
    ("retained_grad", _retained, None),
    ("view_of_leaf_grad", _view_of_leaf, NON_LEAF),
    ("detached_grad", lambda m: _non_leaf(m).detach().grad, None),
    ("no_grad_result_grad", _under_no_grad, None),
    ("softmax_without_dim", lambda m: m.nn.functional.softmax(m.ones(2, 3)),
     "Implicit dimension choice for softmax"),
    ("log_softmax_without_dim", lambda m: m.nn.functional.log_softmax(m.ones(4)),
     "Implicit dimension choice for log_softmax"),
    ("softmin_without_dim", lambda m: m.nn.functional.softmin(m.ones(2, 3, 4)),
     "Implicit dimension choice for softmin"),
    ("softmax_module_without_dim", lambda m: m.nn.Softmax()(m.ones(2, 3)),
     "Implicit dimension choice for softmax"),
    ("softmax_with_dim", lambda m: m.nn.functional.softmax(m.ones(2, 3), dim=1), None),
    ("tensor_of_a_tensor", lambda m: m.tensor(m.ones(2)), "To copy construct from a tensor"),
    ("tensor_of_a_list", lambda m: m.tensor([1.0, 2.0]), None),
    ("as_tensor_of_a_tensor", lambda m: m.as_tensor(m.ones(2)), None),
    ("uint8_index", lambda m: m.arange(3)[m.tensor([1, 0, 1], dtype=m.uint8)],
     "indexing with dtype torch.uint8 is now deprecated"),
    ("bool_index", lambda m: m.arange(3)[m.tensor([True, False, True])], None),
    ("var_of_one_value", lambda m: m.ones(1).var(), "var(): degrees of freedom is <= 0"),
    ("std_over_a_dim_of_one", lambda m: m.ones(2, 1).std(1), "std(): degrees of freedom"),
    ("var_mean_of_one_value", lambda m: m.var_mean(m.ones(1)), "var_mean(): degrees of"),
    ("std_mean_correction_3", lambda m: m.std_mean(m.ones(3), correction=3),
     "std_mean(): degrees of freedom"),
    ("var_of_no_value", lambda m: m.ones(0).var(), "var(): degrees of freedom"),
    ("var_of_two_values", lambda m: m.ones(2).var(), None),
    ("upsample", lambda m: m.nn.functional.upsample(m.ones(1, 1, 2, 2), scale_factor=2),
     "`nn.functional.upsample` is deprecated"),
    ("old_weight_norm", lambda m: m.nn.utils.weight_norm(m.nn.Linear(2, 2)),
     "`torch.nn.utils.weight_norm` is deprecated"),
]

ONCE = [
    ("T_of_3d", lambda m: m.ones(2, 3, 4).T, "The use of `x.T` on tensors of dimension other"),
    ("T_of_1d", lambda m: m.ones(3).T, "The use of `x.T` on tensors of dimension other"),
    ("T_of_0d", lambda m: m.tensor(1.0).T, "Tensor.T is deprecated on 0-D tensors"),
    ("T_of_2d", lambda m: m.ones(2, 3).T, None),
    ("mT_of_3d", lambda m: m.ones(2, 3, 4).mT, None),
    ("meshgrid_without_indexing", lambda m: m.meshgrid(m.ones(2), m.ones(3)),
     "torch.meshgrid: in an upcoming release, it will be required to pass the indexing"),
    ("meshgrid_with_indexing", lambda m: m.meshgrid(m.ones(2), m.ones(3), indexing="xy"), None),
    ("stft_without_window", lambda m: m.stft(m.ones(64), 16, return_complex=True),
     "A window was not provided. A rectangular window will be applied"),
    ("lu", lambda m: m.lu(m.eye(2)), "torch.lu is deprecated in favor of torch.linalg.lu_factor"),
    ("chain_matmul", lambda m: m.chain_matmul(m.ones(2, 2), m.ones(2, 2)),
     "torch.chain_matmul is deprecated and will be removed"),
    ("stft_with_window", lambda m: m.stft(m.ones(64), 16, window=m.hann_window(16),
                                          return_complex=True), None),
]


def _warned(m, code):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code(m)
    return [(w.category, str(w.message), w.filename) for w in caught]


def _matching(caught, phrase):
    return [c for c in caught if phrase in c[1]]


@pytest.mark.parametrize("name, code, phrase", EVERY_CALL, ids=[c[0] for c in EVERY_CALL])
def test_warned_where_torch_warns(name, code, phrase):
    theirs, ours = _warned(torch, code), _warned(flow, code)
    key = phrase or NON_LEAF
    assert bool(_matching(theirs, key)) == (phrase is not None)  # the table is torch's
    found = _matching(ours, key)
    if phrase is None:
        assert not [c for c in ours if c[0] is UserWarning], ours
        return
    assert len(found) == 1 and found[0][0] is _matching(theirs, key)[0][0]  # the category
    assert found[0][2] == __file__  # the user's line, not flowgrad's


@pytest.mark.parametrize("name, code, phrase", ONCE, ids=[c[0] for c in ONCE])
def test_warned_once_where_torch_warns_once(name, code, phrase):
    _warn._WARNED_ONCE.clear()
    ours = _warned(flow, code)
    if phrase is None:
        assert not [c for c in ours if c[0] is UserWarning], ours
        return
    assert len(_matching(ours, phrase)) == 1 and _matching(ours, phrase)[0][2] == __file__
    assert not _matching(_warned(flow, code), phrase)  # once per process, as torch's


def test_flowgrad_reading_grads_of_its_own_non_leaves_does_not_warn():
    """Only the user's reads warn: flowgrad's modules read `.grad` of tensors that may be
    non-leaves (a sparse tensor's values, clip_grad_norm_ over a list holding one)."""
    x = flow.ones(3, requires_grad=True)
    values = x * 2
    s = flow.sparse_coo_tensor(flow.tensor([[0, 2, 1]]), values, (4,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert s.grad is None
        flow.nn.utils.clip_grad_norm_([values, x], 1.0)
    assert not [w for w in caught if NON_LEAF in str(w.message)]
    np.testing.assert_array_equal(s.to_dense().detach().numpy(), [2.0, 2.0, 2.0, 0.0])
