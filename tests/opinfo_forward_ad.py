"""Forward-mode AD of torch's op database (OpInfo) against torch's: the same float64 sample
inputs, the same random tangent for each differentiable tensor input, and then

- `dual`: inside `forward_ad.dual_level()`, the op on `make_dual(input, tangent)`; each output's
  primal and tangent (`unpack_dual`) compared: values, shapes, dtypes, and a tangent that is
  None in torch (no input tangent reaches that output) must be None in flowgrad too;
- `jvp`: the same through `func.jvp` (the differentiable tensors as its primals);
- `fwbw`: where the OpInfo says `supports_fwgrad_bwgrad`, the gradient of a fixed linear
  function of the output tangents with respect to the primals and the tangents (torch's
  test_fn_fwgrad_bwgrad idea: reverse mode over forward mode).

Raise/no-raise must agree too, and the exception's type where both raise. The sample's
`output_process_fn_grad` runs on the outputs inside the level, as torch's gradcheck does (it
makes singular and eigen vectors comparable).

The OpInfos torch says do not support forward AD (`refusals`): the same dual call, a tangent on
every floating input, must raise where torch's does, with its type (NotImplementedError for
an op without a derivative: floor_divide, unique, histogram, heaviside ...), not give a zero
or absent tangent. Where torch refuses only because it has no forward formula ("not
implemented yet": cholesky, cdist, grid_sample ...) and flowgrad derives one, flowgrad's
tangent must be torch's J t through reverse mode (autograd.functional.jvp's double vjp).

    .venv/bin/python tests/opinfo_forward_ad.py [name ...] [--all] [--refusals] [--shard=i/n]
(`--all`: every float64 sample; by default the first of each OpInfo)
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
import torch
from opinfo_vs_torch import (
    RANDOM,
    TIES,
    Converter,
    Unsupported,
    _has_ties,
    compare,
    convert_sample,
    describe,
    flowgrad_wrapper,
    full_name,
    one_thread,
    op_db,
    report,
    resolve,
    shard_of,
    to_numpy,
)

import flowgrad as flow

MODES = ("dual", "jvp", "fwbw")


def _tangent_leaves(sample, every_float=False):
    """The sample's differentiable tensors (those torch made require grad), in order;
    `every_float`: every floating (or complex) tensor, required grad or not."""
    found, seen = [], set()

    def walk(v):
        if isinstance(v, torch.Tensor):
            if (every_float or v.requires_grad) and (
                    v.dtype.is_floating_point or v.dtype.is_complex) and id(v) not in seen:
                seen.add(id(v))
                found.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
    walk(sample.input)
    walk(list(sample.args))
    walk(dict(sample.kwargs))
    return found


def _tangent_arrays(leaves, seed):
    rng = np.random.default_rng(seed)
    out = []
    for t in leaves:
        a = rng.standard_normal(tuple(t.shape))
        if t.dtype.is_complex:
            a = a + 1j * rng.standard_normal(tuple(t.shape))
        out.append(np.asarray(a, dtype=str(t.dtype).split(".")[1]))
    return out


def _swap_torch(value, table):
    """The sample's value with each tensor in `table` (by id) replaced."""
    if isinstance(value, torch.Tensor):
        return table.get(id(value), value)
    if isinstance(value, (list, tuple)):
        items = [_swap_torch(v, table) for v in value]
        return type(value)(items) if type(value) in (list, tuple) else items
    if isinstance(value, dict):
        return {k: _swap_torch(v, table) for k, v in value.items()}
    return value


def _call_torch(info, sample, table):
    args = _swap_torch(list(sample.args), table)
    kwargs = _swap_torch(dict(sample.kwargs), table)
    out = info.gradcheck_wrapper(info.op, _swap_torch(sample.input, table), *args, **kwargs)
    return sample.output_process_fn_grad(out)


def _call_flow(info, fn, sample, leaves, duals):
    convert = Converter()
    for t, d in zip(leaves, duals):
        convert.made[id(t)] = (t, d)
    f_input, f_args, f_kwargs = convert_sample(sample, convert)
    out = flowgrad_wrapper(info.gradcheck_wrapper)(fn, f_input, *f_args, **f_kwargs)
    return sample.output_process_fn_grad(out)


def _unpack(value, module):
    """Outputs as (primal, tangent) pairs in to_numpy form; a tangent None stays None."""
    fwad = module.autograd.forward_ad
    if isinstance(value, module.Tensor):
        primal, tangent = fwad.unpack_dual(value)
        return ("dual", to_numpy(primal), None if tangent is None else to_numpy(tangent))
    if isinstance(value, (list, tuple)):
        return tuple(_unpack(v, module) for v in value)
    return to_numpy(value)


def _compare_duals(expected, actual, where, values):
    if isinstance(expected, tuple) and expected and expected[0] == "dual":
        if not (isinstance(actual, tuple) and actual and actual[0] == "dual"):
            return f"{where}: torch gives a tensor, flowgrad {actual!r:.80}"
        message = compare(expected[1], actual[1], f"{where} primal", values)
        if message:
            return message
        if (expected[2] is None) != (actual[2] is None):
            return (f"{where} tangent: torch {'None' if expected[2] is None else 'a tensor'}, "
                    f"flowgrad {'None' if actual[2] is None else 'a tensor'}")
        if expected[2] is None:
            return None
        return compare(expected[2], actual[2], f"{where} tangent", values)
    if isinstance(expected, tuple) and expected and expected[0] != "tensor":
        if not isinstance(actual, tuple) or len(actual) != len(expected):
            return f"{where}: torch gives {len(expected)} items, flowgrad {actual!r:.80}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            message = _compare_duals(e, a, f"{where}[{i}]", values)
            if message:
                return message
        return None
    return compare(expected, actual, where, values)


def _attempt(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return call(), None
        except Exception as error:  # noqa: BLE001 - any raise is compared
            return None, error


def _raise_message(t_error, f_error, what):
    if isinstance(f_error, Unsupported):
        return "skip: " + str(f_error)
    if f_error is not None and "__torch_function__" in str(f_error):
        return "skip: torch's gradcheck wrapper calls torch functions"
    if (t_error is None) != (f_error is None):
        return f"{what} raise: torch {t_error!r:.200}, flowgrad {f_error!r:.300}"
    if type(t_error) is not type(f_error) and not isinstance(f_error, type(t_error)):
        return (f"{what} raise type: torch {type(t_error).__name__} ({t_error!s:.150}), "
                f"flowgrad {type(f_error).__name__} ({f_error!s:.200})")
    return None


def _values(info, sample):
    if info.name in RANDOM:
        return False
    return not (info.name in TIES and not sample.kwargs.get("stable") and
                _has_ties(sample.input))


def run_dual(info, fn, sample, leaves, arrays):
    values = _values(info, sample)

    def in_torch():
        with torch.autograd.forward_ad.dual_level():
            table = {id(t): torch.autograd.forward_ad.make_dual(
                t.detach().clone(), torch.from_numpy(a.copy())) for t, a in zip(leaves, arrays)}
            return _unpack(_call_torch(info, sample, table), torch)

    def in_flow():
        with flow.autograd.forward_ad.dual_level():
            duals = [flow.autograd.forward_ad.make_dual(
                flow.tensor(t.detach().numpy().copy()), flow.tensor(a.copy()))
                for t, a in zip(leaves, arrays)]
            return _unpack(_call_flow(info, fn, sample, leaves, duals), flow)

    expected, t_error = _attempt(in_torch)
    actual, f_error = _attempt(in_flow)
    if t_error is not None or f_error is not None:
        return _raise_message(t_error, f_error, "dual")
    return _compare_duals(expected, actual, "dual", values)


def _tensors_only(out, module):
    if isinstance(out, module.Tensor):
        return out
    if isinstance(out, (list, tuple)):
        return tuple(_tensors_only(v, module) for v in out)
    raise Unsupported(f"a non-tensor output {type(out).__name__}")


def run_jvp(info, fn, sample, leaves, arrays):
    values = _values(info, sample)

    def in_torch():
        def f(*ps):
            return _tensors_only(_call_torch(info, sample, dict(zip(map(id, leaves), ps))),
                                 torch)
        primals = tuple(t.detach().clone() for t in leaves)
        out, tan = torch.func.jvp(f, primals, tuple(torch.from_numpy(a.copy()) for a in arrays))
        return to_numpy((out, tan))

    def in_flow():
        def f(*ps):
            return _tensors_only(_call_flow(info, fn, sample, leaves, ps), flow)
        primals = tuple(flow.tensor(t.detach().numpy().copy()) for t in leaves)
        out, tan = flow.func.jvp(f, primals, tuple(flow.tensor(a.copy()) for a in arrays))
        return to_numpy((out, tan))

    expected, t_error = _attempt(in_torch)
    if isinstance(t_error, Unsupported):
        return None
    actual, f_error = _attempt(in_flow)
    if t_error is not None or f_error is not None:
        return _raise_message(t_error, f_error, "jvp")
    return compare(expected, actual, "jvp", values)


def _float_outputs(value, module):
    """The floating (or complex) tensor outputs, in order."""
    if isinstance(value, module.Tensor):
        return [value] if value.is_floating_point() or value.is_complex() else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _float_outputs(v, module)]
    return []


def _cotangent(o, rng, module):
    a = rng.standard_normal(tuple(o.shape))
    if o.is_complex():
        a = a + 1j * rng.standard_normal(tuple(o.shape))
    return module.tensor(np.asarray(a, dtype=str(o.dtype).split(".")[1]))


def run_fwbw(info, fn, sample, leaves, arrays):
    """Reverse over forward: d<c, J t>/d(primals, tangents) for a fixed cotangent c. torch's
    side is torch.func.vjp over torch.func.jvp (its autograd over forward_ad refuses some ops
    whose jvp formulas write in place: softmax, logsumexp, normalize)."""
    if not _values(info, sample):
        return None
    n = len(leaves)

    def in_torch():
        def f(*ps):
            return _tensors_only(_call_torch(info, sample, dict(zip(map(id, leaves), ps))),
                                 torch)

        def g(*pt):  # (torch.func.vjp takes floating outputs only)
            return tuple(_float_outputs(torch.func.jvp(f, pt[:n], pt[n:])[1], torch))
        ps = [t.detach().clone() for t in leaves]
        ts = [torch.from_numpy(a.copy()) for a in arrays]
        tan, vjp_fn = torch.func.vjp(g, *ps, *ts)
        rng = np.random.default_rng(1)
        return to_numpy(vjp_fn(tuple(_cotangent(o, rng, torch) for o in tan)))

    def in_flow():
        fwad = flow.autograd.forward_ad
        ps = [flow.tensor(t.detach().numpy().copy()).requires_grad_(True) for t in leaves]
        ts = [flow.tensor(a.copy()).requires_grad_(True) for a in arrays]
        with fwad.dual_level():
            duals = [fwad.make_dual(p, u) for p, u in zip(ps, ts)]
            out = _tensors_only(_call_flow(info, fn, sample, leaves, duals), flow)
            rng = np.random.default_rng(1)
            outs, cots = [], []
            for o in _float_outputs(out, flow):
                c = _cotangent(o, rng, flow)
                tangent = fwad.unpack_dual(o).tangent
                if tangent is not None and tangent.requires_grad:
                    outs.append(tangent)
                    cots.append(c)
            grads = flow.autograd.grad(outs, ps + ts, cots, allow_unused=True) if outs else \
                [None] * (2 * n)
        return to_numpy(tuple(flow.zeros_like(x) if g is None else g
                              for g, x in zip(grads, ps + ts)))

    expected, t_error = _attempt(in_torch)
    if isinstance(t_error, Unsupported):
        return None
    actual, f_error = _attempt(in_flow)
    if t_error is not None or f_error is not None:
        return _raise_message(t_error, f_error, "fwbw")
    return compare(expected, actual, "fwbw grad")


def float64_samples(info):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield from info.sample_inputs("cpu", torch.float64, requires_grad=True)


def probe(info, all_samples=False, modes=MODES):
    """Every forward-AD finding for one OpInfo: [(mode, sample description, message)]."""
    if not info.supports_forward_ad or torch.float64 not in info.supported_dtypes("cpu"):
        return []
    fn = resolve(info)
    if fn is None:
        return [("", "", "missing")]
    try:
        chosen = []
        for sample in float64_samples(info):
            chosen.append(sample)
            if not all_samples:
                break
    except Exception as error:  # noqa: BLE001
        return [("", "", f"skip: sample_inputs: {error!r:.100}")]
    with one_thread():  # small tensors: thread pools only spin
        return _probe_samples(info, fn, chosen, modes)


def _probe_samples(info, fn, chosen, modes):
    found = []
    runs = {"dual": run_dual, "jvp": run_jvp, "fwbw": run_fwbw}
    for k, sample in enumerate(chosen):
        leaves = _tangent_leaves(sample)
        if not leaves:
            continue
        arrays = _tangent_arrays(leaves, k)
        for mode in modes:
            if mode == "fwbw" and not info.supports_fwgrad_bwgrad:
                continue
            try:
                message = runs[mode](info, fn, sample, leaves, arrays)
            except Unsupported as reason:
                message = "skip: " + str(reason)
            if message:
                found.append((mode, describe(sample), message))
            if mode == "dual" and message and not message.startswith("skip"):
                break  # (the other modes would repeat it)
    return found


# ---- the OpInfos torch refuses forward AD for ----------------------------------------------
NOT_YET = "because it has not been implemented yet"  # torch's refusal of a missing formula


def _floating_leaves(sample):
    """Every floating (or complex) tensor of the sample, in order: each gets a tangent."""
    return _tangent_leaves(sample, every_float=True)


def _torch_floats(info, sample, leaves, ps):
    """torch's floating outputs with `ps` (cloned: an in-place op writes the clone) in place
    of the leaves."""
    table = dict(zip(map(id, leaves), (p.clone() for p in ps)))
    return tuple(_float_outputs(_call_torch(info, sample, table), torch))


def _reverse_jvp(info, sample, leaves, arrays):
    """torch's (outputs, J t) of the floating outputs through reverse mode: the double vjp
    of autograd.functional.jvp, which needs no forward formula."""
    primals = tuple(t.detach().clone() for t in leaves)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out, tan = torch.autograd.functional.jvp(
            lambda *ps: _torch_floats(info, sample, leaves, ps), primals,
            tuple(torch.from_numpy(a.copy()) for a in arrays))
    return to_numpy(out), to_numpy(tan)


FD_STEP = 1e-6


def _finite_jvp(info, sample, leaves, arrays):
    """torch's (outputs, J t) by central differences, where its reverse mode cannot be
    differentiated twice (cdist, pdist, the margin losses): (f(x + h t) - f(x - h t)) / 2h.
    It differentiates every floating input, including ones both frameworks hold constant
    (cross_entropy's class weights, embedding_bag's max_norm renorm): later samples of
    linear_cross_entropy and embedding_bag differ from it for that reason alone."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        ps = [t.detach().clone() for t in leaves]
        ts = [torch.from_numpy(a.copy()) for a in arrays]
        out = _torch_floats(info, sample, leaves, ps)
        up = _torch_floats(info, sample, leaves, [p + FD_STEP * t for p, t in zip(ps, ts)])
        down = _torch_floats(info, sample, leaves, [p - FD_STEP * t for p, t in zip(ps, ts)])
    return to_numpy(out), to_numpy(tuple((u - d) / (2 * FD_STEP) for u, d in zip(up, down)))


def _compare_finite(expected, actual, where):
    """Tangents against central differences: within their truncation and rounding error."""
    for i, (e, a) in enumerate(zip(expected, actual)):
        e, a = e[2], a[2]
        if e.shape != a.shape:
            return f"{where}[{i}]: shape torch {e.shape}, flowgrad {a.shape}"
        scale = max(1.0, float(np.abs(e).max(initial=0.0)))
        if not np.allclose(a, e, rtol=1e-5, atol=1e-6 * scale):
            bad = np.argwhere(~np.isclose(a, e, rtol=1e-5, atol=1e-6 * scale))
            j = tuple(bad[0])
            return (f"{where}[{i}]: values differ at {len(bad)} of {e.size} positions, e.g. "
                    f"{j}: finite differences {e[j]}, flowgrad {a[j]}")
    return None


def _dual_floats(info, fn, sample, leaves, arrays):
    """flowgrad's (outputs, tangents) of the floating outputs under a dual level (zeros for
    a tangent that is None, as autograd.functional.jvp's)."""
    fwad = flow.autograd.forward_ad
    with flow.autograd.forward_ad.dual_level():
        duals = [fwad.make_dual(flow.tensor(t.detach().numpy().copy()), flow.tensor(a.copy()))
                 for t, a in zip(leaves, arrays)]
        outs = _float_outputs(_call_flow(info, fn, sample, leaves, duals), flow)
        pairs = [fwad.unpack_dual(o) for o in outs]
        return (to_numpy(tuple(p.primal for p in pairs)),
                to_numpy(tuple(flow.zeros_like(p.primal) if p.tangent is None else p.tangent
                               for p in pairs)))


def run_refusal(info, fn, sample, leaves, arrays):
    """A dual call of an op torch refuses forward AD for: the same raise (and type); where
    flowgrad gives tangents and torch refuses only for want of a formula (or runs all the
    same), they must be torch's reverse-mode J t."""
    def in_torch():
        with torch.autograd.forward_ad.dual_level():
            table = {id(t): torch.autograd.forward_ad.make_dual(
                t.detach().clone(), torch.from_numpy(a.copy())) for t, a in zip(leaves, arrays)}
            return _unpack(_call_torch(info, sample, table), torch)

    _, t_error = _attempt(in_torch)
    actual, f_error = _attempt(lambda: _dual_floats(info, fn, sample, leaves, arrays))
    if f_error is not None or (t_error is not None and not (
            isinstance(t_error, NotImplementedError) and NOT_YET in str(t_error))):
        return _raise_message(t_error, f_error, "dual")
    if not actual[0]:
        return None  # (no floating output: no tangent to give, none to refuse)
    values = _values(info, sample)
    expected, r_error = _attempt(lambda: _reverse_jvp(info, sample, leaves, arrays))
    if r_error is None:
        return compare(expected, actual, "dual (vs torch's reverse-mode J t)", values)
    expected, fd_error = _attempt(lambda: _finite_jvp(info, sample, leaves, arrays))
    if fd_error is not None:
        return f"torch's J t: reverse mode raised {r_error!r:.150}, finite differences " \
               f"{fd_error!r:.150}; flowgrad gave tangents"
    message = compare(expected[0], actual[0], "dual primal", values)
    if message or not values:
        return message
    return _compare_finite(expected[1], actual[1], "dual tangent (vs finite differences)")


def probe_refusals(info):
    """The findings of the first float64 sample of an OpInfo torch refuses forward AD for."""
    if info.supports_forward_ad or torch.float64 not in info.supported_dtypes("cpu"):
        return []
    fn = resolve(info)
    if fn is None:
        return [("", "", "missing")]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sample = next(iter(info.sample_inputs("cpu", torch.float64)), None)
    except Exception as error:  # noqa: BLE001
        return [("", "", f"skip: sample_inputs: {error!r:.100}")]
    leaves = _floating_leaves(sample) if sample is not None else []
    if any(t.layout != torch.strided for t in leaves):
        return [("refusal", describe(sample), "skip: a sparse input")]
    if not leaves:
        return []
    with one_thread():
        try:
            message = run_refusal(info, fn, sample, leaves, _tangent_arrays(leaves, 0))
        except Unsupported as reason:
            message = "skip: " + str(reason)
    return [("refusal", describe(sample), message)] if message else []


def main(names):
    all_samples = "--all" in names
    if all_samples:
        names.remove("--all")
    refusals = "--refusals" in names
    if refusals:
        names.remove("--refusals")
    shard, shards = shard_of(names)
    report(op_db(), probe_refusals if refusals else lambda info: probe(info, all_samples),
           lambda k, info: (k % shards == shard and (
               not names or info.name in names or full_name(info) in names)), "OpInfos")


if __name__ == "__main__":
    main(sys.argv[1:])
