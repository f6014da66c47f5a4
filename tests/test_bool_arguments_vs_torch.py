"""Non-bool values for bool arguments (`keepdim`, `descending`, `upper`, ...), against torch.

torch's argument parser takes its `bool` arguments as bools only: `x.sum(0, keepdim=1)` raises
"sum(): argument 'keepdim' must be bool, not int", and so do 1.5, None, numpy.bool_(True) and
a tensor; its Python-level functions (F.relu's `inplace`, F.max_pool2d's `return_indices`)
test the value for truth and take anything. Every public function and Tensor method of
flowgrad with a bool-defaulted argument that torch's counterpart has too is called with each
value in both libraries: flowgrad must raise torch's TypeError where torch raises one and
return where torch returns (errors.py's `strict_bool_params`).
"""
import inspect
import types
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow

SPACES = {"": (torch, flow), "nn.functional.": (torch.nn.functional, flow.nn.functional),
          "linalg.": (torch.linalg, flow.linalg), "special.": (torch.special, flow.special),
          "fft.": (torch.fft, flow.fft), "Tensor.": (torch.Tensor, flow.Tensor)}

# process-wide switches and file writers, which a call with junk would change for later tests
SKIP = {"set_default_dtype", "use_deterministic_algorithms", "set_printoptions", "compile",
        "save", "load", "set_anomaly_enabled", "set_grad_enabled", "set_warn_always",
        "backward", "register_hook"}

VALUES = {"int 1": 1, "int 0": 0, "float": 1.5, "None": None, "numpy.bool_": np.bool_(True),
          "True": True}

# the rest of the functions that the generic calls below do not reach (a valid call needs
# inputs of their own: OWN_CALLS has some), with why; their bool arguments go through the
# same wrapper (errors.py's `guarded`) as the rest
NEEDS_OWN_INPUTS = {
    "factories (empty_strided, randint, sparse_*_tensor, ...)": "sizes, strides, indices",
    "ctc_loss, embedding_bag, index_reduce, put, segment_reduce": "index and length tensors",
    "ormqr, lu_solve, ldl_solve, linalg.solve_ex": "factorizations",
    "multi_head_attention_forward, scaled_dot_product_attention, instance_norm": "weights",
}

# where flowgrad and torch differ still, with why
KNOWN_DIFFERS = {
    "Tensor.dim_order-ambiguity_check": "torch takes a bool or a list of memory formats "
                                        "(a Python-level isinstance check, not the parser's)",
}

# the functions this test must reach (a change that broke their generic call would drop them)
MUST_COVER = {
    "sum", "mean", "prod", "amax", "amin", "max", "min", "median", "nanmedian", "mode",
    "var", "std", "var_mean", "std_mean", "logsumexp", "norm", "all", "any", "argmax",
    "argmin", "nansum", "nanmean", "sort", "argsort", "topk", "unique", "unique_consecutive",
    "searchsorted", "linalg.vector_norm", "linalg.matrix_norm", "linalg.norm", "linalg.svd",
    "Tensor.sum", "Tensor.max", "Tensor.sort", "Tensor.topk", "kthvalue", "aminmax",
    "isclose", "allclose", "cholesky", "linalg.cholesky", "nn.functional.relu",
    "nn.functional.dropout", "nn.functional.avg_pool1d"}


def _spd(lib, x):
    a = x[:3, :3]
    return (a @ a.T + 3 * lib.eye(3, dtype=x.dtype),)


# ways to call a function validly, tried in order with the argument set to True
PATTERNS = (
    lambda lib, x: (x,), lambda lib, x: (x, 0), lambda lib, x: (x, 1), lambda lib, x: (x, x),
    lambda lib, x: (x, 2), lambda lib, x: (x[0],), _spd,
    lambda lib, x: (x.reshape(1, 3, 4),), lambda lib, x: (x.reshape(1, 1, 3, 4),),
    lambda lib, x: (x.reshape(1, 1, 3, 4), 2),
    lambda lib, x: (x.sort(-1).values, x), lambda lib, x: (x[0].sort().values, x),
    lambda lib, x: (x.reshape(1, 3, 4), 2), lambda lib, x: (x, 0.5, 0.0),
    lambda lib, x: (x, x, x), lambda lib, x: (x.abs(), 2),
    lambda lib, x: (x, 0, lib.zeros(3, 4, dtype=lib.int64)),
    lambda lib, x: (x, lib.linalg.cholesky(_spd(lib, x)[0])),
    lambda lib, x: (3,), lambda lib, x: (3, 3),
)

DATA = np.random.default_rng(0).standard_normal((3, 4))


def _call(lib, fn, method, pattern, arg, value):
    x = lib.tensor(DATA.copy())
    args = pattern(lib, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method:
            return getattr(args[0], fn)(*args[1:], **{arg: value})  # (fn: the name)
        return fn(*args, **{arg: value})


def _outcome(lib, fn, method, pattern, arg, value):
    try:
        _call(lib, fn, method, pattern, arg, value)
    except Exception as error:  # noqa: BLE001 - what is compared is the error
        return error
    return None


def _raised(lib, call):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(lib, lib.tensor(DATA.copy()))
    except Exception as error:  # noqa: BLE001 - what is compared is the error
        return error
    return None


def _bool_params(fn):
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    # (keepdim=None where not given: max, prod, median, whose keepdim needs a dim)
    return [p.name for p in params if p.default.__class__ is bool or p.name == "unbiased"
            or p.name == "keepdim" and p.default is None]


def _torch_has(tfn, arg):
    try:
        params = inspect.signature(tfn).parameters
    except (TypeError, ValueError):  # a builtin: its call with True says
        return True
    return arg in params or "kwargs" in params  # (torch.unique's *args, **kwargs)


def _cases():
    covered, cases = set(), []
    for prefix, (tspace, fspace) in SPACES.items():
        names = vars(fspace) if prefix == "Tensor." else dir(fspace)
        for name in sorted(names):
            ffn = getattr(fspace, name, None)
            if name.startswith("_") or name in SKIP or not isinstance(ffn, types.FunctionType):
                continue
            tfn = getattr(tspace, name, None)
            if tfn is None or not callable(tfn):
                continue
            method = prefix == "Tensor."
            tcall, fcall = (name, name) if method else (tfn, ffn)
            for arg in _bool_params(ffn):
                if not _torch_has(tfn, arg):
                    continue
                pattern = next((p for p in PATTERNS
                                if _outcome(torch, tcall, method, p, arg, True) is None), None)
                label = f"{prefix}{name}-{arg}"
                if pattern is None:
                    cases.append(pytest.param(None, None, None, None, None, id=label, marks=(
                        pytest.mark.skip(reason="no generic valid call; see NEEDS_OWN_INPUTS")
                    )))
                    continue
                covered.add(prefix + name)
                marks = [pytest.mark.xfail(reason=KNOWN_DIFFERS[label], strict=True)] \
                    if label in KNOWN_DIFFERS else []
                cases.append(pytest.param(prefix + name, tcall, fcall, pattern, arg, id=label,
                                          marks=marks))
    return covered, cases


COVERED, CASES = _cases()


def test_the_table_reaches_the_reductions_sorts_and_decompositions():
    assert MUST_COVER <= COVERED, sorted(MUST_COVER - COVERED)


@pytest.mark.parametrize("label,tfn,ffn,pattern,arg", CASES)
def test_bool_argument_matches_torch(label, tfn, ffn, pattern, arg):
    method = label.startswith("Tensor.")
    name = label.rsplit(".", 1)[-1]
    ours = _outcome(flow, ffn, method, pattern, arg, True)
    if ours is not None:
        pytest.skip(f"flowgrad's generic call fails with {arg}=True: {ours!r}")
    for what, value in VALUES.items():
        theirs = _outcome(torch, tfn, method, pattern, arg, value)
        ours = _outcome(flow, ffn, method, pattern, arg, value)
        torch_refuses = isinstance(theirs, TypeError)
        assert isinstance(ours, TypeError) == torch_refuses, (
            f"{label}({arg}={what}): torch {theirs!r}, flowgrad {ours!r}")
        if torch_refuses:
            message = str(ours)
            assert f"{name}()" in message and f"'{arg}'" in message, message


def _signal(lib):
    return lib.tensor(np.random.default_rng(1).standard_normal(64))


def _spectrum(lib):
    window = lib.hann_window(16, dtype=lib.float64)
    return lib.stft(_signal(lib), 16, window=window, return_complex=True), window


# calls for functions the generic ones above do not reach: (lib, x, value of the argument)
OWN_CALLS = {
    "stft-center": lambda lib, x, v: lib.stft(_signal(lib), 16, return_complex=True, center=v),
    "stft-normalized": lambda lib, x, v: lib.stft(_signal(lib), 16, return_complex=True,
                                                  normalized=v),
    "stft-onesided": lambda lib, x, v: lib.stft(_signal(lib), 16, return_complex=True,
                                                onesided=v),
    "stft-return_complex": lambda lib, x, v: lib.stft(_signal(lib), 16, return_complex=v),
    "istft-center": lambda lib, x, v: lib.istft(_spectrum(lib)[0], 16,
                                                window=_spectrum(lib)[1], center=v),
    "interpolate-antialias": lambda lib, x, v: lib.nn.functional.interpolate(
        x.reshape(1, 1, 3, 4), scale_factor=2.0, mode="bilinear", antialias=v),
    "interpolate-align_corners": lambda lib, x, v: lib.nn.functional.interpolate(
        x.reshape(1, 1, 3, 4), scale_factor=2.0, mode="bilinear", align_corners=v),
    "avg_pool3d-ceil_mode": lambda lib, x, v: lib.nn.functional.avg_pool3d(
        x.reshape(1, 1, 1, 3, 4), 1, ceil_mode=v),
    "lp_pool1d-ceil_mode": lambda lib, x, v: lib.nn.functional.lp_pool1d(
        x.reshape(1, 3, 4).abs(), 2, 2, ceil_mode=v),
    "max_pool2d-ceil_mode": lambda lib, x, v: lib.nn.functional.max_pool2d(
        x.reshape(1, 1, 3, 4), 2, ceil_mode=v),
    "max_pool2d-return_indices": lambda lib, x, v: lib.nn.functional.max_pool2d(
        x.reshape(1, 1, 3, 4), 2, return_indices=v),
    "batch_norm-training": lambda lib, x, v: lib.nn.functional.batch_norm(
        x, lib.zeros(4, dtype=x.dtype), lib.ones(4, dtype=x.dtype), training=v),
    "embedding-sparse": lambda lib, x, v: lib.nn.functional.embedding(
        lib.tensor([[0, 1], [2, 0]]), x, sparse=v),
    "embedding-scale_grad_by_freq": lambda lib, x, v: lib.nn.functional.embedding(
        lib.tensor([[0, 1], [2, 0]]), x, scale_grad_by_freq=v),
    "threshold-inplace": lambda lib, x, v: lib.nn.functional.threshold(x, 0.5, 0.0, inplace=v),
    "hann_window-periodic": lambda lib, x, v: lib.hann_window(4, periodic=v),
    "zeros-requires_grad": lambda lib, x, v: lib.zeros(3, requires_grad=v),
    "full-requires_grad": lambda lib, x, v: lib.full((3,), 1.0, requires_grad=v),
    "arange-requires_grad": lambda lib, x, v: lib.arange(3.0, requires_grad=v),
    "linspace-requires_grad": lambda lib, x, v: lib.linspace(0, 1, 3, requires_grad=v),
    "Tensor.new_full-requires_grad": lambda lib, x, v: x.new_full((2,), 1.0, requires_grad=v),
    "linalg.solve-left": lambda lib, x, v: lib.linalg.solve(_spd(lib, x)[0], x[:, :3], left=v),
    "linalg.solve_triangular-upper": lambda lib, x, v: lib.linalg.solve_triangular(
        _spd(lib, x)[0], x, upper=v),
    "linalg.solve_triangular-unitriangular": lambda lib, x, v: lib.linalg.solve_triangular(
        _spd(lib, x)[0], x, upper=True, unitriangular=v),
    "cholesky_solve-upper": lambda lib, x, v: lib.cholesky_solve(
        x, lib.linalg.cholesky(_spd(lib, x)[0]), upper=v),
    "bucketize-right": lambda lib, x, v: lib.bucketize(x, lib.tensor([0.0, 1.0]), right=v),
    "bucketize-out_int32": lambda lib, x, v: lib.bucketize(x, lib.tensor([0.0, 1.0]),
                                                          out_int32=v),
    "Tensor.scatter_reduce-include_self": lambda lib, x, v: x.scatter_reduce(
        0, lib.tensor([[0, 1], [2, 0]]), x[:2, :2], "sum", include_self=v),
    "Tensor.index_put-accumulate": lambda lib, x, v: x.index_put(
        (lib.tensor([0, 1]),), x[:2], accumulate=v),
    "gather-sparse_grad": lambda lib, x, v: lib.gather(x, 0, lib.tensor([[0, 1], [2, 0]]),
                                                       sparse_grad=v),
    "multinomial-replacement": lambda lib, x, v: lib.multinomial(x.abs(), 2, replacement=v),
    "lu_unpack-unpack_data": lambda lib, x, v: lib.lu_unpack(
        *lib.linalg.lu_factor(_spd(lib, x)[0]), unpack_data=v),
}


@pytest.mark.parametrize("key", sorted(OWN_CALLS))
def test_bool_argument_of_own_call_matches_torch(key):
    call, arg = OWN_CALLS[key], key.rsplit("-", 1)[1]
    assert _raised(torch, lambda lib, x: call(lib, x, True)) is None
    assert _raised(flow, lambda lib, x: call(lib, x, True)) is None
    for what, value in VALUES.items():
        theirs = _raised(torch, lambda lib, x: call(lib, x, value))
        ours = _raised(flow, lambda lib, x: call(lib, x, value))
        assert isinstance(ours, TypeError) == isinstance(theirs, TypeError), (
            f"{key}={what}: torch {theirs!r}, flowgrad {ours!r}")
        if isinstance(theirs, TypeError):
            assert f"'{arg}'" in str(ours), str(ours)


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.sum(x, 0, 1), lambda lib, x: x.sum(0, 1),
    lambda lib, x: lib.amax(x, 0, 1.5), lambda lib, x: x.amax(0, None),
    lambda lib, x: lib.topk(x, 2, 0, 1), lambda lib, x: x.topk(2, 0, True, 0),
    lambda lib, x: lib.sort(x, 0, 1), lambda lib, x: lib.logsumexp(x, 0, np.bool_(True)),
    lambda lib, x: lib.sum(x, 0, keepdims=1), lambda lib, x: x.sum(0, keepdim=lib.tensor(True)),
])
def test_positional_and_spelled_bool_arguments_match_torch(call):
    theirs, ours = _raised(torch, call), _raised(flow, call)
    assert isinstance(theirs, TypeError)
    assert isinstance(ours, TypeError), repr(ours)
    if "must be bool" in str(theirs):  # (an overloaded function says "invalid combination")
        assert str(ours) == str(theirs)


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.nn.functional.relu(x, inplace=1),
    lambda lib, x: lib.nn.functional.dropout(x, 0.5, False, 1.5),
    lambda lib, x: lib.nn.functional.max_pool1d(x.reshape(1, 3, 4), 2, return_indices=1),
    lambda lib, x: lib.sort(x, stable=None),
    lambda lib, x: lib.zeros_like(x, requires_grad=None),
    lambda lib, x: x.sum(0, keepdim=False), lambda lib, x: lib.var(x, 0, True, True),
])
def test_where_torch_is_lenient_flowgrad_is_too(call):
    assert _raised(torch, call) is None
    assert _raised(flow, call) is None
