"""Default initialization of every nn module with parameters, and the nn.init functions,
against torch: state_dict layout (names in order, shapes, dtypes, requires_grad), constant
values exactly, random ones by their distribution (std, mean, support, zeros) over large
seeded samples, reset_parameters, dtype= and the default dtype; nn.init over its argument
grids, its dtype checks (an integer tensor must raise, not get truncated draws), complex
tensors, trunc_normal_ far in the tail, and the errors."""
from __future__ import annotations

import contextlib
import math
import signal
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow


@pytest.fixture(autouse=True)
def _seeded(keep_global_random_streams):
    torch.manual_seed(0)
    flow.manual_seed(0)


def _numpy(t):
    return np.asarray(t.detach().tolist(), dtype=np.complex128 if t.is_complex() else None)


def _build(expr, lib):
    return eval(expr, {"nn": lib.nn, "lib": lib, "math": math})


def _samples(expr, lib, least=4000, most=200):
    """Every state_dict entry of fresh modules, flattened and joined over instances until
    each random entry has `least` values (or `most` modules were built)."""
    values = {}
    for _ in range(most):
        for k, v in _build(expr, lib).state_dict().items():
            values.setdefault(k, []).append(_numpy(v).ravel())
        sizes = [sum(a.size for a in v) for v in values.values()
                 if v[0].size and np.any(v[0] != v[0][0])]
        if min(sizes, default=least) >= least:
            break
    return {k: np.concatenate(v) for k, v in values.items()}


def _layout(module):
    return ([(k, tuple(v.shape), v.dtype.is_floating_point, str(v.dtype).split(".")[-1])
             for k, v in module.state_dict().items()],
            [(k, p.requires_grad) for k, p in module.named_parameters()])


def _same_distribution(key, ours, theirs):
    """Constant entries exactly; random ones by mean, std, zero fraction and max|x| / std
    (about 1.73 for a uniform, over 4 for these normal samples)."""
    assert ours.shape == theirs.shape, key
    if ours.size == 0:
        return
    if np.all(theirs == theirs[0]) or np.all(ours == ours[0]):
        np.testing.assert_array_equal(ours, theirs, err_msg=key)
        return
    s_o, s_t = ours.std(), theirs.std()
    assert abs(s_o - s_t) <= 0.06 * s_t, (key, s_o, s_t)
    assert abs(ours.mean() - theirs.mean()) <= 0.05 * s_t + 5 * s_t / math.sqrt(ours.size), key
    assert abs((ours == 0).mean() - (theirs == 0).mean()) <= 0.02, key
    r_o, r_t = np.abs(ours).max() / s_o, np.abs(theirs).max() / s_t
    assert abs(r_o - r_t) <= 0.25 * r_t, (key, r_o, r_t)


MODULES = [
    "nn.Linear(300, 200)",
    "nn.Linear(300, 200, bias=False)",
    "nn.Linear(1, 500)",
    "nn.Bilinear(30, 40, 50)",
    "nn.Bilinear(30, 40, 50, bias=False)",
    "nn.Conv1d(16, 32, 5, groups=4)",
    "nn.Conv2d(16, 32, (3, 5), groups=8, bias=False)",
    "nn.Conv2d(16, 32, 3, padding_mode='reflect', padding=1)",
    "nn.Conv3d(8, 16, 3)",
    "nn.ConvTranspose1d(16, 32, 5, groups=4)",
    "nn.ConvTranspose2d(64, 8, 3)",
    "nn.ConvTranspose2d(16, 8, 3, groups=4, bias=False)",
    "nn.ConvTranspose3d(8, 16, 3, groups=2)",
    "nn.Embedding(1000, 64)",
    "nn.Embedding(100, 64, padding_idx=-1)",
    "nn.EmbeddingBag(100, 64, padding_idx=2, mode='sum')",
    "nn.RNN(30, 50, num_layers=2, bidirectional=True)",
    "nn.RNN(30, 50, bias=False, nonlinearity='relu')",
    "nn.LSTM(30, 50, num_layers=2, bidirectional=True, proj_size=20)",
    "nn.LSTM(30, 50, proj_size=20, bias=False)",
    "nn.GRU(30, 50, num_layers=2)",
    "nn.RNNCell(30, 50)",
    "nn.LSTMCell(30, 50)",
    "nn.GRUCell(30, 50, bias=False)",
    "nn.BatchNorm1d(10)",
    "nn.BatchNorm2d(10, affine=False, momentum=None)",
    "nn.BatchNorm3d(10, track_running_stats=False)",
    "nn.InstanceNorm1d(10)",
    "nn.InstanceNorm2d(10, affine=True, track_running_stats=True)",
    "nn.LayerNorm([4, 5])",
    "nn.LayerNorm(10, elementwise_affine=False)",
    "nn.LayerNorm(10, bias=False)",
    "nn.GroupNorm(2, 10)",
    "nn.GroupNorm(2, 10, affine=False)",
    "nn.RMSNorm([3, 4])",
    "nn.RMSNorm(10, elementwise_affine=False)",
    "nn.PReLU()",
    "nn.PReLU(8, init=0.1)",
    "nn.MultiheadAttention(64, 8)",
    "nn.MultiheadAttention(64, 8, bias=False)",
    "nn.MultiheadAttention(64, 8, add_bias_kv=True)",
    "nn.MultiheadAttention(64, 8, kdim=32, vdim=16, add_bias_kv=True, bias=False)",
    "nn.TransformerEncoderLayer(64, 4, dim_feedforward=128)",
    "nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, bias=False, norm_first=True)",
    "nn.TransformerDecoderLayer(64, 4, dim_feedforward=128)",
    "nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64), 2, norm=nn.LayerNorm(32))",
    "nn.TransformerDecoder(nn.TransformerDecoderLayer(32, 4, 64), 2)",
    "nn.Transformer(32, 4, 2, 2, 64)",
    "nn.Transformer(32, 4, 1, 1, 64, bias=False)",
    "nn.AdaptiveLogSoftmaxWithLoss(64, 100, [10, 40], div_value=2.0, head_bias=True)",
    "nn.SyncBatchNorm(10)",
    "(lambda m: (m(lib.ones(2, 37)), m)[1])(nn.LazyLinear(50))",
    "(lambda m: (m(lib.ones(1, 12, 3, 3)), m)[1])(nn.LazyConv2d(20, 3, groups=4))",
    "(lambda m: (m(lib.ones(1, 12, 1, 1, 1)), m)[1])(nn.LazyConvTranspose3d(20, 3))",
    "(lambda m: (m(lib.ones(2, 12, 9)), m)[1])(nn.LazyBatchNorm1d())",
    "(lambda m: (m(lib.ones(2, 12, 9, 9)), m)[1])(nn.LazyInstanceNorm2d(affine=True))",
    # reset_parameters / _reset_parameters after the values were overwritten
    "(lambda m: (nn.init.constant_(m.weight, 7.0), m.reset_parameters(), m)[2])"
    "(nn.ConvTranspose2d(6, 8, 3))",
    "(lambda m: (nn.init.constant_(m.weight, 7.0), m.reset_parameters(), m)[2])"
    "(nn.Embedding(60, 8, padding_idx=0))",
    "(lambda m: (nn.init.constant_(m.weight, 7.0), m.running_mean.fill_(3), "
    "m.num_batches_tracked.fill_(5), m.reset_parameters(), m)[4])(nn.BatchNorm1d(3))",
    "(lambda m: (nn.init.constant_(m.weight_hr_l0, 7.0), m.reset_parameters(), m)[2])"
    "(nn.LSTM(6, 8, proj_size=4))",
    "(lambda m: (nn.init.constant_(m.in_proj_weight, 7.0), m._reset_parameters(), m)[2])"
    "(nn.MultiheadAttention(16, 2))",
    "(lambda m: (nn.init.constant_(m.head.weight, 7.0), m.reset_parameters(), m)[2])"
    "(nn.AdaptiveLogSoftmaxWithLoss(16, 20, [5]))",
    "(lambda m: (nn.init.constant_(m.encoder.layers[0].linear1.weight, 7.0), "
    "m._reset_parameters(), m)[2])(nn.Transformer(16, 2, 1, 1, 32))",
    # dtype= and device=
    "nn.Linear(3, 4, dtype=lib.float16)",
    "nn.Linear(3, 4, dtype=lib.bfloat16, device='cpu')",
    "nn.ConvTranspose2d(3, 4, 3, dtype=lib.float64)",
    "nn.LSTM(3, 4, proj_size=2, dtype=lib.float64)",
    "nn.BatchNorm1d(3, dtype=lib.float16)",
    "nn.MultiheadAttention(8, 2, kdim=4, vdim=6, add_bias_kv=True, dtype=lib.float64)",
    "nn.Transformer(8, 2, 1, 1, 16, dtype=lib.float64)",
    "(lambda m: (m(lib.ones(1, 3, 3, dtype=lib.float64)), m)[1])"
    "(nn.LazyConv1d(5, 3, dtype=lib.float64))",
]


@pytest.mark.parametrize("expr", MODULES)
def test_module_parameters_like_torch(expr):
    assert _layout(_build(expr, flow)) == _layout(_build(expr, torch))
    ours, theirs = _samples(expr, flow), _samples(expr, torch)
    for key in theirs:
        _same_distribution(key, ours[key], theirs[key])


def _fan_in(w):
    return torch.nn.init._calculate_fan_in_and_fan_out(w)[0]


def _xavier(w):
    return math.sqrt(6 / sum(torch.nn.init._calculate_fan_in_and_fan_out(w)))


BOUNDS = [  # (module, parameter, its U(-b, b) bound from torch's formula given torch's module)
    ("nn.Linear(30, 20)", "weight", lambda m: 1 / math.sqrt(m.in_features)),
    ("nn.ConvTranspose2d(6, 40, 3, groups=2)", "weight", lambda m: 1 / math.sqrt(_fan_in(
        m.weight))),
    ("nn.ConvTranspose2d(6, 40, 3, groups=2)", "bias", lambda m: 1 / math.sqrt(_fan_in(
        m.weight))),
    ("nn.Bilinear(30, 4, 20)", "weight", lambda m: 1 / math.sqrt(m.in1_features)),
    ("nn.GRU(3, 40)", "weight_ih_l0", lambda m: 1 / math.sqrt(m.hidden_size)),
    ("nn.LSTM(3, 40, proj_size=5)", "weight_hr_l0", lambda m: 1 / math.sqrt(m.hidden_size)),
    ("nn.MultiheadAttention(40, 4)", "in_proj_weight", lambda m: _xavier(m.in_proj_weight)),
    ("nn.Transformer(16, 2, 1, 1, 32)", "encoder.layers.0.linear1.weight",
     lambda m: _xavier(m.encoder.layers[0].linear1.weight)),
]


@pytest.mark.parametrize("expr,name,bound", BOUNDS)
def test_uniform_support(expr, name, bound):
    limit = bound(_build(expr, torch))
    values = np.concatenate([_numpy(_build(expr, flow).state_dict()[name]).ravel()
                             for _ in range(40)])
    assert limit * 0.97 <= np.abs(values).max() <= limit


@pytest.mark.parametrize("expr", ["nn.Linear(3, 4)", "nn.LSTM(3, 4, proj_size=2)",
                                  "nn.BatchNorm1d(3)", "nn.MultiheadAttention(4, 2, kdim=3)",
                                  "nn.Transformer(4, 2, 1, 1, 8)", "nn.RMSNorm(3)"])
def test_default_dtype_float64(expr):
    layouts = []
    for lib in (flow, torch):
        lib.set_default_dtype(lib.float64)
        try:
            layouts.append(_layout(_build(expr, lib)))
        finally:
            lib.set_default_dtype(lib.float32)
    assert layouts[0] == layouts[1]
    assert _layout(_build(expr, flow)) == _layout(_build(expr, torch))


# ---- nn.init ----------------------------------------------------------------------------------
def _outcome(lib, call):
    """The value call(lib) returns (as NumPy where a tensor), or the exception type, and the
    warnings it gave."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            out = call(lib)
        except Exception as e:  # noqa: BLE001 - compared with torch's
            out = type(e)
    if isinstance(out, (flow.Tensor, torch.Tensor)):
        out = _numpy(out)
    return out, [(w.category, str(w.message)) for w in seen]


def _same_outcome(call):
    ours, theirs = _outcome(flow, call), _outcome(torch, call)
    if isinstance(theirs[0], type):
        assert ours[0] is not None and isinstance(ours[0], type), (ours, theirs)
        assert issubclass(ours[0], theirs[0]), (ours, theirs)
    elif isinstance(theirs[0], np.ndarray):
        np.testing.assert_allclose(ours[0], theirs[0])
    else:
        assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]


GAIN_NAMES = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu", "gelu"]


@pytest.mark.parametrize("param", [None, 0.2, 3, -1.0, True, "0.1", np.float64(0.3)])
@pytest.mark.parametrize("name", GAIN_NAMES)
def test_calculate_gain(name, param):
    _same_outcome(lambda lib: lib.nn.init.calculate_gain(name, param))


def _init(name, *args, **kwargs):
    return lambda t, lib: getattr(lib.nn.init, name)(t, *args, **kwargs)


FILLS = [  # (initializer, shape): the filled values must equal torch's
    (_init("eye_"), (3, 5)), (_init("eye_"), (3,)), (_init("eye_"), (2, 2, 2)),
    (_init("dirac_"), (4, 2, 3)), (_init("dirac_", 2), (6, 3, 3, 3)),
    (_init("dirac_", 3), (6, 2, 3)), (_init("dirac_", 2), (4, 4, 2, 3, 3)),
    (_init("dirac_", 4), (6, 2, 3)), (_init("dirac_"), (3, 3)),
    (_init("constant_", 2.5), (3,)), (_init("zeros_"), (2, 3)), (_init("ones_"), (2, 3)),
    (_init("orthogonal_"), (3,)), (_init("orthogonal_"), (0, 3)), (_init("sparse_", 0.5), (3,)),
    (_init("xavier_uniform_"), (3,)), (_init("kaiming_normal_"), (4,)),
    (_init("kaiming_uniform_", mode="fan_avg"), (3, 3)),
    (_init("kaiming_uniform_", nonlinearity="gelu"), (3, 3)),
    (_init("kaiming_normal_"), (0, 3)), (_init("kaiming_uniform_"), (3, 0, 2)),
    (_init("xavier_uniform_"), (0, 0)),
]


@pytest.mark.parametrize("fill,shape", FILLS)
def test_fill_like_torch(fill, shape):
    _same_outcome(lambda lib: fill(lib.zeros(*shape), lib))


RANDOM = ["uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_",
          "kaiming_uniform_", "kaiming_normal_", "orthogonal_"]


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
@pytest.mark.parametrize("name", RANDOM + ["sparse_"])
def test_random_fill_refuses_integer_tensors(name, dtype):
    # cast into an integer tensor the draws became a few small integers, without an error
    args = (0.5,) if name == "sparse_" else ()
    _same_outcome(lambda lib: getattr(lib.nn.init, name)(
        lib.zeros(4, 5, dtype=getattr(lib, dtype)), *args))


COMPLEX = [  # complex tensors: torch draws both parts, or raises
    ("normal_", {"mean": 1.0, "std": 2.0}), ("uniform_", {"a": -1.0, "b": 3.0}),
    ("xavier_normal_", {"gain": 2.0}), ("kaiming_uniform_", {"a": 1.0}),
    ("sparse_", {"sparsity": 0.3, "std": 1.0}), ("trunc_normal_", {}), ("orthogonal_", {}),
]


@pytest.mark.parametrize("name,kwargs", COMPLEX)
def test_complex_tensors(name, kwargs):
    results = []
    for lib in (flow, torch):
        t = lib.zeros(200, 300, dtype=lib.complex128)
        try:
            getattr(lib.nn.init, name)(t, **kwargs)
        except NotImplementedError:
            results.append(None)
            continue
        results.append(_numpy(t).ravel())
    if results[1] is None:
        assert results[0] is None
        return
    for part in (np.real, np.imag):
        _same_distribution(name, part(results[0]), part(results[1]))


@contextlib.contextmanager
def _within(seconds):
    """Fail, instead of hanging the run, if the block loops for longer than `seconds`."""
    def expired(*_):
        raise TimeoutError(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


TRUNC = [  # (mean, std, a, b): the window far in a tail took forever to fill by resampling
    (0.0, 1.0, -2.0, 2.0), (1.0, 2.0, -1.0, 0.5), (0.0, 0.02, -0.04, 0.04),
    (0.0, 1.0, 1.5, 4.0), (0.0, 1.0, 5.0, 6.0), (0.0, 1.0, 8.0, 9.0), (0.0, 1.0, -6.0, -2.5),
    (5.0, 1.0, -2.0, 2.0), (2.0, -1.0, -1.0, 0.5), (0.0, 10.0, -1.0, 0.5),
    (0.0, 1.0, 0.0, math.inf), (0.0, 1.0, 1.0, 1.0),
]


@pytest.mark.parametrize("mean,std,a,b", TRUNC)
def test_trunc_normal(mean, std, a, b):
    ours, theirs = flow.empty(200, 100), torch.empty(200, 100)
    with _within(20), warnings.catch_warnings(record=True) as ours_seen:
        warnings.simplefilter("always")
        flow.nn.init.trunc_normal_(ours, mean, std, a, b)
    with warnings.catch_warnings(record=True) as theirs_seen:
        warnings.simplefilter("always")
        torch.nn.init.trunc_normal_(theirs, mean, std, a, b)
    assert [str(w.message) for w in ours_seen] == [str(w.message) for w in theirs_seen]
    ours, theirs = _numpy(ours).ravel(), _numpy(theirs).ravel()
    assert a <= ours.min() and ours.max() <= b
    s_t = theirs.std()
    assert abs(ours.std() - s_t) <= 0.03 * s_t + 1e-7
    assert abs(ours.mean() - theirs.mean()) <= 0.03 * s_t + 1e-7


BAD = [  # torch raises for these; so must flowgrad, in time, naming the function
    lambda lib: lib.nn.init.trunc_normal_(lib.empty(3), 0.0, 1.0, 1.0, -1.0),
    lambda lib: lib.nn.init.trunc_normal_(lib.empty(3), 0.0, 1.0, 3.0, math.inf),
    lambda lib: lib.nn.init.trunc_normal_(lib.empty(3), 0.5, 0.0, 0.0, 1.0),
    lambda lib: lib.nn.init.uniform_(lib.empty(3), 2.0, 1.0),
    lambda lib: lib.nn.init.uniform_(lib.empty(3), 0.0, math.inf),
    lambda lib: lib.nn.init.uniform_(lib.empty(3), 0.0, math.nan),
    lambda lib: lib.nn.init.uniform_(lib.empty(3, dtype=lib.float16), 0.0, 70000.0),
    lambda lib: lib.nn.init.uniform_(lib.empty(3, dtype=lib.float16), -60000.0, 60000.0),
    lambda lib: lib.nn.init.uniform_(lib.empty(3), -3e38, 3e38),
    lambda lib: lib.nn.init.normal_(lib.empty(3), 0.0, -1.0),
    lambda lib: lib.nn.init.sparse_(lib.empty(3, 3), 0.5, -1.0),
]


@pytest.mark.parametrize("call", BAD)
def test_bad_arguments_raise_like_torch(call):
    with _within(20):
        _same_outcome(call)
    with _within(20), pytest.raises(Exception, match=r"nn\.init\.\w+_"):
        call(flow)


@pytest.mark.parametrize("name", ["uniform", "normal", "constant", "eye", "dirac",
                                  "xavier_uniform", "xavier_normal", "kaiming_uniform",
                                  "kaiming_normal", "orthogonal", "sparse"])
def test_deprecated_names(name):
    args = {"constant": (0.5,), "sparse": (0.5,)}.get(name, ())
    shape = (4, 2, 3) if name == "dirac" else (4, 3)

    def call(lib):
        return getattr(lib.nn.init, name)(lib.zeros(*shape), *args)

    (ours, ours_seen), (theirs, theirs_seen) = _outcome(flow, call), _outcome(torch, call)
    assert ours_seen == theirs_seen and [w[0] for w in ours_seen] == [FutureWarning]
    assert ours.shape == theirs.shape == shape and np.count_nonzero(ours)
    if name in ("constant", "eye", "dirac"):
        np.testing.assert_array_equal(ours, theirs)
