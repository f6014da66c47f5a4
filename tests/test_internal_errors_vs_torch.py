"""No exception from inside NumPy or Python's machinery where torch raises its own: every public
function of torch, torch.nn.functional and torch.Tensor that flowgrad has, called with simple
bad arguments (0-d, empty, integer and bool tensors; 0, -5, 5, 2.5, None or a tensor where a
number or a dim belongs). Where torch raises one class and flowgrad raises an AttributeError,
KeyError, ZeroDivisionError, NameError, UnboundLocalError, or anything whose innermost frame is
NumPy's (its AxisError, LinAlgError, broadcast ValueError...), flowgrad missed a check: the
user sees NumPy's words instead of the op, the shapes and the remedy. (Found: roll of a 0-d
tensor, h/v/dsplit into 0 sections, promote_types of a tensor, searchsorted of None, complex
and cosine_similarity of unbroadcastable shapes, cholesky_inverse of a vector, hardtanh_ of a
tensor limit.) A sample of the names runs in the default tier, all of them with -m slow."""
from __future__ import annotations

import inspect
import traceback
import warnings

import pytest
import torch

import flowgrad as flow

INTERNAL = ("AttributeError", "KeyError", "ZeroDivisionError", "NameError", "UnboundLocalError",
            "AxisError", "LinAlgError")

# methods whose calls here would block, draw, write files or leave global state changed
SKIP = frozenset((
    "manual_seed", "seed", "set_default_dtype", "set_default_device", "set_printoptions",
    "use_deterministic_algorithms", "set_num_threads", "set_num_interop_threads", "load", "save",
    "compile", "set_grad_enabled", "set_default_tensor_type", "set_rng_state",
    "set_anomaly_enabled", "set_flush_denormal", "set_warn_always", "from_file",
    "set_float32_matmul_precision", "set_deterministic_debug_mode", "cond", "while_loop", "vmap",
    "export", "backward", "register_hook", "register_post_accumulate_grad_hook", "share_memory_",
    "apply_", "map_", "map2_", "requires_grad_", "retain_grad", "detach_", "set_", "resize_",
    "resize_as_", "module_load", "as_subclass", "uniform_", "normal_", "random_", "exponential_",
    "geometric_", "cauchy_", "log_normal_", "bernoulli_", "set_autocast_enabled",
    "set_autocast_cpu_enabled", "set_autocast_dtype", "set_autocast_cpu_dtype",
    "set_autocast_gpu_dtype", "set_autocast_cache_enabled", "set_default_generator",
))


def _value(m, kind):
    if not isinstance(kind, str):
        return kind
    return {"0d": lambda: m.tensor(1.5, dtype=m.float64),
            "empty": lambda: m.zeros(0, 3, dtype=m.float64),
            "vec": lambda: m.tensor([1.0, -2.0, 3.0], dtype=m.float64),
            "mat": lambda: m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64),
            "int": lambda: m.tensor([1, 2, 3]), "bool": lambda: m.tensor([True, False])}[kind]()


PATTERNS = [(k,) for k in ("0d", "empty", "vec", "mat", "int", "bool")] + [
    (k, a) for k in ("0d", "vec", "mat", "empty") for a in (0, -5, 5, 2.5, None, "vec")]


def _outcome(call):
    """The class name of what `call` raised ('ran' if nothing) and whether it came from
    inside NumPy or another package than flowgrad."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
        return "ran", False
    except Exception as error:  # noqa: BLE001 - the class is the result
        frames = traceback.extract_tb(error.__traceback__)
        where = frames[-1].filename if frames else ""
        outside = "/numpy/" in where or ("site-packages" in where and "flowgrad" not in where)
        if type(error) is flow.linalg.LinAlgError:  # torch.linalg.LinAlgError's counterpart
            return "_LinAlgError", outside  # (torch's class is torch._C._LinAlgError)
        return type(error).__name__, outside


def _callables(namespace, flow_namespace):
    return sorted(n for n in dir(namespace) if not n.startswith("_") and n not in SKIP and
                  hasattr(flow_namespace, n) and callable(getattr(namespace, n)) and
                  not inspect.isclass(getattr(namespace, n)))


NAMES = ([("torch", n) for n in _callables(torch, flow)] +
         [("F", n) for n in _callables(torch.nn.functional, flow.nn.functional)] +
         [("Tensor", n) for n in _callables(torch.Tensor, flow.Tensor)])


def _call(m, where, name, args):
    if where == "Tensor":
        return lambda: getattr(args[0], name)(*args[1:])
    space = m if where == "torch" else m.nn.functional
    return lambda: getattr(space, name)(*args)


def leaks(where, name):
    """The patterns where flowgrad raised an internal error and torch did something else."""
    found = []
    for pattern in PATTERNS:
        theirs, _ = _outcome(_call(torch, where, name, [_value(torch, p) for p in pattern]))
        ours, outside = _outcome(_call(flow, where, name, [_value(flow, p) for p in pattern]))
        if ours != theirs and (outside or ours in INTERNAL):
            found.append(f"{where}.{name}{pattern}: torch {theirs}, flowgrad {ours}")
    return found


@pytest.mark.parametrize("where,name", NAMES[::10], ids=[f"{w}.{n}" for w, n in NAMES[::10]])
def test_no_internal_error_leaks(where, name):
    assert leaks(where, name) == []


@pytest.mark.slow
def test_no_internal_error_leaks_anywhere():
    found = [f for where, name in NAMES for f in leaks(where, name)]
    assert found == []
