"""Bad arguments across the library, each run in torch and in flowgrad: both must raise, or
neither (torch's own acceptance of the odd ones, zero steps or sizes, is kept as torch's).
Probes of 235 such calls found four differences, fixed: tril_indices/triu_indices of a negative
size, instance_norm over one spatial element and //, %, fmod, ** of two bools (torch refuses),
manual_seed(-1) (torch takes it as 2**64 - 1)."""
from __future__ import annotations

import warnings

import pytest
import torch

import flowgrad as flow

CASES = [
    ('arange step0', lambda m: m.arange(0, 5, 0)),
    ('arange nan', lambda m: m.arange(0, float('nan'))),
    ('arange inf', lambda m: m.arange(0, float('inf'))),
    ('linspace neg steps', lambda m: m.linspace(0, 1, -1)),
    ('logspace neg', lambda m: m.logspace(0, 1, -2)),
    ('eye neg', lambda m: m.eye(-1)),
    ('full bad size', lambda m: m.full((-1,), 2.0)),
    ('zeros float size', lambda m: m.zeros(2.5)),
    ('ones_like bad dtype', lambda m: m.ones_like(m.ones(2), dtype=m.int64).requires_grad_()),
    ('tril_indices neg', lambda m: m.tril_indices(-1, 3)),
    ('randn float size', lambda m: m.randn(2.0)),
    ('empty neg', lambda m: m.empty(-2)),
    ('topk k big', lambda m: m.ones(3).topk(4)),
    ('kthvalue 0', lambda m: m.ones(3).kthvalue(0)),
    ('kthvalue big', lambda m: m.ones(3).kthvalue(4)),
    ('quantile >1', lambda m: m.ones(3).quantile(1.5)),
    ('quantile int', lambda m: m.ones(3, dtype=m.int64).quantile(0.5)),
    ('histc bins0', lambda m: m.ones(3).histc(bins=0)),
    ('histc min>max', lambda m: m.ones(3).histc(bins=3, min=2, max=1)),
    ('bincount neg', lambda m: m.tensor([-1, 2]).bincount()),
    ('bincount float', lambda m: m.tensor([1.0, 2.0]).bincount()),
    ('repeat fewer', lambda m: m.ones(2, 3).repeat(2)),
    ('repeat_interleave neg', lambda m: m.ones(3).repeat_interleave(-1)),
    ('roll mismatch', lambda m: m.ones(3).roll((1, 2), (0,))),
    ('flip dup', lambda m: m.ones(3, 3).flip((0, 0))),
    ('permute dup', lambda m: m.ones(3, 3).permute(0, 0)),
    ('narrow neg len', lambda m: m.ones(3).narrow(0, 0, -1)),
    ('chunk 0', lambda m: m.ones(3).chunk(0)),
    ('split 0', lambda m: m.ones(3).split(0)),
    ('unflatten bad', lambda m: m.ones(6).unflatten(0, (4, -1))),
    ('view bad', lambda m: m.ones(6).view(4, -1)),
    ('expand smaller', lambda m: m.ones(3).expand(2)),
    ('gather oob', lambda m: m.ones(3).gather(0, m.tensor([5]))),
    ('index_select oob', lambda m: m.ones(3).index_select(0, m.tensor([5]))),
    ('take oob', lambda m: m.ones(3).take(m.tensor([5]))),
    ('scatter oob', lambda m: m.zeros(3).scatter(0, m.tensor([5]), 1.0)),
    ('one_hot small', lambda m: m.nn.functional.one_hot(m.tensor([3]), 2)),
    ('embedding oob', lambda m: m.nn.functional.embedding(m.tensor([5]), m.ones(3, 2))),
    ('cross_entropy oob', lambda m: m.nn.functional.cross_entropy(m.ones(2, 3), m.tensor([0, 3]))),
    ('nll neg', lambda m: m.nn.functional.nll_loss(m.ones(2, 3), m.tensor([0, -5]))),
    ('mse shape', lambda m: m.nn.functional.mse_loss(m.ones(2, 3), m.ones(3, 2))),
    ('bce out of range',
     lambda m: m.nn.functional.binary_cross_entropy(m.tensor([1.5]), m.tensor([1.0]))),
    ('bce target range',
     lambda m: m.nn.functional.binary_cross_entropy(m.tensor([0.5]), m.tensor([1.5]))),
    ('kl_div shapes', lambda m: m.nn.functional.kl_div(m.ones(2, 3), m.ones(3))),
    ('softmax bad dim', lambda m: m.ones(2, 3).softmax(2)),
    ('clamp min>max', lambda m: m.ones(3).clamp(2, 1)),
    ('pow int neg', lambda m: m.tensor([2]) ** -1),
    ('div int mode', lambda m: m.tensor([1]).div(m.tensor([0]), rounding_mode='floor')),
    ('remainder int 0', lambda m: m.tensor([1]) % m.tensor([0])),
    ('sum dtype bad', lambda m: m.ones(3).sum(dtype=m.int8)),
    ('mean int', lambda m: m.ones(3, dtype=m.int64).mean()),
    ('std int', lambda m: m.ones(3, dtype=m.int64).std()),
    ('cumsum bad dim', lambda m: m.ones(3).cumsum(1)),
    ('matmul 0d', lambda m: m.tensor(1.0) @ m.ones(2)),
    ('mm 1d', lambda m: m.mm(m.ones(2), m.ones(2))),
    ('bmm 2d', lambda m: m.bmm(m.ones(2, 2), m.ones(2, 2))),
    ('dot shapes', lambda m: m.dot(m.ones(2), m.ones(3))),
    ('dot dtypes', lambda m: m.dot(m.ones(2), m.ones(2, dtype=m.float64))),
    ('cat dtypes', lambda m: m.cat([m.ones(2), m.ones(2, dtype=m.int64)])),
    ('stack shapes', lambda m: m.stack([m.ones(2), m.ones(3)])),
    ('where shapes', lambda m: m.where(m.ones(2) > 0, m.ones(3), m.ones(3))),
    ('conv channels', lambda m: m.nn.functional.conv2d(m.ones(1, 3, 5, 5), m.ones(2, 2, 3, 3))),
    ('conv kernel too big',
     lambda m: m.nn.functional.conv2d(m.ones(1, 1, 2, 2), m.ones(1, 1, 3, 3))),
    ('maxpool k big', lambda m: m.nn.functional.max_pool2d(m.ones(1, 1, 2, 2), 3)),
    ('avgpool pad big', lambda m: m.nn.functional.avg_pool2d(m.ones(1, 1, 4, 4), 2, padding=2)),
    ('interpolate none', lambda m: m.nn.functional.interpolate(m.ones(1, 1, 4))),
    ('pad neg big', lambda m: m.nn.functional.pad(m.ones(2, 2), (-3, 0))),
    ('layer_norm shape', lambda m: m.nn.functional.layer_norm(m.ones(2, 3), (4,))),
    ('batch_norm 1 value',
     lambda m: m.nn.functional.batch_norm(m.ones(1, 3), None, None, training=True)),
    ('linear shape', lambda m: m.nn.functional.linear(m.ones(2, 3), m.ones(4, 5))),
    ('embedding_bag mode',
     lambda m: m.nn.functional.embedding_bag(m.tensor([0, 1]), m.ones(3, 2), m.tensor([0]),
                                             mode='bad')),
    ('cdist p neg', lambda m: m.cdist(m.ones(2, 3), m.ones(2, 3), p=-1)),
    ('norm p str', lambda m: m.ones(3).norm(p='bad')),
    ('einsum bad', lambda m: m.einsum('ij,jk->il', m.ones(2, 2), m.ones(2, 2))),
    ('tensordot dims', lambda m: m.tensordot(m.ones(2, 3), m.ones(4, 5), dims=1)),
    ('sort stable kw', lambda m: m.ones(3).sort(stable=None)),
    ('masked_fill nonbool', lambda m: m.ones(3).masked_fill(m.ones(3), 0.0)),
    ('masked_select shape', lambda m: m.ones(3).masked_select(m.ones(2, dtype=m.bool))),
    ('index_put oob', lambda m: m.zeros(3).index_put_((m.tensor([7]),), m.tensor(1.0))),
    ('setitem oob', lambda m: m.zeros(3).__setitem__(5, 1.0)),
    ('getitem oob', lambda m: m.zeros(3)[5]),
    ('item multi', lambda m: m.zeros(3).item()),
    ('bool multi', lambda m: bool(m.zeros(3))),
    ('int of float tensor', lambda m: int(m.tensor(2.7))),
    ('reshape neg2', lambda m: m.ones(6).reshape(-1, -1)),
    ('squeeze bad dim', lambda m: m.ones(3).squeeze(2)),
    ('unsqueeze bad dim', lambda m: m.ones(3).unsqueeze(3)),
    ('transpose bad', lambda m: m.ones(3).transpose(0, 2)),
    ('diag 3d', lambda m: m.ones(2, 2, 2).diag()),
    ('trace 3d', lambda m: m.ones(2, 2, 2).trace()),
    ('det nonsquare', lambda m: m.linalg.det(m.ones(2, 3))),
    ('inv singular', lambda m: m.linalg.inv(m.zeros(2, 2))),
    ('cholesky nonpd', lambda m: m.linalg.cholesky(-m.eye(2))),
    ('solve shapes', lambda m: m.linalg.solve(m.eye(2), m.ones(3))),
    ('lerp weight shape', lambda m: m.lerp(m.ones(2), m.ones(2), m.ones(3))),
    ('sgd lr neg', lambda m: m.optim.SGD([m.nn.Parameter(m.ones(2))], lr=-1)),
    ('adam betas', lambda m: m.optim.Adam([m.nn.Parameter(m.ones(2))], betas=(1.5, 0.9))),
    ('adam eps neg', lambda m: m.optim.Adam([m.nn.Parameter(m.ones(2))], eps=-1)),
    ('sgd momentum neg', lambda m: m.optim.SGD([m.nn.Parameter(m.ones(2))], lr=0.1, momentum=-1)),
    ('sgd nesterov', lambda m: m.optim.SGD([m.nn.Parameter(m.ones(2))], lr=0.1, nesterov=True)),
    ('steplr bad',
     lambda m: m.optim.lr_scheduler.StepLR(m.optim.SGD([m.nn.Parameter(m.ones(2))], lr=0.1),
                                           step_size=0)),
    ('Linear neg', lambda m: m.nn.Linear(-1, 2)),
    ('Conv groups', lambda m: m.nn.Conv2d(3, 4, 3, groups=2)),
    ('Dropout p', lambda m: m.nn.Dropout(1.5)),
    ('Embedding pad oob', lambda m: m.nn.Embedding(3, 2, padding_idx=5)),
    ('MultiheadAttn heads', lambda m: m.nn.MultiheadAttention(10, 3)),
    ('BatchNorm input', lambda m: m.nn.BatchNorm2d(3)(m.ones(2, 3))),
    ('LSTM input size', lambda m: m.nn.LSTM(3, 4)(m.ones(5, 2, 4))),
    ('instance_norm one value', lambda m: m.nn.functional.instance_norm(m.ones(1, 2, 1))),
    ('instance_norm 2d one', lambda m: m.nn.InstanceNorm2d(2)(m.ones(3, 2, 1, 1))),
    ('manual_seed negative', lambda m: m.manual_seed(-1)),
    ('manual_seed too big', lambda m: m.manual_seed(2 ** 64)),
    ('manual_seed too small', lambda m: m.manual_seed(-2 ** 63 - 1)),
    ('reduction bad', lambda m: m.nn.functional.mse_loss(m.ones(2), m.ones(2), reduction='bad')),
    ('ce label_smoothing', lambda m: m.nn.functional.cross_entropy(
        m.ones(2, 3), m.tensor([0, 1]), label_smoothing=1.5)),
    ('gelu approximate', lambda m: m.nn.functional.gelu(m.ones(2), approximate='bad')),
    ('glu odd', lambda m: m.nn.functional.glu(m.ones(3))),
    ('group_norm groups', lambda m: m.nn.functional.group_norm(m.ones(2, 6, 3), 4)),
    ('reflect pad too big', lambda m: m.nn.functional.pad(m.ones(1, 1, 4), (4, 4),
                                                           mode='reflect')),
    ('DataLoader batch 0', lambda m: m.utils.data.DataLoader(list(range(4)), batch_size=0)),
    ('random_split sizes', lambda m: m.utils.data.random_split(list(range(4)), [3, 3])),
    ('backward non-scalar', lambda m: (m.ones(2, requires_grad=True) * 2).backward()),
    ('grad of unused', lambda m: m.autograd.grad(m.ones(2, requires_grad=True).sum(),
                                                 [m.ones(2, requires_grad=True)])),
    ('load_state_dict shape', lambda m: m.nn.Linear(2, 2).load_state_dict(
        {'weight': m.ones(3, 3)})),
    ('optimizer non-leaf', lambda m: m.optim.SGD([m.ones(2, requires_grad=True) * 2], lr=0.1)),
    ('bool // bool', lambda m: m.tensor([True, False]) // m.tensor([True, True])),
    ('bool // True', lambda m: m.tensor([True, False]) // True),
    ('bool // 1', lambda m: m.tensor([True, False]) // 1),
    ('bool % bool', lambda m: m.tensor([True, False]) % m.tensor([True, True])),
    ('bool % True', lambda m: m.tensor([True, False]) % True),
    ('bool fmod', lambda m: m.fmod(m.tensor([True, False]), m.tensor([True, True]))),
    ('bool ** bool', lambda m: m.tensor([True, False]) ** m.tensor([True, True])),
    ('True ** bool', lambda m: True ** m.tensor([True, False])),
    ('bool ** True', lambda m: m.tensor([True, False]) ** True),
    ('bool ** 2', lambda m: m.tensor([True, False]) ** 2),
    ('2 ** bool', lambda m: 2 ** m.tensor([True, False])),
    ('bool div trunc', lambda m: m.tensor([True, False]).div(m.tensor([True, True]),
                                                              rounding_mode='trunc')),
    ('index_add dim oob', lambda m: m.zeros(3).index_add(1, m.tensor([0]), m.ones(1))),
    ('index_add src shape', lambda m: m.zeros(3, 2).index_add(0, m.tensor([0]), m.ones(2, 2))),
    ('index_add float idx', lambda m: m.zeros(3).index_add(0, m.tensor([0.0]), m.ones(1))),
    ('index_copy oob', lambda m: m.zeros(3).index_copy(0, m.tensor([5]), m.ones(1))),
    ('index_fill oob', lambda m: m.zeros(3).index_fill(0, m.tensor([5]), 1.0)),
    ('scatter_add shape', lambda m: m.zeros(3).scatter_add(0, m.tensor([0, 1]), m.ones(1))),
    ('scatter reduce bad', lambda m: m.zeros(3).scatter(0, m.tensor([0]), m.ones(1), reduce='bad')),
    ('scatter_reduce bad', lambda m: m.zeros(3).scatter_reduce(0, m.tensor([0]), m.ones(1), 'bad')),
    ('gather ndim', lambda m: m.ones(3, 3).gather(0, m.tensor([0]))),
    ('take_along_dim shape', lambda m: m.take_along_dim(m.ones(3, 3), m.tensor([[0, 1]]), 2)),
    ('unfold step0', lambda m: m.ones(5).unfold(0, 2, 0)),
    ('unfold size big', lambda m: m.ones(5).unfold(0, 6, 1)),
    ('repeat_interleave mismatch', lambda m: m.ones(3).repeat_interleave(m.tensor([1, 2]))),
    ('tile neg', lambda m: m.ones(3).tile((-1,))),
    ('movedim dup', lambda m: m.ones(2, 3).movedim((0, 0), (1, 0))),
    ('diagonal same dims', lambda m: m.ones(3, 3).diagonal(0, 0, 0)),
    ('diag_embed dims', lambda m: m.diag_embed(m.ones(3), dim1=0, dim2=0)),
    ('tril 1d', lambda m: m.ones(3).tril()),
    ('kron 0', lambda m: m.kron(m.ones(0), m.ones(2))),
    ('cross dim3', lambda m: m.linalg.cross(m.ones(2), m.ones(2))),
    ('outer 2d', lambda m: m.outer(m.ones(2, 2), m.ones(2))),
    ('searchsorted unsorted side',
     lambda m: m.searchsorted(m.tensor([1.0, 2.0]), m.tensor([1.5]), side='bad')),
    ('searchsorted right+side',
     lambda m: m.searchsorted(m.tensor([1.0, 2.0]), m.tensor([1.5]), right=False, side='right')),
    ('bucketize 2d boundaries', lambda m: m.bucketize(m.tensor([1.0]), m.ones(2, 2))),
    ('topk dim oob', lambda m: m.ones(3).topk(1, dim=1)),
    ('sort dim oob', lambda m: m.ones(3).sort(dim=2)),
    ('argmax dim oob', lambda m: m.ones(3).argmax(1)),
    ('max empty', lambda m: m.ones(0).max()),
    ('min empty dim', lambda m: m.ones(0, 3).min(0)),
    ('median empty', lambda m: m.ones(0).median()),
    ('logsumexp int', lambda m: m.ones(3, dtype=m.long).logsumexp(0)),
    ('prod bool', lambda m: m.ones(3, dtype=m.bool).prod()),
    ('cumprod bad dim', lambda m: m.ones(3).cumprod(5)),
    ('var correction neg', lambda m: m.ones(3).var(correction=-1)),
    ('std bool', lambda m: m.ones(3, dtype=m.bool).std()),
    ('norm int', lambda m: m.ones(3, dtype=m.long).norm()),
    ('dist shapes', lambda m: m.dist(m.ones(2), m.ones(3))),
    ('cosine sim shapes', lambda m: m.nn.functional.cosine_similarity(m.ones(2, 3), m.ones(2, 4))),
    ('Normal neg scale', lambda m: m.distributions.Normal(0.0, -1.0, validate_args=True)),
    ('Categorical neg', lambda m: m.distributions.Categorical(
        probs=m.tensor([-0.5, 1.5]), validate_args=True)),
    ('Bernoulli both',
     lambda m: m.distributions.Bernoulli(probs=m.tensor(0.5), logits=m.tensor(0.0))),
    ('Uniform low>high', lambda m: m.distributions.Uniform(1.0, 0.0, validate_args=True)),
    ('Normal log_prob shape',
     lambda m: m.distributions.Normal(m.zeros(2), 1.0).log_prob(m.zeros(3))),
    ('Conv2d 2d input', lambda m: m.nn.Conv2d(1, 1, 3)(m.ones(5, 5))),
    ('Conv2d unbatched', lambda m: m.nn.Conv2d(1, 1, 3)(m.ones(1, 5, 5))),
    ('Linear 0d', lambda m: m.nn.Linear(1, 2)(m.tensor(1.0))),
    ('Embedding float idx', lambda m: m.nn.Embedding(3, 2)(m.tensor([0.0]))),
    ('RNN batch_first shape', lambda m: m.nn.GRU(3, 4, batch_first=True)(m.ones(2, 5, 4))),
    ('LSTM h0 shape',
     lambda m: m.nn.LSTM(3, 4)(m.ones(5, 2, 3), (m.zeros(1, 3, 4), m.zeros(1, 3, 4)))),
    ('TransformerEncoderLayer dims', lambda m: m.nn.TransformerEncoderLayer(8, 3)),
    ('MHA key dim',
     lambda m: m.nn.MultiheadAttention(4, 2)(m.ones(3, 1, 4), m.ones(3, 1, 5), m.ones(3, 1, 4))),
    ('BatchNorm1d 3 dims wrong C', lambda m: m.nn.BatchNorm1d(3)(m.ones(2, 4, 5))),
    ('LayerNorm wrong', lambda m: m.nn.LayerNorm(4)(m.ones(2, 3))),
    ('Flatten bad', lambda m: m.nn.Flatten(2, 1)(m.ones(2, 3, 4))),
    ('Unflatten bad', lambda m: m.nn.Unflatten(1, (2, 2))(m.ones(2, 3))),
    ('PixelShuffle bad', lambda m: m.nn.PixelShuffle(2)(m.ones(1, 3, 2, 2))),
    ('Upsample both', lambda m: m.nn.Upsample(size=4, scale_factor=2)(m.ones(1, 1, 2))),
    ('CrossEntropy ignore all',
     lambda m: m.nn.CrossEntropyLoss(ignore_index=0)(m.ones(2, 3), m.tensor([0, 0]))),
    ('optimizer step closure', lambda m: m.optim.LBFGS([m.nn.Parameter(m.ones(2))]).step()),
    ('Adam amsgrad', lambda m: m.optim.Adam([m.nn.Parameter(m.ones(2))], amsgrad=True, lr=-1)),
    ('parameters_to_vector empty', lambda m: m.nn.utils.parameters_to_vector([])),
    ('pad_sequence empty', lambda m: m.nn.utils.rnn.pad_sequence([])),
    ('pack unsorted',
     lambda m: m.nn.utils.rnn.pack_padded_sequence(m.ones(3, 2, 1), m.tensor([1, 3]))),
    # a None or a string as a fill value (NumPy wrote None as nan into a float tensor)
    ('setitem None', lambda m: m.zeros(2, 3).__setitem__(0, None)),
    ('setitem str', lambda m: m.zeros(2, 3).__setitem__(0, 'a')),
    ('masked_fill None', lambda m: m.zeros(3).masked_fill(m.ones(3).bool(), None)),
    ('masked_fill_ str', lambda m: m.zeros(3).masked_fill_(m.ones(3).bool(), '1')),
    ('index_fill None', lambda m: m.zeros(3).index_fill(0, m.tensor([0]), None)),
    ('full_like None', lambda m: m.full_like(m.zeros(3), None)),
    ('fill_ None', lambda m: m.zeros(3).fill_(None)),
    ('new_full None', lambda m: m.zeros(3).new_full((2,), None)),
    ('full None', lambda m: m.full((2,), None)),
    ('where None', lambda m: m.where(m.ones(3).bool(), m.zeros(3), None)),
    ('tensor with None', lambda m: m.tensor([1.0, None])),
    # values a dtype cannot hold: they were written wrapped (253) or as inf
    ('uniform_ f16 beyond range', lambda m: m.empty(3, dtype=m.float16).uniform_(0, 70000)),
    ('uniform_ f16 span', lambda m: m.empty(3, dtype=m.float16).uniform_(-6e4, 6e4)),
    ('full u8 negative float', lambda m: m.full((2,), -3.5, dtype=m.uint8)),
    ('fill_ u8 negative float', lambda m: m.zeros(2, dtype=m.uint8).fill_(-3.0)),
    ('full u8 negative int', lambda m: m.full((2,), -3, dtype=m.uint8)),
    ('full c64 1e300', lambda m: m.full((2,), 1e300, dtype=m.complex64)),
    ('full c64 imag 1e300', lambda m: m.full((2,), 1e300j, dtype=m.complex64)),
    ('full c128 1e300', lambda m: m.full((2,), 1e300, dtype=m.complex128)),
    ('index_fill u8 negative float', lambda m: m.zeros(2, dtype=m.uint8).index_fill(
        0, m.tensor([0]), -2.5)),
    ('polar of ints', lambda m: m.polar(m.tensor([1, 2]), m.tensor([0, 1]))),
    ('flip without dims', lambda m: m.ones(2, 2).flip()),  # (it reversed nothing)
    ('histogram default bins', lambda m: m.tensor([1.0, 2.0, 3.0]).histogram()),
    ('new_zeros without size', lambda m: m.ones(2).new_zeros()),
    ('new_empty without size', lambda m: m.ones(2).new_empty()),
    ('new_ones of ()', lambda m: m.ones(2).new_ones(())),
    ('sum_to_size without size', lambda m: m.ones(2, 3).sum_to_size()),
    ('sum_to_size of ()', lambda m: m.ones(2, 3).sum_to_size(())),
    ('stack of a tensor', lambda m: m.stack(m.arange(3))),
    ('cat of a tensor', lambda m: m.cat(m.ones(2, 2))),
]


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_raises_exactly_where_torch_raises(case):
    _, call = CASES[case]
    outcome = []
    for m in (torch, flow):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                call(m)
                outcome.append(None)
            except Exception as error:  # noqa: BLE001 - any error counts as refusing
                outcome.append(type(error).__name__)
    assert (outcome[0] is None) == (outcome[1] is None), f"torch {outcome[0]}, flowgrad " \
        f"{outcome[1]}"


# Two Python numbers: torch's add, sub, mul, div (and its aliases) take them as a 0-d tensor
# and a number; its other functions refuse them with a TypeError. flowgrad raised an
# AttributeError for both kinds.
_NUMBER_PAIRS = [(2.0, 3.0), (2, 3), (True, False), (2, 3.5), (True, 2), (1j, 2), (-7, 2),
                 (-7.5, 2)]
_NUMBER_PAIR_CALLS = [
    *((name, {}) for name in ("add", "sub", "mul", "div", "true_divide", "floor_divide",
                              "remainder", "fmod", "pow", "maximum", "minimum", "eq", "lt",
                              "atan2", "hypot", "logaddexp", "copysign", "xlogy", "fmax")),
    ("add", {"alpha": 2}), ("sub", {"alpha": 2}),
    ("div", {"rounding_mode": "floor"}), ("div", {"rounding_mode": "trunc"}),
]


def _outcome(module, name, pair, kwargs):
    try:
        result = getattr(module, name)(*pair, **kwargs)
    except Exception as error:  # noqa: BLE001 - the kind of refusal is compared below
        return "raises", type(error).__name__
    return str(result.dtype).split(".")[-1], tuple(result.shape), complex(result.item())


@pytest.mark.parametrize("name,kwargs", _NUMBER_PAIR_CALLS,
                         ids=[f"{n}{k or ''}" for n, k in _NUMBER_PAIR_CALLS])
def test_two_python_numbers_as_torch(name, kwargs):
    for pair in _NUMBER_PAIRS:
        expected, actual = (_outcome(m, name, pair, kwargs) for m in (torch, flow))
        assert actual[0] == expected[0], f"{name}{pair}: torch {expected}, flowgrad {actual}"
        if expected[0] != "raises":
            assert actual == expected, f"{name}{pair}: torch {expected}, flowgrad {actual}"
        elif expected[1] == "TypeError":  # (not an AttributeError from inside flowgrad)
            assert actual[1] == "TypeError", f"{name}{pair}: flowgrad {actual[1]}"
