"""torch's nn-module database (ModuleInfo) from test_modules.py's other angles (second
derivatives, non-contiguous inputs and parameters, memory formats, in-place modules,
pickle/deepcopy/save, repr, error inputs, train against eval), against torch 2.13:
tests/moduleinfo_angles.py does the work.

A finding fails the test unless KNOWN explains it (a pattern matched against
"angle/mode message", and the reason); an entry that no longer matches anything fails too.
The regression tests at the end are the fixes the sweep led to, each against torch.
"""
from __future__ import annotations

import copy
import io
import pickle
import re
import warnings

import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import moduleinfo_angles  # noqa: E402
import numpy as np  # noqa: E402
import opinfo_vs_torch  # noqa: E402
import torch  # noqa: E402

import flowgrad as flow  # noqa: E402

DB = moduleinfo_angles.module_db()

_NO_DOUBLE = ("torch 2.13 has no derivative of {} (its second derivative raises); "
              "flowgrad's backward is made of differentiable ops")
KNOWN: dict[str, tuple[str, str]] = {
    "nn.MultiLabelMarginLoss": (r"^gradgrad/\w+ gradgrad raise: torch RuntimeError",
                                _NO_DOUBLE.format("multilabel_margin_loss_backward")),
    "nn.MultiMarginLoss": (r"^gradgrad/\w+ gradgrad raise: torch RuntimeError",
                           _NO_DOUBLE.format("multi_margin_loss_backward")),
    **{name: (r"^gradgrad/\w+ gradgrad raise: torch RuntimeError\('derivative for "
              r"aten::_scaled_dot_product_flash", _NO_DOUBLE.format("CPU flash attention's "
                                                                   "backward"))
       for name in ("nn.TransformerEncoder", "nn.TransformerEncoderLayer",
                    "nn.TransformerDecoderLayer", "nn.Transformer")},
}
# more ModuleInputs (slow; stale entries are not checked there)
KNOWN_ALL: dict[str, tuple[str, str]] = {
    "nn.CrossEntropyLoss": (r"^gradgrad/\w+ gradgrad cotangent 0: values differ .* torch nan",
                            "every target ignored with reduction='mean': the first gradient "
                            "is exactly 0 for any cotangent, so its derivative by the "
                            "cotangent is 0; torch's double backward divides by the total "
                            "weight 0 (nan)"),
    "nn.LinearCrossEntropyLoss": (
        r"^gradgrad/\w+ gradgrad(\[\d\]: torch None| \w+ [\w.]+: values differ)",
        "torch's chunked linear_cross_entropy documents no higher-order autograd (its first "
        "gradient is a constant: second derivatives None or 0); flowgrad's are those of the "
        "unchunked loss (test_opinfo_gradgrad_vs_torch.py's KNOWN)"),
}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with opinfo_vs_torch.one_thread():
        yield


def _check(info, known, first, stale_check=True):
    findings = moduleinfo_angles.probe(info, first=first)
    real = [f for f in findings if not f[2].startswith("skip")]
    pattern = known.get(info.name, (None, None))[0]
    unexplained = [f for f in real if pattern is None or
                   not re.search(pattern, f"{f[0]} {f[2]}")]
    assert not unexplained, f"{len(unexplained)} differences from torch:\n" + "\n".join(
        f"[{mode}] {where}: {message[:400]}" for mode, where, message in unexplained[:8])
    assert pattern is None or real or not stale_check, (
        f"{info.name}: no finding matches KNOWN any more: remove it")


@pytest.mark.parametrize("info", DB, ids=[info.name for info in DB])
def test_module_angles_vs_torch(info):
    """Every angle on the first ModuleInput, in training and in eval mode."""
    _check(info, KNOWN, first=1)


MANY = 10  # ModuleInputs per ModuleInfo in the slow tier (LinearCrossEntropyLoss has 200)


@pytest.mark.slow
@pytest.mark.parametrize("info", DB, ids=[info.name for info in DB])
def test_module_angles_more_inputs_vs_torch(info):
    """The first MANY ModuleInputs (KNOWN_ALL: what only later inputs show)."""
    known = dict(KNOWN)
    for name, (pattern, reason) in KNOWN_ALL.items():
        if name in known:
            pattern, reason = f"{known[name][0]}|{pattern}", f"{known[name][1]}; {reason}"
        known[name] = (pattern, reason)
    _check(info, known, first=MANY, stale_check=False)


def test_known_names_are_in_the_database():
    assert set(KNOWN) | set(KNOWN_ALL) <= {info.name for info in DB}


# ---- the fixes the sweep led to ------------------------------------------------------------
def _raises(call):
    """The exception type a call raises (None: it returns)."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the type is what is compared
        return type(error)
    return None


@pytest.mark.parametrize("path", ["nn.functional.relu", "nn.functional.gelu", "acos", "tanh",
                                  "add", "linalg.det", "special.expit", "fft.fft", "tensor",
                                  "Tensor.add", "Tensor.relu"])
def test_public_functions_pickle_by_name(path):
    """The argument guard's wrappers kept the wrapped function's module and name, under which
    pickle found the unwrapped one: PicklingError ("not the same object as
    flowgrad.ops.activation.relu", or a factory's `<locals>` name), where torch's pickle."""
    def lookup(root):
        for part in path.split("."):
            root = getattr(root, part)
        return root
    assert pickle.loads(pickle.dumps(lookup(torch))) is lookup(torch)
    assert pickle.loads(pickle.dumps(lookup(flow))) is lookup(flow)


def test_module_holding_a_function_pickles():
    """A TransformerEncoderLayer with activation=F.relu: pickle and deepcopy (both raised)
    give a layer of the same outputs, as torch's."""
    torch.manual_seed(0)
    t_layer = torch.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0,
                                               activation=torch.nn.functional.relu).double()
    layer = flow.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0,
                                            activation=flow.nn.functional.relu).double()
    layer.load_state_dict({k: flow.tensor(v.numpy()) for k, v in t_layer.state_dict().items()})
    x = torch.randn(3, 5, 4, dtype=torch.float64)
    expected = pickle.loads(pickle.dumps(t_layer))(x).detach().numpy()
    for made in (pickle.loads(pickle.dumps(layer)), copy.deepcopy(layer)):
        assert made.activation is flow.nn.functional.relu
        np.testing.assert_allclose(made(flow.tensor(x.numpy())).detach().numpy(), expected,
                                   rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("eps", [-1.0, -1e-9, 0.0, 1e-5])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("stats", [True, False])
def test_batch_norm_eps_checked_as_torch(eps, training, stats):
    """F.batch_norm refuses eps <= 0 in training and eps < 0 in eval (ValueError); flowgrad
    computed nan (eps=-1: the variance plus eps under a square root) or, in eval, inf."""
    x = (torch.arange(60, dtype=torch.float64).reshape(4, 3, 5) * 0.37) % 1.3 - 0.6

    def call(lib):
        stat = (lib.zeros(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64)) if stats \
            else (None, None)
        return lambda: lib.nn.functional.batch_norm(lib.tensor(x.numpy()), *stat,
                                                    training=training, eps=eps)
    expected = _raises(call(torch))
    assert _raises(call(flow)) is expected
    if expected is None:
        np.testing.assert_allclose(call(flow)().numpy(), call(torch)().numpy(), rtol=1e-10,
                                   atol=1e-12)
    # torch.batch_norm, the functional's kernel, checks nothing: both compute
    kernel = [lib.batch_norm(lib.tensor(x.numpy()), None, None, None, None, True, 0.1, 0.0,
                             False).numpy() for lib in (torch, flow)]
    np.testing.assert_allclose(kernel[1], kernel[0], rtol=1e-10, atol=1e-12)
    module = [_raises(lambda lib=lib: lib.nn.BatchNorm1d(3, eps=eps).double().train(training)(
        lib.tensor(x.numpy()))) for lib in (torch, flow)]
    assert module[1] is module[0]


@pytest.mark.parametrize("cls", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("kwargs", [dict(bias=1), dict(bias="yes"), dict(batch_first=0),
                                    dict(input_size=2.0), dict(input_size=0),
                                    dict(hidden_size=3.0), dict(hidden_size=0), {}])
def test_rnn_constructor_checks_as_torch(cls, kwargs):
    """torch refuses a non-bool bias/batch_first and a non-int input_size/hidden_size
    (TypeError), input_size 0 (ValueError); flowgrad built them (or raised ValueError)."""
    args = dict(input_size=2, hidden_size=3, **{k: v for k, v in kwargs.items()
                                                if k not in ("input_size", "hidden_size")})
    args.update({k: v for k, v in kwargs.items() if k in ("input_size", "hidden_size")})
    assert _raises(lambda: getattr(flow.nn, cls)(**args)) is \
        _raises(lambda: getattr(torch.nn, cls)(**args))


def test_huber_loss_delta_type_checked():
    """torch's HuberLoss refuses a complex delta at construction (TypeError)."""
    for delta in (1j, "1", 2, 0.5):
        assert _raises(lambda d=delta: flow.nn.HuberLoss(delta=d)) is \
            _raises(lambda d=delta: torch.nn.HuberLoss(delta=d))


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.multi_margin_loss(lib.ones(5, 10), lib.zeros(3).long()),
    lambda lib: lib.nn.functional.multi_margin_loss(lib.ones(5, 10), lib.zeros(5, 2).long()),
    lambda lib: lib.nn.functional.cross_entropy(lib.ones(4, 2), lib.ones(5, 2) / 2),
    lambda lib: lib.nn.functional.cross_entropy(lib.ones(4, 2, 3), lib.ones(3, 2, 3) / 2),
    lambda lib: lib.nn.functional.cross_entropy(lib.ones(4, 2), lib.tensor(0.5)),
    lambda lib: lib.nn.functional.cross_entropy(lib.ones(4, 2, 3), lib.ones(4, 2, 2) / 2),
    lambda lib: lib.nn.functional.linear_cross_entropy(lib.ones(4, 3), lib.ones(2, 3),
                                                       lib.ones(5, 2) / 2),
], ids=["mm_batch", "mm_2d_target", "ce_probs_batch", "ce_probs_batch_3d", "ce_0d_target",
        "ce_probs_shape", "lce_probs_batch"])
def test_loss_target_shape_error_types(call):
    """The exception type as torch's: multi_margin_loss's target size is a RuntimeError
    (flowgrad: ValueError); a probability target of another batch size a ValueError (torch
    checks the batch size first; flowgrad: RuntimeError)."""
    expected = _raises(lambda: call(torch))
    assert expected is not None and _raises(lambda: call(flow)) is expected


@pytest.mark.parametrize("make", [
    lambda lib: lib.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0),
    lambda lib: lib.nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0, activation="gelu"),
    lambda lib: lib.nn.LinearCrossEntropyLoss(
        4, 3, options=lib.nn.LinearCrossEntropyOptions(batch_chunk_size=2))],
    ids=["encoder_layer", "decoder_layer_gelu", "linear_cross_entropy_options"])
def test_whole_module_save_load(make):
    """flow.save of a whole module and flow.load(weights_only=False), as torch's: a transformer
    layer holds F.relu (its default activation; pickling it raised, then loading refused the
    function), a LinearCrossEntropyLoss its options (refused as a library class)."""
    torch.manual_seed(0)
    t_mod = make(torch).double().eval()
    mod = make(flow).double().eval()
    mod.load_state_dict({k: flow.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})
    buf = io.BytesIO()
    flow.save(mod, buf)
    buf.seek(0)
    loaded = flow.load(buf, weights_only=False)
    inputs = [torch.randn(2, 3, 4, dtype=torch.float64)]
    inputs += [inputs[0].clone()] if "Decoder" in type(t_mod).__name__ else \
        [torch.tensor([0, 2, 1], dtype=torch.long)] if "Loss" in type(t_mod).__name__ else []
    if "Loss" in type(t_mod).__name__:
        inputs[0] = inputs[0][0]
    expected = t_mod(*inputs).detach().numpy()
    actual = loaded(*[flow.tensor(x.numpy()) for x in inputs]).detach().numpy()
    np.testing.assert_allclose(actual, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda lib: lib.device("cpu"), lambda lib: lib.device("cpu", 0),
    lambda lib: {"device": lib.device("cpu")}], ids=["device", "device_index", "in_a_dict"])
def test_device_pickles_and_deepcopies(make):
    """A device held the array module (NumPy) in a slot: pickle.dumps and copy.deepcopy raised
    TypeError ("cannot pickle 'module' object"), so did deepcopy of a module storing its device
    (an EMA copy); torch's pickle and deepcopy."""
    for lib in (torch, flow):
        value = make(lib)
        assert pickle.loads(pickle.dumps(value)) == value
        assert copy.deepcopy(value) == value
    for lib in (torch, flow):
        module = lib.nn.Linear(2, 2)
        module.device = lib.device("cpu")  # (a plain attribute, as user modules keep one)
        assert copy.deepcopy(module).device == lib.device("cpu")


@pytest.mark.parametrize("how", ["weight_norm", "spectral_norm", "orthogonal"])
def test_parametrized_module_pickle_refused_deepcopy_works(how):
    """torch refuses to pickle a parametrized module (RuntimeError pointing at state_dict) and
    deepcopies it; flowgrad's pickle raised PicklingError (its made class has no importable
    name)."""
    outs = []
    for lib in (torch, flow):
        lib.manual_seed(0)
        module = getattr(lib.nn.utils.parametrizations, how)(lib.nn.Linear(3, 3).double())
        assert _raises(lambda m=module: pickle.dumps(m)) is RuntimeError
        assert _raises(lambda m=module, b=io.BytesIO(): lib.save(m, b)) is RuntimeError
        replica = copy.deepcopy(module.eval())
        assert type(replica).__name__ == "ParametrizedLinear"
        x = lib.ones(2, 3, dtype=lib.float64)
        outs.append((replica(x) - module(x)).abs().max().item())
    assert outs == [0.0, 0.0]


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.max(x, 0), lambda lib, x: lib.sort(x), lambda lib, x: lib.topk(x, 2),
    lambda lib, x: lib.cummin(x, 1), lambda lib, x: lib.aminmax(x),
    lambda lib, x: lib.frexp(x), lambda lib, x: lib.histogram(x.flatten(), 3),
    lambda lib, x: lib.histogramdd(x[:, :2], bins=[2, 2])],
    ids=["max", "sort", "topk", "cummin", "aminmax", "frexp", "histogram", "histogramdd"])
def test_named_results_pickle(call):
    """torch.return_types' results pickle (a worker process returning one); flowgrad's raised
    PicklingError: return_types held max/sort/... only in a dict, histogram/aminmax/frexp were
    named tuples of their ops' modules under a name the op function holds."""
    x = (torch.arange(12, dtype=torch.float64).reshape(4, 3) * 0.37) % 1.1
    name = type(call(torch, x)).__name__
    for lib in (torch, flow):
        result = call(lib, lib.tensor(x.numpy()))
        again = pickle.loads(pickle.dumps(result))
        assert type(again) is type(result) and type(result).__name__ == name
        for a, b in zip(again, result):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("make", [lambda lib: lib.cuda.amp.GradScaler(),
                                  lambda lib: lib.cpu.amp.GradScaler(init_scale=8.0),
                                  lambda lib: lib.amp.GradScaler("cpu", init_scale=4.0)],
                         ids=["cuda_amp", "cpu_amp", "amp"])
def test_grad_scalers_pickle(make):
    """torch.<device>.amp.GradScaler (deprecated spellings) pickles; flowgrad's classes were
    made in a function (`old_spellings.<locals>.GradScaler`: AttributeError in pickle)."""
    results = []
    for lib in (torch, flow):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the deprecated spellings warn)
            scaler = make(lib)
        again = pickle.loads(pickle.dumps(scaler))
        results.append((type(again).__name__, again.is_enabled(),
                        again.get_scale() if again.is_enabled() else None))
    assert results[0] == results[1]
