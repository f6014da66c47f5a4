"""torch's own op database (OpInfo) run through flowgrad: the same sample inputs, the same
values, gradients and raise/no-raise.

`torch.testing._internal.common_methods_invocations.op_db` lists ~700 ops with the sample
inputs torch tests each one on (broadcasting, scalars, keyword options, empty and
non-contiguous tensors) and the bad inputs each must refuse (`error_inputs`). Each sample is
copied into flowgrad tensors (same numbers, same requires_grad), the op is called by the same
name in flowgrad, and the outcome is compared: raise/no-raise, output structure, shape, dtype
and values, then the gradients of a fixed cotangent.

Run as a script for a report: .venv/bin/python tests/opinfo_vs_torch.py [name ...]
(`--reference`: torch's reference inputs; `--dtype=bfloat16`: one dtype's samples; `--shard=i/n`)
"""
from __future__ import annotations

import contextlib
import itertools
import math
import re
import sys
import types
import warnings

import numpy as np
import pytest
import torch
from vs_torch import ERRORS, magnitude

import flowgrad as flow

# ops whose outputs are random draws: only the structure (shape, dtype) can be compared
RANDOM = frozenset((
    "bernoulli", "multinomial", "normal", "rand_like", "randn_like", "randint_like",
    "randint", "randn", "rand", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu", "uniform", "cauchy", "exponential", "geometric", "log_normal",
    "nn.functional.gumbel_softmax", "randperm", "empty", "empty_like", "new_empty",
    "empty_strided", "new_empty_strided", "empty_permuted", "normal.number_mean",
    "normal.in_place", "bernoulli.p", "torch._C._nn.fractional_max_pool2d",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
))
# ops whose outputs are unique only up to a sign or phase (singular and eigen vectors):
# their raw outputs are compared by shape and dtype, their values through the sample's
# `output_process_fn_grad` (which torch writes to be invariant to that choice)
# ops that pick among equal values (sort, topk, mode...): torch's index among ties is its
# kernel's choice, so with repeated input values only the values are compared
TIES = frozenset(("sort", "argsort", "topk", "kthvalue", "mode", "median", "nanmedian",
                  "msort", "max.reduction_with_dim", "min.reduction_with_dim", "argmax",
                  "argmin", "unique", "unique_consecutive"))
GAUGE = frozenset(("linalg.svd", "svd", "linalg.eig", "linalg.eigh", "linalg.eigvals",
                   "linalg.svdvals", "svd_lowrank", "pca_lowrank", "linalg.eigvalsh",
                   "symeig", "lobpcg"))


@contextlib.contextmanager
def torch_test_internals():
    """Import torch's test internals inside: that import loads a hypothesis profile of its own
    (10 examples a test) and freezes torch.backends' flags; both are put back after, for the
    tests that run later in the same process."""
    try:
        import hypothesis
        profile = hypothesis.settings.get_current_profile_name()
    except ImportError:
        hypothesis = profile = None
    backends = torch.backends.flags_frozen.__globals__  # (torch.backends' own namespace)
    unfrozen = not torch.backends.flags_frozen()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    if hypothesis is not None:
        hypothesis.settings.load_profile(profile)
    backends["__allow_nonbracketed_mutation_flag"] = unfrozen
    # torch's sample iterators look for their unittest caller with inspect.stack(), which
    # reads the source of every frame (most of a sweep's CPU time under pytest's deep stack);
    # no unittest.TestCase runs here, so the lookup's answer is always None
    for name in ("torch.testing._internal.common_utils", "torch.testing._internal.opinfo.core"):
        if hasattr(sys.modules.get(name), "extract_test_fn"):
            sys.modules[name].extract_test_fn = _no_test_fn


def _no_test_fn():
    return None


@contextlib.contextmanager
def one_thread():
    """One thread for torch and for the BLAS pools inside (small tensors: with a pool per
    library in each of two xdist workers on two cores, a probe spent 3x its CPU spinning)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        limits = contextlib.nullcontext()
    else:
        limits = threadpool_limits(1)
    with limits:
        yield
    torch.set_num_threads(threads)


def op_db():
    """torch's OpInfo list (imports torch's test internals once)."""
    with torch_test_internals():
        from torch.testing._internal.common_methods_invocations import op_db as db
    return db


def resolve(info):
    """The flowgrad callable for an OpInfo: torch's own wrapper function (a lambda that
    reorders arguments) with `torch` bound to flowgrad; else by its dotted name in flowgrad's
    namespaces, else the Tensor method of that name; None when flowgrad has neither."""
    op = info.op
    if isinstance(op, types.FunctionType) and op.__module__.startswith("torch.testing"):
        scope = dict(op.__globals__, torch=flow)
        return types.FunctionType(op.__code__, scope, op.__name__, op.__defaults__,
                                  op.__closure__)
    name = info.name
    target = flow
    for part in name.split("."):
        target = getattr(target, part, None)
        if target is None:
            break
    if target is not None and callable(target) and not isinstance(target, type):
        return target
    method = getattr(flow.Tensor, name, None) if "." not in name else None
    if method is not None and callable(method):
        return lambda x, *args, **kwargs: getattr(x, name)(*args, **kwargs)
    return None


class Converter:
    """torch values -> flowgrad values, keeping each tensor pair for the gradient step."""

    def __init__(self):
        self.pairs = []  # (torch leaf, flowgrad leaf) that require grad
        self.made = {}  # id(torch tensor) -> (it, its flowgrad tensor): an argument given
        #                 twice (an `out` that is the input) is one flowgrad tensor too

    def __call__(self, value):
        if isinstance(value, torch.Tensor):
            made = self.made.get(id(value))
            if made is not None:
                return made[1]
            if value._base is not None and not value.requires_grad and \
                    not value._base.requires_grad and not value.is_conj() and \
                    not value.is_neg() and value._base.is_contiguous() and \
                    value._base.storage_offset() == 0:  # a view (an expand, a slice): of its
                #                                          base (laid out as its storage)
                out = self(value._base).as_strided(tuple(value.shape), value.stride(),
                                                   value.storage_offset())
            else:
                out = self.tensor(value)
            self.made[id(value)] = (value, out)
            return out
        if isinstance(value, torch.dtype):
            return getattr(flow, str(value).split(".")[1])
        if isinstance(value, torch.Size):
            return tuple(value)
        if isinstance(value, torch.device):
            return flow.device(str(value))
        if isinstance(value, torch.memory_format):
            return getattr(flow, str(value).split(".")[1])
        if isinstance(value, torch.layout):
            return getattr(flow, str(value).split(".")[1])
        if isinstance(value, (list, tuple)):
            items = [self(v) for v in value]
            return type(value)(items) if type(value) in (list, tuple) else items
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, torch.Generator):
            raise Unsupported("a torch.Generator argument")
        if callable(value) and not isinstance(value, (int, float, complex, str, bool)):
            raise Unsupported(f"a callable argument {value!r}")
        return value

    def tensor(self, t):
        if t.layout != torch.strided or t.device.type != "cpu" or t.ndim > 64 or (
                t._is_zerotensor()):
            raise Unsupported(f"layout {t.layout}, device {t.device}, {t.ndim} dims "
                              f"(NumPy: at most 64), or a ZeroTensor")
        if t.requires_grad and t.is_leaf and t._base is not None:
            # (torch's reference inputs: a view made without grad, then requires_grad_(): torch
            # records no edge to it, the gradient is None; a copy here could not show that)
            raise Unsupported("a leaf view that requires grad")
        data = t.detach().resolve_conj().resolve_neg()
        if data.dtype == torch.bfloat16:
            out = flow.tensor(data.float().numpy(), dtype=flow.bfloat16)
        else:
            out = flow.tensor(data.numpy().copy())
        if t.requires_grad:
            out.requires_grad_(True)
            self.pairs.append((t, out))
        return out


class Unsupported(Exception):
    """A sample flowgrad's copy of it cannot express (a sparse layout, a generator)."""


def to_numpy(value):
    """A flowgrad or torch output as nested Python/NumPy values for comparison."""
    if isinstance(value, torch.Tensor):
        v = value.detach().resolve_conj().resolve_neg()
        if v.layout != torch.strided:
            v = v.to_dense()
        if v._is_zerotensor():
            v = torch.zeros(v.shape, dtype=v.dtype)
        if v.dtype == torch.bfloat16:
            return ("tensor", "bfloat16", v.float().numpy())
        return ("tensor", str(v.dtype).split(".")[1], v.numpy())
    if isinstance(value, flow.Tensor):
        v = value.detach()
        dtype = str(v.dtype).split(".")[1]
        if dtype == "bfloat16":
            return ("tensor", dtype, v.float().numpy())
        return ("tensor", dtype, v.numpy())
    if isinstance(value, (list, tuple)):
        return tuple(to_numpy(v) for v in value)
    if hasattr(value, "to_dense"):  # flowgrad's sparse tensors
        return to_numpy(value.to_dense())
    if isinstance(value, (torch.dtype, flow.dtype)):
        return ("dtype", str(value).split(".")[1])
    if isinstance(value, (torch.layout, type(flow.strided))):
        return ("layout", str(value).split(".")[1])
    if isinstance(value, torch.Size):
        return tuple(value)
    return value


def flowgrad_wrapper(wrap):
    """torch's gradcheck wrappers of the masked ops (masked.amax...) call torch.masked._output_mask
    and torch.where on the op's inputs: for flowgrad's call, the same code with `torch` bound to
    flowgrad (flowgrad.masked has _output_mask and _input_mask); any other wrapper as it is."""
    if isinstance(wrap, types.FunctionType) and wrap.__name__.startswith(
            "gradcheck_wrapper_masked"):
        return types.FunctionType(wrap.__code__, dict(wrap.__globals__, torch=flow),
                                  wrap.__name__, wrap.__defaults__, wrap.__closure__)
    return wrap


def tolerance(dtype):
    return {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2), "float32": (1e-4, 1e-5),
            "complex64": (1e-4, 1e-5)}.get(dtype, (1e-7, 1e-9))


def compare(expected, actual, where="output", values=True):
    """A difference between torch's `expected` and flowgrad's `actual` (to_numpy forms) as a
    message, or None."""
    if isinstance(expected, tuple) and expected and expected[0] == "tensor":
        if not (isinstance(actual, tuple) and actual and actual[0] == "tensor"):
            return f"{where}: torch gives a tensor, flowgrad {type(actual).__name__} {actual!r}"
        _, dtype, e = expected
        _, adtype, a = actual
        if dtype != adtype:
            return f"{where}: dtype torch {dtype}, flowgrad {adtype}"
        if e.shape != a.shape:
            return f"{where}: shape torch {e.shape}, flowgrad {a.shape}"
        if not values:
            return None
        rtol, atol = tolerance(dtype)
        if e.dtype.kind in "fc":
            ok = np.isclose(a, e, rtol=rtol, atol=atol * magnitude(e), equal_nan=True)
        else:
            ok = a == e
        if not np.all(ok):
            bad = np.argwhere(~np.asarray(ok))
            i = tuple(bad[0]) if bad.size else ()
            return (f"{where}: values differ at {len(bad)} of {e.size} positions, e.g. {i}: "
                    f"torch {e[i] if e.ndim else e}, flowgrad {a[i] if a.ndim else a}")
        return None
    if isinstance(expected, tuple):
        if not isinstance(actual, tuple) or len(actual) != len(expected):
            return f"{where}: torch gives {len(expected)} items, flowgrad {actual!r:.80}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            message = compare(e, a, f"{where}[{i}]", values)
            if message:
                return message
        return None
    if isinstance(expected, float) and isinstance(actual, (float, int)):
        if math.isclose(expected, actual, rel_tol=1e-6, abs_tol=1e-9) or (
                math.isnan(expected) and math.isnan(actual)):
            return None
    if expected != actual and not (isinstance(actual, tuple) and len(actual) == 3
                                   and actual[0] == "tensor" and actual[2].ndim == 0
                                   and actual[2] == expected):
        return f"{where}: torch {expected!r:.80}, flowgrad {actual!r:.80}"
    return None


def _has_ties(t):
    if not isinstance(t, torch.Tensor) or t.numel() < 2:
        return False
    return torch.unique(t.detach()).numel() < t.numel()


def _differentiable(out, module):
    leaves = out if isinstance(out, (list, tuple)) else (out,)
    flat = []
    for leaf in leaves:
        if isinstance(leaf, (list, tuple)):
            flat.extend(_differentiable(leaf, module))
        elif isinstance(leaf, module.Tensor) and leaf.requires_grad:
            flat.append(leaf)
    return flat


def run_sample(info, fn, sample, check_grad=True, values=True):
    """Compare one sample; return None (same) or a message."""
    convert = Converter()
    try:
        f_input, f_args, f_kwargs = convert_sample(sample, convert)
    except Unsupported as reason:
        return "skip: " + str(reason)
    # torch's gradcheck wrapper keeps inputs in the op's domain (the triangle a triangular
    # solve reads, a Hermitian matrix): both sides are called through it
    wrap = info.gradcheck_wrapper
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = wrap(info.op, sample.input, *sample.args, **sample.kwargs)
            t_error = None
        except ERRORS as error:
            expected, t_error = None, error
        try:
            actual = flowgrad_wrapper(wrap)(fn, f_input, *f_args, **f_kwargs)
            f_error = None
        except ERRORS as error:
            actual, f_error = None, error
        except Exception as error:  # noqa: BLE001 - any other raise is a finding too
            actual, f_error = None, error
    if f_error is not None and ("Tensor, not Tensor" in str(f_error) or (
            "for 'torch." in str(f_error) and "__torch_function__" in str(f_error))):
        # (a torch function given a flowgrad tensor: its __torch_function__ refuses it)
        return "skip: torch's gradcheck wrapper calls torch functions"
    if t_error is not None or f_error is not None:
        if (t_error is None) != (f_error is None):
            return f"raise: torch {t_error!r:.200}, flowgrad {f_error!r:.300}"
        return None
    gauge = info.name in GAUGE
    if sample.kwargs.get("dropout_p", 0) or sample.kwargs.get("p", 0) and "dropout" in info.name:
        values = False  # random draws
    expected_np, actual_np = to_numpy(expected), to_numpy(actual)
    if info.name in TIES and not sample.kwargs.get("stable") and _has_ties(sample.input):
        if isinstance(expected_np, tuple) and expected_np and expected_np[0] != "tensor":
            expected_np, actual_np = expected_np[:1], actual_np[:1]  # (values, indices)
        else:
            values = False  # an index tensor alone: structure only
    message = compare(expected_np, actual_np, values=values and not gauge)
    process_t = sample.output_process_fn_grad
    if gauge and not message and values:
        try:
            message = compare(to_numpy(process_t(expected)), to_numpy(process_t(actual)),
                              "processed output")
        except Exception as error:  # noqa: BLE001 - the processing lambda is torch-written
            return f"skip: output_process_fn_grad: {error!r:.100}"
    if message or not check_grad or not values:
        return message
    # gradients: the same cotangent for every differentiable output
    try:
        t_out = _differentiable(process_t(expected), torch)
        f_out = _differentiable(process_t(actual), flow)
    except Exception as error:  # noqa: BLE001 - the processing lambda is torch-written
        return f"skip: output_process_fn_grad: {error!r:.100}"
    if not t_out or not convert.pairs:
        if len(f_out) != len(t_out):
            return f"grad: torch has {len(t_out)} differentiable outputs, flowgrad {len(f_out)}"
        return None
    if len(f_out) != len(t_out):
        return f"grad: torch has {len(t_out)} differentiable outputs, flowgrad {len(f_out)}"
    return compare_grads(t_out, f_out, convert.pairs, cotangents(t_out))


def cotangents(outs, seed=0):
    """A random cotangent for each torch output, drawn in order from one generator (complex
    outputs: random real and imaginary parts)."""
    gen = torch.Generator().manual_seed(seed)
    made = []
    for o in outs:
        if o.dtype.is_complex:
            c = torch.complex(torch.randn(o.shape, generator=gen, dtype=torch.float64),
                              torch.randn(o.shape, generator=gen, dtype=torch.float64))
        else:
            c = torch.randn(o.shape, generator=gen, dtype=torch.float64)
        made.append(c.to(o.dtype))
    return made


def compare_grads(t_out, f_out, pairs, cots):
    """The gradients of torch's outputs `t_out` and flowgrad's `f_out`, with torch's cotangents
    `cots`, to the (torch, flowgrad) leaf `pairs`: None when they agree (or both raise), else
    a message."""
    t_leaves = [t for t, _ in pairs]
    f_leaves = [f for _, f in pairs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            t_grads = torch.autograd.grad(t_out, t_leaves, cots, allow_unused=True)
            t_error = None
        except ERRORS as error:
            t_grads, t_error = None, error
        try:
            f_cot = [Converter().tensor(c) for c in cots]
            f_grads = flow.autograd.grad(f_out, f_leaves, f_cot, allow_unused=True)
            f_error = None
        except Exception as error:  # noqa: BLE001
            f_grads, f_error = None, error
    if t_error is not None or f_error is not None:
        if (t_error is None) != (f_error is None):
            return f"grad raise: torch {t_error!r:.200}, flowgrad {f_error!r:.300}"
        return None
    t_grads = [torch.zeros_like(leaf) if g is None else g for g, leaf in zip(t_grads, t_leaves)]
    f_grads = [flow.zeros_like(leaf) if g is None else g for g, leaf in zip(f_grads, f_leaves)]
    return compare(to_numpy(tuple(t_grads)), to_numpy(tuple(f_grads)), "grad")


def convert_sample(sample, convert=None):
    """The sample's input, args and kwargs as flowgrad values, converted in that order by
    `convert` (a fresh Converter unless given); raises Unsupported."""
    convert = Converter() if convert is None else convert
    return convert(sample.input), convert(list(sample.args)), convert(dict(sample.kwargs))


REFERENCE = False  # True: torch's larger reference_inputs (extremal values, promotion)


def samples(info, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        requires_grad = info.supports_autograd and (dtype.is_floating_point or dtype.is_complex)
        source = info.reference_inputs if REFERENCE else info.sample_inputs
        yield from source("cpu", dtype, requires_grad=requires_grad)


def error_samples(info):
    if info.error_inputs_func is None:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield from info.error_inputs("cpu")


def check_errors(info, fn):
    """Each of torch's error inputs must raise in flowgrad too, an exception of torch's class
    (not one NumPy or Python raised inside flowgrad); messages where it does not."""
    found = []
    try:
        errors = list(error_samples(info))
    except Exception as error:  # noqa: BLE001 - torch's generator needs something missing
        return [f"skip: error_inputs: {error!r:.100}"]
    for error_input in errors:
        sample = error_input.sample_input
        try:
            f_input, f_args, f_kwargs = convert_sample(sample)
        except Unsupported:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fn(f_input, *f_args, **f_kwargs)
            except Exception as error:  # noqa: BLE001 - compared with torch's class below
                if not isinstance(error, error_input.error_type):
                    found.append(f"raised {type(error).__name__}({str(error)[:80]!r}) where "
                                 f"torch raises {error_input.error_type.__name__}: "
                                 f"{describe(sample)}")
                continue
        found.append(f"no raise where torch raises {error_input.error_type.__name__}"
                     f"({error_input.error_regex!r:.80}): {describe(sample)}")
    return found


def describe(sample):
    def one(v):
        if isinstance(v, torch.Tensor):
            return f"T{tuple(v.shape)}:{str(v.dtype).split('.')[1]}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(one(x) for x in v) + "]"
        return repr(v)[:40]
    kw = ", ".join(f"{k}={one(v)}" for k, v in sample.kwargs.items())
    args = ", ".join(one(a) for a in sample.args)
    return f"({one(sample.input)}, {args}{', ' if kw else ''}{kw})"


DTYPES = (torch.float64, torch.float32, torch.int64, torch.bool, torch.complex128)


def probe(info, dtypes=DTYPES):
    """Every finding for one OpInfo: [(dtype, sample description, message)]."""
    fn = resolve(info)
    if fn is None:
        return [("", "", "missing")]
    found = []
    for dtype, all_samples in dtype_samples(info, dtypes, found):
        for sample in all_samples:
            message = run_sample(info, fn, sample, check_grad=dtype in (
                torch.float64, torch.complex128), values=info.name not in RANDOM)
            if message:
                found.append((str(dtype).split(".")[1], describe(sample), message))
    for message in check_errors(info, fn):
        found.append(("errors", "", message))
    return [("", "", "missing")] if only_missing_names(found) else found


def dtype_samples(info, dtypes, found, count=None):
    """(dtype, a list of its first `count` samples: None, all) for each of `dtypes` the OpInfo
    supports on CPU; a sample generator that raises is a skip in `found`. (Not drawn past
    `count`: some of torch's generators seed its generator per sample.)"""
    supported = info.supported_dtypes("cpu")
    for dtype in dtypes:
        if dtype not in supported:
            continue
        try:
            chosen = list(itertools.islice(samples(info, dtype), count))
        except Exception as error:  # noqa: BLE001
            found.append((str(dtype), "", f"skip: sample_inputs: {error!r:.100}"))
            continue
        yield dtype, chosen


def only_missing_names(found):
    """Whether every real finding is an AttributeError for a name flowgrad lacks (torch's
    wrapper of the op calls it): the OpInfo counts as missing."""
    real = [f for f in found if not f[2].startswith("skip")]
    return bool(real) and all("AttributeError" in f[2] and re.search(
        r"(module 'flowgrad[\w.]*'|'(Batched)?Tensor' object|type object 'Tensor') has no "
        r"attribute", f[2]) for f in real)


def full_name(info):
    """An OpInfo's name with its variant: `linalg.pinv.hermitian` (a ModuleInfo's name)."""
    variant = getattr(info, "variant_test_name", "")
    return info.name + ("." + variant if variant else "")


def shard_of(names):
    """(i, n) from a `--shard=i/n` argument (removed from `names`): every n-th info from the
    i-th, for running a report in several processes; (0, 1) without one."""
    for arg in list(names):
        if arg.startswith("--shard="):
            names.remove(arg)
            i, n = map(int, arg[8:].split("/"))
            return i, n
    return 0, 1


def report(infos, probe_one, chosen, what):
    """Probe each info that `chosen(k, info)` selects and print its findings; a summary last."""
    total = bad = missing = 0
    for k, info in enumerate(infos):
        if not chosen(k, info):
            continue
        total += 1
        name = full_name(info)
        try:
            findings = probe_one(info)
        except Exception as error:  # noqa: BLE001 - the probe's own failure, reported
            print(f"PROBE ERROR {name}: {error!r:.200}")
            continue
        if findings and findings[0][2] == "missing":
            missing += 1
            print(f"MISSING {name}")
            continue
        real = [f for f in findings if not f[2].startswith("skip")]
        skips = len(findings) - len(real)
        if real:
            bad += 1
            print(f"FAIL {name}: {len(real)} findings" + (f", {skips} skipped" if skips else ""))
            for kind, where, message in real[:6]:
                print(f"    [{kind}] {where[:150]}\n        {message[:400]}")
    print(f"# {total} {what}, {missing} missing in flowgrad, {bad} with findings")


def main(names):
    global REFERENCE
    if "--reference" in names:
        REFERENCE = True
        names.remove("--reference")
    dtypes = DTYPES
    for arg in list(names):  # --dtype=bfloat16: that dtype's samples only (no gradients)
        if arg.startswith("--dtype="):
            dtypes = (getattr(torch, arg[8:]),)
            names.remove(arg)
    shard, shards = shard_of(names)
    report(op_db(), lambda info: probe(info, dtypes), lambda k, info: k % shards == shard and (
        not names or info.name in names or full_name(info) in names), "OpInfos")


if __name__ == "__main__":
    main(sys.argv[1:])


def assert_explained(name, findings, known, stale_check=True, notes=("skip",), missing=()):
    """Each sweep test's verdict on one entry: every finding (kind, where, message) that is not
    a note matches the entry's KNOWN pattern (known[name][0]); with `stale_check`, a pattern
    no finding matches any more fails (remove it). A name in `missing` (flowgrad lacks it)
    must still be reported missing, and the test skips. Returns the findings that count."""
    if name in missing:
        assert any(f[2].startswith("missing") for f in findings), f"{name} exists now"
        pytest.skip("not in flowgrad")
    real = [f for f in findings if not f[2].startswith(notes)]
    pattern = known.get(name, (None,))[0]
    unexplained = [f for f in real if pattern is None or not re.search(pattern, f[2])]
    assert not unexplained, "\n".join(
        f"[{kind}] {where}\n    {message}" for kind, where, message in unexplained[:6])
    assert pattern is None or real or not stale_check, (
        f"{name}: no finding matches KNOWN any more: remove it")
    return real
